"""How every `tt-zoo` command builds its argument parser: `tt-zoo NAME` in the usage line, the
module docstring as description and examples, each option's default after its help.

A command module defines ``add_arguments(parser)`` (its options, and nothing heavy: no
TensorFlow before the arguments are parsed) and ``parse_args(argv)``, which builds its parser
with `command_parser` and checks what argparse cannot. `tt_zoo.cli.main` adds the same
arguments to its subparser, so `tt-zoo NAME --help` and `python -m tt_zoo.cli NAME --help`
(or recipes/pretrain.py --help) agree.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Callable

from tt_zoo.configs.run_config import NO_PROGRESS_HELP

PROG = "tt-zoo"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the docstring's lines (examples stay copyable) and appends ``(default: X)`` to an
    option's help, unless the help already speaks of its default or there is none to show
    (None, False, an empty list)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        nothing = default is None or default is False or default in ("", [], argparse.SUPPRESS)
        if ("default" in text or nothing
                or not (action.option_strings or action.nargs in ("?", "*"))):
            return text
        return f"{text} (default: %(default)s)"


def parser_settings(doc: str) -> dict:
    """`ArgumentParser` keywords from a command's docstring: its first paragraph is the
    description, the rest (details, examples) the epilog."""
    first, _, rest = doc.strip().partition("\n\n")
    return {"description": first, "epilog": rest.rstrip() or None,
            "formatter_class": HelpFormatter}


def command_parser(name: str, doc: str,
                   add_arguments: Callable[[argparse.ArgumentParser], None]
                   ) -> argparse.ArgumentParser:
    """The parser of ``tt-zoo NAME``, as a command module's `parse_args` builds it."""
    parser = argparse.ArgumentParser(prog=f"{PROG} {name}", **parser_settings(doc))
    add_arguments(parser)
    return parser


def parse_run_config(config_type, doc: str, argv=None):
    """``(parser, namespace)`` of a training command whose flags are the run config
    `config_type`'s (`tt_zoo.configs.run_config.RunConfig`: its groups, ``--config``, the
    required settings), parsed from `argv`; the command checks what the config cannot."""
    parser = command_parser(config_type.COMMAND, doc, config_type.add_arguments)
    return parser, config_type.parse(parser, argv)


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``, every command's one spelling for "no progress bars" (a run config's
    ``no_progress`` field carries the same help:
    `tt_zoo.configs.run_config.TrainOutputArguments`)."""
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)


def exit_missing(parser: argparse.ArgumentParser, message: str):
    """`parser.error` without the usage: one line for a missing data file, whose fix is a path
    (the flag, or $TT_ZOO_DATA), not the command's syntax. Exits with status 2."""
    parser.exit(2, f"{parser.prog}: error: {message}\n")


def articles_or_exit(parser: argparse.ArgumentParser, articles, data) -> str:
    """--articles made concrete: `articles`, else `data`/wikispeedia (the shared data's);
    `exit_missing` when that path does not exist (a URL is taken as it is)."""
    articles = articles or str(data / "wikispeedia")
    if not pathlib.Path(articles).exists() and "://" not in articles:
        exit_missing(parser, f"--articles: {articles} does not exist (set TT_ZOO_DATA or pass "
                             "--articles PATH)")
    return articles



def model_name_or_path(value: str) -> str:
    """argparse ``type`` of a command's model option: a name `tt_zoo.load` takes, or a path (the
    loader checks it). An unknown name, or a recipe without weights, fails here, before
    TensorFlow loads, with close matches and a pointer to ``tt-zoo list``."""
    from tt_zoo.zoo import registry  # pylint: disable=import-outside-toplevel (no TensorFlow)

    problem = registry.model_name_problem(value, where=f"'{PROG} list'")
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value
