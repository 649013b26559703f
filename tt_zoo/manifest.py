"""Per-file manifests: how every tt_zoo artifact records its files and checks them on load.

A manifest maps each file's POSIX path, relative to the artifact's folder, to its size and
sha256: ``{"variables/variables.index": {"size": 1234, "sha256": "ab…"}, ...}``. Model exports
keep it in ``metadata.json``, embedding indexes in ``index.json``, text indexes in
``text_index.json`` and pair directories in ``manifest.json`` (one entry per shard, beside its
record count). The manifest is written last, so an artifact whose manifest is missing, or whose
files differ from it, was cut short or damaged: readers raise `ArtifactError` naming the file.

`manifest_digest` is the artifact's identity: the sha256 of its manifest, which the registry
records for each shipped model and which a download is checked against. Beside the manifest an
artifact records the version of its layout (``format_version``); `check_format_version` is how
every reader compares it, so a later tt_zoo's layout is refused, not misread.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Iterable, Mapping, Optional, Type

from tt_zoo.atomic_io import is_remote
from tt_zoo.errors import ArtifactError

CHECKS = ("sha256", "size", "none")


def _gfile():
    import tensorflow as tf  # noqa: PLC0415 (only for URLs: local files need no TensorFlow)
    return tf.io.gfile


def describe_file(path) -> dict:
    """``{"size": bytes, "sha256": hex}`` of one file (a local path or a gs:// URL)."""
    digest = hashlib.sha256()
    size = 0
    opener = _gfile().GFile if is_remote(path) else open
    with opener(str(path), "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            size += len(block)
            digest.update(block)
    return {"size": size, "sha256": digest.hexdigest()}


def describe_files(root, names: Optional[Iterable[str]] = None, skip: Iterable[str] = ()) -> dict:
    """The manifest of a local folder: every file under `root` (or only `names`), minus `skip`."""
    root = pathlib.Path(root)
    paths = ([root / name for name in names] if names is not None
             else sorted(p for p in root.rglob("*") if p.is_file()))
    skip = set(skip)
    return {p.relative_to(root).as_posix(): describe_file(p) for p in paths
            if p.relative_to(root).as_posix() not in skip}


def manifest_digest(files: Mapping[str, Mapping]) -> str:
    """The sha256 of a manifest (canonical JSON): one hash that pins every file's content."""
    canonical = json.dumps({name: {"size": int(entry["size"]), "sha256": entry["sha256"]}
                            for name, entry in files.items()},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _size(path) -> int:
    return _gfile().stat(str(path)).length if is_remote(path) else os.path.getsize(path)


def _exists(path) -> bool:
    return _gfile().exists(str(path)) if is_remote(path) else os.path.isfile(path)


def verify_file(path, expected, *, listed_in, check: str = "sha256",
                error: Type[ArtifactError] = ArtifactError) -> None:
    """Checks one file against its manifest entry: present, then the size (cheap), then, with
    ``check="sha256"``, the content. Raises `error` naming the file and the manifest.

    An entry that is a bare sha256 string (indexes saved before sizes were recorded) is checked
    by content alone."""
    if isinstance(expected, str):
        expected = {"sha256": expected}
    if check not in CHECKS:
        raise ValueError(f"check must be one of {CHECKS} (got {check!r}).")
    if check == "none":
        return
    if not _exists(path):
        raise error(f"{path} listed in {listed_in} is missing.")
    size = _size(path)
    if "size" in expected and size != expected["size"]:
        raise error(f"{path} is corrupted or truncated: it has {size} bytes, the manifest says "
                    f"{expected['size']} ({listed_in}).")
    if check == "sha256":
        actual = describe_file(path)["sha256"]
        if actual != expected["sha256"]:
            raise error(f"{path} is corrupted or truncated: its sha256 {actual[:16]}… differs "
                        f"from {expected['sha256'][:16]}… recorded in {listed_in}.")


def verify_files(root, files: Mapping[str, Mapping], *, listed_in, check: str = "sha256",
                 error: Type[ArtifactError] = ArtifactError) -> None:
    """`verify_file` for every entry of a manifest, relative to `root` (a folder or URL)."""
    for name, expected in files.items():
        path = f"{str(root).rstrip('/')}/{name}" if is_remote(root) else pathlib.Path(root) / name
        verify_file(path, expected, listed_in=listed_in, check=check, error=error)


def check_format_version(recorded, supported: int, *, listed_in, what: str) -> int:
    """The layout version an artifact records, refusing one this tt_zoo cannot read.

    Args:
      recorded: the ``format_version`` field as read (None when absent: the artifact was written
        before versions were recorded, which is format 1).
      supported: the newest version this tt_zoo reads (it reads every older one).
      listed_in: the file that records it, named in the error.
      what: the artifact's kind in words (e.g. "tt_zoo model export").

    Raises:
      ArtifactError: a version newer than `supported` (naming both: upgrade tt_zoo), or one that
        is not a whole number of 1 or more.
    """
    from tt_zoo._version import __version__  # noqa: PLC0415
    version = 1 if recorded is None else recorded
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ArtifactError(f"{listed_in}: format_version {recorded!r} is not a whole number "
                            f"of 1 or more (this tt_zoo reads {what} formats 1 to {supported}).")
    if version > supported:
        raise ArtifactError(f"{listed_in} was written in {what} format {version}; this tt_zoo "
                            f"({__version__}) reads up to format {supported}: upgrade tt_zoo "
                            "to load it.")
    return version


def read_json_object(path, what: str, error=ArtifactError) -> dict:
    """The JSON object in the file `path`, or `error` naming the file and `what` it should hold
    (missing, not UTF-8 JSON, or not an object)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise error(f"{path} is missing ({what}).")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{path} is not valid JSON ({e}); expected {what}.") from e
    if not isinstance(value, dict):
        raise error(f"{path} must hold a JSON object ({what}; got {type(value).__name__}).")
    return value
