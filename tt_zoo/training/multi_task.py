"""Multi-task training of one retriever on several tasks (Maillard et al. 2021, Sec. 3-4).

Multi-task DPR trains one query and one passage encoder on the union of several tasks'
training sets, each example (query, positive passage, one BM25 "hard confounder") scored
against every passage of its batch and the batch's confounders with the in-batch softmax
(here the corrected sampled softmax of Chang et al. 2020, Sec. 2, with its logQ term and
accidental-hit masking). This module does that with the package's resumable loop:

* **Examples as arrays.** Every task's examples (`tt_zoo.data.tasks.Task`) are tokenized once by
  the model's own preprocessors (`step_data.tokenize_pair_set`): query, positive (title,
  passage), one confounder. An example without a confounder gets the positive of another
  example of its task (seeded), so every row has one (counted in the summary).
* **Batches drawn as the union is.** Maillard et al. train on the shuffled union of the tasks'
  training sets, so a batch mixes tasks in proportion to their sizes. `TaskMixtureOrder` draws
  step s's batch from ``numpy.random.default_rng([seed, s])``: with ``batching="mixed"`` the
  batch's slots are split among tasks by a multinomial over the task weights (default:
  proportional to size, the union), each task's rows drawn without replacement; with
  ``"homogeneous"`` one task is drawn per batch (by weight) and fills it. Per-task
  ``weights`` up- or down-sample a task. The data of any step is a function of the step, so a
  resumed run is exact (`loop.train_resumable`).
* **q(d) for the logQ correction**: the expected share of a batch's slots that hold document d,
  sum over tasks of weight_t * count_t(d) / size_t.
* **Task markers** (Sec. 4.3: one marker token per task class, prepended to the query):
  `add_task_markers` adds each class's marker word (`tt_zoo.data.tasks.marker_token`) to the
  vocabulary, growing both towers' token embeddings by new rows (the old rows are kept), and
  the queries of each task are trained with their marker. The vocabulary travels in the model's
  config, so the export tokenizes a marked query the same way; the card records the markers.
* **Task-specific query towers** (Sec. 4.3: one query encoder per task type, the passage encoder
  shared): `with_task_query_towers` gives the marker-grown model one copy of its query tower per
  task class, in a `tt_zoo.modeling.routed_tower.TaskRoutedTower` that sends each query to its
  marker's tower, in the graph: the export needs nothing but the marked text.

Example:

>>> model, markers = add_task_markers(model, ["qa"])                          # doctest: +SKIP
>>> result = train_multi_task(model, [webquestions, reqa_task], steps=500, batch_size=128,
...                           learning_rate=1e-3, workdir="runs/mt", markers=markers)  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tt_zoo.data import features as F
from tt_zoo.data.tasks import BATCHING, QUERY_TOWERS, Task, marker_token, with_marker



# -- task markers ---------------------------------------------------------------------------

def add_task_markers(model, task_classes: Sequence[str]):
    """(the model with one marker word per task class in its vocabulary, {class: marker}).

    The preprocessors' vocabularies get the new words appended (existing ids unchanged) and
    every weight whose first dimension is the vocabulary size (the towers' token embeddings)
    gets new rows from a freshly built model's initialiser; all other weights are copied. A
    model that already holds every marker is returned as it is.
    """
    markers = {c: marker_token(c) for c in sorted(set(task_classes))}
    vocabulary = list(model.query_preprocessor.vocabulary)
    new = [m for m in markers.values() if m not in vocabulary]
    if not new:
        return model, markers
    config = copy.deepcopy(model.get_config())
    old_size = len(vocabulary)
    for key in ("query_preprocessor", "document_preprocessor"):
        config[key]["config"]["vocabulary"] = vocabulary + new
    for key in ("query_tower", "document_tower"):
        tower = config.get(key)
        if tower is None:
            continue
        if tower["config"].get("vocab_size") != old_size:
            raise ValueError(f"add_task_markers: the {key} ({tower['class_name']}) has no "
                             f"vocab_size {old_size} in its config; task markers need a tower "
                             "whose token embeddings are sized by the vocabulary.")
        tower["config"]["vocab_size"] = old_size + len(new)
    grown = type(model).from_config(config)
    grown.build_by_calling()
    if len(grown.weights) != len(model.weights):
        raise ValueError("add_task_markers: the rebuilt model has "
                         f"{len(grown.weights)} weights, the original {len(model.weights)}.")
    values = []
    for old, fresh in zip(model.weights, grown.weights):
        value = old.numpy()
        if tuple(fresh.shape) != value.shape:
            if (value.shape[0] != old_size or fresh.shape[0] != old_size + len(new)
                    or tuple(fresh.shape[1:]) != value.shape[1:]):
                raise ValueError(f"add_task_markers: weight {old.name} has shape {value.shape}, "
                                 f"its rebuilt copy {tuple(fresh.shape)}.")
            value = np.concatenate([value, fresh.numpy()[old_size:]], axis=0)
        values.append(value)
    grown.set_weights(values)
    return grown, markers


def with_task_query_towers(model, markers: Dict[str, str], default_class: str):
    """A new model with one query tower per task class (Maillard et al. 2021, Sec. 4.3).

    Maillard et al.'s task-specific variant: a query encoder per task type, the passage encoder
    shared by all. The new model's query tower is a
    `tt_zoo.modeling.routed_tower.TaskRoutedTower` of K copies of `model`'s query tower (one per
    class of `markers`, in sorted order, each named ``<query tower>_<class>`` and initialised
    with its weights), routed by the marker word each query carries; an unmarked query goes to
    `default_class`'s tower. The document tower is `model`'s (its config and weights). If
    `model` shared one tower for queries and documents, that tower's weights become the
    document side's own tower, no longer shared with any query tower: from here on the sides
    train apart. Right after the split the model's query embeddings (marked or not) and
    document embeddings are `model`'s. `model` itself is left as it was.

    Args:
      model: a `TwoTowerModel` whose vocabulary holds the markers (`add_task_markers`' result).
      markers: {task class: marker word}, at least two classes (one is the shared tower).
      default_class: the class an unmarked query is encoded as (the card's
        ``default_task_class``).

    Returns:
      the new model; `model` itself when its query tower already routes these markers with
      this default class (a rerun, or training a per-class export further).

    Raises:
      ValueError: a late-interaction (ColBERT) model (its one tower encodes both sides token
        by token), fewer than two classes, a marker missing from the vocabulary, a default
        class without a marker, or a model already routed otherwise.
    """
    from tt_zoo.modeling.late_interaction_model import LateInteractionModel  # noqa: PLC0415
    from tt_zoo.modeling.routed_tower import TaskRoutedTower  # noqa: PLC0415

    if isinstance(model, LateInteractionModel):
        raise ValueError("with_task_query_towers: a late-interaction (ColBERT) model has one "
                         "token tower for queries and documents; task-specific query towers "
                         "are for single-vector two-tower models (use task markers alone).")
    classes = sorted(markers)
    if len(classes) < 2:
        raise ValueError(f"with_task_query_towers: task-specific query towers need at least two "
                         f"task classes (got {classes}); one class is the shared tower.")
    if default_class not in markers:
        raise ValueError(f"with_task_query_towers: default class {default_class!r} has no marker "
                         f"(markers: {classes}).")
    vocabulary = list(model.query_preprocessor.vocabulary)
    missing = sorted(markers[c] for c in classes if markers[c] not in vocabulary)
    if missing:
        raise ValueError(f"with_task_query_towers: markers {missing} are not in the model's "
                         "vocabulary: call add_task_markers(model, task_classes) first.")
    marker_ids = [vocabulary.index(markers[c]) for c in classes]
    default_index = classes.index(default_class)
    if isinstance(model.query_tower, TaskRoutedTower):
        tower = model.query_tower
        if (list(tower.task_classes), list(tower.marker_ids), tower.default_index) == (
                classes, marker_ids, default_index):
            return model
        raise ValueError(f"with_task_query_towers: the model's query towers already route "
                         f"classes {list(tower.task_classes)} (default "
                         f"{tower.task_classes[tower.default_index]!r}); asked for {classes} "
                         f"(default {default_class!r}).")
    model = untie_towers(model)
    config = copy.deepcopy(model.get_config())
    query = config["query_tower"]
    document = config["document_tower"]
    subs = []
    for task_class in classes:
        sub = copy.deepcopy(query)
        sub["config"]["name"] = f"{query['config']['name']}_{task_class}"
        subs.append(sub)
    routed = TaskRoutedTower([tf.keras.layers.deserialize(s) for s in subs],
                             marker_ids=marker_ids, task_classes=classes,
                             default_index=default_index, name=query["config"]["name"])
    config["query_tower"] = tf.keras.layers.serialize(routed)
    config["document_tower"] = document
    split = type(model).from_config(config)
    split.build_by_calling()
    towers = len(split.query_tower.weights) + len(split.document_tower.weights)
    if len(split.weights) != towers:
        raise ValueError(f"with_task_query_towers: the model holds {len(split.weights) - towers} "
                         "weights outside its towers, which this split does not copy.")
    query_weights = model.query_tower.get_weights()
    for sub in split.query_tower.towers:
        sub.set_weights(query_weights)
    split.document_tower.set_weights(model.document_tower.get_weights())
    return split


def untie_towers(model):
    """`model` with its query and document sides in towers of their own: a model that shares
    one tower for both (``share_towers``) gets a new model whose document tower is a copy of
    that tower (its config and weights), so the two sides train apart from here; a model with
    two towers is returned as it is. Right after, both sides' embeddings are `model`'s.

    Multi-task DPR (Maillard et al. 2021, Sec. 3) has separate query and passage encoders; the
    zoo's CPU-scale towers share one. `with_task_query_towers` starts from this, so
    ``--untie-towers`` alone is the comparison that separates routing from untying."""
    from tt_zoo.modeling.late_interaction_model import LateInteractionModel  # noqa: PLC0415

    if not model.share_towers:
        return model
    if isinstance(model, LateInteractionModel):
        raise ValueError("untie_towers: a late-interaction (ColBERT) model encodes queries and "
                         "documents with its one token tower (Khattab & Zaharia 2020, Sec. 3).")
    if not model.built:
        model.build_by_calling()
    config = copy.deepcopy(model.get_config())
    document = copy.deepcopy(config["query_tower"])
    document["config"]["name"] = "document_tower"
    config["document_tower"] = document
    untied = type(model).from_config(config)
    untied.build_by_calling()
    if len(untied.weights) != 2 * len(model.weights):
        raise ValueError(f"untie_towers: the untied model holds {len(untied.weights)} weights, "
                         f"not twice the shared model's {len(model.weights)}: weights outside "
                         "the tower are not copied.")
    weights = model.query_tower.get_weights()
    untied.query_tower.set_weights(weights)
    untied.document_tower.set_weights(weights)
    return untied


def query_tower_routes(model) -> Optional[Dict[str, int]]:
    """{task class: marker id} of a model with task-specific query towers
    (`with_task_query_towers`); None for one shared query tower."""
    from tt_zoo.modeling.routed_tower import TaskRoutedTower  # noqa: PLC0415

    tower = getattr(model, "query_tower", None)
    if not isinstance(tower, TaskRoutedTower):
        return None
    return dict(zip(tower.task_classes, tower.marker_ids))


# -- the examples as arrays -----------------------------------------------------------------

def task_weights(tasks: Sequence[Task], weights: Optional[Sequence[float]] = None) -> np.ndarray:
    """Normalised sampling weights: the given ones, or proportional to task size (the union)."""
    sizes = np.array([len(t) for t in tasks], dtype=np.float64)
    if weights is None:
        w = sizes
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != sizes.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"weights must be {len(tasks)} non-negative numbers, one per task, "
                             f"not all zero (got {list(weights)}).")
    return w / w.sum()


def example_table(tasks: Sequence[Task], weights: np.ndarray,
                  markers: Optional[Dict[str, str]] = None, seed: int = 0) -> tuple:
    """The string features of every example (rows grouped by task, in task order), the task of
    each row, and counts: (features dict of numpy arrays, task index [n], counts)."""
    queries, titles, texts, ids, negatives, task_of = [], [], [], [], [], []
    borrowed = 0
    for t, task in enumerate(tasks):
        rng = np.random.default_rng([seed, t])
        for i, example in enumerate(task.examples):
            query = example.query
            if markers is not None:
                if task.task_class not in markers:
                    raise ValueError(f"Task {task.name!r} is of class {task.task_class!r}, which "
                                     f"has no marker (markers: {sorted(markers)}).")
                query = with_marker(query, task.task_class)
            positive = example.positive
            negative = example.negatives[0] if example.negatives else None
            if negative is None:
                negative = _borrowed_negative(task, i, rng)
                borrowed += 1
            queries.append(query)
            titles.append(positive.title)
            texts.append(positive.text)
            ids.append(positive.id)
            negatives.append(negative)
            task_of.append(t)
    task_of = np.asarray(task_of, np.int64)
    counts = collections.Counter()
    for t, doc_id in zip(task_of, ids):
        counts[(int(t), doc_id)] += 1
    sizes = np.array([len(t) for t in tasks], np.float64)
    q = collections.defaultdict(float)
    for (t, doc_id), c in counts.items():
        q[doc_id] += weights[t] * c / sizes[t]
    features = {
        F.QUERY: np.array(queries, dtype=object), F.DOC_TITLE: np.array(titles, dtype=object),
        F.DOC_TEXT: np.array(texts, dtype=object), F.DOC_ID: np.array(ids, dtype=object),
        F.DOC_SAMPLING_PROB: np.array([q[d] for d in ids], np.float32),
        F.HARD_NEGATIVE_TITLES: np.array([[n.title] for n in negatives], dtype=object),
        F.HARD_NEGATIVE_TEXTS: np.array([[n.text] for n in negatives], dtype=object),
        F.HARD_NEGATIVE_IDS: np.array([[n.id] for n in negatives], dtype=object)}
    return features, task_of, {"negatives_borrowed": borrowed}


def _borrowed_negative(task: Task, i: int, rng: np.random.Generator):
    own = task.examples[i].positive.id
    for j in rng.permutation(len(task.examples)):
        if task.examples[j].positive.id != own:
            return task.examples[j].positive
    raise ValueError(f"Task {task.name!r}: example {i} has no confounder and every example "
                     "shares its positive; give confounders or more examples.")


# -- the order of batches ---------------------------------------------------------------------

class TaskMixtureOrder:
    """Row indices of step s's batch, drawn from ``default_rng([seed, s])`` (see the module
    docstring); the `order` of `tt_zoo.training.step_data.step_batches`. The tasks of `alone`
    (distillation: their examples carry K candidates, `tt_zoo.training.distill_data`) always
    fill a batch by themselves, drawn by weight as in homogeneous batching; with ``"mixed"``,
    the other tasks share the remaining batches by their weights."""

    def __init__(self, task_of: np.ndarray, weights: np.ndarray, batch_size: int, seed: int,
                 batching: str = "mixed", alone: Sequence[int] = ()):
        if batching not in BATCHING:
            raise ValueError(f"batching must be one of {BATCHING} (got {batching!r}).")
        self.rows_of_task = [np.flatnonzero(task_of == t) for t in range(len(weights))]
        if any(len(r) == 0 for r in self.rows_of_task):
            raise ValueError("TaskMixtureOrder: every task needs at least one row.")
        self.weights = np.asarray(weights, np.float64)
        self.batch_size, self.seed, self.batching = batch_size, seed, batching
        self.alone = frozenset(int(t) for t in alone)

    def _draw(self, rng, task: int, count: int) -> np.ndarray:
        rows = self.rows_of_task[task]
        return rng.choice(rows, count, replace=count > len(rows))

    def rows(self, step: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, step])
        if self.batching == "homogeneous":
            task = int(rng.choice(len(self.weights), p=self.weights))
            return self._draw(rng, task, self.batch_size)
        weights = self.weights
        if self.alone:  # (without such tasks, the draws of the runs recorded before)
            task = int(rng.choice(len(weights), p=weights))
            if task in self.alone:
                return self._draw(rng, task, self.batch_size)
            weights = np.array([0.0 if t in self.alone else w for t, w in enumerate(weights)])
            weights /= weights.sum()
        counts = rng.multinomial(self.batch_size, weights)
        return np.concatenate([self._draw(rng, t, int(c)) for t, c in enumerate(counts) if c])

    def settings(self) -> dict:
        return {"batching": self.batching, "weights": [round(float(w), 6) for w in self.weights],
                "task_sizes": [len(r) for r in self.rows_of_task],
                **({"alone": sorted(self.alone)} if self.alone else {})}


# -- training ---------------------------------------------------------------------------------

@dataclasses.dataclass
class MultiTaskData:
    """The tokenized examples of a task union and their batch order; with distillation tasks,
    their examples too (`distill`, rows numbered after the others' in `order`)."""

    arrays: Optional[dict]
    order: TaskMixtureOrder
    tasks: List[dict]
    counts: dict
    distill: Optional[object] = None  # `tt_zoo.training.distill_data.DistillArrays`

    def batches(self, batch_size: int, *, seed: int, start_step: int,
                distill_candidates: int = 0) -> tf.data.Dataset:
        """The run's step dataset from `start_step` on."""
        from tt_zoo.training import distill_data, step_data  # noqa: PLC0415

        if self.distill is None:
            return step_data.step_batches(self.arrays, batch_size, seed=seed,
                                          start_step=start_step, order=self.order)
        return distill_data.step_batches(self.arrays, self.distill, batch_size,
                                         distill_candidates, seed=seed, start_step=start_step,
                                         order=self.order)


def prepare(model, tasks: Sequence[Task], *, batch_size: int, weights=None,
            batching: str = "mixed", markers: Optional[Dict[str, str]] = None, seed: int = 0,
            distill_candidates: int = 0, log=print) -> MultiTaskData:
    """Tokenizes the union of `tasks` with `model` and sets its batch order; distillation
    tasks (`tt_zoo.data.distill_task`) are tokenized apart, `distill_candidates` K a step."""
    from tt_zoo.data.distill_task import is_distillation  # noqa: PLC0415
    from tt_zoo.training.step_data import tokenize_pair_set  # noqa: PLC0415

    if not tasks:
        raise ValueError("train_multi_task: no tasks.")
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError(f"Task names must be unique (got {names}).")
    w = task_weights(tasks, weights)
    distilled = [t for t, task in enumerate(tasks) if is_distillation(task)]
    others = [t for t in range(len(tasks)) if t not in distilled]
    arrays, counts, task_of = None, {"negatives_borrowed": 0}, np.zeros(0, np.int64)
    if others:
        features, local, counts = example_table([tasks[t] for t in others], w[others], markers,
                                                seed)
        arrays = tokenize_pair_set(model, tf.data.Dataset.from_tensor_slices(features), log=log)
        task_of = np.asarray(others, np.int64)[local]
    distill = None
    if distilled:
        from tt_zoo.training.distill_data import distill_arrays  # noqa: PLC0415
        distill = distill_arrays(model, [tasks[t] for t in distilled], distill_candidates,
                                 markers, log=log)
        task_of = np.concatenate([task_of, np.repeat(
            np.asarray(distilled, np.int64), [len(tasks[t]) for t in distilled])])
    order = TaskMixtureOrder(task_of, w, batch_size, seed, batching, alone=distilled)
    described = [{**t.describe(), "weight": round(float(wt), 6),
                  **({"marker": markers[t.task_class]} if markers else {})}
                 for t, wt in zip(tasks, w)]
    return MultiTaskData(arrays, order, described, counts, distill)


def check_distillation(names: Sequence[str], distillation, candidates) -> None:
    """Raises `TtZooError` (a ValueError) unless distillation tasks `names` can train:
    a `DistillationLoss` given, K >= 2 candidates. (The student scores its candidates as it
    scores any passage, `PairModel.candidate_scores`: dot products, or MaxSim for ColBERT.)"""
    from tt_zoo.errors import TtZooError  # noqa: PLC0415

    if distillation is None:
        raise TtZooError(f"Tasks {list(names)} distil a teacher's scores: pass distillation="
                         "DistillationLoss(...) (tt-zoo multitask --distill-loss).")
    if not isinstance(candidates, (int, np.integer)) or candidates < 2:
        raise TtZooError(f"distill_candidates must be an int >= 2: the teacher's best and at "
                         f"least one other (got {candidates!r}).")


def train_multi_task(model, tasks: Sequence[Task], *, steps: int, batch_size: int,
                     learning_rate: float, workdir: str, weights=None, batching: str = "mixed",
                     markers: Optional[Dict[str, str]] = None, warmup_fraction: float = 0.1,
                     seed: int = 0, checkpoint_every: int = 100, progress: bool = True,
                     callbacks: Sequence[tf.keras.callbacks.Callback] = (),
                     distillation=None, distill_candidates: int = 8, log=print) -> dict:
    """Trains `model` in place on the union of `tasks` (Maillard et al. 2021), resumably.

    Adam with linear warm-up and decay (`loop.paper_learning_rate`), one confounder per
    example, batches by `TaskMixtureOrder`; checkpoints in ``workdir`` (a killed run resumes
    exactly; resuming with other settings is refused: call
    `loop.enable_checkpointable_randomness(seed)` before building the model, so its dropout
    draws from generators the checkpoints hold, as `tt-zoo multitask` does). `markers`
    ({task class: word}, from
    `add_task_markers` on this model) prepends each task's marker to its queries; a model with
    task-specific query towers (`with_task_query_towers`) needs the markers it routes by, and
    its settings record ``query_towers: per-class``. `callbacks`:
    more Keras callbacks for the `fit` call (they run after the step's checkpoint).

    Distillation tasks (`tt_zoo.data.distill_task`, examples with teacher scores) train with
    `distillation` (a `tt_zoo.modeling.distillation.DistillationLoss`: listwise KL or
    Margin-MSE) on `distill_candidates` K candidates an example a step, in batches of their own
    (`tt_zoo.training.distill_data`); the settings record both.

    Returns the run's summary: settings, tasks (with weights and markers), steps, wall time,
    pairs/s, final loss.
    """
    from tt_zoo.training import loop  # noqa: PLC0415

    for name, value in (("steps", steps), ("batch_size", batch_size)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int (got {value!r}).")
    if markers is not None:
        vocabulary = set(model.query_preprocessor.vocabulary)
        missing = sorted(m for m in markers.values() if m not in vocabulary)
        if missing:
            raise ValueError(f"Markers {missing} are not in the model's vocabulary: call "
                             "add_task_markers(model, task_classes) first and train its result.")
    routes = query_tower_routes(model)
    if routes is not None:
        vocabulary = list(model.query_preprocessor.vocabulary)
        given = {t.task_class: None if markers is None or t.task_class not in markers
                 else vocabulary.index(markers[t.task_class]) for t in tasks}
        unrouted = sorted(c for c, i in given.items() if routes.get(c) != i)
        if unrouted:
            raise ValueError(f"The model's query towers are routed by the markers of classes "
                             f"{sorted(routes)}; the tasks' classes {unrouted} have no such "
                             "marker (pass the markers the towers were split with, "
                             "with_task_query_towers).")
    from tt_zoo.data.distill_task import is_distillation  # noqa: PLC0415

    distilling = [t.name for t in tasks if is_distillation(t)]
    if distilling:
        check_distillation(distilling, distillation, distill_candidates)
    start = time.perf_counter()
    tf.keras.utils.set_random_seed(seed)
    data = prepare(model, tasks, batch_size=batch_size, weights=weights, batching=batching,
                   markers=markers, seed=seed, distill_candidates=distill_candidates, log=log)
    model.set_distillation(distillation if distilling else None)
    model.compile(optimizer=tf.keras.optimizers.Adam(
        loop.paper_learning_rate(learning_rate, steps, warmup_fraction)))
    settings = {"kind": "multi_task", "steps": int(steps), "batch_size": int(batch_size),
                "learning_rate": learning_rate, "warmup_fraction": warmup_fraction,
                "seed": int(seed), "markers": markers, **data.order.settings(),
                # (absent for one shared query tower: the runs recorded before keep resuming)
                **({"query_towers": QUERY_TOWERS[1]} if routes is not None else {}),
                "tasks": [{k: t[k] for k in ("name", "task_class", "examples")}
                          for t in data.tasks],
                "vocabulary_sha256": model.query_preprocessor.vocabulary_sha256}
    if distilling:  # (absent otherwise: the runs recorded before keep resuming)
        settings["distillation"] = {**distillation.describe(),
                                    "candidates": int(distill_candidates)}
    result = loop.train_resumable(
        model, lambda first: data.batches(batch_size, seed=seed, start_step=first,
                                          distill_candidates=distill_candidates),
        steps=steps, global_batch=batch_size, checkpoint_dir=f"{workdir}/checkpoints",
        checkpoint_every=checkpoint_every, settings=settings, progress=progress,
        callbacks=callbacks, log=log)
    return {"settings": settings, "tasks": data.tasks, **data.counts,
            "steps_done": result.steps_done, "resumed_from": result.resumed_from,
            "train_wall_time_s": round(result.total_wall_time_s, 1),
            "pairs_per_s": round(result.pairs_per_s, 1),
            "final_loss": None if result.final_loss is None else round(result.final_loss, 4),
            "seconds": round(time.perf_counter() - start, 1)}

