# The README's two commands: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL := 2
export TT_ZOO_DATA ?= $(abspath ../shared/data)

.PHONY: setup demo test test-slow clean

setup: $(STAMP)

$(STAMP): setup.cfg setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip >/dev/null
	$(PY) -m pip install -e ".[test,beam]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) recipes/demo.py

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) build *.egg-info
