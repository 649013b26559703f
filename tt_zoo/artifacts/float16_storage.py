"""float16 storage of an export's weights: half the bytes to ship and download, a float32
SavedModel again on the user's machine.

A MiniLM-sized export is ~90 MB in float32 (issue 50, "Ship the winners": store weights in
float16 where the recall cost is measured as nil). A SavedModel's graph reads float32
variables, and `tt-zoo index-corpus`, serving and ``tf.saved_model.load`` read its variables
checkpoint directly, so the compact artifact is not a SavedModel: it keeps the export's files
but ``variables/`` becomes ``variables_float16/``, the same checkpoint keys with every float32
array cast to float16 (other dtypes, the object graph included, copied). Its card records
``storage`` (`tt_zoo.artifacts.model_card.Storage`: weights "float16", the arrays cast and the
float32 export's sha256), which ``behaviour.json`` pins under the file manifest
(`tt_zoo.artifacts.export.BEHAVIOUR_KEYS`: a swapped shared array or an edited cast is refused at
load, naming metadata.json), and its own file manifest, which is the registry's sha256.

`tt_zoo.load` (`tt_zoo.zoo.loading.find_artifact`) verifies a compact artifact, then
`materialise`s it once into the cache (``$TT_ZOO_HOME/float32/<name>-<key>``, the key a digest of
the manifest's sha256 and the pinned storage facts: `cache_key`): the float16 arrays cast back
to float32 under ``variables/``, a card recording ``materialised_from`` (the compact artifact's
sha256, which `tt_zoo.artifacts.export.verify_export` accepts for it) and its own manifest. Built
in a temp folder and renamed (`tt_zoo.atomic_io.write_directory`), so a cut materialisation is
never taken for a model; a damaged copy is built again.

A model that holds arrays another shipped model holds already (a query-adapted model's document
tower and token table are its base model's, `tt_zoo.training.query_adaptation`) is written with
``share_with``: an array (of `MIN_SHARED_VALUES` or more) whose float16 value equals one of that
model's is left out and recorded (``Storage.shared_arrays``, with the model's name and the
sha256 of its float32 SavedModel), and `materialise` reads it from that model, refused if its
sha256 changed. That model's folder is found by the loader (`tt_zoo.zoo.loading.loadable`,
which asks `shared_from` whose it is) and handed down as ``base``: this module finds no model
by name. Such an artifact ships at the size of what it adds.

The cast rounds each weight to 11 significant bits (relative error <= 2^-11); what that costs in
recall is measured per shipped model, side by side with the float32 export
(``python -m benchmarks.precision_cost --compare storage``; results/float16_storage*.md).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from tt_zoo.atomic_io import write_directory
from tt_zoo.cache import home
from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.manifest import describe_files, manifest_digest
from tt_zoo.artifacts.export import (BEHAVIOUR_FILE, COMPACT_WEIGHTS, FLOAT16_DIR,
                                   MANIFEST_EXCLUDES, METADATA_FILE, behaviour_of, verify_export,
                                   write_behaviour, write_metadata_and_card)
from tt_zoo.artifacts.model_card import ModelCard, Storage

FLOAT32_DIR = "variables"  # the SavedModel's own
CHECKPOINT_NAME = "variables"  # <dir>/variables.index, <dir>/variables.data-00000-of-00001
FLOAT16 = COMPACT_WEIGHTS
MATERIALISED = "float32"  # the cache's folder of materialised copies, and their storage
_FLOAT16_MAX = float(np.finfo(np.float16).max)
# Arrays smaller than this are stored even when shared: biases and norms cost little, and a
# constant array (zeros, ones) would otherwise tie models that have nothing else in common.
MIN_SHARED_VALUES = 1024


def storage_of(metadata: dict) -> Optional[Storage]:
    """The export's ``storage`` record (None: plain float32 SavedModel variables)."""
    return ModelCard.from_dict(metadata).provenance.storage


def is_float16(metadata: dict) -> bool:
    """Whether metadata.json describes a compact float16 artifact (to be materialised)."""
    storage = storage_of(metadata)
    return storage is not None and storage.weights == FLOAT16


def _array_digest(array: np.ndarray) -> str:
    return hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes()).hexdigest()


def _copy_checkpoint(source_prefix: str, target_prefix: str, dtype,
                     shared: Optional[Dict[str, str]] = None,
                     share=None, fill: Optional[Dict[str, np.ndarray]] = None) -> int:
    """Writes every tensor of the checkpoint at `source_prefix` to `target_prefix` under the
    same key, floating arrays cast to `dtype` (float16 <-> float32); returns how many were.
    `share` (float16 digest -> a key of the shared model) leaves out each cast array it names,
    recording the pair in `shared`; `fill` adds arrays (key -> array, cast the same way)."""
    reader = tf.train.load_checkpoint(source_prefix)
    names, tensors, cast = [], [], 0
    items = sorted(reader.get_variable_to_dtype_map().items())
    for key, array in sorted((fill or {}).items()):
        items.append((key, tf.as_dtype(array.dtype)))
    for key, key_dtype in items:
        value = fill[key] if fill and key in fill else reader.get_tensor(key)
        if dtype == tf.float16 and key_dtype == tf.float16:  # would come back as float32
            raise TtZooError(f"{source_prefix}: {key} is a float16 array already; only an "
                             "export whose floating weights are all float32 is stored so.")
        if key_dtype in (tf.float32, tf.float16) and key_dtype != dtype:
            array = np.asarray(value)
            if dtype == tf.float16 and np.abs(array).max(initial=0.0) > _FLOAT16_MAX:
                raise TtZooError(f"{source_prefix}: {key} holds a value beyond float16's range "
                                 f"(|x| > {_FLOAT16_MAX:g}); ship this export in float32.")
            value = array.astype(dtype.as_numpy_dtype)
            cast += 1
            if share and value.size >= MIN_SHARED_VALUES:
                there = share.get(_array_digest(value))
                if there is not None:  # the shared model holds it: left out, recorded
                    shared[key] = there
                    continue
        names.append(key)
        tensors.append(tf.constant(value))
    tf.raw_ops.SaveV2(prefix=target_prefix, tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=tensors)
    return cast


def _stamp(staging: pathlib.Path, card: ModelCard, storage: Storage,
           copied: Optional[Dict[str, dict]] = None) -> dict:
    """The card with `storage`, pinned in behaviour.json (a compact artifact's:
    `tt_zoo.artifacts.export.write_behaviour`), and the manifest of `staging`'s files, written
    into it. `copied`: the manifest entries of files copied unchanged from an artifact verified
    just before, taken as they are; only the other files are hashed."""
    card.provenance.storage = storage
    write_behaviour(card, staging)
    known = {name: entry for name, entry in (copied or {}).items() if name != BEHAVIOUR_FILE}
    names = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    card.provenance.files = {
        **describe_files(staging, names=[n for n in names if n not in known],
                         skip=MANIFEST_EXCLUDES),
        **{n: known[n] for n in names if n in known}}
    card.provenance.sha256 = manifest_digest(card.provenance.files)
    return write_metadata_and_card(staging, card.to_dict())


def _copy_beside_weights(source: pathlib.Path, staging: pathlib.Path, weights_dir: str) -> None:
    """Copies the export's files except its weights folder, metadata.json and the card."""
    skip = {weights_dir, *MANIFEST_EXCLUDES}
    for item in source.iterdir():
        if item.name in skip:
            continue
        if item.is_dir():
            shutil.copytree(item, staging / item.name)
        else:
            shutil.copy2(item, staging / item.name)


def _shared_model(base) -> Tuple[str, str]:
    """(the checkpoint prefix, the sha256) of the float32 SavedModel of the model whose arrays
    an artifact shares, at `base` (its export folder; a float16 one is materialised first)."""
    path, metadata = open_export(base)
    return (str(path / FLOAT32_DIR / CHECKPOINT_NAME),
            ModelCard.from_dict(metadata).provenance.sha256)


def write_float16(source, staging, share_with: Optional[str] = None, base=None) -> dict:
    """Writes the compact float16 artifact of the float32 export at `source` into the (empty)
    folder `staging`; returns its metadata. `source` is verified first; it may be the float32
    copy `materialise` made of a compact artifact (whose float32 export it then names: the
    arrays come back to the same float16 values). With `share_with` (a shipped model's name,
    recorded), the arrays equal to that model's are left out (module docstring); `base` is
    that model's folder as the loader finds it (`tt_zoo.zoo.loading.locate_artifact`), by
    default `share_with` itself taken as a folder.

    Raises:
      ArtifactError: `source` is not a complete, undamaged export.
      TtZooError: it is already float16, holds a weight beyond float16's range, or shares no
        array with `share_with`.
    """
    source, staging = pathlib.Path(source), pathlib.Path(staging)
    metadata = verify_export(source)
    storage = storage_of(metadata)
    if storage is not None and storage.weights != MATERIALISED:
        raise TtZooError(f"{source} stores its weights as {storage.weights} already; give "
                         "the float32 export it came from.")
    share, shared, shared_sha256 = None, {}, None
    if share_with is not None:
        prefix, shared_sha256 = _shared_model(share_with if base is None else base)
        reader = tf.train.load_checkpoint(prefix)
        share = {_array_digest(np.asarray(reader.get_tensor(key)).astype(np.float16)): key
                 for key, key_dtype in reader.get_variable_to_dtype_map().items()
                 if key_dtype == tf.float32}
    _copy_beside_weights(source, staging, FLOAT32_DIR)
    (staging / FLOAT16_DIR).mkdir()
    cast = _copy_checkpoint(str(source / FLOAT32_DIR / CHECKPOINT_NAME),
                            str(staging / FLOAT16_DIR / CHECKPOINT_NAME), tf.float16,
                            shared=shared, share=share)
    if share_with is not None and not shared:
        raise TtZooError(f"{source} holds no array equal to one of {share_with!r}'s: nothing "
                         "to share; ship it without share_with.")
    card = ModelCard.from_dict(metadata)
    float32_sha256 = (storage.float32_sha256 if storage is not None and storage.float32_sha256
                      else card.provenance.sha256)
    return _stamp(staging, card, Storage(
        weights=FLOAT16, arrays=cast, float32_sha256=float32_sha256,
        shared_from=share_with, shared_sha256=shared_sha256, shared_arrays=shared or None))


def _shared_arrays(storage: Storage, path: pathlib.Path, base) -> Dict[str, np.ndarray]:
    """The arrays the artifact at `path` left out, read from the model it shares them with
    (float32), at `base`, which must be the one it was written against."""
    if not storage.shared_arrays:
        return {}
    if base is None:
        raise ArtifactError(f"{path}: its arrays {sorted(storage.shared_arrays)[:2]}... are "
                            f"{storage.shared_from!r}'s: load it with tt_zoo.load, which finds "
                            "that model (or give its folder as base).")
    prefix, sha256 = _shared_model(base)
    if sha256 != storage.shared_sha256:
        raise ArtifactError(f"{path}: its arrays {sorted(storage.shared_arrays)[:2]}... are "
                            f"{storage.shared_from!r}'s of sha256 {storage.shared_sha256[:16]}…, "
                            f"but {storage.shared_from!r} is now {sha256[:16]}…: ship the two "
                            "together.")
    reader = tf.train.load_checkpoint(prefix)
    return {key: np.asarray(reader.get_tensor(there), np.float16)
            for key, there in storage.shared_arrays.items()}


def cache_key(metadata: dict) -> str:
    """The sha256 of what a float32 copy is made from: the compact artifact's manifest sha256
    and the facts of its card that change the weights (its storage: the arrays cast, those
    read from another model and which; `tt_zoo.artifacts.export.behaviour_of`)."""
    facts = {"sha256": ModelCard.from_dict(metadata).provenance.sha256,
             "behaviour": behaviour_of(metadata)}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode("utf-8")).hexdigest()


def materialised_path(path, metadata: dict) -> pathlib.Path:
    """Where the float32 copy of the compact artifact `path` (its `metadata`) is kept: a
    folder named by `cache_key`, so a copy made from other storage facts is never taken."""
    return (home() / MATERIALISED
            / f"{pathlib.Path(path).resolve().name}-{cache_key(metadata)[:16]}")


def _copy_of(path: pathlib.Path, sha256: str) -> Optional[dict]:
    """The metadata of `path` when it is an undamaged float32 copy materialised from the
    artifact `sha256`, else None. (`verify_export` takes a folder for `sha256` only when its
    manifest hashes to it, the compact artifact itself, or when its card records that it was
    materialised from it: a copy.)"""
    try:
        return verify_export(path, sha256)
    except (ArtifactError, TtZooError):
        return None


def materialise(path, expected_sha256: Optional[str] = None, base=None) -> pathlib.Path:
    """The float32 SavedModel of the compact artifact at `path`: its cached copy when that is
    complete and undamaged, else built now (after verifying `path` against `expected_sha256`,
    the registry's, or its own record), reading the arrays it shares from the model at `base`
    (`shared_from` names it; the loader finds it).

    Raises:
      ArtifactError: `path` is damaged or is not a float16 artifact.
    """
    path = pathlib.Path(path)
    metadata = verify_export(path, expected_sha256)
    if not is_float16(metadata):
        raise ArtifactError(f"{path / METADATA_FILE} records no float16 storage: it is a "
                            "SavedModel to load as it is.")
    return _materialised(path, metadata, ModelCard.from_dict(metadata), base)[0]


def _materialised(path: pathlib.Path, metadata: dict, card: ModelCard, base
                  ) -> Tuple[pathlib.Path, dict]:
    """(the float32 copy, its metadata) of the compact artifact at `path`, whose `metadata`
    (read as `card`) was verified just before: the cached copy, verified, else one built now,
    whose manifest takes the compact artifact's entries for the files it copies (hashed once,
    there) and hashes only what it writes."""
    sha256 = card.provenance.sha256
    dest = materialised_path(path, metadata)
    cached = _copy_of(dest, sha256)
    if cached is not None:
        return dest, cached

    fill = _shared_arrays(card.provenance.storage, path, base)
    written = {}

    def build(staging: pathlib.Path) -> None:
        _copy_beside_weights(path, staging, FLOAT16_DIR)
        (staging / FLOAT32_DIR).mkdir()
        cast = _copy_checkpoint(str(path / FLOAT16_DIR / CHECKPOINT_NAME),
                                str(staging / FLOAT32_DIR / CHECKPOINT_NAME), tf.float32,
                                fill=fill)
        written.update(_stamp(staging, card, Storage(
            weights=MATERIALISED, arrays=cast, materialised_from=sha256,
            float32_sha256=card.provenance.storage.float32_sha256),
            copied=card.provenance.files))

    # The cache's own folder: whatever is there (a damaged copy) is replaced.
    write_directory(dest, build, overwrite=True, what="float32 copy of a tt_zoo export")
    return dest, written


def _recorded_storage(path: pathlib.Path) -> Optional[Storage]:
    """The ``storage`` metadata.json at `path` records, read as it is (None: none, or not
    readable here: the loader's verify_export names what is wrong)."""
    try:
        metadata = json.loads((path / METADATA_FILE).read_text(encoding="utf-8"))
        return storage_of(metadata) if isinstance(metadata, dict) else None
    except (OSError, ValueError, TtZooError):
        return None


def shared_from(path) -> Optional[str]:
    """The model whose arrays the float16 artifact at `path` reads (``Storage.shared_from``,
    as its metadata.json records it; `materialise` verifies), for the loader to find and hand
    to `loadable` as ``base``; None for any other export."""
    storage = _recorded_storage(pathlib.Path(path))
    if storage is None or storage.weights != FLOAT16 or not storage.shared_arrays:
        return None
    return storage.shared_from


def open_export(path, expected_sha256: Optional[str] = None, base=None
                ) -> Tuple[pathlib.Path, dict]:
    """(the folder a loader reads, its metadata) of the export at `path`, verified once
    against `expected_sha256` (the registry's) or its own record: a SavedModel export as it
    is; a float16 artifact's float32 copy (`materialise`; `base` as `loadable` takes it).

    Raises:
      ArtifactError: `path` (or the model at `base` it reads arrays from) is damaged.
    """
    path = pathlib.Path(path)
    metadata = verify_export(path, expected_sha256)
    card = ModelCard.from_dict(metadata)
    storage = card.provenance.storage
    if storage is not None and storage.weights == FLOAT16:
        return _materialised(path, metadata, card, base)
    return path, metadata


def loadable(path, expected_sha256: Optional[str] = None, base=None) -> pathlib.Path:
    """`path` itself for a SavedModel export; the `materialise`d copy for a float16 artifact
    (the one way a loader turns what it found into what it reads; `base`: the folder of the
    model named by `shared_from`, found by the loader)."""
    path = pathlib.Path(path)
    storage = _recorded_storage(path)
    compact = storage is not None and storage.weights == FLOAT16
    return materialise(path, expected_sha256, base) if compact else path


__all__ = ["FLOAT16_DIR", "storage_of", "is_float16", "write_float16", "materialised_path",
           "materialise", "shared_from", "loadable", "open_export"]
