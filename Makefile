# The README's two commands: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
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

# Both cores (pytest-xdist): one worker per core, each test module on one worker (its module
# fixtures are built once). The tests are parallel-safe: temp paths only, ports from the OS.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) build *.egg-info
