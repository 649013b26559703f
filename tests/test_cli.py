"""`tt-zoo COMMAND`: one entry point over the recipes, and recipes/*.py as thin wrappers."""

import os
import pathlib
import subprocess
import sys

import pytest

from tt_zoo import cli

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_every_command_has_a_module_and_a_recipe_wrapper():
    for name, (module, _) in cli.COMMANDS.items():
        assert callable(__import__(f"tt_zoo.cli.{module}", fromlist=["main"]).main), name
        wrapper = (REPO / "recipes" / f"{module}.py").read_text()
        assert f"from tt_zoo.cli.{module} import main" in wrapper
        assert "sys.path" not in wrapper and "importlib" not in wrapper


def test_usage_and_unknown_command(capsys):
    assert cli.main(["--help"]) == 0
    assert "make-pairs" in capsys.readouterr().out
    assert cli.main([]) == 2
    assert cli.main(["pretrian"]) == 2
    assert "unknown command 'pretrian'" in capsys.readouterr().err


def test_exit_code_of_a_command_that_returns_its_results():
    assert cli.exit_code({"rows": []}) == 0 and cli.exit_code(3) == 3


@pytest.mark.parametrize("command", [[sys.executable, "-m", "tt_zoo.cli", "evaluate", "--help"],
                                     [sys.executable, str(REPO / "recipes" / "evaluate.py"),
                                      "--help"]])
def test_a_command_runs_as_module_and_as_recipe(command, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--bm25" in result.stdout
