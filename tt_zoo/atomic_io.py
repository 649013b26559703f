"""Writes that leave either the old state or the complete new one, never a half-written file."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import tempfile
from typing import Callable, Optional


@contextlib.contextmanager
def open_for_replace(path, mode: str = "w", **open_kwargs):
    """Opens a temp file beside `path`; on a clean exit renames it over `path`, on an error
    removes it. Yields the open file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as f:
            yield f
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path, text: str) -> pathlib.Path:
    """Writes `text` (UTF-8) to a temp file beside `path`, then renames it over `path`."""
    with open_for_replace(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return pathlib.Path(path)


def write_json(path, obj, *, indent: int = 1, sort_keys: bool = False) -> pathlib.Path:
    """Writes `obj` as JSON (with a final newline) through `write_text`."""
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=sort_keys) + "\n")


def remove_debris(path) -> list:
    """Removes what a killed `write_directory(path, ...)` left beside `path`: the hidden
    ``.NAME.tmp-*`` (an unfinished new version) and ``.NAME.old-*`` (a replaced one not yet
    deleted) folders. They are ours by name; nothing else is touched. Returns what it removed."""
    path = pathlib.Path(path)
    removed = []
    if path.parent.is_dir():
        for pattern in (f".{path.name}.tmp-*", f".{path.name}.old-*"):
            for debris in path.parent.glob(pattern):
                if debris.is_dir():
                    shutil.rmtree(debris, ignore_errors=True)
                    removed.append(debris)
    return removed


def check_replaceable(path, *, overwrite: bool = False,
                      is_replaceable: Optional[Callable[[pathlib.Path], bool]] = None,
                      what: str = "directory") -> None:
    """Raises FileExistsError, naming `path`, unless `write_directory` may write there: `path`
    is absent or empty, `is_replaceable(path)` holds, or `overwrite`. Recipes call it before a
    long job, so a run never ends in a refused write."""
    path = pathlib.Path(path)
    if not path.exists() or overwrite:
        return
    if not path.is_dir():
        raise FileExistsError(f"{path} exists and is a file, not a {what}; refusing to replace "
                              "it. Choose another path or pass overwrite=True.")
    if any(path.iterdir()) and not (is_replaceable and is_replaceable(path)):
        raise FileExistsError(
            f"{path} exists and is not a {what} (it holds other files, which would be lost); "
            "refusing to write there. Choose another path or pass overwrite=True.")


def write_directory(path, build: Callable[[pathlib.Path], None], *, overwrite: bool = False,
                    is_replaceable: Optional[Callable[[pathlib.Path], bool]] = None,
                    what: str = "directory") -> pathlib.Path:
    """Runs `build(tmp_dir)` in a temp directory beside `path`, then renames it to `path`.

    A user's folder is never lost: an existing `path` is replaced only when it is empty, when
    `is_replaceable(path)` says it already holds this kind of artifact, or when `overwrite` is
    True; otherwise FileExistsError names it, before anything is built. The replacement is
    atomic: the old version goes only after `build` succeeded; on any error the temp directory
    is removed and `path` is left as it was. Debris of an earlier killed write is cleaned first
    (`remove_debris`).

    Args:
      path: the directory to write.
      build: fills the temp directory it is given.
      overwrite: replace whatever is at `path`.
      is_replaceable: whether an existing `path` is an artifact this call may replace.
      what: what is written, for the error message (e.g. "tt_zoo model export").
    """
    path = pathlib.Path(path)
    check_replaceable(path, overwrite=overwrite, is_replaceable=is_replaceable, what=what)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_debris(path)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        build(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp creates 0700
        if path.exists():
            old = pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            os.rename(path, old / path.name)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
