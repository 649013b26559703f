"""A corpus's embeddings in shards, each with its own index: the layout, written once a shard.

Chang et al., ICLR 2020, Section 2 ("Inference"): the candidate embeddings psi(d) are computed
once, offline; for a corpus too large for one machine they are computed in parallel
(`tt_zoo.serving.corpus_index`, Apache Beam) and kept in shards. A passage goes to shard
``crc32(utf-8 id) % num_shards`` (`shard_of`: stable across processes and machines, unlike
Python's salted ``hash``), so every copy of an id lands in the same shard and a duplicate is
found there. The layout::

    OUTPUT/
      shard-00000-of-00004/
        ids.txt          one id a line, sorted (the rows' order)
        embeddings.npy   [n, dim] float32, float16 or int8 (`EmbeddingStorage`)
        scales.npy       int8 only: float32 [n] (per row) or [dim] (per dimension)
        index/           an `EmbeddingIndex` (ScaNN, `ScannConfig.for_size(n)`) over the
                         stored embeddings, decoded (absent for an empty shard)
        shard.json       settings, count, sha256 of the files above: written last
      ...
      manifest.json      every shard and the sha256 of its files: written last of all

A shard is built in a hidden temp folder beside it (``.shard-...tmp-*``) and renamed when
complete (`write_shard`), so a shard folder is either absent or whole; a temp folder left by a
killed worker is never read. A shard that exists complete, with the same settings and the same
ids, is not written again (a resumed run, a retried or duplicate worker), and rename refuses to
replace one that another worker completed first. Object stores (``gs://``) have no atomic folder
rename: there the shard is uploaded with its ``shard.json`` last, and a shard counts as complete
only when its files match the sha256 that ``shard.json`` records.

`read_manifest` verifies a finished output; `tt_zoo.retrieval.sharded_index.ShardedIndex`
searches it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import shutil
import tempfile
import zlib
from typing import List, Optional, Sequence, Set, Tuple

import numpy as np

from tt_zoo.atomic_io import is_remote, write_directory, write_json
from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.manifest import (check_format_version, describe_file, describe_files,
                             manifest_digest, verify_files)
from tt_zoo.retrieval.embedding_storage import EmbeddingStorage

FORMAT = "tt_zoo.EmbeddingShards"
SHARD_FORMAT = "tt_zoo.EmbeddingShard"
FORMAT_VERSION = 1  # 1: the layout above
FORMAT_NAME = "tt_zoo embedding shards"  # how the format is named in errors
MANIFEST_FILE = "manifest.json"
SHARD_FILE = "shard.json"
IDS_FILE = "ids.txt"
EMBEDDINGS_FILE = "embeddings.npy"
SCALES_FILE = "scales.npy"
INDEX_DIR = "index"
SHARD_PREFIX = "shard"
ASSIGNMENT = "crc32(utf-8 id) % num_shards"
MAX_SHARDS = 99_999  # five digits in the names


class DuplicateIdError(TtZooError):
    """Two passages share an id; the message names the id."""


class ShardConflictError(ArtifactError):
    """A shard folder already exists and is not the shard this run would write (other settings,
    other passages, or not a finished shard): it is never replaced; the message names it."""


@dataclasses.dataclass(frozen=True)
class ShardSettings:
    """What every shard of one output shares; an existing shard is reused only when they match.

    Args:
      num_shards: how many shards (1 to 99,999).
      dim: the embedding dimension.
      storage: how embeddings are stored (`EmbeddingStorage`).
      model_sha256: the sha256 of the model export that encoded them.
      backend: each shard's `EmbeddingIndex` backend ("scann" or "brute_force").
    """

    num_shards: int
    dim: int
    storage: EmbeddingStorage
    model_sha256: str
    backend: str = "scann"

    def __post_init__(self):
        check_num_shards(self.num_shards)
        if not isinstance(self.dim, int) or isinstance(self.dim, bool) or self.dim < 1:
            raise TtZooError(f"dim must be a positive int (got {self.dim!r}).")
        from tt_zoo.retrieval.index import check_backend  # noqa: PLC0415
        check_backend(self.backend)

    def to_json(self) -> dict:
        return {"num_shards": self.num_shards, "dim": self.dim,
                "storage": self.storage.to_json(), "model_sha256": self.model_sha256,
                "backend": self.backend}

    @classmethod
    def from_json(cls, config: dict) -> "ShardSettings":
        config = dict(config)
        config["storage"] = EmbeddingStorage.from_json(config["storage"])
        return cls(**config)


def check_num_shards(num_shards) -> int:
    if (not isinstance(num_shards, int) or isinstance(num_shards, bool)
            or not 1 <= num_shards <= MAX_SHARDS):
        raise TtZooError(f"num_shards must be an int from 1 to {MAX_SHARDS:,} "
                         f"(got {num_shards!r}).")
    return num_shards


def shard_of(candidate_id: str, num_shards: int) -> int:
    """The shard of an id: ``crc32(utf-8 bytes) % num_shards``, the same in every process.

    >>> shard_of("Paris#0", 4), shard_of("Paris#1", 4)
    (0, 2)
    """
    return zlib.crc32(candidate_id.encode("utf-8")) % num_shards


def shard_name(index: int, num_shards: int) -> str:
    """``shard-00003-of-00004``: the folder of shard `index` of `num_shards`."""
    return f"{SHARD_PREFIX}-{index:05d}-of-{num_shards:05d}"


def ids_text(ids: Sequence[str]) -> str:
    """The content of ids.txt: one id a line (ids never hold a newline)."""
    return "".join(f"{i}\n" for i in ids)


# -- paths, local or remote --------------------------------------------------------------------

def _gfile():
    import tensorflow as tf  # noqa: PLC0415 (only for URLs: local shards need no TensorFlow)
    return tf.io.gfile


def _join(root, *names) -> str:
    if is_remote(root):
        return "/".join([str(root).rstrip("/"), *names])
    return str(pathlib.Path(root, *names))


def _exists(path: str) -> bool:
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def _read_json(path: str) -> Optional[dict]:
    """The JSON object in `path`, None when absent; ArtifactError when not a JSON object."""
    import json  # noqa: PLC0415
    if not _exists(path):
        return None
    try:
        if is_remote(path):
            with _gfile().GFile(path, "r") as f:
                data = json.loads(f.read())
        else:
            data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ArtifactError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ArtifactError(f"{path} must hold a JSON object (got {type(data).__name__}).")
    return data


def _shard_names_present(output_dir) -> List[str]:
    pattern = _join(output_dir, f"{SHARD_PREFIX}-*-of-*")
    found = (_gfile().glob(pattern) if is_remote(output_dir)
             else [str(p) for p in pathlib.Path(output_dir).glob(f"{SHARD_PREFIX}-*-of-*")])
    return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in found)


# -- one shard ---------------------------------------------------------------------------------

def _order_by_id(ids: Sequence[str], embeddings, where: str) -> Tuple[List[str], np.ndarray]:
    """Rows sorted by id; a duplicate id raises `DuplicateIdError` naming it."""
    ids = list(ids)
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ids = [ids[i] for i in order]
    for a, b in zip(ids, ids[1:]):
        if a == b:
            raise DuplicateIdError(f"passage id {a!r} occurs {ids.count(a)} times in the "
                                   f"corpus ({where}); ids must be unique.")
    array = np.asarray(embeddings, dtype=np.float32)
    return ids, (array[order] if len(order) else array)


def _complete_shard(output_dir, name: str, settings: ShardSettings,
                    check: str = "sha256") -> Optional[dict]:
    """The shard.json of a finished shard `name` written with `settings`, its files checked
    (`check`: "sha256" or "size"), None when the shard is absent (or an empty folder, which a
    rename replaces). Raises `ShardConflictError` for a folder that is not a finished shard of
    these settings."""
    folder = _join(output_dir, name)
    meta = _read_json(_join(folder, SHARD_FILE))
    if meta is None:
        if not _exists(folder) or not _listdir(folder):
            return None
        raise ShardConflictError(
            f"{folder} holds files but no {SHARD_FILE}: it is not a shard a finished run wrote; "
            "remove it (or choose another output folder) and run again.")
    if meta.get("format") != SHARD_FORMAT:
        raise ShardConflictError(f"{_join(folder, SHARD_FILE)}: format is "
                                 f"{meta.get('format')!r}, expected {SHARD_FORMAT!r}.")
    if meta.get("settings") != settings.to_json():
        raise ShardConflictError(
            f"{folder} was written with other settings ({meta.get('settings')}; this run: "
            f"{settings.to_json()}); it is never replaced: remove it or choose another output "
            "folder.")
    try:
        verify_files(folder, meta["files"], listed_in=_join(folder, SHARD_FILE), check=check,
                     error=ShardConflictError)
    except KeyError as e:
        raise ShardConflictError(f"{_join(folder, SHARD_FILE)} records no files.") from e
    return meta


def _listdir(folder: str) -> list:
    return _gfile().listdir(folder) if is_remote(folder) else os.listdir(folder)


def _check_same_ids(meta: dict, ids: Sequence[str], folder: str) -> None:
    digest = hashlib.sha256(ids_text(ids).encode("utf-8")).hexdigest()
    if meta["files"][IDS_FILE]["sha256"] != digest:
        raise ShardConflictError(
            f"{folder} holds {meta['num_passages']:,} passages that differ from the "
            f"{len(ids):,} of this run's shard (the corpus changed since it was written); it is "
            "never replaced: remove it to encode it again, or choose another output folder.")


def check_shard_ids(output_dir, index: int, ids: Sequence[str],
                    settings: ShardSettings) -> dict:
    """For a shard a run finds complete and does not encode again: its passages must be the
    ones it holds. Returns its shard.json; raises `DuplicateIdError` or `ShardConflictError`.
    (Its files' sizes are checked here; `prepare_output` checked their sha256.)"""
    name = shard_name(index, settings.num_shards)
    ordered, _ = _order_by_id(ids, np.zeros((len(ids), 0), np.float32), name)
    meta = _complete_shard(output_dir, name, settings, check="size")
    if meta is None:
        raise ShardConflictError(f"{_join(output_dir, name)} is no longer there.")
    _check_same_ids(meta, ordered, _join(output_dir, name))
    return meta


def write_shard(output_dir, index: int, ids: Sequence[str], embeddings,
                settings: ShardSettings) -> dict:
    """Writes shard `index` of `ids` and their float32 `embeddings` `[n, dim]`, once.

    The rows are sorted by id; the embeddings are stored as `settings.storage` says and the
    shard's `EmbeddingIndex` is built over them as stored (decoded), so what it searches is what
    is kept. Built in a temp folder beside the shard, then renamed. When the shard exists
    complete with the same settings and ids (a resumed run, a retried or duplicate worker),
    nothing is written.

    Returns:
      its shard.json, with ``"written"``: whether this call wrote it.

    Raises:
      DuplicateIdError: an id occurs twice (named).
      ShardConflictError: the shard folder exists and is not this shard.
    """
    name = shard_name(index, settings.num_shards)
    folder = _join(output_dir, name)
    ids, embeddings = _order_by_id(ids, embeddings, name)
    stray = next((i for i in ids if shard_of(i, settings.num_shards) != index), None)
    if stray is not None:
        raise TtZooError(f"passage id {stray!r} belongs to shard "
                         f"{shard_of(stray, settings.num_shards)} ({ASSIGNMENT}), not {name}.")
    if embeddings.shape != (len(ids), settings.dim) and len(ids):
        raise TtZooError(f"{name}: embeddings must be [{len(ids)}, {settings.dim}] (got "
                         f"{embeddings.shape}).")
    existing = _complete_shard(output_dir, name, settings)
    if existing is not None:
        _check_same_ids(existing, ids, folder)
        return {**existing, "written": False}
    meta = {}

    def build(tmp: pathlib.Path) -> None:
        meta.update(_build_shard(tmp, name, ids, embeddings.reshape(len(ids), settings.dim),
                                 settings))

    if is_remote(output_dir):
        write_directory(folder, build, what="tt_zoo embedding shard", last=(SHARD_FILE,))
        return {**meta, "written": True}
    os.makedirs(output_dir, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=output_dir))
    try:
        build(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp creates 0700
        try:
            os.rename(tmp, folder)  # refuses a non-empty folder: the first complete shard wins
        except OSError:
            winner = _complete_shard(output_dir, name, settings)
            if winner is None:
                raise
            _check_same_ids(winner, ids, folder)
            shutil.rmtree(tmp, ignore_errors=True)
            return {**winner, "written": False}
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {**meta, "written": True}


def _build_shard(tmp: pathlib.Path, name: str, ids: List[str], embeddings: np.ndarray,
                 settings: ShardSettings) -> dict:
    from tt_zoo.retrieval.index import EmbeddingIndex  # noqa: PLC0415 (ScaNN, TensorFlow)

    (tmp / IDS_FILE).write_text(ids_text(ids), encoding="utf-8", newline="\n")
    values, scales = settings.storage.encode(embeddings)
    np.save(tmp / EMBEDDINGS_FILE, values, allow_pickle=False)
    files = [IDS_FILE, EMBEDDINGS_FILE]
    if scales is not None:
        np.save(tmp / SCALES_FILE, scales, allow_pickle=False)
        files.append(SCALES_FILE)
    if ids:
        EmbeddingIndex(settings.storage.decode(values, scales), ids,
                       backend=settings.backend).save(tmp / INDEX_DIR)
        # index.json pins every other file of the index by its sha256.
        files.append(f"{INDEX_DIR}/index.json")
    meta = {"format": SHARD_FORMAT, "format_version": FORMAT_VERSION, "name": name,
            "num_passages": len(ids), "settings": settings.to_json(),
            "files": describe_files(tmp, names=files)}
    write_json(tmp / SHARD_FILE, meta, indent=1, sort_keys=True)
    return meta


# -- the whole output --------------------------------------------------------------------------

def prepare_output(output_dir, settings: ShardSettings) -> Set[int]:
    """Before a run: the shards already complete (with these settings), which it will not
    encode again. Removes the old manifest (a failed run then leaves none) and temp folders of
    killed workers; refuses a folder holding another kind of manifest or shards of another
    `num_shards` (`ShardConflictError`), and a shard of other settings (`_complete_shard`)."""
    output_dir = str(output_dir)
    manifest = _join(output_dir, MANIFEST_FILE)
    old = _read_json(manifest)
    if old is not None and old.get("format") != FORMAT:
        raise ShardConflictError(f"{manifest} is not a {FORMAT} manifest (format "
                                 f"{old.get('format')!r}); refusing to write into "
                                 f"{output_dir}: choose another output folder.")
    names = _shard_names_present(output_dir) if _exists(output_dir) else []
    expected = {shard_name(i, settings.num_shards): i for i in range(settings.num_shards)}
    foreign = [n for n in names if n not in expected]
    if foreign:
        raise ShardConflictError(f"{output_dir} holds shards of another run ({foreign[0]}, "
                                 f"{len(foreign)} in all; this run writes {settings.num_shards} "
                                 "shards): choose another output folder or remove them.")
    complete = {expected[n] for n in names if _complete_shard(output_dir, n, settings)}
    if old is not None:
        (_gfile().remove if is_remote(manifest) else os.remove)(manifest)
    if not is_remote(output_dir) and os.path.isdir(output_dir):
        for debris in pathlib.Path(output_dir).glob(f".{SHARD_PREFIX}-*.tmp-*"):
            shutil.rmtree(debris, ignore_errors=True)
    return complete


def write_manifest(output_dir, settings: ShardSettings, extra: Optional[dict] = None) -> dict:
    """After every shard is written: reads each shard.json and writes manifest.json (last) with
    every shard's files (paths relative to `output_dir`) and their sha256 (`tt_zoo.manifest`)."""
    shards, files = [], {}
    for i in range(settings.num_shards):
        name = shard_name(i, settings.num_shards)
        meta = _complete_shard(output_dir, name, settings, check="size")  # hashed by its writer
        if meta is None:
            raise ArtifactError(f"{_join(output_dir, name)} is missing: the run did not write "
                                "every shard.")
        shard_files = {f"{name}/{k}": v for k, v in meta["files"].items()}
        shard_files[f"{name}/{SHARD_FILE}"] = describe_file(_join(output_dir, name, SHARD_FILE))
        shards.append({"name": name, "num_passages": meta["num_passages"],
                       "files": sorted(shard_files)})
        files.update(shard_files)
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION,
                "settings": settings.to_json(), "shard_assignment": ASSIGNMENT,
                "num_passages": sum(s["num_passages"] for s in shards),
                **(extra or {}), "shards": shards, "files": files,
                "sha256": manifest_digest(files)}
    write_json(_join(output_dir, MANIFEST_FILE), manifest, indent=1)
    return manifest


def read_manifest(output_dir, verify: str = "sha256") -> dict:
    """The manifest of a finished output, its files checked (`verify`: "sha256", "size" or
    "none"). Raises `ArtifactError` naming what is missing or differs: no manifest means the
    run that wrote the folder did not finish."""
    output_dir = str(output_dir)
    path = _join(output_dir, MANIFEST_FILE)
    manifest = _read_json(path)
    if manifest is None:
        raise ArtifactError(f"{path} is missing: {output_dir} is not a finished set of "
                            "embedding shards (its run did not finish; run it again to resume).")
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: format is {manifest.get('format')!r}, expected {FORMAT!r}.")
    check_format_version(manifest.get("format_version"), FORMAT_VERSION, listed_in=path,
                         what=FORMAT_NAME)
    try:
        files, shards = dict(manifest["files"]), list(manifest["shards"])
        settings = ShardSettings.from_json(manifest["settings"])
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"{path} is malformed: {e!r}.") from e
    if manifest_digest(files) != manifest.get("sha256"):
        raise ArtifactError(f"{path} is corrupted: its file list does not hash to the sha256 "
                            "it records.")
    if len(shards) != settings.num_shards:
        raise ArtifactError(f"{path} lists {len(shards)} shards; its settings say "
                            f"{settings.num_shards}.")
    verify_files(output_dir, files, listed_in=path, check=verify)
    return manifest


def read_shard(output_dir, name: str, storage: EmbeddingStorage) -> Tuple[List[str], np.ndarray]:
    """``(ids, float32 embeddings [n, dim])`` of one shard, decoded from its stored dtype (the
    files are checked by `read_manifest`, not here)."""
    folder = pathlib.Path(output_dir) / name
    ids = (folder / IDS_FILE).read_text(encoding="utf-8").split("\n")[:-1]
    values = np.load(folder / EMBEDDINGS_FILE, allow_pickle=False)
    scales = (np.load(folder / SCALES_FILE, allow_pickle=False)
              if (folder / SCALES_FILE).is_file() else None)
    embeddings = storage.decode(values, scales)
    if embeddings.shape[0] != len(ids):
        raise ArtifactError(f"{folder}: {len(ids)} ids for {embeddings.shape[0]} embeddings.")
    return ids, embeddings
