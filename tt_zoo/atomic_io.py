"""Writes that leave either the old state or the complete new one, never a half-written file.

Local paths are written to a temp name and renamed. URLs (``gs://``, ``s3://``, ``ram://``: what
TPUs read and write) go through `tf.io.gfile`: a file is uploaded to a temp name and renamed; a
folder is built locally and uploaded with its completeness marker (``last``) at the end, and
readers verify the artifact's sha256 manifest, so a cut upload is refused, never taken as
complete (object stores have no atomic folder rename).

A local folder is replaced in two renames (the old version aside, the new one in), which one
lock on the parent folder serializes: two writers to one path both finish, the last to rename
wins, and a reader or writer that comes after a kill between the two renames puts the old
version back (`recover_replaced`). Temp folders carry their writer's process id, so cleaning
the debris of killed writes (`remove_debris`) never touches a live writer's folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import re
import shutil
import tempfile
import uuid
from typing import Callable, Optional, Sequence

try:
    import fcntl
except ImportError:  # not POSIX: no lock (one writer at a time is then the caller's care)
    fcntl = None


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


def json_text(obj, *, where, indent: Optional[int] = 1, sort_keys: bool = False) -> str:
    """`obj` as strict JSON: NaN and infinity are refused (`allow_nan=False`; Python would
    write ``NaN``, which no JSON reader takes) with a ValueError naming `where` (the file)."""
    try:
        return json.dumps(obj, indent=indent, sort_keys=sort_keys, allow_nan=False)
    except ValueError as e:
        raise ValueError(f"{where}: refusing to write a NaN or infinite number as JSON "
                         f"({e}).") from e


def read_json(path):
    """The JSON in the local file `path`, or None while it does not exist (a result not written
    yet, a folder without its metadata)."""
    path = pathlib.Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def write_json(path, obj, *, indent: Optional[int] = 1, sort_keys: bool = False):
    """Writes `obj` as strict JSON (`json_text`, with a final newline) through `write_text`."""
    return write_text(path, json_text(obj, where=path, indent=indent, sort_keys=sort_keys)
                      + "\n")


# -- temp folders, their owners, and the lock of a folder replace -----------------------------

def _temp_prefix(path: pathlib.Path, kind: str) -> str:
    """``.NAME.tmp-PID-`` / ``.NAME.old-PID-``: a temp folder named by its writer's process."""
    return f".{path.name}.{kind}-{os.getpid()}-"


def _owner_alive(folder: pathlib.Path, path: pathlib.Path) -> bool:
    """Whether the process that named temp folder `folder` (`_temp_prefix`) still runs on this
    machine. A folder of an older tt_zoo (no process id in its name) has no live owner."""
    found = re.fullmatch(rf"\.{re.escape(path.name)}\.(?:tmp|old)-(\d+)-.*", folder.name)
    if not found:
        return False
    pid = int(found.group(1))
    if pid == os.getpid():
        return True  # this process: another thread may be writing
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process: alive
    return True


@contextlib.contextmanager
def folder_lock(folder):
    """Holds an exclusive lock (`flock`) on directory `folder` for the block: what serializes
    the renames of `write_directory` and `recover_replaced` on one parent folder, across
    processes and threads. A no-op where there is no `fcntl`, or the folder cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY) if fcntl is not None else None
    except OSError:
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _replaced_copies(path: pathlib.Path) -> list:
    """The versions of `path` set aside by replaces (``.NAME.old-*/NAME``), newest first."""
    copies = [old / path.name for old in path.parent.glob(f".{path.name}.old-*")
              if (old / path.name).is_dir()]
    return sorted(copies, key=lambda p: p.stat().st_mtime, reverse=True)


def _recover_replaced(path: pathlib.Path) -> Optional[pathlib.Path]:
    """`recover_replaced` without the lock (its caller holds it)."""
    if path.exists() or not path.parent.is_dir():
        return None
    for copy in _replaced_copies(path):
        if not _owner_alive(copy.parent, path):
            try:
                os.rename(copy, path)
            except OSError:
                return None  # a read-only folder: the copy stays where it is
            shutil.rmtree(copy.parent, ignore_errors=True)
            return path
    return None


def recover_replaced(path) -> Optional[pathlib.Path]:
    """Puts back the version of `path` that a replace killed between its two renames set aside
    (`write_directory`: ``.NAME.old-*/NAME``, left with nothing at `path`). Loaders and writers
    call it first, so such a kill costs nothing: the old version is found at its path. Returns
    `path` when it recovered it, else None (`path` exists, or nothing to recover; a URL)."""
    if is_remote(path):
        return None
    path = pathlib.Path(path)
    if path.exists() or not path.parent.is_dir():
        return None
    with folder_lock(path.parent):
        return _recover_replaced(path)


def remove_debris(path) -> list:
    """Removes what a killed `write_directory(path, ...)` left beside `path`: the hidden
    ``.NAME.tmp-*`` (an unfinished new version) and ``.NAME.old-*`` (a replaced one not yet
    deleted) folders whose writer no longer runs (a live writer's are its own: two writers to
    one path never remove each other's). They are ours by name; nothing else is touched. A
    set-aside version with nothing at `path` is put back first (`recover_replaced`). Returns
    what it removed."""
    if is_remote(path):
        return []  # remote folders are uploaded in place (`write_directory`): no temp folders
    path = pathlib.Path(path)
    removed = []
    if path.parent.is_dir():
        with folder_lock(path.parent):
            _recover_replaced(path)
            for pattern in (f".{path.name}.tmp-*", f".{path.name}.old-*"):
                for debris in path.parent.glob(pattern):
                    if debris.is_dir() and not _owner_alive(debris, path):
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
    True; otherwise FileExistsError names it, before anything is built (and again before the
    rename: a folder that appeared meanwhile is refused too). The replacement is atomic: the
    old version goes only after `build` succeeded; on any error the temp directory is removed
    and `path` is left as it was. The two renames of a replace hold the parent folder's lock
    (`folder_lock`): of two writers to one path, both finish and the last to rename wins; a
    kill between them is repaired by the next load or write (`recover_replaced`). Debris of
    an earlier killed write is cleaned first (`remove_debris`; never a live writer's).

    Args:
      path: the directory to write.
      build: fills the temp directory it is given.
      overwrite: replace whatever is at `path`.
      is_replaceable: whether an existing `path` is an artifact this call may replace.
      what: what is written, for the error message (e.g. "tt_zoo model export").
      last: for a URL `path`: the top-level files uploaded last, after everything else (the
        artifact's completeness marker, e.g. its metadata.json or manifest).
    """
    if is_remote(path):
        check_replaceable(path, overwrite=overwrite, is_replaceable=is_replaceable, what=what)
        return _upload_directory(str(path), build, last)
    path = pathlib.Path(path)
    if path.parent.is_dir():
        recover_replaced(path)  # a replace killed midway: its old version is what is there
    check_replaceable(path, overwrite=overwrite, is_replaceable=is_replaceable, what=what)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_debris(path)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=_temp_prefix(path, "tmp"), dir=path.parent))
    old = None
    try:
        build(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp creates 0700
        with folder_lock(path.parent):
            check_replaceable(path, overwrite=overwrite, is_replaceable=is_replaceable,
                              what=what)
            if path.exists():
                old = pathlib.Path(tempfile.mkdtemp(prefix=_temp_prefix(path, "old"),
                                                    dir=path.parent))
                os.rename(path, old / path.name)
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not path.exists() and (old / path.name).is_dir():
            os.rename(old / path.name, path)  # the second rename failed: the old one goes back
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
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
