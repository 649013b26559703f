"""Training data held in memory as arrays and served in an order that is a function of the step.

Pretraining (Chang et al. 2020, Sec. 5.1) sees the pair set several times over; tokenizing every
pair again on every pass wastes the CPU the towers need, so `tokenize_pair_set` runs the model's
own preprocessors once over the pair set (`TwoTowerModel.tokenize_pairs`: training and serving
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

Arrays = Dict[str, object]  # a nested dict of np.ndarray, all with the same first dimension


def _map_arrays(fn, arrays):
    return {k: _map_arrays(fn, v) if isinstance(v, dict) else fn(v) for k, v in arrays.items()}


def num_rows(arrays: Arrays) -> int:
    """The common first dimension of a nested dict of arrays (raises if they disagree)."""
    sizes = set()
    _map_arrays(lambda a: sizes.add(len(a)), arrays)
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

    The model's own token ids (`TwoTowerModel.tokenize_pairs`: training and serving cannot
    tokenize differently), DOC_ID hashed to int64 (`tt_zoo.modeling.losses.hash_ids`) and
    DOC_SAMPLING_PROB as float32 when present; other features are dropped. Mapped over a batched
    `tf.data` pipeline it runs on the host, so the step holds no strings (XLA and TPUs have none).
    """
    tokens = model.tokenize_pairs(batch)
    out = {side: tokens[side] for side in (F.QUERY_INPUTS, F.DOCUMENT_INPUTS)}
    out[F.DOC_ID] = hash_ids(batch[F.DOC_ID])
    if F.DOC_SAMPLING_PROB in batch:
        out[F.DOC_SAMPLING_PROB] = tf.cast(batch[F.DOC_SAMPLING_PROB], tf.float32)
    return out


def tokenize_pair_set(model, pairs: tf.data.Dataset, batch_size: int = 2048,
                      log=print) -> Arrays:
    """Tokenizes a pair dataset once with the model's preprocessors into in-memory arrays.

    Args:
      model: a `TwoTowerModel` (its `tokenize_pairs` defines the ids).
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
            packed[side] = {
                "input_word_ids": tf.cast(packed[side]["input_word_ids"], tf.int32),
                "input_mask": tf.cast(packed[side]["input_mask"], tf.int8),
                "input_type_ids": tf.cast(packed[side]["input_type_ids"], tf.int8)}
        return packed

    arrays = arrays_from_dataset(pairs.batch(batch_size).map(
        tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))
    n = num_rows(arrays)
    log(f"tokenized {n:,} pairs once in {time.perf_counter() - start:.0f} s")
    return arrays


def _widen(a: np.ndarray) -> np.ndarray:
    """Narrow integer arrays (stored compactly) go to the model as int32."""
    return a.astype(np.int32) if a.dtype in (np.int8, np.int16) else a


def cached_tokenize_pair_set(model, pairs_dir: str, cache_dir: Optional[str], *,
                             max_pairs: Optional[int] = None, log=print) -> Arrays:
    """`tokenize_pair_set` of a pair directory, kept in `cache_dir` for the next run.

    The cache file is named by a sha256 of everything the ids depend on: the pair directory's
    manifest (its shards' sha256), `max_pairs`, the vocabulary and both sequence lengths; a
    changed input gives a new name, never a stale hit. Written to a temporary name, then renamed.
    """
    from tt_zoo.atomic_io import open_for_replace
    from tt_zoo.data.pairs_io import MANIFEST, read_pairs

    pairs = read_pairs(pairs_dir)
    if max_pairs:
        pairs = pairs.take(max_pairs)
    if not cache_dir:
        return tokenize_pair_set(model, pairs, log=log)
    with tf.io.gfile.GFile(os.path.join(pairs_dir, MANIFEST), "rb") as f:
        manifest = f.read()
    key = hashlib.sha256(json.dumps({
        "manifest": hashlib.sha256(manifest).hexdigest(), "max_pairs": max_pairs,
        "vocabulary": model.query_preprocessor.vocabulary_sha256,
        "lower_case": model.query_preprocessor.lower_case,
        "query_length": model.query_preprocessor.seq_length,
        "document_length": model.document_preprocessor.seq_length}, sort_keys=True)
        .encode("utf-8")).hexdigest()[:24]
    path = os.path.join(cache_dir, f"tokens-{key}.npz")
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "rb") as f, np.load(io.BytesIO(f.read())) as stored:
            arrays = _unflatten({name: stored[name] for name in stored.files})
        log(f"read {num_rows(arrays):,} tokenized pairs from {path}")
        return arrays
    arrays = tokenize_pair_set(model, pairs, log=log)
    with open_for_replace(path, "wb") as f:
        np.savez(f, **_flatten(arrays))
    return arrays


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


class _StepOrder:
    """Row indices of each step: epoch e is a permutation seeded by (seed, e)."""

    def __init__(self, n: int, batch_size: int, seed: int):
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self._epoch, self._perm = None, None

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            self._epoch = epoch
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
        return self._perm

    def rows(self, step: int) -> np.ndarray:
        positions = step * self.batch_size + np.arange(self.batch_size, dtype=np.int64)
        epochs, offsets = positions // self.n, positions % self.n
        out = np.empty(self.batch_size, np.int64)
        for epoch in np.unique(epochs):
            where = epochs == epoch
            out[where] = self._permutation(int(epoch))[offsets[where]]
        return out


def step_batches(arrays: Arrays, batch_size: int, *, seed: int, start_step: int,
                 end_step: Optional[int] = None,
                 input_context: Optional[tf.distribute.InputContext] = None) -> tf.data.Dataset:
    """Batches `start_step, start_step + 1, ...` (to `end_step`, or forever) of the arrays.

    Each batch holds `batch_size` distinct rows while an epoch lasts; epochs are reshuffled
    with their own seed. Deterministic: batch s is the same whatever step the run started from.

    With `input_context` (from `distribute_step_batches`), `batch_size` is the global batch and
    this input pipeline yields, for each step, the per-replica batches of its replicas in turn:
    pipeline p of P serves rows [p B / P, (p + 1) B / P) of the global batch, cut into
    batches of B / replicas.
    """
    n = num_rows(arrays)
    if batch_size <= 0 or batch_size > n:
        raise ValueError(f"batch_size must be in [1, {n}] for {n} training rows "
                         f"(got {batch_size}).")
    order = _StepOrder(n, batch_size, seed)
    per_replica, first, replicas = batch_size, 0, 1
    if input_context is not None:
        _check_divisible(batch_size, input_context.num_replicas_in_sync)
        per_replica = batch_size // input_context.num_replicas_in_sync
        replicas = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * replicas * per_replica

    def generate():
        step = start_step
        while end_step is None or step < end_step:
            rows = order.rows(step)
            for replica in range(replicas):
                start = first + replica * per_replica
                part = rows[start:start + per_replica]
                yield _map_arrays(lambda a: _widen(a[part]), arrays)
            step += 1

    signature = _map_arrays(
        lambda a: tf.TensorSpec([per_replica, *a.shape[1:]], tf.as_dtype(_widen(a[:1]).dtype)),
        arrays)
    return tf.data.Dataset.from_generator(generate, output_signature=signature).prefetch(2)


def _check_divisible(global_batch: int, replicas: int) -> None:
    if global_batch % replicas:
        raise ValueError(f"The global batch {global_batch} must be a multiple of the "
                         f"{replicas} replicas in sync (--batch-size).")


def distribute_step_batches(strategy: tf.distribute.Strategy, arrays: Arrays, global_batch: int,
                            *, seed: int, start_step: int, end_step: Optional[int] = None):
    """`step_batches` of the global batch, distributed over the strategy's replicas with
    `distribute_datasets_from_function` (per-replica batch = global batch / replicas; each
    input pipeline's `step_batches` checks that the replicas divide it)."""
    return strategy.distribute_datasets_from_function(
        lambda context: step_batches(arrays, global_batch, seed=seed, start_step=start_step,
                                     end_step=end_step, input_context=context))
