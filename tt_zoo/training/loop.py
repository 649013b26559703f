"""Pretraining machinery: the paper's optimizer schedule, distribution strategies, and a
resumable training loop (one `fit` call, checkpoints every N steps, settings checked on resume,
TensorBoard scalars, a pairs/s progress bar).

Chang et al. 2020, Sec. 5.1: Adam, learning rate 1e-4, linear warm-up over the first 10% of
steps then linear decay; batch 8,192 over 32 TPU v3 chips.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import statistics
import time
from typing import Callable, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from official.modeling.optimization import lr_schedule

from tt_zoo.atomic_io import json_text, write_json, write_text
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.pair_model import build_optimizer

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
    final_loss: Optional[float]          # None when no step ran (the run was already complete)
    global_batch: int = 0
    step_seconds: List[float] = dataclasses.field(default_factory=list)
    earlier_wall_time_s: float = 0.0     # the segments before this one (`TRAIN_TIME_FILE`)

    @property
    def total_wall_time_s(self) -> float:
        """Training wall time of the whole run, every resumed segment included: what a card
        records (a run resumed at its last step would otherwise say 0 s)."""
        return self.earlier_wall_time_s + self.wall_time_s

    def pairs_per_s_over(self, first: bool, window: int = 100) -> Optional[float]:
        """pairs/s from the median step time of the first (or last) `window` steps of this run."""
        times = self.step_seconds[:window] if first else self.step_seconds[-window:]
        return self.global_batch / statistics.median(times) if times else None


SETTINGS_FILE = "run_settings.json"
# Beside the checkpoints: {"step": n, "seconds": s}, the training wall time of all segments up
# to the checkpoint of step n, rewritten (atomically) after each checkpoint.
TRAIN_TIME_FILE = "train_time.json"


def read_train_time(checkpoint_dir: str, step: int, log=print) -> float:
    """The training seconds recorded up to the checkpoint of `step` (0 for a fresh run); a
    record of another step (a kill between a checkpoint and its record) is used as it is, and
    said."""
    path = os.path.join(checkpoint_dir, TRAIN_TIME_FILE)
    if step == 0 or not tf.io.gfile.exists(path):
        return 0.0
    record = read_run_record(path, 'the training time up to a checkpoint: {"step", "seconds"}')
    if not isinstance(record.get("seconds"), (int, float)):
        raise TtZooError(f"{path} records no training seconds (got {record!r}); delete it to "
                         "count the wall time from this run on.")
    if record.get("step") != step:
        log(f"{path} records the training time up to step {record.get('step')}, not the "
            f"checkpoint's step {step}: the run's total wall time counts {record['seconds']:.0f} s "
            "for the steps before this run")
    return float(record["seconds"])


def read_run_record(path: str, what: str) -> dict:
    """The JSON object of a record a run keeps beside its checkpoints (`SETTINGS_FILE`,
    `TRAIN_TIME_FILE`; any filesystem), or `TtZooError` naming the file and `what` it holds."""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            value = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TtZooError(f"{path} is not valid JSON ({e}); it holds {what}. Restore it, or "
                         "start a new run with another --workdir.") from None
    if not isinstance(value, dict):
        raise TtZooError(f"{path} must hold a JSON object ({what}; got "
                         f"{type(value).__name__}).")
    return value


_CHECKPOINT_INDEX = re.compile(r"ckpt-(\d+)\.index")
STATE_FILE = "checkpoint"  # TensorFlow's list of a directory's checkpoints


def checkpoint_files(checkpoint_dir: str) -> List[str]:
    """The prefixes (``DIR/ckpt-N``) of the checkpoints whose ``.index`` file is in
    `checkpoint_dir`, oldest first: what is there, whatever the state file says."""
    found = []
    for path in tf.io.gfile.glob(os.path.join(checkpoint_dir, "ckpt-*.index")):
        match = _CHECKPOINT_INDEX.fullmatch(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path[:-len(".index")]))
    return [prefix for _, prefix in sorted(found)]


def repair_checkpoint_state(checkpoint_dir: str, log=print) -> None:
    """Rewrites `STATE_FILE` from the ``ckpt-N`` files themselves when it is unreadable (not
    UTF-8, garbage) or lists other checkpoints than are there, so a resumed run finds them and
    never starts fresh over them (its first checkpoints would overwrite them)."""
    found = checkpoint_files(checkpoint_dir) if tf.io.gfile.isdir(checkpoint_dir) else []
    if not found:
        return
    try:
        state = tf.train.get_checkpoint_state(checkpoint_dir)
        listed = [os.path.basename(p) for p in state.all_model_checkpoint_paths] if state else []
        problem = None if listed == [os.path.basename(p) for p in found] else (
            f"it lists {listed or 'none'}")
    except Exception as e:  # noqa: BLE001 (not UTF-8, not a state proto: any failure)
        problem = f"it cannot be read: {_first_line(e)}"
    if problem is None:
        return
    # Each with its file's time, after the last preserved one: the manager keeps (and rotates)
    # only checkpoints newer than that.
    times = [tf.io.gfile.stat(f"{p}.index").mtime_nsec / 1e9 for p in found]
    tf.compat.v1.train.update_checkpoint_state(
        checkpoint_dir, found[-1], all_model_checkpoint_paths=found,
        all_model_checkpoint_timestamps=times, last_preserved_timestamp=min(times) - 1)
    log(f"{os.path.join(checkpoint_dir, STATE_FILE)} did not list the checkpoints there "
        f"({problem}): rewritten from the files, "
        f"{', '.join(os.path.basename(p) for p in found)}")


class SettingsMismatchError(TtZooError):
    """A checkpoint was trained with settings other than the ones a resumed run asks for."""


class NonFiniteLossError(TtZooError):
    """The training loss became NaN or infinite: the run stopped before checkpointing or
    exporting those weights."""


class DamagedCheckpointError(TtZooError):
    """No checkpoint of a run can be read back whole; the message names the damaged files."""


def check_run_settings(checkpoint_dir: str, settings: Optional[dict], resuming: bool) -> None:
    """Records a fresh run's settings beside its checkpoints; refuses to resume with other ones.

    A checkpoint trained with batch 128 and then resumed with batch 256 (or another learning
    rate, step count, tower shape, pair set, ...) would give a model no single recipe describes;
    the error names every setting that differs.
    """
    if settings is None:
        return
    settings = json.loads(json.dumps(settings))  # what JSON will give back, for a fair compare
    path = os.path.join(checkpoint_dir, SETTINGS_FILE)
    if resuming and tf.io.gfile.exists(path):
        recorded = read_run_record(path, "the settings the checkpoints were trained with")
        differ = sorted(k for k in set(recorded) | set(settings)
                        if recorded.get(k) != settings.get(k))
        if differ:
            details = "; ".join(f"{k}: checkpoint {recorded.get(k)!r}, now {settings.get(k)!r}"
                                for k in differ)
            raise SettingsMismatchError(f"The checkpoint in {checkpoint_dir} was trained with other "
                             f"settings ({details}). Resume with the same settings, or start a "
                             "new run with another --workdir.")
        return
    tf.io.gfile.makedirs(checkpoint_dir)
    write_json(path, settings, indent=2, sort_keys=True)


def remove_checkpoint_debris(checkpoint_dir: str) -> List[str]:
    """Removes the ``*_temp*`` folders a checkpoint write leaves when killed midway (TF writes
    ``ckpt-N_temp/`` then merges it into ``ckpt-N``); returns what it removed."""
    removed = []
    if tf.io.gfile.isdir(checkpoint_dir):
        for path in tf.io.gfile.glob(os.path.join(checkpoint_dir, "*_temp*")):
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
                removed.append(path)
    return removed


def checkpoint_damage(prefix: str) -> Optional[str]:
    """Why checkpoint `prefix` (``DIR/ckpt-N``) cannot be read back whole, naming its file, or
    None. Every tensor is read: TensorFlow checks each against the crc32c its index records, so
    a truncated or corrupted ``.data-*`` file (an Adam slot included, which a restore would read
    only later, at the first step) is found here, before training starts."""
    try:
        reader = tf.compat.v1.train.NewCheckpointReader(prefix)  # a prefix, on any filesystem
    except Exception as e:  # noqa: BLE001 (any failure to open it is damage)
        return f"{prefix}.index cannot be read ({_first_line(e)})"
    for name in sorted(reader.get_variable_to_shape_map()):
        try:
            reader.get_tensor(name)
        except Exception as e:  # noqa: BLE001 (truncation: IndexError; checksums: DataLoss)
            files = ", ".join(sorted(tf.io.gfile.glob(f"{prefix}.data-*"))) or f"{prefix}.data-*"
            return f"{files} is damaged: {name} cannot be read ({_first_line(e)})"
    return None


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:200]}"


def newest_good_checkpoint(manager: tf.train.CheckpointManager, log=print) -> Optional[str]:
    """The newest of `manager`'s checkpoints that reads back whole (`checkpoint_damage`), saying
    which damaged ones it passed over; None when there are none. Raises
    `DamagedCheckpointError` naming the files when every one is damaged (Keras and Orbit keep
    several checkpoints for this: `train_resumable` keeps two)."""
    damaged = []
    for prefix in reversed(manager.checkpoints):
        why = checkpoint_damage(prefix)
        if why is None:
            if damaged:
                log(f"checkpoint {damaged[0][0]} is damaged ({damaged[0][1]}); resuming from "
                    f"the previous one, {prefix}")
            return prefix
        damaged.append((prefix, why))
    if damaged:
        raise DamagedCheckpointError(
            f"Every checkpoint in {manager.directory} is damaged: "
            + "; ".join(f"{prefix}: {why}" for prefix, why in damaged)
            + ". Restore them from a copy, or start a new run with another --workdir.")
    return None


class _StopOnNonFiniteLoss(tf.keras.callbacks.Callback):
    """Raises `NonFiniteLossError` at the first step whose loss is NaN or infinite, before any
    later callback checkpoints those weights (it runs first)."""

    def __init__(self, optimizer, checkpoint_dir: str):
        super().__init__()
        self.optimizer, self.checkpoint_dir = optimizer, checkpoint_dir

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            step = int(self.optimizer.iterations.numpy())
            lr = self.optimizer.learning_rate
            lr = float(lr(self.optimizer.iterations) if callable(lr) else lr)
            raise NonFiniteLossError(
                f"The training loss became {float(loss)} at step {step} (learning rate then "
                f"{lr:.3g}): training stopped; these weights are neither checkpointed nor "
                f"exported (the checkpoints in {self.checkpoint_dir} are from before). Lower "
                "the learning rate or check the training data.")


class _ProgressAndScalars(tf.keras.callbacks.Callback):
    """tqdm bar with loss and pairs/s; TensorBoard scalars every `log_every` steps; step times."""

    def __init__(self, bar, writer, global_batch: int, optimizer, log_every: int, log=None,
                 print_every: int = 100):
        super().__init__()
        self.bar, self.writer, self.global_batch = bar, writer, global_batch
        self.optimizer, self.log_every = optimizer, log_every
        self.log, self.print_every = log, print_every
        self.last_loss = None
        self.step_seconds: List[float] = []
        self._t = None

    def on_train_batch_begin(self, batch, logs=None):
        self._t = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        elapsed = time.perf_counter() - self._t
        self.step_seconds.append(elapsed)
        self.last_loss = float(logs.get("loss", float("nan")))
        step = int(self.optimizer.iterations.numpy())
        rate = self.global_batch / max(elapsed, 1e-9)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{self.last_loss:.4f}", pairs_s=f"{rate:.0f}")
        elif self.log is not None and step % self.print_every == 0:
            recent = self.step_seconds[-self.print_every:]
            self.log(f"step {step}: loss {self.last_loss:.4f}, "
                     f"{self.global_batch * len(recent) / sum(recent):.0f} pairs/s")
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


class _Checkpointer(tf.keras.callbacks.Callback):
    """Saves the checkpoint every `every` optimizer steps, inside the one `fit` call."""

    def __init__(self, manager: tf.train.CheckpointManager, optimizer, every: int, writer,
                 earlier_seconds: float = 0.0):
        super().__init__()
        self.manager, self.optimizer, self.every, self.writer = manager, optimizer, every, writer
        self.earlier_seconds, self.start = earlier_seconds, time.perf_counter()

    def save(self, step: int) -> None:
        """The checkpoint of `step`, then the run's training time up to it (`TRAIN_TIME_FILE`)."""
        self.manager.save(checkpoint_number=step)
        seconds = self.earlier_seconds + time.perf_counter() - self.start
        write_json(os.path.join(self.manager.directory, TRAIN_TIME_FILE),
                   {"step": step, "seconds": round(seconds, 3)}, indent=None)

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.optimizer.iterations.numpy())
        if step % self.every == 0:
            self.save(step)
            if self.writer is not None:
                self.writer.flush()


def train_resumable(model: tf.keras.Model, make_dataset: Callable[[int], tf.data.Dataset], *,
                    steps: int, global_batch: int, checkpoint_dir: str,
                    checkpoint_every: int, settings: Optional[dict] = None,
                    log_dir: Optional[str] = None, log_every: int = 10, progress: bool = True,
                    callbacks: Sequence[tf.keras.callbacks.Callback] = (),
                    data_callbacks: Sequence[tf.keras.callbacks.Callback] = (),
                    log=print) -> TrainResult:
    """Trains a compiled model for `steps` steps in one `fit` call, checkpointing and resuming
    exactly.

    `make_dataset(start_step)` returns the batches of steps `start_step, start_step + 1, ...`
    (e.g. `tt_zoo.training.step_data.step_batches`), so a resumed run starts at its step without replaying
    the batches before it. Checkpoints hold the model, the optimizer (with its step counter) and
    the Keras random generators (dropout masks), so a resumed run ends with the same weights as an
    uninterrupted one. `settings` are recorded beside the checkpoints; resuming with different
    ones is refused (`check_run_settings`).

    Args:
      model: a compiled model (its optimizer created under the strategy's scope).
      make_dataset: start step -> the training batches from that step on.
      steps: total optimizer steps.
      global_batch: pairs per step (for pairs/s).
      checkpoint_dir: where checkpoints live; a missing directory starts fresh (and says so).
        The checkpoints are the ``ckpt-N`` files there: an unreadable state file is
        rewritten from them (`repair_checkpoint_state`), never taken for a fresh start.
      checkpoint_every: steps between checkpoints.
      settings: what defines the run (batch, learning rate, steps, model config, data, seed).
      log_dir: TensorBoard directory (scalars: loss, learning_rate, pairs_per_second).
      callbacks: more Keras callbacks for the `fit` call (e.g. a zero-shot evaluation).
      data_callbacks: callbacks that make the data of later steps (e.g.
        `clustered_batches.ClusteringCallback`): they run before the checkpoint callback, so
        what a run resumed from a step's checkpoint needs is on disk before the checkpoint is;
        their `close()`, if they have one, is called when `fit` ends however it ends, to
        release a data pipeline waiting on them.
    """
    if checkpoint_every <= 0:
        raise ValueError(f"checkpoint_every must be positive (got {checkpoint_every}).")
    optimizer = model.optimizer
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                     dropout_generators=dropout_generators(model))
    for debris in remove_checkpoint_debris(checkpoint_dir):
        log(f"removed {debris}, a checkpoint write cut off by an earlier kill")
    repair_checkpoint_state(checkpoint_dir, log)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=2,
                                         step_counter=optimizer.iterations)
    latest, restored = newest_good_checkpoint(manager, log), None
    if latest:
        check_run_settings(checkpoint_dir, settings, resuming=True)
        try:
            restored = checkpoint.restore(latest)
            restored.assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            raise SettingsMismatchError(
                f"The checkpoint {latest} does not fit this model ({first}). "
                "Resume with the model it was trained with, or start a new run with another "
                "--workdir.") from None
        log(f"resuming from {latest} at step {int(optimizer.iterations.numpy())}")
    else:
        if not tf.io.gfile.isdir(checkpoint_dir) or not tf.io.gfile.listdir(checkpoint_dir):
            log(f"no checkpoint in {checkpoint_dir}: starting fresh")
        else:
            log(f"{checkpoint_dir} holds no readable checkpoint: starting fresh")
        check_run_settings(checkpoint_dir, settings, resuming=False)
    resumed_from = int(optimizer.iterations.numpy())
    if restored is not None and resumed_from >= steps:
        # A finished run takes no step: the optimizer's slots are never built to receive their
        # values. Expected, not hundreds of warnings when the checkpoint is deleted.
        restored.expect_partial()
    if resumed_from > steps:
        raise ValueError(f"The checkpoint in {checkpoint_dir} is at step {resumed_from}, past the "
                         f"requested {steps} steps.")

    writer = tf.summary.create_file_writer(log_dir) if log_dir else None
    bar = None
    if progress and resumed_from < steps:
        from tqdm.auto import tqdm
        bar = tqdm(total=steps, initial=resumed_from, unit="step", desc="pretrain")
    monitor = _ProgressAndScalars(bar, writer, global_batch, optimizer, log_every,
                                  log=None if progress else log)
    earlier = read_train_time(checkpoint_dir, resumed_from, log=log)
    saver = _Checkpointer(manager, optimizer, checkpoint_every, writer, earlier)
    start = time.perf_counter()
    try:
        if resumed_from < steps:
            build_optimizer(model)  # (`PairModel.fit` does too; any other Keras model needs it)
            model.fit(make_dataset(resumed_from), epochs=1, steps_per_epoch=steps - resumed_from,
                      verbose=0, callbacks=[_StopOnNonFiniteLoss(optimizer, checkpoint_dir),
                                            monitor, *data_callbacks, saver, *callbacks])
    finally:
        for callback in data_callbacks:
            if hasattr(callback, "close"):
                callback.close()
        if bar is not None:
            bar.close()
    done = int(optimizer.iterations.numpy())
    if done > resumed_from and done % checkpoint_every:
        saver.save(done)
    if writer is not None:
        writer.flush()
    wall = time.perf_counter() - start
    trained = done - resumed_from
    if trained:
        pairs_per_s = trained * global_batch / wall
    else:  # nothing left to train: the rate of the segments before
        pairs_per_s = done * global_batch / earlier if earlier else 0.0
    return TrainResult(steps_done=done, resumed_from=resumed_from, wall_time_s=wall,
                       pairs_per_s=pairs_per_s, final_loss=monitor.last_loss,
                       global_batch=global_batch, step_seconds=monitor.step_seconds,
                       earlier_wall_time_s=earlier)


class ZeroShotReqaCurve(tf.keras.callbacks.Callback):
    """Scores ReQA zero-shot every `every_steps` optimizer steps; appends one JSON line per point.

    Each line: step, pairs_seen, train_seconds (this run's wall time without the evaluations),
    train_cpu_seconds (the process's CPU time, all threads, without the evaluations: unlike wall
    time it does not grow when other processes share the cores), loss, and R@1/5/10/50/100 and
    MRR of `num_questions` questions (sampled with seed 0) against all candidates, by exact
    search (`tt_zoo.evaluation.metrics.evaluate_encoder`).
    """

    def __init__(self, reqa, *, every_steps: int, num_questions: int, global_batch: int,
                 output: str, log=print):
        super().__init__()
        if every_steps <= 0:
            raise ValueError(f"every_steps must be positive (got {every_steps}).")
        ids = reqa.question_ids
        rng = np.random.default_rng(0)
        self.question_ids = ([ids[i] for i in sorted(rng.choice(len(ids), num_questions,
                                                                replace=False))]
                             if num_questions < len(ids) else ids)
        self.reqa, self.every_steps, self.global_batch = reqa, every_steps, global_batch
        self.output, self.log = output, log
        self._start, self._eval_seconds = None, 0.0
        self._cpu_start, self._eval_cpu_seconds = None, 0.0

    def on_train_begin(self, logs=None):
        self._start, self._eval_seconds = time.perf_counter(), 0.0
        self._cpu_start, self._eval_cpu_seconds = time.process_time(), 0.0
        if int(self.model.optimizer.iterations.numpy()) == 0:
            self.evaluate(loss=None)  # the starting point of the curve

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.every_steps == 0:
            self.evaluate(loss=(logs or {}).get("loss"))

    def evaluate(self, loss) -> dict:
        from tt_zoo.evaluation.metrics import evaluate_encoder
        t, cpu = time.perf_counter(), time.process_time()
        step = int(self.model.optimizer.iterations.numpy())
        train_seconds = t - self._start - self._eval_seconds
        train_cpu_seconds = cpu - self._cpu_start - self._eval_cpu_seconds
        result = evaluate_encoder(self.model, self.reqa, self.question_ids)
        metrics = result["exact"]
        point = {"step": step, "pairs_seen": step * self.global_batch,
                 "train_seconds": round(train_seconds, 1),
                 "train_cpu_seconds": round(train_cpu_seconds, 1),
                 "num_questions": result["num_queries"],
                 "num_candidates": result["num_candidates"],
                 "loss": None if loss is None else round(float(loss), 4),
                 **{k: round(float(v), 4) for k, v in metrics.items()}}
        # Rewritten whole, not appended: object stores (gs://) cannot append to a file.
        earlier = ""
        if tf.io.gfile.exists(self.output):
            with tf.io.gfile.GFile(self.output) as f:
                earlier = f.read()
        write_text(self.output, earlier + json_text(point, where=self.output, indent=None) + "\n")
        self._eval_seconds += time.perf_counter() - t
        self._eval_cpu_seconds += time.process_time() - cpu
        self.log(f"step {step}: zero-shot ReQA " + " ".join(
            f"{k} {v:.3f}" for k, v in metrics.items()) + f" ({time.perf_counter() - t:.0f} s)")
        return point


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
