"""Fine-tuning a two-tower model on ReQA question-answer pairs, with early stopping.

Chang et al. 2020, Sec. 5 ("Downstream fine-tuning"): after pretraining, both towers are
fine-tuned on the training part of a cold-start ReQA split with the same loss (sampled softmax
over the batch's documents), Adam with learning rate 5e-5, batch size 512, 2,000 steps. The
10% of the training part held out for validation (Sec. 4.1) picks the stopping point here: every
``eval_every`` steps the validation loss (the same in-batch loss on the validation pairs) or the
validation recall@k is measured, training stops after ``patience`` evaluations without
improvement, and the best weights are restored (`tf.keras.callbacks.EarlyStopping`).

Example:

>>> reqa = tt_zoo.evaluation.reqa.build_reqa("dev-v1.1.json")              # doctest: +SKIP
>>> split = tt_zoo.evaluation.reqa.make_splits(reqa, 0.05, seed=0)          # doctest: +SKIP
>>> result = finetune(model, reqa, split, steps=300, batch_size=128)  # doctest: +SKIP
>>> result["best_step"], result["history"][-1]["val_loss"]      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import pathlib
import time
from typing import Optional

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from tt_zoo.data import features as F
from tt_zoo.evaluation import reqa as reqa_lib
from tt_zoo.evaluation import metrics as retrieval_metrics
from tt_zoo.atomic_io import write_json
from tt_zoo.data.sampling import sampling_probabilities
from tt_zoo.mining.hard_negatives import DEFAULT_DEPTH, mine_reqa_negatives
from tt_zoo.training.step_data import tokenize_on_host

logger = logging.getLogger(__name__)

# Chang et al. 2020, Sec. 5.1: the fine-tuning hyper-parameters.
PAPER_STEPS = 2000
PAPER_BATCH_SIZE = 512
PAPER_LEARNING_RATE = 5e-5

HISTORY_FILE = "finetune_history.json"
LOG_FILE = "finetune_log.csv"


def _with_sampling_probabilities(pairs: tf.data.Dataset, doc_ids) -> tf.data.Dataset:
    """Adds DOC_SAMPLING_PROB = q(d), the chance that a batch slot holds document d.

    Batches are drawn uniformly over the questions, so q(d) is the fraction of these questions
    whose gold candidate is d; the loss subtracts log q(d) (the logQ correction, Chang et al.
    2020, Sec. 2). A candidate that answers several questions is not over-penalised as a negative.
    """
    probs = sampling_probabilities(doc_ids)
    keys = tf.constant(list(probs), tf.string)
    values = tf.constant(list(probs.values()), tf.float32)
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), 0.0)

    def add(example):
        return {**example, F.DOC_SAMPLING_PROB: table.lookup(example[F.DOC_ID])}

    return pairs.map(add)


def reqa_pairs(reqa, question_ids, *, sampling_correction: bool = True,
               hard_negatives=None) -> tf.data.Dataset:
    """`tt_zoo.evaluation.reqa.training_pairs` (DOC_ID = gold candidate index, so two questions with the
    same gold (sentence, passage) in a batch are accidental hits, not negatives), plus q(d).

    `hard_negatives` (int [questions, H] candidate indices, `tt_zoo.mining.hard_negatives.
    mine_reqa_negatives`) adds each question's negatives as strings: HARD_NEGATIVE_TITLES
    (sentences), HARD_NEGATIVE_TEXTS (passages) and HARD_NEGATIVE_IDS (candidate indices, the
    DOC_ID convention, so a negative that is another question's gold is an accidental hit)
    [H]. They carry no q(d): the loss gives them the batch's mean log q (they are not drawn
    by the batch's sampling, so their gold frequency, mostly 0, would be no correction)."""
    pairs = reqa_lib.training_pairs(reqa, question_ids)
    if hard_negatives is not None:
        pairs = tf.data.Dataset.zip(pairs, tf.data.Dataset.from_tensor_slices(
            _negative_strings(reqa, hard_negatives))).map(lambda pair, hard: {**pair, **hard})
    if not sampling_correction:
        return pairs
    doc_ids = [str(q.gold_index) for q in reqa.questions_for(question_ids)]
    return _with_sampling_probabilities(pairs, doc_ids)


def _negative_strings(reqa, hard_negatives) -> dict:
    """The string features of candidate indices [questions, H]."""
    rows = np.asarray(hard_negatives)
    candidates = reqa.candidates
    return {F.HARD_NEGATIVE_TITLES: np.array([[candidates[c].sentence for c in r] for r in rows],
                                             dtype=object),
            F.HARD_NEGATIVE_TEXTS: np.array([[candidates[c].passage for c in r] for r in rows],
                                            dtype=object),
            F.HARD_NEGATIVE_IDS: np.array([[str(c) for c in r] for r in rows], dtype=object)}


class _Progress(tf.keras.callbacks.Callback):
    """Counts optimizer steps over all epochs, stops at ``steps``, records each evaluation.

    Keras epochs here are evaluation periods of ``eval_every`` steps; the last one is cut short
    so that exactly ``steps`` steps run.
    """

    def __init__(self, steps: int, monitor: str, progress: bool):
        super().__init__()
        self.steps = steps
        self.monitor = monitor
        self.progress = progress
        self.step = 0
        self.records = []
        self.bar = None

    def on_train_begin(self, logs=None):
        self.bar = tqdm(total=self.steps, desc="fine-tune", unit="step", disable=not self.progress)

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        self.bar.update(1)
        if logs and "loss" in logs:
            self.bar.set_postfix(loss=f"{float(logs['loss']):.4f}", refresh=False)
        if self.step >= self.steps:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        record = {"step": self.step, **{k: float(v) for k, v in (logs or {}).items()}}
        self.records.append(record)
        shown = {k: round(v, 4) for k, v in record.items()
                 if k in ("loss", self.monitor)}
        message = f"step {self.step}: {shown}"
        if self.progress:
            self.bar.write(message)
        else:
            logger.info(message)

    def on_train_end(self, logs=None):
        self.bar.close()


class _ValidationRecall(tf.keras.callbacks.Callback):
    """Adds ``val_R@k`` (and ``val_MRR``) to the epoch logs: validation questions retrieved among
    all ReQA candidates with `tt_zoo.evaluation.metrics.evaluate_encoder`. Runs before
    `EarlyStopping` in the callback list so that it can monitor the value."""

    def __init__(self, reqa, question_ids, batch_size: int = 256):
        super().__init__()
        self.reqa = reqa
        self.question_ids = list(question_ids)
        self.batch_size = batch_size

    def on_epoch_end(self, epoch, logs=None):
        metrics = retrieval_metrics.evaluate_encoder(self.model, self.reqa, self.question_ids,
                                                     batch_size=self.batch_size)["exact"]
        if logs is not None:
            logs.update({f"val_{name}": value for name, value in metrics.items()})


def _validation_value(model, reqa, question_ids, monitor, val_dataset) -> float:
    if monitor == "val_loss":
        return float(model.evaluate(val_dataset, verbose=0, return_dict=True)["loss"])
    metrics = retrieval_metrics.evaluate_encoder(model, reqa, question_ids)["exact"]
    return float(metrics[monitor[len("val_"):]])


def _mine_negatives(reqa, question_ids, num: int, depth: int, model, skip_gold_passage: bool,
                    seed: int, progress: bool, bm25_extra: int = 0):
    """(`MinedNegatives` of the questions, its record: what mined them, and which model): BM25's,
    or `model`'s exact search over the candidates (`task_sources.dense_rank`), then
    `bm25_extra` BM25 negatives of each question other than those (gold passage allowed); the
    seconds include the encoding."""
    start = time.perf_counter()
    rank, source, record = None, "BM25 (bm25s) over the ReQA candidates", {}
    if model is not None:
        from tt_zoo.mining.task_sources import dense_rank, reqa_documents
        rank = dense_rank(model, reqa_documents(reqa), progress=progress)
        source = (f"{getattr(model, 'name', 'the given model')}'s exact inner-product search "
                  "over the ReQA candidates")
        metadata = getattr(model, "metadata", None) or {}  # a loaded export: the one that mined
        if metadata.get("sha256"):
            record["mined_with"] = {"from": str(getattr(model, "path", None) or model.name),
                                    "name": model.name, "sha256": metadata["sha256"]}
    if skip_gold_passage:
        source += ", skipping the gold passage's sentences"
    mined = mine_reqa_negatives(reqa, question_ids, num, depth=depth, seed=seed,
                                progress=progress, rank=rank,
                                skip_gold_passage=skip_gold_passage)
    if bm25_extra:
        bm25 = mine_reqa_negatives(reqa, question_ids, num + bm25_extra,
                                   depth=max(depth, num + bm25_extra), seed=seed,
                                   progress=progress)
        extra = [[c for c in row if c not in taken][:bm25_extra]
                 for row, taken in zip(bm25.rows.tolist(), map(set, mined.rows.tolist()))]
        mined = dataclasses.replace(mined, rows=np.concatenate(
            [mined.rows, np.asarray(extra, dtype=np.int32)], axis=1),
            counts={**mined.counts, "bm25_extra": bm25.counts})
        source += f"; then {bm25_extra} BM25 negative(s) other than those (siblings allowed)"
    return (dataclasses.replace(mined, seconds=time.perf_counter() - start),
            {"source": source, **record})


def finetune(model, reqa, split, *, steps: int = PAPER_STEPS, batch_size: int = PAPER_BATCH_SIZE,
             learning_rate: float = PAPER_LEARNING_RATE, eval_every: Optional[int] = None,
             patience: int = 5, min_delta: float = 0.0, validation_metric: str = "loss",
             sampling_correction: bool = True, seed: int = 0, log_dir=None,
             progress: bool = True, hard_negatives: int = 0,
             hard_negatives_depth: Optional[int] = None, hard_negatives_model=None,
             skip_gold_passage: bool = False, bm25_negatives: int = 0) -> dict:
    """Fine-tunes a two-tower model on a ReQA split's training questions (Chang et al., Sec. 5).

    Trains with ``model.compile(optimizer=Adam(learning_rate))`` and ``model.fit`` on the
    training pairs (question, gold (sentence, passage)), shuffled with ``seed`` and repeated, in
    batches of ``batch_size`` (whole batches only). Every ``eval_every`` steps the validation
    part of the split is scored; `tf.keras.callbacks.EarlyStopping` stops after ``patience``
    evaluations without improvement and restores the best weights (also when training ran to
    the end). Without validation questions, training runs all ``steps`` and keeps the last
    weights.

    Args:
      model: a `tt_zoo.modeling.models.TwoTowerModel` (e.g. ``tt_zoo.load(name).keras_model``); trained
        in place.
      reqa: the `tt_zoo.evaluation.reqa.ReQA` benchmark the split's ids refer to.
      split: a `tt_zoo.evaluation.reqa.Split`; ``split.train`` is trained on, ``split.validation`` monitored.
      steps: optimizer steps (paper: 2,000).
      batch_size: pairs per step (paper: 512); clamped to the number of training pairs.
      learning_rate: Adam's learning rate (paper: 5e-5).
      eval_every: steps between validation evaluations; default ``max(1, steps // 10)``.
      patience: evaluations without improvement before stopping.
      min_delta: the smallest change of the monitored value that counts as an improvement.
      validation_metric: "loss" (the in-batch loss on validation pairs, batches of
        ``min(batch_size, #validation)``) or a retrieval metric "R@1", "R@5", "R@10", "R@50",
        "R@100", "MRR" (validation questions ranked among all candidates; slower).
      sampling_correction: feed q(d) (gold-document frequency) to the logQ correction.
      seed: seeds shuffling, dropout and anything else random (`tf.keras.utils.set_random_seed`).
      log_dir: if given, writes the per-evaluation log (CSV) and the returned dict (JSON) there.
      progress: show a tqdm progress bar.
      hard_negatives: H hard negatives per training question (BM25's by default), beside the
        in-batch ones (Multi-task DPR, Maillard et al. 2021): mined among all ReQA candidates,
        skipping the gold and candidates whose sentence holds an answer
        (`tt_zoo.mining.hard_negatives.mine_reqa_negatives`, seeded by `seed`). Validation
        batches keep in-batch negatives only, so val_loss stays comparable across H.
      hard_negatives_depth: results searched per question (default the miner's).
      hard_negatives_model: mine with this model's exact inner-product search over the
        candidates (a `tt_zoo.ZooModel`, e.g. an earlier fine-tuned export: Maillard et al.
        2021, Sec. 4.4) instead of BM25 (`tt_zoo.mining.task_sources.dense_rank`).
      skip_gold_passage: never take a sibling sentence of the gold's passage as a negative.
      bm25_negatives: K more BM25 negatives per question beside the H the model mined (other
        candidates than those; a sibling of the gold passage allowed): the two kinds of R@1
        miss, another paragraph and a sibling sentence (benchmarks/reqa_misses.py). Needs
        `hard_negatives_model`.

    Returns:
      ``{"history": [{"step", "loss", "val_loss", ...}, ...], "best_step", "best_value",
      "monitor", "steps_run", "stopped_early", "batch_size", "requested_batch_size",
      "learning_rate", "eval_every", "patience", "train_pairs", "validation_pairs", "seconds",
      "notes"}`` (and ``"hard_negatives"`` with H, the miner's counts and seconds, when H > 0).
      The first history entry (step 0) is the validation value before training; it
      is reported, not a restore candidate (the restored weights are always fine-tuned ones).
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer (got {steps!r}).")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer (got {batch_size!r}).")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive (got {learning_rate!r}).")
    if patience < 0:
        raise ValueError(f"patience must be >= 0 (got {patience!r}).")
    if not isinstance(hard_negatives, int) or hard_negatives < 0:
        raise ValueError(f"hard_negatives must be an int >= 0 (got {hard_negatives!r}).")
    if not isinstance(bm25_negatives, int) or bm25_negatives < 0:
        raise ValueError(f"bm25_negatives must be an int >= 0 (got {bm25_negatives!r}).")
    if bm25_negatives and (hard_negatives_model is None or not hard_negatives):
        raise ValueError("bm25_negatives adds BM25 negatives to those a model mines: give "
                         "hard_negatives >= 1 and hard_negatives_model too.")
    metric_names = [f"R@{k}" for k in retrieval_metrics.DEFAULT_KS] + ["MRR"]
    if validation_metric != "loss" and validation_metric not in metric_names:
        raise ValueError(f"validation_metric must be 'loss' or one of {metric_names} "
                         f"(got {validation_metric!r}).")
    eval_every = max(1, steps // 10) if eval_every is None else eval_every
    if not isinstance(eval_every, int) or eval_every < 1:
        raise ValueError(f"eval_every must be a positive integer (got {eval_every!r}).")
    n_train, n_val = len(split.train), len(split.validation)
    if n_train == 0:
        raise ValueError("finetune: the split has no training questions.")

    notes = []

    def note(message):
        notes.append(message)
        logger.warning(message)

    requested_batch_size = batch_size
    if batch_size > n_train:
        batch_size = n_train
        note(f"batch size {requested_batch_size} exceeds the {n_train} training pairs; "
             f"clamped to {batch_size}.")
    tf.keras.utils.set_random_seed(seed)
    # Tokenized in the input pipeline (`tokenize_on_host`): the training step sees numbers only.
    tokenize = functools.partial(tokenize_on_host, model)
    mined = None
    if hard_negatives:
        hard_negatives_depth = hard_negatives_depth or DEFAULT_DEPTH
        mined, mined_record = _mine_negatives(
            reqa, split.train, hard_negatives, hard_negatives_depth, hard_negatives_model,
            skip_gold_passage, seed, progress, bm25_extra=bm25_negatives)
        if mined.counts["questions_with_fallback"]:
            note(f"{mined.counts['questions_with_fallback']} of {n_train} training questions "
                 f"had fewer than {hard_negatives} valid mined negatives; "
                 f"{mined.counts['fallback_negatives']} random candidates filled in.")
    train = (reqa_pairs(reqa, split.train, sampling_correction=sampling_correction,
                        hard_negatives=None if mined is None else mined.rows)
             .shuffle(n_train, seed=seed, reshuffle_each_iteration=True)
             .repeat()
             .batch(batch_size, drop_remainder=True)
             .map(tokenize)
             .prefetch(tf.data.AUTOTUNE))
    monitor = "val_loss" if validation_metric == "loss" else f"val_{validation_metric}"
    mode = "min" if validation_metric == "loss" else "max"
    val_dataset = None
    val_batch_size = min(batch_size, n_val)
    if n_val:
        val_dataset = (reqa_pairs(reqa, split.validation, sampling_correction=sampling_correction)
                       .batch(val_batch_size, drop_remainder=True)
                       .map(tokenize).cache())
    else:
        note("the split has no validation questions: no early stopping; the last weights are "
             "kept.")

    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate))
    history = []
    if n_val:
        initial = _validation_value(model, reqa, split.validation, monitor, val_dataset)
        history.append({"step": 0, monitor: initial})
    tracker = _Progress(steps, monitor, progress)
    callbacks = [tracker]
    if n_val:
        if validation_metric != "loss":
            callbacks.insert(0, _ValidationRecall(reqa, split.validation))
        stopper = tf.keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=patience,
                                                   min_delta=min_delta, restore_best_weights=True)
        callbacks.append(stopper)
    if log_dir is not None:
        log_dir = pathlib.Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        callbacks.append(tf.keras.callbacks.CSVLogger(str(log_dir / LOG_FILE)))

    epochs = math.ceil(steps / eval_every)
    t0 = time.perf_counter()
    model.fit(train, epochs=epochs, steps_per_epoch=eval_every,
              validation_data=val_dataset if validation_metric == "loss" else None,
              callbacks=callbacks, verbose=0)
    seconds = time.perf_counter() - t0
    history += tracker.records

    best_step, best_value = tracker.step, None
    if n_val:
        # One record per Keras epoch (evaluation period); EarlyStopping restored this one.
        best = tracker.records[stopper.best_epoch]
        best_step, best_value = best["step"], best[monitor]
    result = {
        "history": history, "best_step": best_step, "best_value": best_value,
        "monitor": monitor if n_val else None, "steps_run": tracker.step,
        "stopped_early": tracker.step < steps, "steps": steps, "batch_size": batch_size,
        "requested_batch_size": requested_batch_size, "validation_batch_size": val_batch_size,
        "learning_rate": learning_rate, "eval_every": eval_every, "patience": patience,
        "min_delta": min_delta, "sampling_correction": sampling_correction, "seed": seed, "train_pairs": n_train,
        "validation_pairs": n_val, "seconds": seconds,
        "train_pairs_per_s": tracker.step * batch_size / seconds if seconds else None,
        "notes": notes,
    }
    if mined is not None:
        result["hard_negatives"] = {
            "num_negatives": hard_negatives + bm25_negatives, "depth": hard_negatives_depth,
            **mined_record, "counts": mined.counts,
            "mining_seconds": round(mined.seconds, 1)}
    message = (f"fine-tuned {tracker.step} steps of {batch_size} pairs in {seconds:.1f} s"
               + (f"; best {monitor} {best_value:.4f} at step {best_step} (weights restored)"
                  if n_val else ""))
    if progress:
        tqdm.write(message)
    else:
        logger.info(message)
    if log_dir is not None:
        write_json(log_dir / HISTORY_FILE, result)
    return result
