"""Training HDCT's term-weight model on pretraining pairs and labelled tasks, resumable.

Dai & Callan, WWW 2020 (HDCT), Sec. 3.4: MSE between the predicted and the target weight of
every document term; targets from the pairs' queries (`tt_zoo.data.term_weight_targets`), or
from the questions of labelled tasks (`task_pairs`: DeepCT's supervision by relevant queries,
Dai & Callan 2019, Sec. 3.2).
The documents are tokenized and their targets computed once (kept in a cache file named by
everything they depend on), then served by step (`tt_zoo.training.step_data.step_batches`)
through the project's resumable one-`fit` loop (`tt_zoo.training.loop.train_resumable`:
checkpoints, settings checked on resume, TensorBoard scalars, progress). The process CPU time
of the training steps is summed over resumed runs (recorded at each checkpoint).

One device: the loss is the batch's mean (no division by replicas), so `tf.distribute`
strategies are not wired in; the tiny BERT trains in minutes on a CPU.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from tt_zoo.atomic_io import open_for_replace, write_json
from tt_zoo.data import features as F
from tt_zoo.data.term_weight_targets import batch_targets
from tt_zoo.data.terms import TermSpace
from tt_zoo.modeling.term_weights import TARGET_MASK, TARGETS, TermWeightModel
from tt_zoo.training import loop
from tt_zoo.training.step_data import step_batches

CPU_TIME_FILE = "cpu_time.json"


def term_weight_arrays(model: TermWeightModel, pairs, terms: TermSpace, *,
                       batch_size: int = 1024, log=print) -> dict:
    """Packed document ids and their targets, as int8/int32 arrays [n, seq_length].

    Args:
      model: its preprocessor packs (DOC_TITLE, DOC_TEXT).
      pairs: an unbatched `tf.data` of pair dicts (`tt_zoo.data.pairs_io.read_pairs`).
      terms: the term space of the targets (BM25's).

    Returns:
      {input_word_ids int32, input_mask int8, input_type_ids int8, TARGETS int8,
      TARGET_MASK int8}.
    """
    start = time.perf_counter()
    vocabulary = np.array(model.preprocessor.vocabulary, dtype=object)
    chunks = {k: [] for k in ("input_word_ids", "input_mask", "input_type_ids", TARGETS,
                              TARGET_MASK)}
    count = 0
    for batch in pairs.batch(batch_size).as_numpy_iterator():
        packed = {k: v.numpy() for k, v in model.preprocessor(
            (tf.constant(batch[F.DOC_TITLE]), tf.constant(batch[F.DOC_TEXT]))).items()}
        tokens = [vocabulary[row].tolist() for row in packed["input_word_ids"]]
        queries = [q.decode("utf-8") for q in batch[F.QUERY]]
        targets, mask = batch_targets(tokens, queries, terms)
        chunks["input_word_ids"].append(packed["input_word_ids"].astype(np.int32))
        chunks["input_mask"].append(packed["input_mask"].astype(np.int8))
        chunks["input_type_ids"].append(packed["input_type_ids"].astype(np.int8))
        chunks[TARGETS].append(targets.astype(np.int8))
        chunks[TARGET_MASK].append(mask.astype(np.int8))
        count += len(queries)
    if not count:
        raise ValueError("The pair set is empty: nothing to train the term weights on.")
    arrays = {k: np.concatenate(v) for k, v in chunks.items()}
    positive = arrays[TARGETS].sum() / max(arrays[TARGET_MASK].sum(), 1)
    log(f"targets of {count:,} pairs in {time.perf_counter() - start:.0f} s "
        f"({100 * positive:.1f}% of document word pieces are query terms)")
    return arrays


def task_pairs(tasks, untitled=frozenset()) -> tf.data.Dataset:
    """The (query, document) pairs of labelled tasks (`tt_zoo.data.tasks.Task`, e.g. `tt-zoo
    multitask`'s webquestions and reqa) for term-weight targets: each example's question and
    its first positive (DPR's rule), as an unbatched `tf.data` of {QUERY, DOC_TITLE, DOC_TEXT}.

    DeepCT (Dai & Callan 2019, Sec. 3.2) trains its weights on relevant queries; here the QA
    tasks' questions play that part. The documents of the tasks named in `untitled` lose their
    titles: a ReQA candidate is (sentence, passage), and the passage alone is what gets
    weighted (as `benchmarks/term_weights.py` weighs ReQA), so the model trains on what it
    reads.
    """
    return _string_dataset(_task_texts(tasks, untitled))


def _string_dataset(texts: dict) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(
        {name: tf.constant(values, tf.string) for name, values in texts.items()})


def _task_texts(tasks, untitled) -> dict:
    """{QUERY, DOC_TITLE, DOC_TEXT: [str]} of `task_pairs`, in order."""
    texts = {F.QUERY: [], F.DOC_TITLE: [], F.DOC_TEXT: []}
    for task in tasks:
        for example in task.examples:
            doc = example.positive
            texts[F.QUERY].append(example.query)
            texts[F.DOC_TITLE].append("" if task.name in untitled else doc.title)
            texts[F.DOC_TEXT].append(doc.text)
    return texts


def cached_term_weight_arrays(model: TermWeightModel, pairs_dir: Optional[str],
                              terms: TermSpace, cache_dir: Optional[str], *,
                              max_pairs: Optional[int] = None, tasks=(),
                              untitled=frozenset(), log=print) -> dict:
    """`term_weight_arrays` of a pair directory's pairs (its first `max_pairs`), then the
    `task_pairs(tasks, untitled)`; kept in `cache_dir` under a name made from the pairs'
    manifest, `max_pairs`, the tasks' texts, the vocabulary, the length and the term space."""
    from tt_zoo.data.pairs_io import manifest_sha256, read_pairs

    parts, key = [], {"kind": "term_weight_targets"}
    if pairs_dir:
        pairs = read_pairs(pairs_dir)
        if max_pairs:
            pairs = pairs.take(max_pairs)
        fields = (F.QUERY, F.DOC_TITLE, F.DOC_TEXT)
        parts.append(pairs.map(lambda p: {name: p[name] for name in fields}))
        key.update(manifest=manifest_sha256(pairs_dir), max_pairs=max_pairs)
    if tasks:  # `task_pairs`, its texts made once: the dataset and the key's hash
        texts = _task_texts(tasks, untitled)
        parts.append(_string_dataset(texts))
        key["tasks"] = hashlib.sha256(json.dumps(texts).encode("utf-8")).hexdigest()
    if not parts:
        raise ValueError("Nothing to train the term weights on: give a pair directory or tasks.")
    pairs = parts[0] if len(parts) == 1 else parts[0].concatenate(parts[1])
    if not cache_dir:
        return term_weight_arrays(model, pairs, terms, log=log)
    key.update({**model.preprocessor.tokenizer_settings(), "length": model.seq_length,
                "terms": terms.settings()})
    key = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:24]
    path = os.path.join(cache_dir, f"term-targets-{key}.npz")
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "rb") as f, np.load(io.BytesIO(f.read())) as stored:
            arrays = {name: stored[name] for name in stored.files}
        log(f"read the targets of {len(arrays[TARGETS]):,} pairs from {path}")
        return arrays
    arrays = term_weight_arrays(model, pairs, terms, log=log)
    with open_for_replace(path, "wb") as f:
        np.savez(f, **arrays)
    return arrays


class _CpuTime(tf.keras.callbacks.Callback):
    """Writes the cumulative training CPU time at every checkpoint step: {step: seconds}."""

    def __init__(self, path: str, base: float, every: int):
        super().__init__()
        self.path, self.base, self.every = path, base, every
        self.history = read_cpu_times(path)
        self._start = None

    def on_train_begin(self, logs=None):
        self._start = time.process_time()

    def total(self) -> float:
        return self.base + (time.process_time() - self._start if self._start else 0.0)

    def record(self, step: int) -> None:
        self.history[str(step)] = round(self.total(), 2)
        write_json(self.path, self.history)

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.every == 0:
            self.record(step)


def read_cpu_times(path: str) -> dict:
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def cpu_seconds_at(history: dict, step: int) -> float:
    """The CPU time recorded at `step`, else at the latest step before it (0 at the start)."""
    earlier = [int(s) for s in history if int(s) <= step]
    return float(history[str(max(earlier))]) if earlier else 0.0


def train_term_weights(model: TermWeightModel, arrays: dict, *, steps: int, batch_size: int,
                       learning_rate: float, warmup_fraction: float, workdir: str,
                       checkpoint_every: int, seed: int, settings: dict,
                       progress: bool = True, log=print) -> dict:
    """Compiles `model` (Adam, linear warm-up and decay) and trains it for `steps` steps,
    resuming from `workdir`'s checkpoints; returns what the export's metadata records:
    train_steps, resumed_from, train_wall_time_s and train_steps_per_s_last_100 (this run: the
    median step of its last 100), train_cpu_seconds (all runs), final_loss."""
    model.compile(optimizer=tf.keras.optimizers.Adam(
        loop.paper_learning_rate(learning_rate, steps, warmup_fraction)))
    checkpoint_dir = os.path.join(workdir, "checkpoints")
    cpu_path = os.path.join(workdir, CPU_TIME_FILE)
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    start_step = int(latest.rsplit("-", 1)[1]) if latest else 0
    cpu = _CpuTime(cpu_path, cpu_seconds_at(read_cpu_times(cpu_path), start_step),
                   checkpoint_every)
    result = loop.train_resumable(
        model, lambda start: step_batches(arrays, batch_size, seed=seed, start_step=start,
                                          end_step=steps),
        steps=steps, global_batch=batch_size, checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every, settings=settings,
        log_dir=os.path.join(workdir, "logs"), progress=progress, callbacks=[cpu], log=log)
    if result.final_loss is not None:
        cpu.record(result.steps_done)
    history = read_cpu_times(cpu_path)
    steps_per_s = result.pairs_per_s_over(first=False)
    return {"train_steps": result.steps_done, "resumed_from": result.resumed_from,
            "train_wall_time_s": round(result.total_wall_time_s, 1),
            "train_steps_per_s_last_100": None if steps_per_s is None
            else round(steps_per_s / batch_size, 2),
            "train_cpu_seconds": round(cpu_seconds_at(history, result.steps_done), 1),
            "final_loss": None if result.final_loss is None else round(result.final_loss, 5)}
