"""Distillation batches for multi-task training, and one step dataset for every kind of batch.

A distillation example (`tt_zoo.data.distill_task.ScoredExample`) carries a question's
teacher-scored candidates, often a hundred or more. Each step gives each of its examples K of
them: the teacher's best, always, and K - 1 others drawn uniformly without replacement, kept in
the teacher's order, so over the steps the student sees the whole list against the teacher's top
(RocketQAv2, Ren et al. 2021, Sec. 3.2, samples its listwise candidates so). The draw is a
function of (seed, step): a resumed run sees the same candidates.

The batch is a pair batch of the usual features (`tt_zoo.data.features`): the query, the
teacher's best as the document, the K - 1 others as the example's hard negatives (rows
b * (K - 1) ... of HARD_NEGATIVE_INPUTS), their hashed passage ids, and TEACHER_SCORES
`[batch, K]`; `PairModel.compute_loss` scores it with the distillation loss. A batch of another
task of the same run carries TEACHER_SCORES `[batch, 0]` and takes the in-batch softmax, so one
`model.fit` over one dataset (`step_batches`) trains both; the mixture
(`tt_zoo.training.multi_task.TaskMixtureOrder`) gives a distillation task batches of its own.
The questions and the distinct candidate passages are tokenized once, by the model's own
preprocessors (`tt_zoo.training.step_data.tokenize_texts`).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from tt_zoo.data import features as F
from tt_zoo.data.tasks import Task, with_marker
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.losses import hash_ids
from tt_zoo.training import step_data


@dataclasses.dataclass
class DistillArrays:
    """The tokenized distillation examples of a run: example i's candidates are
    ``candidates[offsets[i]:offsets[i + 1]]`` (rows of `passages`), best teacher score first,
    their scores in `scores`."""

    queries: Dict[str, np.ndarray]   # packed ids [examples, query_length]
    passages: Dict[str, np.ndarray]  # packed ids [distinct passages, document_length]
    passage_ids: np.ndarray          # int64 [distinct passages], hashed (`hash_ids`)
    offsets: np.ndarray              # int64 [examples + 1]
    candidates: np.ndarray           # int64 [total], rows of `passages`
    scores: np.ndarray               # float32 [total]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def sample(self, rows: np.ndarray, k: int, rng: np.random.Generator):
        """(candidate rows of `passages` [len(rows), k], teacher scores [len(rows), k]) of the
        examples `rows`: each one's first candidate and k - 1 others drawn without
        replacement, in the teacher's order."""
        picked = np.empty((len(rows), k), np.int64)
        for j, row in enumerate(rows):
            start, size = int(self.offsets[row]), int(self.offsets[row + 1] - self.offsets[row])
            others = np.sort(rng.choice(size - 1, k - 1, replace=False)) + 1
            picked[j] = start + np.concatenate([[0], others])
        return self.candidates[picked], self.scores[picked]


def distill_arrays(model, tasks: Sequence[Task], k: int,
                   markers: Optional[Dict[str, str]] = None, log=print) -> DistillArrays:
    """The examples of the distillation `tasks` (in task order) tokenized by `model`'s
    preprocessors, each query with its task class's marker when `markers` are given. Raises
    `TtZooError` naming the task when an example has fewer than `k` candidates."""
    queries, offsets, candidates, scores = [], [0], [], []
    row_of: Dict[str, int] = {}
    titles, texts, ids = [], [], []
    for task in tasks:
        fewest = min(len(e.teacher_scores) for e in task.examples)
        if fewest < k:
            raise TtZooError(f"Task {task.name!r}: an example has {fewest} teacher-scored "
                             f"candidates, fewer than the {k} a step gives each example "
                             "(--distill-candidates): lower K or mine deeper (tt-zoo "
                             "teacher-scores --depth).")
        for example in task.examples:
            if markers is not None:
                if task.task_class not in markers:
                    raise ValueError(f"Task {task.name!r} is of class {task.task_class!r}, "
                                     f"which has no marker (markers: {sorted(markers)}).")
                queries.append(with_marker(example.query, task.task_class))
            else:
                queries.append(example.query)
            for document in example.candidates:
                if document.id not in row_of:
                    row_of[document.id] = len(ids)
                    ids.append(document.id)
                    titles.append(document.title)
                    texts.append(document.text)
                candidates.append(row_of[document.id])
            scores.extend(example.teacher_scores)
            offsets.append(len(candidates))
    arrays = DistillArrays(
        queries=step_data.tokenize_texts(model.query_preprocessor, queries),
        passages=step_data.tokenize_texts(model.document_preprocessor, (titles, texts)),
        passage_ids=hash_ids(tf.constant(ids)).numpy(),
        offsets=np.asarray(offsets, np.int64), candidates=np.asarray(candidates, np.int64),
        scores=np.asarray(scores, np.float32))
    log(f"tokenized {len(queries):,} distillation questions and their {len(ids):,} distinct "
        f"candidate passages ({len(candidates):,} candidates)")
    return arrays


def distill_batch(arrays: DistillArrays, rows: np.ndarray, k: int,
                  rng: np.random.Generator) -> dict:
    """The pair batch of distillation examples `rows` (the module docstring): K candidates
    each (`DistillArrays.sample`), the first as the document, the others as hard negatives."""
    picked, scores = arrays.sample(rows, k, rng)
    widen = step_data.widen

    def passages(which):
        return {key: widen(value[which]) for key, value in arrays.passages.items()}

    return {F.QUERY_INPUTS: {key: widen(value[rows]) for key, value in arrays.queries.items()},
            F.DOCUMENT_INPUTS: passages(picked[:, 0]),
            F.DOC_ID: arrays.passage_ids[picked[:, 0]],
            F.DOC_SAMPLING_PROB: np.ones(len(rows), np.float32),
            F.HARD_NEGATIVE_INPUTS: passages(picked[:, 1:].reshape(-1)),
            F.HARD_NEGATIVE_IDS: arrays.passage_ids[picked[:, 1:].reshape(-1)],
            F.TEACHER_SCORES: scores.astype(np.float32)}


# The features whose first dimension is not the batch's (batch * H hard negatives: H = 1 for
# a confounder, K - 1 for distillation).
_FLAT = (F.HARD_NEGATIVE_INPUTS, F.HARD_NEGATIVE_IDS)


def step_batches(arrays: Optional[step_data.Arrays], distill: DistillArrays, batch_size: int,
                 k: int, *, seed: int, start_step: int, order) -> tf.data.Dataset:
    """Batches `start_step, start_step + 1, ...` of a run with distillation tasks: `order.rows`
    (`TaskMixtureOrder`) numbers the rows of `arrays` (the other tasks' tokenized examples,
    `tt_zoo.training.step_data.tokenize_pair_set`; None when every task distils) first, then
    the distillation examples; a step's rows are all of one kind."""
    n = 0 if arrays is None else step_data.num_rows(arrays)
    if k < 2:
        raise ValueError(f"Distillation needs K >= 2 candidates an example (got {k}).")
    if order.batch_size != batch_size:
        raise ValueError(f"The order serves batches of {order.batch_size}, not {batch_size}.")

    def batch_of(step: int) -> dict:
        rows = order.rows(step)
        if rows[0] >= n:
            return distill_batch(distill, rows - n, k, np.random.default_rng([seed, step, 1]))
        batch = step_data.map_arrays(lambda a: step_data.widen(a[rows]), arrays)
        batch[F.TEACHER_SCORES] = np.zeros((len(rows), 0), np.float32)
        return batch

    def generate():
        step = start_step
        while True:
            yield batch_of(step)
            step += 1

    example = distill_batch(distill, np.zeros(1, np.int64), k, np.random.default_rng(0))
    if arrays is not None and set(arrays) | {F.TEACHER_SCORES} != set(example):
        raise ValueError(f"The other tasks' arrays hold {sorted(arrays)}; a distillation batch "
                         f"{sorted(example)}: one dataset needs the same features.")

    def spec(key, value):
        if isinstance(value, dict):
            return {name: spec(key, v) for name, v in value.items()}
        shape = [None if key in _FLAT else batch_size, *value.shape[1:]]
        if key == F.TEACHER_SCORES:
            shape = [batch_size, None]
        return tf.TensorSpec(shape, tf.as_dtype(value.dtype))

    signature = {key: spec(key, value) for key, value in example.items()}
    return tf.data.Dataset.from_generator(generate, output_signature=signature).prefetch(2)

