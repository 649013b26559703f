"""A teacher's ranking of each training question's candidate passages, as query adaptation
distils it (`tt_zoo.training.query_adaptation`, listwise KL: RocketQAv2, Ren et al. 2021,
Sec. 3).

`TeacherTargets` holds, for question i, the rows of its candidates in the collection
(``rows[i]``, -1 padding) and the teacher's scores of them (``scores[i]``), with the softmax
temperature T the teacher's distribution is taken at. They are made once from the teacher's
passage index and kept in a file, so training never runs the teacher.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class TeacherTargets:
    """Candidates and teacher scores, one padded row per training question.

    Args:
      rows: int64 [questions, k]: collection rows of each question's candidates, -1 padding
        (at least one real row each).
      scores: float32 [questions, k]: the teacher's score of each candidate (padding ignored).
      temperature: T, the teacher's softmax temperature (its scores are divided by it).
    """

    rows: np.ndarray
    scores: np.ndarray
    temperature: float = 1.0

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], scores: Sequence[Sequence[float]],
                   temperature: float = 1.0) -> "TeacherTargets":
        """Ragged per-question candidate rows and scores, padded to the longest with -1."""
        if len(rows) != len(scores):
            raise ValueError(f"TeacherTargets: {len(rows)} questions of candidate rows but "
                             f"{len(scores)} of scores; expected one list of each per question.")
        k = max((len(r) for r in rows), default=0)
        padded_rows = np.full((len(rows), k), -1, np.int64)
        padded_scores = np.zeros((len(rows), k), np.float32)
        for i, (r, sc) in enumerate(zip(rows, scores)):
            if len(r) != len(sc):
                raise ValueError(f"TeacherTargets: question {i} has {len(r)} candidate rows but "
                                 f"{len(sc)} scores; expected one score per candidate.")
            padded_rows[i, :len(r)] = r
            padded_scores[i, :len(sc)] = sc
        return cls(padded_rows, padded_scores, float(temperature))

    def check(self, num_questions: int, num_passages: int) -> None:
        """Raises ValueError unless these targets fit `num_questions` training questions over
        `num_passages` passages: shapes, at least one candidate each, rows in range, finite
        scores, a positive temperature."""
        if self.rows.shape != self.scores.shape or self.rows.shape[:1] != (num_questions,):
            raise ValueError(f"TeacherTargets: rows {self.rows.shape} and scores "
                             f"{self.scores.shape}; expected both [{num_questions}, k] (one row "
                             "per training question).")
        valid = self.rows >= 0
        if num_questions and not valid.any(axis=1).all():
            raise ValueError(f"TeacherTargets: question {int(np.argmin(valid.any(axis=1)))} has "
                             "no candidate; expected at least one each.")
        if (self.rows >= num_passages).any():
            raise ValueError(f"TeacherTargets: candidate rows up to {int(self.rows.max())}; "
                             f"expected rows in [0, {num_passages}) of the collection.")
        if not np.isfinite(self.scores[valid]).all():
            raise ValueError("TeacherTargets: a teacher score is not finite (NaN or infinite).")
        if not self.temperature > 0:
            raise ValueError(f"TeacherTargets: temperature {self.temperature}; expected a "
                             "positive number.")


__all__ = ["TeacherTargets"]
