"""Teacher-scored candidates: what distillation trains on, as one versioned ``.npz`` file.

For each training question, the candidate passages mined from a collection (the union of the
top k of BM25, of the student's own dense search and of the teacher's; built by
`tt_zoo.mining.teacher_candidates`), each with the teacher's score (the dot product of its query
and passage embeddings) and whether the passage holds one of the question's answers (DPR's
answer match, `tt_zoo.evaluation.odqa`). Distillation (`tt_zoo.modeling.distillation`; RocketQAv2,
Margin-MSE) reads the scores; the answer flags say how often the teacher's best is an answer.

The file (`write_teacher_scores`, written to a temporary name and renamed; `read_teacher_scores`)
is a NumPy ``.npz`` of flat arrays, the candidates of question i at ``offsets[i]:offsets[i + 1]``,
best teacher score first:

=============== =================== ======================================================
``meta``        str (JSON)          format, version, teacher and student (name, sha256),
                                    collection (passages, sha256 of ids and texts, source),
                                    depth per source, question sets
``questions``   str ``[Q]``         the question texts
``set_of``      int32 ``[Q]``       each question's set, an index into ``meta["question_sets"]``
``offsets``     int64 ``[Q + 1]``   where each question's candidates start
``rows``        int32 ``[N]``       the candidates' rows in the collection
``scores``      float32 ``[N]``     the teacher's scores
``has_answer``  bool ``[N]``        whether the passage holds an answer of the question
``found_by``    uint8 ``[N]``       which searches found it: bit i is `SOURCES`' i-th
=============== =================== ======================================================

Rows mean nothing without their collection: `TeacherScores.check_collection` refuses another
collection than the one scored (other passages, ids or texts), naming both.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Dict, Sequence, Tuple

import numpy as np

from tt_zoo.errors import ArtifactError

FORMAT = "tt_zoo.teacher_scores"
FORMAT_VERSION = 1
SOURCES = ("bm25", "student", "teacher")  # bit i of ``found_by``
SUFFIX = ".npz"
_ARRAYS = ("questions", "set_of", "offsets", "rows", "scores", "has_answer", "found_by")


class TeacherScoresError(ArtifactError):
    """A teacher-scores file that cannot be read or does not belong to the collection given;
    the message names the file and what was expected."""


@dataclasses.dataclass(frozen=True)
class TeacherScores:
    """Teacher-scored candidates of a set of questions (see the module docstring for the
    arrays). `meta` holds ``teacher`` and ``student`` ({"name", "sha256"}), ``collection``
    ({"passages", "sha256", "source"}), ``depth`` ({source: k}) and ``question_sets`` (names)."""

    questions: Tuple[str, ...]
    set_of: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray
    scores: np.ndarray
    has_answer: np.ndarray
    found_by: np.ndarray
    meta: dict

    def __len__(self) -> int:
        return len(self.questions)

    def candidates(self, i: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, teacher scores, answer flags) of question i's candidates, best first."""
        part = slice(int(self.offsets[i]), int(self.offsets[i + 1]))
        return self.rows[part], self.scores[part], self.has_answer[part]

    @property
    def teacher(self) -> str:
        return self.meta["teacher"]["name"]

    def check_collection(self, collection, where: str = "teacher scores") -> None:
        """Raises `TeacherScoresError` unless `collection` (`tt_zoo.data.passage_collection.
        Collection`) is the one the candidates' rows refer to (its passages' ids and texts)."""
        recorded = self.meta["collection"]
        sha = collection.fingerprint().hexdigest()
        if recorded["passages"] != len(collection) or recorded["sha256"] != sha:
            raise TeacherScoresError(
                f"{where}: scored over a collection of {recorded['passages']:,} passages "
                f"(sha256 {recorded['sha256'][:12]}…, {recorded.get('source') or '?'}), not "
                f"this one of {len(collection):,} passages (sha256 {sha[:12]}…); score the "
                "questions over this collection (tt-zoo teacher-scores) or use the collection "
                "the file was built on.")

    def summary(self) -> dict:
        """Counts for a log line or a card: questions, candidates per question (min, mean,
        max), the share of questions whose teacher's best holds an answer."""
        sizes = np.diff(self.offsets)
        firsts = self.has_answer[self.offsets[:-1][sizes > 0]]
        return {"questions": len(self), "candidates": int(sizes.sum()),
                "per_question": [int(sizes.min()), round(float(sizes.mean()), 1),
                                 int(sizes.max())] if len(sizes) else [0, 0.0, 0],
                "teacher_best_holds_answer": round(float(firsts.mean()), 4) if len(firsts)
                else 0.0}


def from_candidates(questions: Sequence[str], set_of: Sequence[int],
                    candidates: Sequence[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                    meta: dict) -> TeacherScores:
    """`TeacherScores` of per-question (rows, scores, has_answer, found_by) arrays, each
    question's sorted by descending teacher score (ties by row)."""
    if len(candidates) != len(questions) or len(set_of) != len(questions):
        raise ValueError(f"from_candidates: {len(questions)} questions, {len(set_of)} set "
                         f"indices and {len(candidates)} candidate lists.")
    parts: Dict[str, list] = {"rows": [], "scores": [], "has_answer": [], "found_by": []}
    offsets = [0]
    for rows, scores, answers, found in candidates:
        order = np.lexsort((np.asarray(rows), -np.asarray(scores, np.float64)))
        for key, values in zip(parts, (rows, scores, answers, found)):
            parts[key].append(np.asarray(values)[order])
        offsets.append(offsets[-1] + len(order))
    dtypes = {"rows": np.int32, "scores": np.float32, "has_answer": bool, "found_by": np.uint8}
    arrays = {k: (np.concatenate(v) if v else np.zeros(0)).astype(dtypes[k])
              for k, v in parts.items()}
    return TeacherScores(tuple(questions), np.asarray(set_of, np.int32),
                         np.asarray(offsets, np.int64), meta=dict(meta), **arrays)


def write_teacher_scores(scores: TeacherScores, path) -> pathlib.Path:
    """Writes `scores` to `path` (a ``.npz``), to a temporary name first and then renamed, so a
    cut-off write leaves no half file. Returns the path."""
    from tt_zoo.atomic_io import open_for_replace  # noqa: PLC0415

    path = pathlib.Path(path)
    if path.suffix != SUFFIX:
        raise ValueError(f"A teacher-scores file ends in {SUFFIX} (got {path}).")
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **scores.meta}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_for_replace(path, "wb") as f:
        np.savez_compressed(
            f, meta=np.array(json.dumps(meta)), questions=np.array(scores.questions, dtype=str),
            **{k: getattr(scores, k) for k in _ARRAYS if k != "questions"})
    return path


def read_teacher_scores(path, collection=None) -> TeacherScores:
    """The teacher scores stored at `path`; with `collection`, checked to be the one they were
    scored over (`TeacherScores.check_collection`). Raises `TeacherScoresError` naming the file
    for a missing, foreign, newer or inconsistent file."""
    from tt_zoo.manifest import check_format_version  # noqa: PLC0415

    path = pathlib.Path(path)
    if not path.is_file():
        raise TeacherScoresError(f"{path} does not exist (a teacher-scores file, made by "
                                 "tt-zoo teacher-scores).")
    try:
        with np.load(path, allow_pickle=False) as stored:
            missing = [k for k in ("meta", *_ARRAYS) if k not in stored.files]
            if missing:
                raise TeacherScoresError(f"{path}: not a teacher-scores file (no {missing}; it "
                                         f"holds {sorted(stored.files)}).")
            meta = json.loads(str(stored["meta"]))
            arrays = {k: stored[k] for k in _ARRAYS}
    except (OSError, ValueError) as e:
        if isinstance(e, TeacherScoresError):
            raise
        raise TeacherScoresError(f"{path}: not a readable .npz teacher-scores file ({e}).") \
            from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise TeacherScoresError(f"{path}: its meta names format "
                                 f"{meta.get('format') if isinstance(meta, dict) else meta!r}, "
                                 f"not {FORMAT!r}.")
    check_format_version(meta.get("format_version"), FORMAT_VERSION, listed_in=path,
                         what="teacher-scores")
    scores = TeacherScores(tuple(str(q) for q in arrays.pop("questions")), meta=meta, **arrays)
    _check_consistent(scores, path)
    if collection is not None:
        scores.check_collection(collection, where=str(path))
    return scores


def _check_consistent(scores: TeacherScores, path) -> None:
    n = len(scores.questions)
    offsets = scores.offsets
    total = len(scores.rows)
    problems = []
    if scores.set_of.shape != (n,) or offsets.shape != (n + 1,):
        problems.append(f"{n} questions but set_of {scores.set_of.shape} and offsets "
                        f"{offsets.shape}")
    elif offsets[0] != 0 or offsets[-1] != total or np.any(np.diff(offsets) < 0):
        problems.append("offsets must rise from 0 to the number of candidates")
    for key in ("scores", "has_answer", "found_by"):
        if getattr(scores, key).shape != (total,):
            problems.append(f"{key} has shape {getattr(scores, key).shape}, rows ({total},)")
    passages = scores.meta.get("collection", {}).get("passages")
    if total and passages is not None and (scores.rows.min() < 0
                                           or scores.rows.max() >= passages):
        problems.append(f"rows outside [0, {passages})")
    if problems:
        raise TeacherScoresError(f"{path}: inconsistent teacher-scores file: "
                                 + "; ".join(problems) + ".")


__all__ = ["FORMAT", "FORMAT_VERSION", "SOURCES", "TeacherScores", "TeacherScoresError",
           "from_candidates", "read_teacher_scores", "write_teacher_scores"]

