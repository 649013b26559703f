"""benchmarks/ is a package: its docstring indexes every script, the scripts import one another
as `benchmarks.NAME` (never through sys.path), and the flags they share are defined once, in
benchmarks/arguments.py."""

import re

import benchmarks
from conftest import REPO_ROOT

SCRIPTS = sorted(p for p in (REPO_ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")
# A benchmark too large for one file is a package with one entry point (`python -m
# benchmarks.NAME`, its __main__.py), e.g. benchmarks/peers/.
PACKAGES = sorted(p for p in (REPO_ROOT / "benchmarks").iterdir() if (p / "__main__.py").is_file())
MODULES = sorted((REPO_ROOT / "benchmarks").rglob("*.py"))
SHARED_FLAGS = ("--output", "--model", "--data-dir", "--squad")


def test_the_index_names_every_script():
    missing = [p.stem for p in SCRIPTS + PACKAGES
               if not re.search(rf"\b{p.stem}\b", benchmarks.__doc__)]
    assert not missing, f"benchmarks/__init__.py's index does not name {missing}"


def test_no_script_edits_sys_path():
    assert [p.name for p in MODULES if "sys.path.insert" in p.read_text()] == []


def test_shared_flags_are_defined_once():
    for flag in SHARED_FLAGS:
        where = [p.name for p in MODULES if f'add_argument("{flag}"' in p.read_text()]
        assert where == ["arguments.py"], f"{flag} is defined in {where}"
