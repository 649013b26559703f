"""Writes that leave either the old state or the complete new one, never a half-written file."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import tempfile
from typing import Callable


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


def write_directory(path, build: Callable[[pathlib.Path], None],
                    overwrite: bool = True) -> pathlib.Path:
    """Runs `build(tmp_dir)` in a temp directory beside `path`, then renames it to `path`.

    An existing `path` is replaced only after `build` succeeded (or refused when `overwrite` is
    False); on any error the temp directory is removed and `path` is left as it was.
    """
    path = pathlib.Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True to replace it.")
    path.parent.mkdir(parents=True, exist_ok=True)
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
