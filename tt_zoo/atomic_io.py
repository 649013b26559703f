"""Writes that leave either the old state or the complete new one, never a half-written file.

Local paths are written to a temp name and renamed. URLs (``gs://``, ``s3://``, ``ram://``: what
TPUs read and write) go through `tf.io.gfile`: a file is uploaded to a temp name and renamed; a
folder is built locally and uploaded with its completeness marker (``last``) at the end, and
readers verify the artifact's sha256 manifest, so a cut upload is refused, never taken as
complete (object stores have no atomic folder rename).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import shutil
import tempfile
import uuid
from typing import Callable, Optional, Sequence


def is_remote(path) -> bool:
    """Whether `path` is a URL (gs://, s3://, ram://, ...) that only `tf.io.gfile` can reach."""
    return "://" in str(path)


def _gfile():
    import tensorflow as tf  # noqa: PLC0415 (only for URLs: local writes need no TensorFlow)
    return tf.io.gfile


def _split_url(path: str):
    parent, _, name = str(path).rstrip("/").rpartition("/")
    return parent, name


@contextlib.contextmanager
def replacing(path):
    """Yields a temp path beside `path` (``.NAME.<random>.tmp``) for a writer that wants a
    file name (e.g. `tf.io.TFRecordWriter`); on a clean exit renames it over `path`, on an
    error removes it. URLs go through `tf.io.gfile`."""
    if is_remote(path):
        gfile = _gfile()
        parent, name = _split_url(path)
        gfile.makedirs(parent)
        tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        exists, rename, remove = gfile.exists, gfile.rename, gfile.remove
    else:
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = str(path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp")
        exists, remove = os.path.exists, os.unlink
        rename = lambda src, dst, overwrite: os.replace(src, dst)  # noqa: E731
    try:
        yield tmp
        rename(tmp, str(path), overwrite=True)
    except BaseException:
        if exists(tmp):
            remove(tmp)
        raise


@contextlib.contextmanager
def open_for_replace(path, mode: str = "w", **open_kwargs):
    """Opens a temp file beside `path`; on a clean exit renames it over `path`, on an error
    removes it (`replacing`). Yields the open file. URLs go through `tf.io.gfile` (UTF-8 text):
    the writes are buffered in memory (zip writers need seek/tell, which object stores lack)
    and uploaded at the end."""
    if is_remote(path):
        buffer = io.BytesIO() if "b" in mode else io.StringIO()
        yield buffer
        with replacing(path) as tmp, _gfile().GFile(tmp, "wb" if "b" in mode else "w") as f:
            f.write(buffer.getvalue())
        return
    with replacing(path) as tmp:
        with open(tmp, mode, **open_kwargs) as f:
            yield f


def write_text(path, text: str):
    """Writes `text` (UTF-8) to a temp file beside `path`, then renames it over `path`."""
    with open_for_replace(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return str(path) if is_remote(path) else pathlib.Path(path)


def write_json(path, obj, *, indent: int = 1, sort_keys: bool = False):
    """Writes `obj` as JSON (with a final newline) through `write_text`."""
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=sort_keys) + "\n")


def remove_debris(path) -> list:
    """Removes what a killed `write_directory(path, ...)` left beside `path`: the hidden
    ``.NAME.tmp-*`` (an unfinished new version) and ``.NAME.old-*`` (a replaced one not yet
    deleted) folders. They are ours by name; nothing else is touched. Returns what it removed."""
    if is_remote(path):
        return []  # remote folders are uploaded in place (`write_directory`): no temp folders
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
    if is_remote(path):
        gfile = _gfile()
        if overwrite or not gfile.exists(str(path)):
            return
        if not gfile.isdir(str(path)):
            raise FileExistsError(f"{path} exists and is a file, not a {what}; refusing to "
                                  "replace it. Choose another path or pass overwrite=True.")
        if gfile.listdir(str(path)) and not (is_replaceable and is_replaceable(str(path))):
            raise FileExistsError(
                f"{path} exists and is not a {what} (it holds other files, which would be "
                "lost); refusing to write there. Choose another path or pass overwrite=True.")
        return
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
                    what: str = "directory", last: Sequence[str] = ()):
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
      last: for a URL `path`: the top-level files uploaded last, after everything else (the
        artifact's completeness marker, e.g. its metadata.json or manifest).
    """
    check_replaceable(path, overwrite=overwrite, is_replaceable=is_replaceable, what=what)
    if is_remote(path):
        return _upload_directory(str(path), build, last)
    path = pathlib.Path(path)
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


def _upload_directory(url: str, build: Callable[[pathlib.Path], None], last: Sequence[str]) -> str:
    """`write_directory` for a URL: builds in a local temp directory, removes the earlier
    version (already checked replaceable), then uploads every file, the `last` ones at the end."""
    gfile = _gfile()
    with tempfile.TemporaryDirectory(prefix="tt_zoo-upload-") as local:
        local = pathlib.Path(local)
        build(local)
        files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
        files.sort(key=lambda name: name in last)  # stable: the `last` files move to the end
        if gfile.exists(url):
            gfile.rmtree(url)
        gfile.makedirs(url)
        for name in files:
            parent = os.path.dirname(name)
            if parent:
                gfile.makedirs(f"{url}/{parent}")
            gfile.copy(str(local / name), f"{url}/{name}", overwrite=True)
    return url
