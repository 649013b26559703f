"""Pair datasets on disk: sharded TFRecords with a manifest, read back as ``tf.data``.

The pretraining tasks of Chang et al. 2020 (Sec. 3: ICT, BFS, WLP) produce positive
(query, document) pairs; the two-tower model trains on them with a sampled softmax over the
batch's documents and the logQ correction (Sec. 2), which needs q(d), the probability that a
document appears as a candidate. Here q(d) = count(doc_id) / num_pairs over the whole pair set
(`tt_zoo.data.sampling`), stored per record as ``DOC_SAMPLING_PROB``.

Layout of an output directory::

    pairs-00000-of-00004.tfrecord ... pairs-00003-of-00004.tfrecord
    manifest.json      # written last, atomically: shard names, record counts, sizes, sha256

Each shard is written under a temporary name and renamed only once complete, and the manifest
is written after every shard, so an interrupted run leaves no manifest and readers refuse the
directory ("incomplete output: ..."). A shard deleted, truncated or altered after writing no
longer matches the manifest and is refused too.

q(d) needs document frequencies over *all* pairs before the first record is final. We spill:
pass 1 streams the pairs into temporary spill shards while counting doc ids (memory holds only
the ``Counter`` of doc ids, not the pairs); pass 2 rewrites each spill shard with q(d) filled in,
then removes the spill. Pass ``sampling_probs`` to skip the spill when q(d) is known already.

Paths go through ``tf.io.gfile``, so ``gs://`` output directories work as well as local ones.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import json
import os
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

import tensorflow as tf
from tqdm.auto import tqdm

from tt_zoo.data import features
from tt_zoo.atomic_io import json_text, replacing, write_text
from tt_zoo.errors import ArtifactError
from tt_zoo.manifest import CHECKS, describe_file, verify_file
from tt_zoo.data.sampling import sampling_probabilities

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
PAIRS_PREFIX = "pairs"
MLM_PREFIX = "mlm"
_STRING_FEATURES = (features.QUERY, features.DOC_TITLE, features.DOC_TEXT, features.DOC_ID,
                    features.TASK)
_MLM_FLOAT_FEATURES = ("masked_lm_weights",)


class IncompleteOutputError(ArtifactError):
    """A pair directory has no manifest, or its shards do not match the manifest."""


def shard_name(prefix: str, index: int, num_shards: int) -> str:
    """``pairs-00000-of-00004.tfrecord`` for ``("pairs", 0, 4)``."""
    return f"{prefix}-{index:05d}-of-{num_shards:05d}.tfrecord"


# --------------------------------------------------------------------------- tf.train.Example


def _bytes_feature(value: str | bytes) -> tf.train.Feature:
    if isinstance(value, str):
        value = value.encode("utf-8")
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def pair_to_example(pair, sampling_prob: float) -> bytes:
    """Serializes one ``Pair`` (query, doc_title, doc_text, doc_id, task) with its q(d)."""
    feature = {name: _bytes_feature(getattr(pair, name)) for name in _STRING_FEATURES}
    feature[features.DOC_SAMPLING_PROB] = tf.train.Feature(
        float_list=tf.train.FloatList(value=[float(sampling_prob)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _parse_pair_fields(serialized: bytes) -> dict:
    """Python-side parse of a pair record into a dict of str / float (for tests and stats)."""
    example = tf.train.Example.FromString(serialized)
    f = example.features.feature
    out = {name: f[name].bytes_list.value[0].decode("utf-8") for name in _STRING_FEATURES}
    out[features.DOC_SAMPLING_PROB] = f[features.DOC_SAMPLING_PROB].float_list.value[0]
    return out


def _mlm_to_example(example: Mapping[str, Sequence]) -> bytes:
    feature = {}
    for name in features.MLM_FEATURES:
        if name not in example:
            raise ValueError(f"MLM example lacks feature {name!r} (has {sorted(example)}).")
        values = [v for v in _as_list(example[name])]
        if name in _MLM_FLOAT_FEATURES:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=[int(v) for v in values]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _as_list(value) -> list:
    if hasattr(value, "numpy"):
        value = value.numpy()
    if hasattr(value, "tolist"):
        value = value.tolist()
    return list(value)


# --------------------------------------------------------------------------- writing


def is_pair_directory(path) -> bool:
    """Whether `path` holds pairs or MLM examples written by this module (a manifest or shards),
    which a new `tt-zoo make-pairs` run may replace."""
    path = str(path)
    return tf.io.gfile.exists(os.path.join(path, MANIFEST)) or any(
        tf.io.gfile.glob(os.path.join(path, f"{prefix}-*-of-*"))
        for prefix in (PAIRS_PREFIX, MLM_PREFIX))


def clear_previous_output(output_dir: str, prefix: str) -> None:
    """Removes an old manifest first (so a half-overwritten directory reads as incomplete),
    then old shards and leftover temporary files of ``prefix``. Every writer of a pair
    directory (here and ``tt_zoo.data.beam_pairs``) calls it before writing."""
    manifest = os.path.join(output_dir, MANIFEST)
    if tf.io.gfile.exists(manifest):
        tf.io.gfile.remove(manifest)
    for pattern in (f"{prefix}-*", f".spill-{prefix}-*", f".{prefix}-*.tmp", f".tmp-*-{prefix}-*",
                    f"beam-temp-{prefix}-*"):
        for path in tf.io.gfile.glob(os.path.join(output_dir, pattern)):
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)  # a failed Beam run's temporary directory
            else:
                tf.io.gfile.remove(path)


def write_records_atomically(path: str, records: Iterable[bytes]) -> int:
    """Writes records to a temporary name, renamed to ``path`` once complete; returns count."""
    count = 0
    with replacing(path) as tmp, tf.io.TFRecordWriter(tmp) as writer:
        for record in records:
            writer.write(record)
            count += 1
    return count


def write_manifest(output_dir: str, prefix: str, kind: str, shard_names: Sequence[str],
                   config: Optional[Mapping] = None, extra: Optional[Mapping] = None,
                   counts: Optional[Sequence[int]] = None) -> dict:
    """Describes complete shards in ``manifest.json`` (written last, atomically) and returns it.

    Record counts are taken from ``counts`` when given, else counted by reading each shard.
    """
    shards = []
    for i, name in enumerate(shard_names):
        path = os.path.join(output_dir, name)
        if not tf.io.gfile.exists(path):
            raise IncompleteOutputError(f"incomplete output: shard {path} was not written.")
        n = counts[i] if counts is not None else _count_records(path)
        shards.append({"name": name, "num_records": int(n), **describe_file(path)})
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "prefix": prefix,
        "num_shards": len(shards),
        "num_records": sum(s["num_records"] for s in shards),
        "shards": shards,
        "config": dict(config or {}),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tensorflow_version": tf.__version__,
    }
    manifest.update(extra or {})
    path = os.path.join(output_dir, MANIFEST)
    write_text(path, json_text(manifest, where=path, indent=2, sort_keys=True))
    return manifest


def _count_records(path: str) -> int:
    return sum(1 for _ in tf.data.TFRecordDataset(path).as_numpy_iterator())


def check_num_shards(num_shards: int) -> None:
    """Raises ``ValueError`` unless ``num_shards`` is a positive int (every shard writer)."""
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive int (got {num_shards!r}).")


def write_pair_shards(pairs: Iterable, output_dir: str, num_shards: int,
                      sampling_probs: Optional[Mapping[str, float]] = None, *,
                      config: Optional[Mapping] = None, progress: bool = True) -> dict:
    """Writes pairs as sharded TFRecords of ``tf.train.Example`` plus ``manifest.json``.

    Records go round-robin to the shards (record i to shard i % num_shards), in input order.

    Args:
      pairs: ``Pair`` objects (attributes query, doc_title, doc_text, doc_id, task).
      output_dir: the directory to create or overwrite (its old manifest and ``pairs-*``
        shards are removed first).
      num_shards: how many shards.
      sampling_probs: q(d) per doc id. When None, q(d) = count(doc_id) / num_pairs over these
        pairs, computed with a two-pass spill (see the module docstring).
      config: JSON-able settings recorded in the manifest (task config, source, seed).
      progress: show tqdm progress bars.

    Returns:
      The manifest dict.
    """
    check_num_shards(num_shards)
    output_dir = str(output_dir)
    tf.io.gfile.makedirs(output_dir)
    clear_previous_output(output_dir, PAIRS_PREFIX)
    names = [shard_name(PAIRS_PREFIX, i, num_shards) for i in range(num_shards)]
    paths = [os.path.join(output_dir, n) for n in names]

    if sampling_probs is not None:
        counts = _write_round_robin(
            paths, (pair_to_example(p, _lookup_prob(sampling_probs, p)) for p in pairs),
            progress, "writing pairs")
        return write_manifest(output_dir, PAIRS_PREFIX, "pairs", names, config,
                              {"sampling_probs": "given"}, counts)

    # Pass 1: spill the pairs (q(d) = 0 placeholder) while counting doc ids.
    doc_counts: collections.Counter = collections.Counter()
    spill_paths = [os.path.join(output_dir, f".spill-{n}") for n in names]

    def counted(pairs_iter):
        for p in pairs_iter:
            doc_counts[p.doc_id] += 1
            yield pair_to_example(p, 0.0)

    try:
        counts = _write_round_robin(spill_paths, counted(pairs), progress, "writing pairs")
        probs = sampling_probabilities(doc_counts)
        # Pass 2: rewrite each spill shard with q(d) = count(doc_id) / num_pairs.
        bar = tqdm(total=sum(counts), desc="adding q(d)", unit="pair", disable=not progress)
        for spill, path in zip(spill_paths, paths):
            def with_probs(spill=spill):
                for raw in tf.data.TFRecordDataset(spill).as_numpy_iterator():
                    example = tf.train.Example.FromString(raw)
                    doc_id = example.features.feature[features.DOC_ID].bytes_list.value[0]
                    example.features.feature[features.DOC_SAMPLING_PROB].float_list.value[0] = (
                        probs[doc_id.decode("utf-8")])
                    bar.update(1)
                    yield example.SerializeToString()
            write_records_atomically(path, with_probs())
        bar.close()
    finally:
        for spill in spill_paths:
            if tf.io.gfile.exists(spill):
                tf.io.gfile.remove(spill)
    return write_manifest(output_dir, PAIRS_PREFIX, "pairs", names, config,
                          {"sampling_probs": "count(doc_id)/num_pairs",
                           "num_distinct_docs": len(doc_counts)}, counts)


def _lookup_prob(sampling_probs: Mapping[str, float], pair) -> float:
    try:
        return sampling_probs[pair.doc_id]
    except KeyError:
        raise KeyError(f"sampling_probs has no entry for doc_id {pair.doc_id!r} "
                       f"(task {pair.task!r}, query {pair.query[:60]!r}).") from None


def _write_round_robin(paths: Sequence[str], records: Iterator[bytes], progress: bool,
                       desc: str) -> list:
    """Writes record i to ``paths[i % len(paths)]``, each under a temporary name renamed at the
    end only if every record was written; on any error no file of ``paths`` is left behind."""
    counts = [0] * len(paths)
    with contextlib.ExitStack() as stack:  # on exit: writers closed first, then renamed
        tmps = [stack.enter_context(replacing(p)) for p in paths]
        writers = [stack.enter_context(tf.io.TFRecordWriter(t)) for t in tmps]
        for i, record in enumerate(tqdm(records, desc=desc, unit="pair", disable=not progress)):
            k = i % len(paths)
            writers[k].write(record)
            counts[k] += 1
    return counts


def write_mlm_shards(examples: Iterable[Mapping[str, Sequence]], output_dir: str,
                     num_shards: int, *, config: Optional[Mapping] = None,
                     progress: bool = True) -> dict:
    """Writes Model Garden MLM examples (``features.MLM_FEATURES``, fixed length) as shards.

    All examples must have the same length per feature (``seq_length`` for the input features,
    ``max_predictions_per_seq`` for the masked-LM ones); the lengths go into the manifest so
    ``read_mlm_examples`` needs no arguments. ``masked_lm_weights`` is float, the rest int.
    """
    check_num_shards(num_shards)
    output_dir = str(output_dir)
    tf.io.gfile.makedirs(output_dir)
    clear_previous_output(output_dir, MLM_PREFIX)
    names = [shard_name(MLM_PREFIX, i, num_shards) for i in range(num_shards)]
    lengths: Dict[str, int] = {}

    def serialized():
        for i, example in enumerate(examples):
            for name in features.MLM_FEATURES:
                n = len(_as_list(example[name])) if name in example else None
                lengths.setdefault(name, n)
                if n != lengths[name]:
                    raise ValueError(f"MLM example {i}: feature {name!r} has length {n}, "
                                     f"expected {lengths[name]} like the first example.")
            yield _mlm_to_example(example)

    counts = _write_round_robin([os.path.join(output_dir, n) for n in names], serialized(),
                                progress, "writing MLM examples")
    if not lengths:
        raise ValueError("write_mlm_shards got no examples.")
    return write_manifest(output_dir, MLM_PREFIX, "mlm", names, config,
                          {"feature_lengths": lengths}, counts)


# --------------------------------------------------------------------------- reading


def read_manifest(output_dir: str, *, verify: str = "size") -> dict:
    """Loads ``manifest.json`` and checks the shards against it.

    Args:
      output_dir: a directory written by ``write_pair_shards`` / ``write_mlm_shards`` /
        ``beam_pairs.run_beam_pipeline``.
      verify: "size" (every shard exists with the recorded size; cheap), "sha256" (also the
        recorded hash; reads every byte) or "none".

    Raises:
      IncompleteOutputError: no manifest, or a shard missing / of the wrong size or hash.
    """
    if verify not in CHECKS:
        raise ValueError(f"verify must be one of {CHECKS} (got {verify!r}).")
    output_dir = str(output_dir)
    path = os.path.join(output_dir, MANIFEST)
    if not tf.io.gfile.exists(path):
        raise IncompleteOutputError(
            f"incomplete output: {output_dir} has no {MANIFEST} (the writer did not finish, or "
            f"this is not a tt_zoo pair directory).")
    with tf.io.gfile.GFile(path, "r") as f:
        try:
            manifest = json.loads(f.read())
        except json.JSONDecodeError as e:
            raise IncompleteOutputError(f"incomplete output: {path} is not valid JSON ({e}).")
    if verify == "none":
        return manifest
    for shard in manifest["shards"]:
        verify_file(os.path.join(output_dir, shard["name"]), shard, listed_in=MANIFEST,
                    check=verify, error=IncompleteOutputError)
    return manifest


@contextlib.contextmanager
def named_damage(output_dir: str):
    """Around a read of a pair directory's records: a record TensorFlow cannot read back (a
    byte changed in a shard, its size unchanged, so `read_manifest`'s cheap check passed)
    becomes an `IncompleteOutputError` naming the shard whose sha256 differs from the
    manifest's (or the directory, when every shard matches)."""
    try:
        yield
    except tf.errors.DataLossError as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        try:
            read_manifest(output_dir, verify="sha256")
        except IncompleteOutputError as damaged:
            raise IncompleteOutputError(f"{damaged} Reading it failed ({first}); make the "
                                        "pairs again.") from e
        raise IncompleteOutputError(f"{output_dir}: a record cannot be read ({first}), though "
                                    f"every shard matches {MANIFEST}.") from e


def manifest_sha256(output_dir: str) -> str:
    """The sha256 of a pair directory's ``manifest.json`` bytes: the identity of its pairs (the
    manifest lists every shard's sha256), which artifacts derived from them record (the token
    cache's key, `tt_zoo.mining.hard_negatives`' sidecar)."""
    import hashlib

    path = os.path.join(str(output_dir), MANIFEST)
    if not tf.io.gfile.exists(path):
        raise IncompleteOutputError(
            f"incomplete output: {output_dir} has no {MANIFEST} (the writer did not finish, or "
            f"this is not a tt_zoo pair directory).")
    with tf.io.gfile.GFile(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _shard_files(output_dir: str, manifest: dict, expected_kind: str) -> list:
    if manifest.get("kind") != expected_kind:
        raise ValueError(f"{output_dir} holds {manifest.get('kind')!r} records, "
                         f"expected {expected_kind!r}.")
    return [os.path.join(str(output_dir), s["name"]) for s in manifest["shards"]]


def _files_dataset(files: list, shuffle_files: bool, seed: Optional[int],
                   num_parallel_reads: Optional[int]) -> tf.data.Dataset:
    if shuffle_files:
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=seed)
        return ds.interleave(tf.data.TFRecordDataset, cycle_length=num_parallel_reads or 1,
                             num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
    # Deterministic: files in manifest order, records in file order.
    return tf.data.TFRecordDataset(files, num_parallel_reads=None)


PAIR_FEATURE_SPEC = {
    **{name: tf.io.FixedLenFeature([], tf.string) for name in _STRING_FEATURES},
    features.DOC_SAMPLING_PROB: tf.io.FixedLenFeature([], tf.float32),
}


def read_pairs(output_dir: str, *, shuffle_files: bool = False, seed: Optional[int] = None,
               num_parallel_reads: Optional[int] = None, verify: str = "size") -> tf.data.Dataset:
    """Reads a pair directory as an unbatched ``tf.data.Dataset`` of feature dicts.

    Each element is ``{QUERY, DOC_TITLE, DOC_TEXT, DOC_ID, TASK: tf.string [],
    DOC_SAMPLING_PROB: tf.float32 []}`` (names from ``tt_zoo.data.features``), ready for
    ``.shuffle(...).batch(...)`` and ``model.fit``.

    Args:
      output_dir: a directory with ``manifest.json`` and its shards.
      shuffle_files: shuffle the shard order and interleave shards; by default files are read
        in manifest order, one after another, so the record order is deterministic.
      seed: seed for the file shuffle.
      num_parallel_reads: shards read at once when ``shuffle_files``.
      verify: how to check shards against the manifest (see ``read_manifest``).

    Raises:
      IncompleteOutputError: the directory has no manifest or its shards do not match it.
    """
    manifest = read_manifest(output_dir, verify=verify)
    files = _shard_files(output_dir, manifest, "pairs")
    ds = _files_dataset(files, shuffle_files, seed, num_parallel_reads)
    return ds.map(lambda r: tf.io.parse_single_example(r, PAIR_FEATURE_SPEC),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def iter_pair_records(output_dir: str, *, verify: str = "size") -> Iterator[dict]:
    """Yields each pair of a directory as a plain dict of ``str`` (and float q(d)), in order."""
    manifest = read_manifest(output_dir, verify=verify)
    for path in _shard_files(output_dir, manifest, "pairs"):
        with named_damage(output_dir):
            for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
                yield _parse_pair_fields(raw)


@dataclasses.dataclass
class PairTexts:
    """A pair set's text columns, in `read_pairs` order (row i is pair i)."""

    queries: List[str]
    doc_ids: List[str]
    titles: List[str]
    texts: List[str]
    tasks: List[str]

    def __len__(self) -> int:
        return len(self.queries)


def read_pair_texts(pairs_dir: str, max_pairs: Optional[int] = None,
                    batch_size: int = 4096) -> PairTexts:
    """The text columns of a pair directory (its first `max_pairs` pairs), in the row order of
    `tt_zoo.training.step_data.cached_tokenize_pair_set` (what BM25 hard-negative mining reads:
    `tt_zoo.mining.hard_negatives`)."""
    pairs = read_pairs(pairs_dir)
    if max_pairs:
        pairs = pairs.take(max_pairs)
    keys = (features.QUERY, features.DOC_ID, features.DOC_TITLE, features.DOC_TEXT,
            features.TASK)
    columns = {key: [] for key in keys}
    with named_damage(pairs_dir):
        for batch in pairs.batch(batch_size).as_numpy_iterator():
            for key in keys:
                columns[key].extend(value.decode("utf-8") for value in batch[key])
    return PairTexts(*(columns[key] for key in keys))


def read_mlm_examples(output_dir: str, *, shuffle_files: bool = False,
                      seed: Optional[int] = None, num_parallel_reads: Optional[int] = None,
                      verify: str = "size") -> tf.data.Dataset:
    """Reads MLM shards as an unbatched dataset of fixed-length feature dicts.

    Elements: ``input_word_ids, input_mask, input_type_ids: tf.int32 [seq_length]``,
    ``masked_lm_positions, masked_lm_ids: tf.int32 [max_predictions_per_seq]``,
    ``masked_lm_weights: tf.float32 [max_predictions_per_seq]`` — the inputs of the Model
    Garden's ``BertPretrainer``. Lengths come from the manifest.
    """
    manifest = read_manifest(output_dir, verify=verify)
    files = _shard_files(output_dir, manifest, "mlm")
    lengths = manifest["feature_lengths"]
    spec = {name: tf.io.FixedLenFeature(
        [lengths[name]], tf.float32 if name in _MLM_FLOAT_FEATURES else tf.int64)
        for name in features.MLM_FEATURES}

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {k: (v if v.dtype == tf.float32 else tf.cast(v, tf.int32))
                for k, v in parsed.items()}

    ds = _files_dataset(files, shuffle_files, seed, num_parallel_reads)
    return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
