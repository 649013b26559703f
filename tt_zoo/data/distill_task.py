"""A distillation task: a teacher-scores file (`tt_zoo.data.teacher_scores`) as a `Task` of
multi-task training (``tt-zoo multitask --task distill:FILE``).

Each question becomes a `ScoredExample`: its candidates as documents looked up in the collection
(title and text, by row), the teacher's best first as the example's positive and the others,
best first, as its negatives, with the teacher's score of each. Training draws K of them a step,
the teacher's best and K - 1 others (`tt_zoo.training.distill_data`), and the student learns
the teacher's scores over them (`tt_zoo.modeling.distillation`: RocketQAv2's listwise KL or
Hofstätter et al.'s Margin-MSE).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

from tt_zoo.data.task_choices import DISTILL_LOSSES  # noqa: F401 (named here too)
from tt_zoo.data.tasks import Document, Task, TaskExample



@dataclasses.dataclass(frozen=True)
class ScoredExample(TaskExample):
    """A `TaskExample` whose documents (positives, then negatives) each carry the teacher's
    score, `teacher_scores`, best first."""

    teacher_scores: Tuple[float, ...] = ()

    @property
    def candidates(self) -> Tuple[Document, ...]:
        """The documents in `teacher_scores`' order: positives, then negatives."""
        return self.positives + self.negatives


def is_distillation(task: Task) -> bool:
    """Whether `task`'s examples carry teacher scores (`ScoredExample`)."""
    return bool(task.examples) and isinstance(task.examples[0], ScoredExample)


def distill_task(name: str, path, collection, *, task_class: str = "qa") -> Task:
    """The task of the teacher-scores file at `path` over `collection` (the
    `tt_zoo.data.passage_collection.Collection` it was scored over: another one raises
    `tt_zoo.data.teacher_scores.TeacherScoresError`). Questions with fewer than two candidates
    are left out and counted. The stats record the teacher, the student that mined candidates,
    the file's sha256 and the candidates' counts."""
    from tt_zoo.data.teacher_scores import read_teacher_scores  # noqa: PLC0415
    from tt_zoo.manifest import describe_file  # noqa: PLC0415

    scores = read_teacher_scores(path, collection)
    documents: Dict[int, Document] = {}

    def document(row) -> Document:
        row = int(row)
        if row not in documents:
            documents[row] = Document(collection.ids[row], collection.titles[row],
                                      collection.texts[row])
        return documents[row]

    examples, dropped = [], 0
    for i, question in enumerate(scores.questions):
        rows, values, _ = scores.candidates(i)
        if len(rows) < 2:
            dropped += 1
            continue
        examples.append(ScoredExample(question, (document(rows[0]),),
                                      tuple(document(r) for r in rows[1:]),
                                      teacher_scores=tuple(float(v) for v in values)))
    meta = scores.meta
    stats = {"teacher": meta["teacher"], "student": meta["student"],
             "scores_file": {"path": str(path), **describe_file(path)},
             "question_sets": meta["question_sets"], "depth": meta["depth"],
             **scores.summary(), "dropped_fewer_than_two_candidates": dropped,
             "negatives": "teacher-scored candidates (BM25, student and teacher top-k)"}
    return Task(name, task_class, tuple(examples),
                knowledge_source=f"{meta['collection'].get('source') or 'a collection'}: "
                                 f"{meta['collection']['passages']:,} passages (title, text)",
                stats=stats)
