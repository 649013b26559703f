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


def test_one_runner_lists_and_runs_every_indexed_benchmark(capsys):
    """`python -m benchmarks` lists the index's entries, each on one line; every one of them is
    a script it runs, as `python -m benchmarks.NAME` does (the same --help)."""
    import subprocess
    import sys

    from benchmarks import __main__ as runner

    entries = runner.index()
    assert {"odqa", "peers", "search_loop"} <= set(entries) and "arguments" not in entries
    assert set(entries) <= set(runner.runnable())
    assert not {"arguments", "measure", "text_rows"} & set(runner.runnable())
    runner.main([])
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed[3:]] == sorted(entries)
    helps = [subprocess.run([sys.executable, "-m", *how, "--help"], cwd=REPO_ROOT, text=True,
                            capture_output=True, check=True).stdout
             for how in (["benchmarks", "docs_tables"], ["benchmarks.docs_tables"])]
    assert helps[0] == helps[1] and "--check" in helps[0]
