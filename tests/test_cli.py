"""`tt-zoo COMMAND`: argparse subparsers over the command modules, recipes/ (pretrain.py, the
documented entry point, and one run config per shipped model), --help without TensorFlow, and
every recorded command line still parsing."""

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys

import pytest

from helpers import run_as_a_user
from tt_zoo import cli

REPO = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ("tensorflow", "tensorflow_text", "scann", "bm25s", "datasets", "apache_beam")


def test_every_command_has_a_module_and_recipes_holds_pretrain_and_the_shipped_configs():
    """Each command is `tt-zoo NAME` and `python -m tt_zoo.cli NAME`; recipes/ holds only
    pretrain.py (a wrapper of `tt_zoo.cli.pretrain`) and models/: its README and
    COMMAND/NAME.json, one per shipped model, COMMAND a command that reads --config
    (tests/test_shipped_models.py checks what each file holds)."""
    from tt_zoo.training import shipped_recipes
    from tt_zoo.zoo import registry

    for name in cli.COMMANDS:
        command = cli.command_module(name)
        assert callable(command.main) and callable(command.add_arguments), name
    recipes = REPO / "recipes"
    wrapper = (recipes / "pretrain.py").read_text()
    assert "from tt_zoo.cli.pretrain import main" in wrapper
    assert "sys.path" not in wrapper and "importlib" not in wrapper
    assert {p.name for p in recipes.iterdir() if p.name != "__pycache__"} == {"pretrain.py"}
    models = shipped_recipes.recipes_dir()  # package data, beside the shipped list
    assert models == registry.RECIPES_DIR == registry.SHIPPED_FILE.parent / "recipes"
    configs = {p.relative_to(models) for p in models.rglob("*") if p.is_file()}
    shipped = shipped_recipes.shipped_names()
    expected = {shipped_recipes.recipe_path(name, shipped_recipes.shipped_recipe(name)[0],
                                            models).relative_to(models)
                for name in shipped}
    # A retired model (registered, no longer shipped) keeps the recipe of its recorded run.
    retired = {name: path.relative_to(models) for name, path in registry.recipe_files().items()
               if name not in shipped}
    assert all(not registry.REGISTRY[name].shipped for name in retired)
    assert configs == expected | set(retired.values()) | {pathlib.Path("README.md")}
    assert {p.parts[0] for p in expected} <= set(shipped_recipes.RUN_CONFIGS) <= set(cli.COMMANDS)


def test_top_level_help_version_and_unknown_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tt-zoo [-h] [--version] COMMAND ...")
    assert all(name in out for name in cli.COMMANDS)
    assert cli.main(["--version"]) == 0
    from tt_zoo import __version__
    assert capsys.readouterr().out.strip() == f"tt-zoo {__version__}"
    assert cli.main([]) == 2
    assert "required: COMMAND" in capsys.readouterr().err
    assert cli.main(["pretrian"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'pretrian'" in err and "Did you mean: pretrain?" in err


def test_exit_code_of_a_command_that_returns_its_results():
    assert cli.exit_code({"rows": []}) == 0 and cli.exit_code(3) == 3


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_command_help_names_the_command_and_shows_defaults(name, capsys):
    assert cli.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tt-zoo {name} "), out[:200]
    assert "recipes/" not in out


def _subparser(name) -> argparse.ArgumentParser:
    parser = cli.build_parser(name)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_every_option_has_a_help_text(name):
    missing = [a.option_strings or a.dest for a in _subparser(name)._actions
               if not a.help]
    assert not missing, f"tt-zoo {name}: options without help: {missing}"


def test_defaults_are_shown_in_help(capsys):
    cli.main(["learn-vocab", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 8192)" in out and "(default: 0.25)" in out
    assert "seed of the paragraph sample (default: 0)" in out  # 0 is a default, not "none"
    cli.main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default: multitask_static_minilm_l6_384, ict_bfs_wlp_512)" in out
    assert "(default: scann)" in out
    assert "(default: None)" not in out and "(default: False)" not in out


def test_quiet_has_one_spelling():
    """--no-progress in every command with progress bars; finetune's old --quiet is a hidden
    alias (benchmarks/finetune_hard_negatives.py ran with it)."""
    with_progress = [n for n in cli.COMMANDS
                     if any("--no-progress" in a.option_strings for a in _subparser(n)._actions)]
    assert {"make-pairs", "mine-negatives", "pretrain", "train-term-weights", "odqa", "finetune",
            "encode", "search"} <= set(with_progress)
    for name in cli.COMMANDS:
        quiet = [a for a in _subparser(name)._actions if "--quiet" in a.option_strings]
        assert not quiet or (name == "finetune" and quiet[0].help == argparse.SUPPRESS
                             and quiet[0].dest == "no_progress")


def test_help_of_every_command_imports_no_tensorflow():
    """`tt-zoo CMD --help` for every command in a fresh process: nothing heavy is imported
    before argparse has parsed (a module check, not a timing one: the machine is shared)."""
    script = (
        "import sys, contextlib, io\n"
        "from tt_zoo import cli\n"
        f"heavy = {HEAVY!r}\n"
        "for name in cli.COMMANDS:\n"
        "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "        code = cli.main([name, '--help'])\n"
        "    assert code == 0 and out.getvalue().startswith('usage: tt-zoo ' + name), name\n"
        "    loaded = [m for m in heavy if m in sys.modules]\n"
        "    assert not loaded, f'tt-zoo {name} --help imported {loaded}'\n"
        "print('ok')\n")
    result = run_as_a_user(["-c", script], cwd=REPO, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


@pytest.mark.parametrize("command", [[sys.executable, "-m", "tt_zoo.cli", "pretrain", "--help"],
                                     [sys.executable, str(REPO / "recipes" / "pretrain.py"),
                                      "--help"]])
def test_a_command_runs_as_module_and_as_recipe(command, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: tt-zoo pretrain ") and "--config" in result.stdout


def _parse(command_line: str):
    """Parses one recorded command (`python recipes/NAME.py ...`, `python -m tt_zoo.cli NAME
    ...` or `tt-zoo NAME ...`) with its command's own parser."""
    from tt_zoo.training.shipped_recipes import command_words

    name, rest = command_words(command_line)
    return cli.command_module(name).parse_args(rest)


def test_recorded_and_registered_command_lines_still_parse():
    recorded = [json.loads(p.read_text())["command"]
                for p in sorted((REPO / "saved_models").glob("*/metadata.json"))]
    # (a run that learnt a teacher's scores needs its --task distill:FILE at parse time, made by
    # `tt-zoo teacher-scores` in runs/: its recipe config is checked in test_shipped_models.py)
    recorded = [c for c in recorded if "distill:" not in c]
    assert len(recorded) >= 10
    from tt_zoo.zoo.registry import REGISTRY
    registered = [part.strip() for spec in REGISTRY.values()
                  for part in spec.recipe_command().split("&&")]
    assert all(c.startswith("tt-zoo ") for c in registered), registered[:3]
    # (`tt-zoo multitask` needs its pair directory and the shared data at parse time:
    # tests/test_zoo.py::test_multitask_recipe_command_parses parses those.)
    registered = [c for c in registered if not c.startswith("tt-zoo multitask ")]
    for line in recorded + registered:
        assert _parse(line) is not None, line


def test_the_grids_own_command_lines_parse(tmp_path):
    from tt_zoo.reproduction import grid
    args = cli.command_module("reproduce").parse_args(["--runs", str(tmp_path), "--stages",
                                                       "pretrain"])
    for variant in grid.CELLS:
        config = _parse(shlex.join(grid.pretrain_command(variant, args)))
        assert config.model.variant == variant
    for mix in ("mlm", "ict_bfs_wlp"):
        command = grid.make_data_command(mix, tmp_path / mix, args)
        assert _parse(shlex.join(command)).output == str(tmp_path / mix)


def test_choices_kept_here_for_a_quick_help_match_the_package():
    """Two constants repeated so that --help imports no TensorFlow or bm25s."""
    from tt_zoo.mining.hard_negatives import DEFAULT_DEPTH
    from tt_zoo.training import pretrain_run
    from tt_zoo.training.loop import STRATEGIES
    assert cli.command_module("mine-negatives").DEFAULT_DEPTH == DEFAULT_DEPTH
    assert pretrain_run.STRATEGIES == STRATEGIES
