"""Training data held in memory as arrays and served in an order that is a function of the step.

Pretraining (Chang et al. 2020, Sec. 5.1) sees the pair set several times over; tokenizing every
pair again on every pass wastes the CPU the towers need, so `tokenize_pair_set` runs the model's
own preprocessors once over the pair set (`PairModel.tokenize_pairs`: training and serving
cannot tokenize differently) and keeps the ids as NumPy arrays.

`step_batches` then serves batch ``s`` as the rows ``perm_e[(s * batch) % n ...]`` where
``perm_e`` is a permutation drawn from ``(seed, epoch e)``: the data of any step is computed
directly, so a resumed run starts at its step without replaying (and paying for) the batches
before it, and gives exactly the batches an uninterrupted run would have seen.

Under `tf.distribute` (TPUs, GPUs, several workers), `distribute_step_batches` feeds the same
global batches through `strategy.distribute_datasets_from_function`: each input pipeline serves
its replicas their slices of every global batch, so the replicas together train on exactly the
rows one device would. Every host holds the tokenized pair set in memory (about 1.2 KB a pair at
lengths 64/128), and the step's data is made by Python on the host: on TPUs, run on a TPU VM.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from tt_zoo.data import features as F
from tt_zoo.modeling.losses import hash_ids
from tt_zoo.modeling.pair_model import hard_negative_ids, hard_negative_strings

Arrays = Dict[str, object]  # a nested dict of np.ndarray, all with the same first dimension


def map_arrays(fn, arrays):
    return {k: map_arrays(fn, v) if isinstance(v, dict) else fn(v) for k, v in arrays.items()}


def num_rows(arrays: Arrays) -> int:
    """The common first dimension of a nested dict of arrays (raises if they disagree)."""
    sizes = set()
    map_arrays(lambda a: sizes.add(len(a)), arrays)
    if len(sizes) != 1:
        raise ValueError(f"Training arrays must all have the same number of rows (got {sizes}).")
    return sizes.pop()


def arrays_from_dataset(batches: tf.data.Dataset) -> Arrays:
    """Concatenates a batched dataset of (nested) dicts into in-memory NumPy arrays."""
    chunks = list(batches.as_numpy_iterator())
    if not chunks:
        raise ValueError("The dataset is empty: nothing to train on.")

    def concat(parts):
        if isinstance(parts[0], dict):
            return {key: concat([p[key] for p in parts]) for key in parts[0]}
        return np.concatenate(parts, axis=0)

    return concat(chunks)


def tokenize_on_host(model, batch: dict) -> dict:
    """A raw pair batch as the numbers a compiled training step takes.

    The model's own token ids (`PairModel.tokenize_pairs`: training and serving cannot
    tokenize differently), DOC_ID hashed to int64 (`tt_zoo.modeling.losses.hash_ids`) and
    DOC_SAMPLING_PROB as float32 when present; other features are dropped. Mapped over a batched
    `tf.data` pipeline it runs on the host, so the step holds no strings (XLA and TPUs have none).

    String hard negatives (HARD_NEGATIVE_TEXTS, optional HARD_NEGATIVE_TITLES and
    HARD_NEGATIVE_IDS, each [batch, H]; e.g. ReQA fine-tuning's BM25 negatives) become
    HARD_NEGATIVE_INPUTS tokenized by the document preprocessor and HARD_NEGATIVE_IDS hashed
    like DOC_ID, flattened to [batch * H] (example b's h-th at b * H + h), with
    HARD_NEGATIVE_SAMPLING_PROBS when given.
    """
    tokens = model.tokenize_pairs(batch)
    out = {side: tokens[side] for side in (F.QUERY_INPUTS, F.DOCUMENT_INPUTS)}
    out[F.DOC_ID] = hash_ids(batch[F.DOC_ID])
    if F.DOC_SAMPLING_PROB in batch:
        out[F.DOC_SAMPLING_PROB] = tf.cast(batch[F.DOC_SAMPLING_PROB], tf.float32)
    if F.HARD_NEGATIVE_TEXTS in batch:
        out[F.HARD_NEGATIVE_INPUTS] = model.document_preprocessor(hard_negative_strings(batch))
        out[F.HARD_NEGATIVE_IDS] = hash_ids(hard_negative_ids(batch))
        if F.HARD_NEGATIVE_SAMPLING_PROBS in batch:
            out[F.HARD_NEGATIVE_SAMPLING_PROBS] = tf.cast(
                tf.reshape(batch[F.HARD_NEGATIVE_SAMPLING_PROBS], [-1]), tf.float32)
    return out


def tokenize_pair_set(model, pairs: tf.data.Dataset, batch_size: int = 2048,
                      log=print) -> Arrays:
    """Tokenizes a pair dataset once with the model's preprocessors into in-memory arrays.

    Args:
      model: a `PairModel`, two-tower or late interaction (its `tokenize_pairs` defines the ids).
      pairs: unbatched pair dicts (QUERY, DOC_TITLE, DOC_TEXT, DOC_ID, DOC_SAMPLING_PROB).

    Returns:
      `tokenize_on_host`'s features as arrays: {QUERY_INPUTS: {input_word_ids, input_mask,
      input_type_ids}, DOCUMENT_INPUTS: {...}, DOC_ID: int64 [n] (hashed), DOC_SAMPLING_PROB:
      float32 [n]}; ids int32, masks and segment ids int8 (a 700K-pair set at lengths 64/128
      takes about 0.8 GB).
    """
    start = time.perf_counter()

    def tokenize(batch):
        packed = tokenize_on_host(model, batch)
        for side in (F.QUERY_INPUTS, F.DOCUMENT_INPUTS):
            packed[side] = narrow_packed(packed[side])
        return packed

    arrays = arrays_from_dataset(pairs.batch(batch_size).map(
        tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))
    n = num_rows(arrays)
    log(f"tokenized {n:,} pairs once in {time.perf_counter() - start:.0f} s")
    return arrays


def narrow_packed(packed: dict) -> dict:
    """Packed ids as they are kept in memory: ids int32, masks and segment ids int8."""
    return {"input_word_ids": tf.cast(packed["input_word_ids"], tf.int32),
            "input_mask": tf.cast(packed["input_mask"], tf.int8),
            "input_type_ids": tf.cast(packed["input_type_ids"], tf.int8)}


def tokenize_texts(preprocessor, texts, batch_size: int = 2048) -> Arrays:
    """`preprocessor`'s packed ids of `texts` (a list of strings, or a tuple of two lists for a
    document preprocessor's (title, text) pairs) as in-memory arrays (`narrow_packed`)."""
    data = tf.data.Dataset.from_tensor_slices(
        tuple(np.asarray(t, dtype=object) for t in texts) if isinstance(texts, tuple)
        else np.asarray(texts, dtype=object))
    return arrays_from_dataset(data.batch(batch_size).map(
        lambda *batch: narrow_packed(preprocessor(batch if len(batch) > 1 else batch[0])),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


def widen(a: np.ndarray) -> np.ndarray:
    """Narrow integer arrays (stored compactly) go to the model as int32."""
    return a.astype(np.int32) if a.dtype in (np.int8, np.int16) else a


def cached_tokenize_pair_set(model, pairs_dir: str, cache_dir: Optional[str], *,
                             max_pairs: Optional[int] = None, log=print) -> Arrays:
    """`tokenize_pair_set` of a pair directory, kept in `cache_dir` for the next run.

    The cache file is named by a sha256 of everything the ids depend on: the pair directory's
    manifest (its shards' sha256), `max_pairs`, the vocabulary, both sequence lengths and any
    query packing beyond the plain one (`_query_packing`); a
    changed input gives a new name, never a stale hit. Written to a temporary name, then renamed.
    """
    from tt_zoo.atomic_io import open_for_replace
    from tt_zoo.data.pairs_io import manifest_sha256, named_damage, read_pairs

    pairs = read_pairs(pairs_dir)
    if max_pairs:
        pairs = pairs.take(max_pairs)
    if not cache_dir:
        with named_damage(pairs_dir):
            return tokenize_pair_set(model, pairs, log=log)
    key = hashlib.sha256(json.dumps({
        "manifest": manifest_sha256(pairs_dir), "max_pairs": max_pairs,
        **model.query_preprocessor.tokenizer_settings(),
        "query_length": model.query_preprocessor.seq_length,
        "document_length": model.document_preprocessor.seq_length,
        **_query_packing(model)}, sort_keys=True)
        .encode("utf-8")).hexdigest()[:24]
    path = os.path.join(cache_dir, f"tokens-{key}.npz")
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "rb") as f, np.load(io.BytesIO(f.read())) as stored:
            arrays = _unflatten({name: stored[name] for name in stored.files})
        log(f"read {num_rows(arrays):,} tokenized pairs from {path}")
        return arrays
    with named_damage(pairs_dir):
        arrays = tokenize_pair_set(model, pairs, log=log)
    with open_for_replace(path, "wb") as f:
        np.savez(f, **_flatten(arrays))
    return arrays


def _query_packing(model) -> dict:
    """The query preprocessor's settings beyond a plain `TextPreprocessor`'s (e.g. ColBERT's
    [MASK] augmentation and query marker: `tt_zoo.modeling.late_interaction`), which change the
    ids; {} for a plain one, so the cache names of single-vector models stay as they were."""
    plain = {"name", "trainable", "dtype", "vocabulary", "seq_length", "lower_case",
             "case_folding"}
    extra = {k: v for k, v in model.query_preprocessor.get_config().items() if k not in plain}
    return {"query_packing": extra} if extra else {}


def _flatten(arrays: Arrays, prefix: str = "") -> Dict[str, np.ndarray]:
    flat = {}
    for key, value in arrays.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _unflatten(flat: Dict[str, np.ndarray]) -> Arrays:
    arrays: Arrays = {}
    for name, value in flat.items():
        *parents, leaf = name.split("/")
        node = arrays
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return arrays


class StepOrder:
    """Row indices of each step: epoch e is a permutation seeded by (seed, e)."""

    def __init__(self, n: int, batch_size: int, seed: int):
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self._cached = (None, None)  # (epoch, permutation): one tuple, so threads see a pair

    def _permutation(self, epoch: int) -> np.ndarray:
        cached_epoch, perm = self._cached
        if epoch != cached_epoch:
            perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._cached = (epoch, perm)
        return perm

    def rows(self, step: int) -> np.ndarray:
        positions = step * self.batch_size + np.arange(self.batch_size, dtype=np.int64)
        epochs, offsets = positions // self.n, positions % self.n
        out = np.empty(self.batch_size, np.int64)
        for epoch in np.unique(epochs):
            where = epochs == epoch
            out[where] = self._permutation(int(epoch))[offsets[where]]
        return out


def hard_negative_features(arrays: Arrays, rows: np.ndarray) -> dict:
    """The hard-negative features of pair `rows` (flat [batch * H], row b * H + h being example
    b's h-th negative): their document ids (HARD_NEGATIVE_INPUTS), hashed DOC_IDs
    (HARD_NEGATIVE_IDS) and q(d) (HARD_NEGATIVE_SAMPLING_PROBS, when the arrays have it), taken
    from the tokenized pair arrays (`tt_zoo.mining.hard_negatives` stores negatives as rows)."""
    out = {F.HARD_NEGATIVE_INPUTS: map_arrays(lambda a: widen(a[rows]),
                                               arrays[F.DOCUMENT_INPUTS]),
           F.HARD_NEGATIVE_IDS: arrays[F.DOC_ID][rows]}
    if F.DOC_SAMPLING_PROB in arrays:
        out[F.HARD_NEGATIVE_SAMPLING_PROBS] = arrays[F.DOC_SAMPLING_PROB][rows]
    return out


def check_hard_negatives(hard_negatives, n: int) -> np.ndarray:
    """`hard_negatives` as an int64 [n, H] array of row indices in [0, n), or a ValueError
    naming what is wrong."""
    rows = np.asarray(hard_negatives)
    if rows.ndim != 2 or rows.shape[0] != n or rows.shape[1] < 1:
        raise ValueError(f"hard_negatives must be [{n}, H] row indices, one row per training "
                         f"pair (got shape {rows.shape}).")
    if not np.issubdtype(rows.dtype, np.integer):
        raise ValueError(f"hard_negatives must hold integer row indices (got {rows.dtype}).")
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError(f"hard_negatives holds rows outside [0, {n}) (min {rows.min()}, max "
                         f"{rows.max()}): mined for another pair set or --max-pairs?")
    return rows.astype(np.int64)


def step_batches(arrays: Arrays, batch_size: int, *, seed: int, start_step: int,
                 end_step: Optional[int] = None,
                 input_context: Optional[tf.distribute.InputContext] = None,
                 hard_negatives: Optional[np.ndarray] = None,
                 order=None) -> tf.data.Dataset:
    """Batches `start_step, start_step + 1, ...` (to `end_step`, or forever) of the arrays.

    Each batch holds `batch_size` distinct rows while an epoch lasts; epochs are reshuffled
    with their own seed. Deterministic: batch s is the same whatever step the run started from.
    `order` replaces that order: any object whose `rows(step)` gives the row indices of the
    step's (global) batch, e.g. `tt_zoo.training.clustered_batches.ClusteredStepOrder`, which
    regroups the same rows by cluster.

    With `input_context` (from `distribute_step_batches`), `batch_size` is the global batch and
    this input pipeline yields, for each step, the per-replica batches of its replicas in turn:
    pipeline p of P serves rows [p B / P, (p + 1) B / P) of the global batch, cut into
    batches of B / replicas.

    With `hard_negatives` (int [n, H] row indices, `tt_zoo.mining.hard_negatives`), each batch
    also carries its examples' negatives (`hard_negative_features`: [batch * H, ...], example
    b's at rows b * H ... b * H + H - 1), so each replica gets the negatives of its own examples.
    The arrays then need DOCUMENT_INPUTS and DOC_ID.
    """
    n = num_rows(arrays)
    if batch_size <= 0 or batch_size > n:
        raise ValueError(f"batch_size must be in [1, {n}] for {n} training rows "
                         f"(got {batch_size}).")
    negatives = None
    if hard_negatives is not None:
        negatives = check_hard_negatives(hard_negatives, n)
        missing = [k for k in (F.DOCUMENT_INPUTS, F.DOC_ID) if k not in arrays]
        if missing:
            raise ValueError(f"Hard negatives are taken from the arrays' {missing} "
                             f"(the arrays have {sorted(arrays)}).")
    if order is None:
        order = StepOrder(n, batch_size, seed)
    elif order.batch_size != batch_size:
        raise ValueError(f"The order serves batches of {order.batch_size}, not {batch_size}.")
    per_replica, first, replicas = batch_size, 0, 1
    if input_context is not None:
        _check_divisible(batch_size, input_context.num_replicas_in_sync)
        per_replica = batch_size // input_context.num_replicas_in_sync
        replicas = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * replicas * per_replica

    def batch_of(part):
        batch = map_arrays(lambda a: widen(a[part]), arrays)
        if negatives is not None:
            batch.update(hard_negative_features(arrays, negatives[part].reshape(-1)))
        return batch

    def generate():
        step = start_step
        while end_step is None or step < end_step:
            rows = order.rows(step)
            for replica in range(replicas):
                start = first + replica * per_replica
                yield batch_of(rows[start:start + per_replica])
            step += 1

    signature = map_arrays(
        lambda a: tf.TensorSpec([per_replica, *a.shape[1:]], tf.as_dtype(widen(a[:1]).dtype)),
        arrays)
    if negatives is not None:
        signature.update(map_arrays(
            lambda a: tf.TensorSpec([per_replica * negatives.shape[1], *a.shape[1:]],
                                    tf.as_dtype(a.dtype)),
            hard_negative_features(arrays, np.zeros(1, np.int64))))
    return tf.data.Dataset.from_generator(generate, output_signature=signature).prefetch(2)


def _check_divisible(global_batch: int, replicas: int) -> None:
    if global_batch % replicas:
        raise ValueError(f"The global batch {global_batch} must be a multiple of the "
                         f"{replicas} replicas in sync (--batch-size).")


def distribute_step_batches(strategy: tf.distribute.Strategy, arrays: Arrays, global_batch: int,
                            *, seed: int, start_step: int, end_step: Optional[int] = None,
                            hard_negatives: Optional[np.ndarray] = None, order=None):
    """`step_batches` of the global batch, distributed over the strategy's replicas with
    `distribute_datasets_from_function` (per-replica batch = global batch / replicas; each
    input pipeline's `step_batches` checks that the replicas divide it), with each example's
    `hard_negatives` when given. `order`: as in `step_batches`, shared by the input pipelines of
    this process."""
    return strategy.distribute_datasets_from_function(
        lambda context: step_batches(arrays, global_batch, seed=seed, start_step=start_step,
                                     end_step=end_step, input_context=context,
                                     hard_negatives=hard_negatives, order=order))
