"""Pretraining machinery: the paper's optimizer schedule, distribution strategies, and a
resumable training loop (checkpoints every N steps, TensorBoard scalars, a pairs/s progress bar).

Chang et al. 2020, Sec. 5.1: Adam, learning rate 1e-4, linear warm-up over the first 10% of
steps then linear decay; batch 8,192 over 32 TPU v3 chips.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Callable, Optional

import tensorflow as tf
from official.modeling.optimization import lr_schedule

STRATEGIES = ("cpu", "mirrored", "multiworker", "tpu")


def paper_learning_rate(learning_rate: float, total_steps: int, warmup_fraction: float = 0.1):
    """Linear warm-up to `learning_rate` over `warmup_fraction` of the steps, then linear decay to 0."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive (got {total_steps}).")
    if not 0 <= warmup_fraction < 1:
        raise ValueError(f"warmup_fraction must be in [0, 1) (got {warmup_fraction}).")
    decay = tf.keras.optimizers.schedules.PolynomialDecay(
        initial_learning_rate=learning_rate, decay_steps=total_steps, end_learning_rate=0.0,
        power=1.0)
    warmup_steps = int(round(total_steps * warmup_fraction))
    if warmup_steps == 0:
        return decay
    return lr_schedule.LinearWarmup(after_warmup_lr_sched=decay, warmup_steps=warmup_steps,
                                    warmup_learning_rate=0.0)


def make_strategy(name: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """A `tf.distribute` strategy by name: cpu, mirrored, multiworker or tpu.

    `tpu` is the TPU address or name for the cluster resolver (as the Model Garden's
    `--tpu` flag); "" means the local TPU VM. `multiworker` reads TF_CONFIG.
    """
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        if tpu not in (None, "", "local"):
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {name!r}; expected one of {STRATEGIES}.")


@dataclasses.dataclass
class TrainResult:
    steps_done: int
    resumed_from: int
    wall_time_s: float
    pairs_per_s: float
    final_loss: float


class _ProgressAndScalars(tf.keras.callbacks.Callback):
    """tqdm bar with loss and pairs/s; TensorBoard scalars every `log_every` steps."""

    def __init__(self, bar, writer, global_batch: int, optimizer, log_every: int):
        super().__init__()
        self.bar, self.writer, self.global_batch = bar, writer, global_batch
        self.optimizer, self.log_every = optimizer, log_every
        self.last_loss = float("nan")
        self._t = None

    def on_train_batch_begin(self, batch, logs=None):
        self._t = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        elapsed = time.perf_counter() - self._t
        self.last_loss = float(logs.get("loss", float("nan")))
        step = int(self.optimizer.iterations.numpy())
        rate = self.global_batch / max(elapsed, 1e-9)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{self.last_loss:.4f}", pairs_s=f"{rate:.0f}")
        if self.writer is not None and (step % self.log_every == 0 or step == 1):
            lr = self.optimizer.learning_rate
            lr = float(lr(self.optimizer.iterations) if callable(lr) else lr)
            with self.writer.as_default():
                tf.summary.scalar("loss", self.last_loss, step=step)
                tf.summary.scalar("learning_rate", lr, step=step)
                tf.summary.scalar("pairs_per_second", rate, step=step)
                for name, value in (logs or {}).items():
                    if name != "loss":
                        tf.summary.scalar(name, float(value), step=step)


def train_resumable(model: tf.keras.Model, make_dataset: Callable[[], tf.data.Dataset], *,
                    steps: int, global_batch: int, checkpoint_dir: str,
                    checkpoint_every: int, log_dir: Optional[str] = None,
                    log_every: int = 10, progress: bool = True, log=print) -> TrainResult:
    """Trains a compiled model for `steps` steps, checkpointing and resuming exactly.

    The data order is a pure function of the step: `make_dataset()` must return the same
    batched, repeated, seeded dataset every time; after a restart the first `resumed_from`
    batches are skipped, so no step is lost or repeated. Checkpoints hold the model, the
    optimizer (with its step counter) and the Keras random generators (dropout masks), so a
    resumed run ends with the same weights as an uninterrupted one.

    Args:
      model: a compiled model (its optimizer created under the strategy's scope).
      make_dataset: returns the infinite, batched training dataset.
      steps: total optimizer steps.
      global_batch: pairs per step (for pairs/s).
      checkpoint_dir: where checkpoints live; a missing directory starts fresh (and says so).
      checkpoint_every: steps between checkpoints.
      log_dir: TensorBoard directory (scalars: loss, learning_rate, pairs_per_second).
    """
    if checkpoint_every <= 0:
        raise ValueError(f"checkpoint_every must be positive (got {checkpoint_every}).")
    optimizer = model.optimizer
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                     dropout_generators=dropout_generators(model))
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=2,
                                         step_counter=optimizer.iterations)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        log(f"resuming from {manager.latest_checkpoint} at step "
            f"{int(optimizer.iterations.numpy())}")
    elif not os.path.isdir(checkpoint_dir) or not os.listdir(checkpoint_dir):
        log(f"no checkpoint in {checkpoint_dir}: starting fresh")
    else:
        log(f"{checkpoint_dir} holds no readable checkpoint: starting fresh")
    resumed_from = int(optimizer.iterations.numpy())
    if resumed_from > steps:
        raise ValueError(f"The checkpoint in {checkpoint_dir} is at step {resumed_from}, past the "
                         f"requested {steps} steps.")

    writer = tf.summary.create_file_writer(log_dir) if log_dir else None
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=steps, initial=resumed_from, unit="step", desc="pretrain")
    callback = _ProgressAndScalars(bar, writer, global_batch, optimizer, log_every)
    start = time.perf_counter()
    done = resumed_from
    try:
        while done < steps:
            chunk = min(checkpoint_every - done % checkpoint_every, steps - done)
            data = make_dataset().skip(done).take(chunk)
            model.fit(data, epochs=1, steps_per_epoch=chunk, verbose=0, callbacks=[callback])
            done = int(optimizer.iterations.numpy())
            manager.save(checkpoint_number=done)
            if writer is not None:
                writer.flush()
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - start
    trained = done - resumed_from
    return TrainResult(steps_done=done, resumed_from=resumed_from, wall_time_s=wall,
                       pairs_per_s=trained * global_batch / wall if trained else 0.0,
                       final_loss=callback.last_loss)


def dropout_generators(model: tf.keras.Model) -> list:
    """The tf.random.Generator of every random layer (dropout), in a fixed layer order.

    Keras does not track these generators, so checkpoints must list them explicitly for a
    resumed run to draw the same dropout masks. (Reads Keras' `_random_generator`; there is
    no public accessor.)
    """
    generators = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        random_generator = getattr(layer, "_random_generator", None)
        if random_generator is None:
            continue
        random_generator._maybe_init()
        if getattr(random_generator, "_generator", None) is not None:
            generators.append(random_generator._generator)
    return generators


def enable_checkpointable_randomness(seed: int) -> None:
    """Seeds everything and makes Keras dropout draw from tf.random.Generator state that is
    saved in checkpoints, so resumed runs reproduce the same dropout masks."""
    tf.keras.backend.experimental.enable_tf_random_generator()
    tf.keras.utils.set_random_seed(seed)


def steps_for_epochs(num_pairs: int, global_batch: int, epochs: float) -> int:
    return max(1, math.ceil(num_pairs * epochs / global_batch))
