"""Candidates for distillation, mined from a collection and scored by a teacher.

Distilling a bi-encoder teacher into a student (RocketQAv2, Ren et al. 2021, Sec. 3.2; Margin-MSE,
Hofstätter et al. 2020) needs, for each training question, passages the student should learn to
order as the teacher does: here the union of the top ``depth`` of three searches over the same
collection, BM25 (`tt_zoo.evaluation.odqa.bm25_searcher`), the student's own dense search and
the teacher's (`tt_zoo.retrieval.search.ExactSearcher` over their passage embeddings, computed
once: `tt_zoo.evaluation.document_embeddings.encode_documents_to_file`). The student's own
top passages are the ones it ranks wrongly today (RocketQAv2 mines them so); the teacher's are
what it should rank; BM25's add lexical neighbours. Each candidate gets the teacher's score,
<phi_t(q), psi_t(d)>, and an answer flag (DPR's match, `tt_zoo.data.answer_passages`). The
result is a `tt_zoo.data.teacher_scores.TeacherScores`, written by ``tt-zoo teacher-scores``.

With a lexical weight w > 0 the teacher is a hybrid: BM25 fused with the dense teacher as the
convex combination of `tt_zoo.retrieval.fusion` ranks them (Bruch, Gai and Ingber, TOIS 2023;
min-max normalised over each search's own top ``depth``, a deeper candidate below 0), written on
the dense teacher's scale so a distillation temperature keeps its meaning
(`lexical_fusion`).
"""

from __future__ import annotations

import pathlib
import time
from typing import FrozenSet, List, Sequence

import numpy as np

from tt_zoo.data import answer_passages
from tt_zoo.data.passage_collection import Collection
from tt_zoo.data.question_sets import QuestionSet
from tt_zoo.data.teacher_scores import SOURCES, TeacherScores, from_candidates
from tt_zoo.errors import TtZooError

DEPTH = 100  # each search's top passages (DPR's BM25 top 100)
_QUERY_CHUNK = 1024  # questions per search call


def _identity(model) -> dict:
    from tt_zoo.evaluation.document_embeddings import model_tag  # noqa: PLC0415

    return {"name": model.name, "sha256": (getattr(model, "metadata", None) or {}).get("sha256"),
            "tag": model_tag(model)}


def _embeddings(name: str, embeddings, collection: Collection) -> np.ndarray:
    array = np.asarray(embeddings)
    if array.ndim != 2 or array.shape[0] != len(collection):
        raise TtZooError(f"build_teacher_scores: the {name}'s passage embeddings must be "
                         f"[{len(collection):,}, dim], one row per passage of the collection "
                         f"(got shape {array.shape}).")
    return array


def _min_max(values: np.ndarray, top: np.ndarray) -> np.ndarray:
    """`values` min-max normalised by the min and max of ``values[top]`` (0 where that is
    empty or flat)."""
    if not top.any():
        return np.zeros_like(values)
    low, high = values[top].min(), values[top].max()
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


def lexical_fusion(dense: np.ndarray, lexical: np.ndarray, found_by: np.ndarray,
                   weight: float) -> np.ndarray:
    """One question's candidates scored by the convex fusion
    ``w * minmax(BM25) + (1 - w) * minmax(dense)`` (`tt_zoo.retrieval.fusion`), each normalised
    over the candidates its own search found (`found_by` bits of `SOURCES`), and written on the
    dense scale: ``dense + w / (1 - w) * (max - min of dense) * minmax(BM25)``, which orders the
    candidates exactly as the convex score does (it is that score times (max - min of dense) /
    (1 - w), plus a constant) while keeping the dense teacher's spread, what the distillation
    temperature was set for. ``weight`` 0 returns `dense` unchanged."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"lexical_fusion: the lexical weight must lie in [0, 1) (got {weight}).")
    dense = np.asarray(dense, np.float64)
    if weight == 0.0:
        return dense.astype(np.float32)
    found_by = np.asarray(found_by)
    by_bm25 = (found_by >> SOURCES.index("bm25") & 1).astype(bool)
    by_teacher = (found_by >> SOURCES.index("teacher") & 1).astype(bool)
    spread = float(np.ptp(dense[by_teacher])) if by_teacher.any() else 0.0
    lexical = _min_max(np.asarray(lexical, np.float64), by_bm25)
    return (dense + weight / (1.0 - weight) * spread * lexical).astype(np.float32)


def build_teacher_scores(question_sets: Sequence[QuestionSet], collection: Collection, *,
                         teacher, student, teacher_embeddings, student_embeddings,
                         depth: int = DEPTH, answer_rows=None, bm25=None,
                         lexical_weight: float = 0.0, collection_source: str = "",
                         progress: bool = False, log=print) -> TeacherScores:
    """The teacher-scored candidates of every question of `question_sets`.

    Args:
      question_sets: the questions (`tt_zoo.data.question_sets.QuestionSet`s); every question is
        kept, with or without an answer in the collection (its candidates then have none).
      collection: the passages searched (`Collection`), in the rows of both embedding arrays.
      teacher, student: models with ``encode_queries`` and ``name`` (`tt_zoo.load`'s).
      teacher_embeddings, student_embeddings: `[len(collection), dim]` each model's passage
        embeddings psi(title, text) (e.g. a memory-mapped ``.npy``).
      depth: the top passages taken from each of the three searches.
      answer_rows: per set, per question, the rows holding an answer (e.g. cached); default
        `answer_passages.AnswerIndex` over the collection.
      bm25: a BM25 searcher over the collection's rows (default: built here).
      lexical_weight: w in [0, 1); above 0 each candidate's score is the hybrid teacher's,
        BM25 and the teacher fused (`lexical_fusion`), e.g. the convex weight chosen for that
        pair on validation questions.
      collection_source: what the collection was cut from, recorded.

    Returns:
      `TeacherScores`, each question's candidates best first.
    """
    from tt_zoo.evaluation import odqa  # noqa: PLC0415
    from tt_zoo.retrieval.search import ExactSearcher  # noqa: PLC0415

    start = time.perf_counter()
    if not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"build_teacher_scores: depth must be a positive int (got {depth!r}).")
    if not 0.0 <= lexical_weight < 1.0:
        raise ValueError("build_teacher_scores: lexical_weight must lie in [0, 1) (got "
                         f"{lexical_weight!r}).")
    teacher_passages = _embeddings("teacher", teacher_embeddings, collection)
    student_passages = _embeddings("student", student_embeddings, collection)
    questions = [q for s in question_sets for q in s.questions]
    set_of = [i for i, s in enumerate(question_sets) for _ in s.questions]
    if not questions:
        raise TtZooError("build_teacher_scores: the question sets "
                         f"{[s.name for s in question_sets]} hold no questions.")
    if answer_rows is None:
        index = answer_passages.AnswerIndex(collection.texts)
        rows_of: List[FrozenSet[int]] = index.rows_with_answers(questions)
    else:
        rows_of = [frozenset(r) for per_set in answer_rows for r in per_set]
        if len(rows_of) != len(questions):
            raise TtZooError(f"build_teacher_scores: {len(rows_of)} answer-row sets for "
                             f"{len(questions)} questions.")
    texts = [q.text for q in questions]
    log(f"Teacher scores: {len(texts):,} questions, top {depth} of BM25, {student.name} and "
        f"{teacher.name} over {len(collection):,} passages")
    teacher_queries = np.asarray(teacher.encode_queries(texts), np.float32)
    student_queries = np.asarray(student.encode_queries(texts), np.float32)
    for name, queries, passages in (("teacher", teacher_queries, teacher_passages),
                                    ("student", student_queries, student_passages)):
        if queries.shape[1] != passages.shape[1]:
            raise TtZooError(f"build_teacher_scores: the {name}'s queries are "
                             f"{queries.shape[1]}-dimensional, its passage embeddings "
                             f"{passages.shape[1]}-dimensional: embeddings of another model?")
    bm25 = bm25 if bm25 is not None else odqa.bm25_searcher(collection)
    searches = (
        (bm25, texts),
        (ExactSearcher(student_passages, collection.ids), student_queries),
        (ExactSearcher(teacher_passages, collection.ids), teacher_queries))
    found = []  # per source: [Q, <= depth] rows, -1 padded
    for (searcher, queries), source in zip(searches, SOURCES):
        t = time.perf_counter()
        found.append(np.concatenate([
            np.asarray(searcher.search(queries[i:i + _QUERY_CHUNK], depth).rows)
            for i in range(0, len(texts), _QUERY_CHUNK)]))
        log(f"  {source}: top {depth} in {time.perf_counter() - t:.0f} s")
    union = []
    for i in range(len(questions)):
        bits = {}
        for bit, rows in enumerate(found):
            for r in rows[i]:
                if r >= 0:
                    bits[int(r)] = bits.get(int(r), 0) | (1 << bit)
        union.append(bits)
    rows_each = [np.fromiter(bits, np.int64, len(bits)) for bits in union]
    lexical = bm25.scores_at(texts, rows_each) if lexical_weight else None
    candidates = []
    for i, (bits, rows) in enumerate(zip(union, rows_each)):
        found_by = np.fromiter((bits[int(r)] for r in rows), np.uint8, len(rows))
        scores = np.asarray(teacher_passages[rows], np.float32) @ teacher_queries[i]
        if lexical is not None:
            scores = lexical_fusion(scores, lexical[i], found_by, lexical_weight)
        candidates.append((rows, scores, np.array([int(r) in rows_of[i] for r in rows], bool),
                           found_by))
    meta = {"teacher": _identity(teacher), "student": _identity(student),
            "collection": {"passages": len(collection),
                           "sha256": collection.fingerprint().hexdigest(),
                           "source": collection_source},
            "depth": {source: int(depth) for source in SOURCES},
            "question_sets": [s.name for s in question_sets],
            "score": "dot product of the teacher's query and passage embeddings" if not
            lexical_weight else "the teacher's dot product fused with BM25 (convex, lexical "
            f"weight {lexical_weight}), on the teacher's scale", "lexical_weight": lexical_weight}
    scores = from_candidates([q.text for q in questions], set_of, candidates, meta)
    log(f"Teacher scores: {scores.summary()} ({time.perf_counter() - start:.0f} s)")
    return scores


def passage_embeddings(model, collection: Collection, path, *, flag: str = "",
                       progress: bool = False, log=print) -> np.ndarray:
    """`model`'s passage embeddings of `collection` in the ``.npy`` at `path`
    (`encode_documents_to_file`): read when complete, finished when cut off, encoded when
    missing. A file recorded (in its ``.json`` beside it) as another model's, or of another
    shape, is refused with a `TtZooError` naming `flag` and the file, never overwritten; a bare
    ``.npy`` without that record is taken when its shape fits, and said."""
    from tt_zoo.atomic_io import read_json  # noqa: PLC0415
    from tt_zoo.evaluation.document_embeddings import (encode_documents_to_file,  # noqa: PLC0415
                                                       model_tag)

    path = pathlib.Path(path)
    where = f"{flag} {path}".strip()
    shape = [len(collection), int(model.keras_model.embedding_dim)]
    state_path = path.with_suffix(".json")
    if state_path.is_file():
        state = read_json(state_path)
        if state.get("encoder") != model_tag(model) or state.get("shape") != shape:
            raise TtZooError(f"{where}: its record {state_path} says it holds the embeddings of "
                             f"{state.get('model')} (encoder {state.get('encoder')}, shape "
                             f"{state.get('shape')}), not {model.name}'s of these "
                             f"{shape[0]:,} passages (encoder {model_tag(model)}, shape {shape}).")
    elif path.is_file():
        array = np.load(path, mmap_mode="r")
        if list(array.shape) != shape:
            raise TtZooError(f"{where}: holds an array of shape {list(array.shape)}, not "
                             f"{shape} ({model.name}'s embeddings of these passages).")
        log(f"{where}: no record of the model that encoded it beside it; taken as "
            f"{model.name}'s by its shape {shape}")
        return array
    else:
        log(f"{where}: encoding {shape[0]:,} passages with {model.name} (resumable)")
    return encode_documents_to_file(model, collection.texts, collection.titles, path,
                                    progress=progress)


__all__ = ["DEPTH", "build_teacher_scores", "lexical_fusion", "passage_embeddings"]

