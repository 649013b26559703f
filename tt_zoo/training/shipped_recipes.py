"""The recipe of every shipped model: the run config of the command that trained it, as a file
that ``tt-zoo COMMAND --config`` reads (``tt_zoo/zoo/recipes/COMMAND/NAME.json``, package data
beside the shipped list, so a wheel carries it) and the registry
reads as the model's recipe (`tt_zoo.zoo.registry.read_recipe`: `ModelSpec.run`, whose command
line is `ModelSpec.recipe_command`).

A shipped export records the command line that made it (metadata.json's ``command``) and, since
the typed run configs, the whole config (``run_config``, `RUN_CONFIG_KEY`). A model's recipe is
that config; where only the command line is recorded, the config its flags parse to with the
command's own parser (`parse_command`). The folder names the command and the file holds only
`RunConfig.to_dict`'s groups, so ``tt-zoo COMMAND --config tt_zoo/zoo/recipes/COMMAND/NAME.json``
reads it as it reads any ``--config`` file (flags given with it override it: ``--export``,
``--workdir``). Paths in it are those of the run that made the model.

    python -m tt_zoo.training.shipped_recipes   # rewrites tt_zoo/zoo/recipes/ from saved_models/
"""

from __future__ import annotations

import argparse
import pathlib
import shlex
from typing import List, Optional, Tuple

from tt_zoo.atomic_io import write_json
from tt_zoo.configs.commands import RUN_CONFIGS  # noqa: F401 (the commands, by name)
from tt_zoo.configs.run_config import RUN_CONFIG_KEY, RunConfig
from tt_zoo.manifest import read_json_object
from tt_zoo.artifacts.model_card import METADATA_FILE
from tt_zoo.zoo import registry


def recipes_dir() -> pathlib.Path:
    """The recipes beside the shipped list (`registry.SHIPPED_FILE`, read when called: a
    temporary list has its own), `registry.RECIPES_DIR` for the package's."""
    return registry.SHIPPED_FILE.parent / registry.RECIPES_FOLDER


def command_words(line: str) -> Tuple[str, List[str]]:
    """(command, its arguments) of a recorded command line: ``tt-zoo NAME ...``, ``python [-u]
    -m tt_zoo.cli NAME ...``, or ``python recipes/MODULE.py ...`` as the runs recorded it before
    the commands were `tt-zoo`'s (MODULE ``train_term_weights``: command ``train-term-weights``).
    """
    words = shlex.split(line)
    if words[0] == "tt-zoo":
        return words[1], words[2:]
    words = [w for w in words[1:] if w != "-u"]  # python's unbuffered switch
    if words[0] == "-m":
        return words[2], words[3:]
    return pathlib.PurePath(words[0]).stem.replace("_", "-"), words[1:]


class _RaisingParser(argparse.ArgumentParser):
    """A parser whose refusal is a `ValueError` naming the command, not an exit."""

    def error(self, message):
        raise ValueError(f"{self.prog}: {message}")


def parse(command: str, argv) -> RunConfig:
    """The run config of `command`'s flags `argv` (``--config FILE`` among them, if given),
    parsed by the command's run-config parser (`RunConfig.parse`: flags over the file over the
    defaults; a setting the run resolves later, such as pretrain's default vocabulary, stays
    unset). Flags the command refuses raise `ValueError`."""
    if command not in RUN_CONFIGS:
        raise ValueError(f"tt-zoo {command} trains no model from a run config (those that do: "
                         f"{', '.join(RUN_CONFIGS)})")
    config_type = RUN_CONFIGS[command]
    parser = _RaisingParser(prog=f"tt-zoo {command}")
    config_type.add_arguments(parser)
    return config_type.from_namespace(config_type.parse(parser, argv))


def parse_command(line: str) -> Tuple[str, RunConfig]:
    """(command, its run config) of a recorded training command line (`command_words`,
    `parse`)."""
    command, argv = command_words(line)
    return command, parse(command, argv)


def shipped_names() -> List[str]:
    """The models in saved_models/ (``tt_zoo/zoo/shipped_models.json``'s entries)."""
    return sorted(registry.read_shipped())


def recorded_run(name: str) -> dict:
    """The metadata.json of shipped model `name`, as its export wrote it."""
    artifact = registry.read_shipped()[name]["artifact"]
    path = registry.SAVED_MODELS_DIR / artifact / METADATA_FILE
    return read_json_object(path, f"the metadata of shipped model {name}")


def shipped_recipe(name: str, meta: Optional[dict] = None) -> Tuple[str, dict]:
    """(command, run config as `RunConfig.to_dict`) of shipped model `name`: the config its
    export records, else the one its recorded command line parses to (`meta`: its metadata,
    default `recorded_run`'s)."""
    meta = recorded_run(name) if meta is None else meta
    if "command" not in meta:
        raise ValueError(f"shipped model {name}'s {METADATA_FILE} records no training command")
    command, config = parse_command(meta["command"])
    if RUN_CONFIG_KEY in meta:
        config = type(config).from_dict(meta[RUN_CONFIG_KEY], source=f"{name}'s {METADATA_FILE}")
    return command, config.to_dict()


def recipe_path(name: str, command: str, root: Optional[pathlib.Path] = None) -> pathlib.Path:
    """Where model `name`'s recipe for `command` is: ROOT/COMMAND/NAME.json (default ROOT
    `recipes_dir()`)."""
    return (root or recipes_dir()) / command / f"{name}.json"


def write_recipe(name: str, root: Optional[pathlib.Path] = None,
                 meta: Optional[dict] = None) -> pathlib.Path:
    """Writes shipped model `name`'s recipe under `root` (`recipe_path`; `meta`: its export's
    metadata, default `recorded_run`'s); returns its path."""
    command, config = shipped_recipe(name, meta)
    path = recipe_path(name, command, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_json(path, config)


def write_recipes(root: Optional[pathlib.Path] = None) -> List[pathlib.Path]:
    """Writes the recipe of every shipped model under `root` (`recipe_path`); returns the
    paths."""
    return [write_recipe(name, root) for name in shipped_names()]


if __name__ == "__main__":
    for written in write_recipes():
        print(written)
