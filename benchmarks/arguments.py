"""The flags and paths the benchmark scripts share, each defined once: the parser built from a
script's docstring, --output, --model, --data-dir and --squad, and where the shared data is
(tt_zoo's own default: $TT_ZOO_DATA, else ../shared/data beside the clone,
`tt_zoo.cli.common.default_data_dir`).

A script keeps its flags' names, defaults and help; what differs between scripts (a default,
one model or several, a help line) is an argument of the function that adds the flag.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any, Optional

# data_dir(): the shared data folder, $TT_ZOO_DATA, else ../shared/data beside the clone.
from tt_zoo.cli.common import SQUAD_DEV, default_data_dir as data_dir

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"


def squad_path(data: Optional[pathlib.Path] = None) -> pathlib.Path:
    """SQuAD v1.1 dev under the data folder (`data`, default `data_dir()`)."""
    return (data if data is not None else data_dir()) / SQUAD_DEV


def parser(doc: str, summary: Optional[str] = None, **kwargs: Any) -> argparse.ArgumentParser:
    """A benchmark's parser, from its docstring: the first line the description, the rest the
    epilog, both as written; or, with `summary` ("line" or "paragraph"), the docstring's first
    line or first paragraph alone as the description, reflowed by argparse."""
    if summary is not None:
        if summary not in ("line", "paragraph"):
            raise ValueError(f"summary must be 'line' or 'paragraph' (got {summary!r})")
        first = doc.splitlines()[0] if summary == "line" else doc.split("\n\n")[0]
        return argparse.ArgumentParser(description=first, **kwargs)
    lines = doc.splitlines()
    return argparse.ArgumentParser(description=lines[0], epilog="\n".join(lines[2:]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   **kwargs)


def comma_choices(text: str, choices, flag: str) -> list:
    """The comma-separated names of `text`, each one of `choices`; an unknown name stops the
    run naming it and the flag (`flag`, e.g. "--parts")."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in choices]
    if unknown:
        sys.exit(f"{flag}: unknown {unknown} (choose from {tuple(choices)})")
    return names


def add_output(p, default: Any = None, help: Optional[str] = None, type=pathlib.Path) -> None:
    """--output: where the script writes (a path, or a stem when `type` is str)."""
    p.add_argument("--output", type=type, default=default, help=help)


def check_new_output(p, output) -> None:
    """Exits through `p` unless --output was given and names nothing yet (a user's file is
    never overwritten)."""
    if output is None:
        p.error("--output is required")
    if output.exists():
        p.error(f"--output: {output} exists; choose a new path")


def add_model(p, default: Any = None, *, repeat: bool = False, required: bool = False,
              help: Optional[str] = None) -> None:
    """--model: a registered name or an export directory; with `repeat`, one per use (a list)."""
    if help is None:
        help = "a registered zoo name or an export directory" + (" (repeatable)" if repeat else "")
    p.add_argument("--model", action="append" if repeat else "store", default=default,
                   required=required, metavar="NAME_OR_PATH", help=help)


def add_data_dir(p, default: Any = "shared",
                 help: str = "the shared data (default: $TT_ZOO_DATA, ../shared/data)") -> None:
    """--data-dir: the shared data folder (default `data_dir()`)."""
    p.add_argument("--data-dir", type=pathlib.Path,
                   default=data_dir() if default == "shared" else default, help=help)


def add_squad(p, default: Any = "shared", type=pathlib.Path,
              help: str = "SQuAD v1.1 dev JSON (default: $TT_ZOO_DATA/squad/dev-v1.1.json)"
              ) -> None:
    """--squad: the SQuAD v1.1 file ReQA is built from (default `squad_path()`)."""
    p.add_argument("--squad", type=type, help=help,
                   default=type(squad_path()) if default == "shared" else default)
