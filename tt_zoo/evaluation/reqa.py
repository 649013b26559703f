"""ReQA: sentence-level retrieval question answering built from SQuAD-format data.

Implements the benchmark of Ahmad et al. 2019 (*ReQA: An Evaluation for End-to-End Answer
Retrieval Models*) as Chang et al. 2020 (Sec. 4.1) use it: every SQuAD entry (question, answer,
passage) becomes (q, s, p) where s is the sentence of p that holds the answer; the candidates are
all (sentence, passage) pairs of all passages, and a hit is the gold (s, p) pair only. Fine-tuning
splits are "cold start" splits of the questions (1% / 5% / 80% for training, 10% of the training
part held out for validation; Chang et al. 2020, Sec. 4.1).

Example:

>>> reqa = build_reqa("dev-v1.1.json")            # doctest: +SKIP
>>> split = make_splits(reqa, 0.01, seed=0)       # doctest: +SKIP
>>> pairs = training_pairs(reqa, split.train)     # doctest: +SKIP
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import json
import pathlib
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from tt_zoo.data import features
from tt_zoo.atomic_io import write_json
from tt_zoo.errors import TtZooError
from tt_zoo.data.passages import sentence_spans
from tt_zoo.data.text_files import Texts

SPLIT_FORMAT_VERSION = 1


class ReQAFormatError(TtZooError):
    """A SQuAD-format input that cannot become a ReQA example; the message names where.

    ``reason`` is a short key (e.g. "missing_field") used to count skipped inputs.
    """

    def __init__(self, message: str, reason: str = "invalid"):
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Question:
    """A ReQA question.

    Args:
      id: the SQuAD question id.
      text: the question text.
      gold_index: index into ``ReQA.candidates`` of the (sentence, passage) holding its answer.
      answers: the texts of its SQuAD answers (the first one placed the gold sentence); mining
        hard negatives skips candidates that contain one (`tt_zoo.mining.hard_negatives`).
    """

    id: str
    text: str
    gold_index: int
    answers: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A ReQA candidate: one sentence in its passage (the document is the pair).

    Args:
      sentence: the sentence text (a span of the passage).
      passage: the full passage (SQuAD "context").
      passage_index: index of the passage among the distinct passages.
    """

    sentence: str
    passage: str
    passage_index: int


@dataclasses.dataclass
class ReQAReport:
    """What the builder read, merged and skipped.

    ``skipped_questions`` counts questions dropped by reason (only with ``on_error="skip"``);
    ``skipped_paragraphs`` counts paragraphs dropped whole (an empty passage, a missing field).
    """

    articles: int = 0
    paragraphs: int = 0
    passages: int = 0
    sentences: int = 0
    duplicate_candidates: int = 0
    questions: int = 0
    skipped_questions: Dict[str, int] = dataclasses.field(default_factory=collections.Counter)
    skipped_paragraphs: Dict[str, int] = dataclasses.field(default_factory=collections.Counter)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["skipped_questions"] = dict(sorted(self.skipped_questions.items()))
        d["skipped_paragraphs"] = dict(sorted(self.skipped_paragraphs.items()))
        return d


@dataclasses.dataclass
class ReQA:
    """A ReQA benchmark: questions, the deduplicated candidates, and the build report."""

    questions: List[Question]
    candidates: List[Candidate]
    report: ReQAReport
    source: str = ""

    def __post_init__(self):
        self._by_id = {q.id: q for q in self.questions}

    @property
    def question_ids(self) -> List[str]:
        return [q.id for q in self.questions]

    def question(self, question_id: str) -> Question:
        """Returns the question with this id; raises KeyError naming the id when absent."""
        try:
            return self._by_id[question_id]
        except KeyError:
            raise KeyError(f"Question id {question_id!r} is not in this ReQA "
                           f"({len(self.questions)} questions from {self.source or 'memory'}).")

    def questions_for(self, question_ids: Iterable[str] | None) -> List[Question]:
        """The questions for these ids (all questions for None), in the order given."""
        if question_ids is None:
            return list(self.questions)
        return [self.question(qid) for qid in question_ids]

    def candidate_passages(self) -> Texts:
        """The candidates as a corpus of passages (what `tt-zoo export --corpus squad`
        indexes): each passage titled with its sentence, its id its position."""
        return Texts([c.passage for c in self.candidates], [c.sentence for c in self.candidates],
                     None, self.source)

    def summary(self) -> str:
        r = self.report
        return (f"ReQA({self.source or 'memory'}): {len(self.questions):,} questions, "
                f"{len(self.candidates):,} candidates ({r.passages:,} passages, "
                f"{r.duplicate_candidates:,} duplicate (sentence, passage) pairs merged); "
                f"skipped questions: {dict(r.skipped_questions) or 'none'}")


def _require(obj, key, where, expected_type=None):
    if not isinstance(obj, dict) or key not in obj:
        raise ReQAFormatError(f"{where}: missing field {key!r}.", "missing_field")
    value = obj[key]
    if expected_type is not None and not isinstance(value, expected_type):
        raise ReQAFormatError(f"{where}: field {key!r} must be {expected_type.__name__} "
                              f"(got {type(value).__name__}: {value!r:.80}).", "wrong_type")
    return value


def build_reqa_from_squad(squad: dict, *, on_error: str = "raise", source: str = "") -> ReQA:
    """Builds ReQA from a SQuAD-format object (``{"data": [{"title", "paragraphs": [...]}]}``).

    See ``build_reqa`` for the rules.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip' (got {on_error!r}).")
    where_file = source or "SQuAD object"
    articles = _require(squad, "data", where_file, list)
    report = ReQAReport()
    candidates: List[Candidate] = []
    candidate_index: Dict[tuple, int] = {}
    passage_index: Dict[str, int] = {}
    questions: List[Question] = []
    seen_ids = set()

    def fail(error: ReQAFormatError, counter):
        if on_error == "raise":
            raise error
        counter[error.reason] += 1

    for a, article in enumerate(articles):
        report.articles += 1
        where_article = f"{where_file}: article {a}"
        try:
            paragraphs = _require(article, "paragraphs", where_article, list)
        except ReQAFormatError as e:
            fail(e, report.skipped_paragraphs)
            continue
        for p, paragraph in enumerate(paragraphs):
            report.paragraphs += 1
            where_par = f"{where_article} ({article.get('title', '?')!r}), paragraph {p}"
            try:
                context = _require(paragraph, "context", where_par, str)
                qas = _require(paragraph, "qas", where_par, list)
            except ReQAFormatError as e:
                fail(e, report.skipped_paragraphs)
                continue
            spans = sentence_spans(context)
            if not spans:
                n = len(qas)
                if on_error == "raise":
                    ids = [q.get("id", "?") for q in qas if isinstance(q, dict)]
                    raise ReQAFormatError(f"{where_par}: empty passage (question ids {ids}).",
                                          "empty_passage")
                report.skipped_paragraphs["empty_passage"] += 1
                if n:
                    report.skipped_questions["empty_passage"] += n
                continue
            # Every (sentence, passage) pair is a candidate, deduplicated by text.
            if context not in passage_index:
                passage_index[context] = len(passage_index)
                report.passages += 1
            span_candidates = []
            for start, end in spans:
                sentence = context[start:end]
                key = (sentence, context)
                report.sentences += 1
                if key in candidate_index:
                    report.duplicate_candidates += 1
                else:
                    candidate_index[key] = len(candidates)
                    candidates.append(Candidate(sentence, context, passage_index[context]))
                span_candidates.append(candidate_index[key])
            starts = [s for s, _ in spans]
            for i, qa in enumerate(qas):
                where_q = f"{where_par}, question {i}"
                try:
                    qid = _require(qa, "id", where_q, str)
                    where_q = f"question id {qid!r} ({where_par})"
                    text = _require(qa, "question", where_q, str)
                    answers = _require(qa, "answers", where_q, list)
                    if not answers:
                        raise ReQAFormatError(f"{where_q}: no answers.", "no_answers")
                    answer = answers[0]
                    answer_start = _require(answer, "answer_start", where_q + ", answer 0", int)
                    answer_text = _require(answer, "text", where_q + ", answer 0", str)
                    if not 0 <= answer_start < len(context):
                        raise ReQAFormatError(
                            f"{where_q}: answer_start {answer_start} is outside its passage "
                            f"(length {len(context)}).", "answer_outside_passage")
                    if context[answer_start:answer_start + len(answer_text)] != answer_text:
                        raise ReQAFormatError(
                            f"{where_q}: answer text {answer_text!r:.60} does not match the "
                            f"passage at answer_start {answer_start} "
                            f"({context[answer_start:answer_start + len(answer_text)]!r:.60}).",
                            "answer_text_mismatch")
                    if not text.strip():
                        raise ReQAFormatError(f"{where_q}: empty question text.", "empty_question")
                    if qid in seen_ids:
                        raise ReQAFormatError(f"{where_q}: duplicate question id.", "duplicate_id")
                    # The answer's first non-space character places it in a sentence.
                    pos = answer_start
                    while pos < len(context) - 1 and context[pos].isspace():
                        pos += 1
                    s = bisect.bisect_right(starts, pos) - 1
                    if s < 0 or pos >= spans[s][1]:
                        raise ReQAFormatError(
                            f"{where_q}: answer_start {answer_start} falls between sentences "
                            f"(sentence spans {spans}).", "answer_between_sentences")
                except ReQAFormatError as e:
                    fail(e, report.skipped_questions)
                    continue
                seen_ids.add(qid)
                texts = tuple(a["text"] for a in answers
                              if isinstance(a, dict) and isinstance(a.get("text"), str))
                questions.append(Question(qid, text, span_candidates[s], texts))
    report.questions = len(questions)
    return ReQA(questions, candidates, report, source=source)


def build_reqa(squad_json_path, *, on_error: str = "raise") -> ReQA:
    """Builds ReQA (Ahmad et al. 2019) from a SQuAD v1.1-format JSON file.

    Each passage is split into sentences (`tt_zoo.data.passages.sentence_spans`, blingfire); every
    (sentence, passage) pair is a candidate, deduplicated (the same sentence text in the same
    passage text is one candidate, wherever it occurs); each question's gold candidate is the
    sentence whose span holds its
    first answer's ``answer_start``. Natural Questions converted to SQuAD format works the same.

    Args:
      squad_json_path: path to the JSON file.
      on_error: "raise" raises ``ReQAFormatError`` naming the question id (or article and
        paragraph index) for a missing field, an answer offset outside its passage or not
        matching the answer text, an empty passage, a duplicate id; "skip" drops the question
        (or paragraph) and counts it in ``report.skipped_questions`` by reason.
    """
    path = pathlib.Path(squad_json_path)
    if not path.exists():
        raise FileNotFoundError(f"SQuAD file {path} does not exist.")
    try:
        with open(path, encoding="utf-8") as f:
            squad = json.load(f)
    except json.JSONDecodeError as e:
        raise ReQAFormatError(f"{path}: not valid JSON ({e}).") from e
    return build_reqa_from_squad(squad, on_error=on_error, source=str(path))


def squad_rows_to_json(rows: Iterable[dict]) -> dict:
    """Converts Hugging Face ``squad`` rows to the SQuAD v1.1 JSON structure.

    Rows have ``id, title, context, question, answers={"text": [...], "answer_start": [...]}``;
    rows with the same title become one article and, within it, rows with the same context one
    paragraph (in first-seen order).
    """
    data: List[dict] = []
    titles: Dict[str, dict] = {}
    paragraphs: Dict[tuple, dict] = {}
    for row in rows:
        title, context = row["title"], row["context"]
        if title not in titles:
            titles[title] = {"title": title, "paragraphs": []}
            data.append(titles[title])
        if (title, context) not in paragraphs:
            paragraphs[(title, context)] = {"context": context, "qas": []}
            titles[title]["paragraphs"].append(paragraphs[(title, context)])
        answers = [{"text": t, "answer_start": int(s)}
                   for t, s in zip(row["answers"]["text"], row["answers"]["answer_start"])]
        paragraphs[(title, context)]["qas"].append(
            {"id": row["id"], "question": row["question"], "answers": answers})
    return {"version": "1.1", "data": data}


def load_squad_from_hf(split: str = "validation", *, on_error: str = "raise") -> ReQA:
    """Builds ReQA from Hugging Face ``datasets.load_dataset("squad", split=split)``.

    Needs network access (or a populated ``datasets`` cache); the offline path is ``build_reqa``.
    """
    import datasets  # Lazy: heavy import, only for this path.

    rows = datasets.load_dataset("squad", split=split)
    return build_reqa_from_squad(squad_rows_to_json(rows), on_error=on_error,
                                 source=f"hf:squad/{split}")


@dataclasses.dataclass
class Split:
    """A cold-start split of question ids (a test question is never seen in training).

    Args:
      train, validation, test: disjoint lists of question ids.
      meta: how it was made (fractions, seed, number of questions, source).
    """

    train: List[str]
    validation: List[str]
    test: List[str]
    meta: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        _check_disjoint(self.train, self.validation, self.test, where="Split")


def _check_disjoint(train, validation, test, where):
    parts = {"train": train, "validation": validation, "test": test}
    for name, ids in parts.items():
        if len(set(ids)) != len(ids):
            dup = [i for i, c in collections.Counter(ids).items() if c > 1][:5]
            raise ValueError(f"{where}: {name} has repeated question ids, e.g. {dup}.")
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        common = set(parts[a]) & set(parts[b])
        if common:
            raise ValueError(f"{where}: {a} and {b} share question ids, e.g. {sorted(common)[:5]}.")


def make_splits(reqa: ReQA, train_fraction: float, *, seed: int = 0,
                validation_fraction: float = 0.1) -> Split:
    """Splits the questions "cold start": by question, seeded.

    ``round(train_fraction * n)`` questions form the training part (the paper's 1% / 5% / 80%),
    of which ``round(validation_fraction * that)`` are held out for validation; the rest of the
    questions are the test set (Chang et al. 2020, Sec. 4.1).
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1) (got {train_fraction}).")
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must be in [0, 1) (got {validation_fraction}).")
    ids = reqa.question_ids
    n = len(ids)
    n_train_part = int(round(train_fraction * n))
    n_val = int(round(validation_fraction * n_train_part))
    if n_train_part - n_val < 1 or n_train_part >= n:
        raise ValueError(
            f"train_fraction {train_fraction} of {n} questions leaves {n_train_part - n_val} "
            f"training and {n - n_train_part} test questions; both must be at least 1.")
    order = np.random.default_rng(seed).permutation(n)
    shuffled = [ids[i] for i in order]
    meta = {"train_fraction": train_fraction, "validation_fraction": validation_fraction,
            "seed": seed, "num_questions": n, "source": reqa.source}
    return Split(train=shuffled[:n_train_part - n_val],
                 validation=shuffled[n_train_part - n_val:n_train_part],
                 test=shuffled[n_train_part:], meta=meta)


def save_split(split: Split, path) -> None:
    """Writes the split as JSON (to a temp file, then renamed)."""
    obj = {"format_version": SPLIT_FORMAT_VERSION, "meta": split.meta, "train": split.train,
           "validation": split.validation, "test": split.test}
    write_json(path, obj, indent=1)


def load_split(path) -> Split:
    """Reads a split written by ``save_split``; raises ValueError naming the file when malformed."""
    path = pathlib.Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"Split file {path}: not valid JSON ({e}).") from e
    if not isinstance(obj, dict):
        raise ValueError(f"Split file {path}: expected a JSON object (got {type(obj).__name__}).")
    parts = {}
    for name in ("train", "validation", "test"):
        ids = obj.get(name)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"Split file {path}: {name!r} must be a list of question-id strings.")
        parts[name] = ids
    _check_disjoint(parts["train"], parts["validation"], parts["test"], where=f"Split file {path}")
    return Split(meta=obj.get("meta", {}), **parts)


def evaluation_questions(reqa: ReQA, *, split_file=None, train_fraction: Optional[float] = None,
                         seed: int = 0, split_out=None,
                         limit: Optional[int] = None) -> Tuple[List[str], str]:
    """The ids of the questions to score and where they come from, in words: the test part of
    `split_file` (`load_split`), or of a new cold-start split with `train_fraction` and `seed`
    (`make_splits`, saved to `split_out` if given), else all questions; the first `limit` of
    them when given."""
    if split_file:
        split = load_split(split_file)
        ids, where = split.test, f"test part of {split_file}"
    elif train_fraction is not None:
        split = make_splits(reqa, train_fraction, seed=seed)
        if split_out:
            save_split(split, split_out)
        ids = split.test
        where = f"test part of a {train_fraction:g} cold-start split, seed {seed}"
    else:
        ids, where = reqa.question_ids, "all questions"
    if limit:
        ids = ids[:limit]
        where += f", first {len(ids)}"
    return ids, where


def training_examples(reqa: ReQA, question_ids: Sequence[str]) -> Dict[str, List[str]]:
    """Columns of (question, gold sentence, gold passage, gold candidate id) for these questions."""
    cols = {features.QUERY: [], features.DOC_TITLE: [], features.DOC_TEXT: [],
            features.DOC_ID: []}
    for q in reqa.questions_for(question_ids):
        c = reqa.candidates[q.gold_index]
        cols[features.QUERY].append(q.text)
        cols[features.DOC_TITLE].append(c.sentence)
        cols[features.DOC_TEXT].append(c.passage)
        cols[features.DOC_ID].append(str(q.gold_index))
    return cols


def training_pairs(reqa: ReQA, question_ids: Sequence[str]):
    """A ``tf.data.Dataset`` of ReQA fine-tuning pairs, one per question, unbatched.

    Each element is a dict of scalar ``tf.string`` with the keys of ``tt_zoo.data.features``:
    QUERY = question, DOC_TITLE = gold sentence, DOC_TEXT = gold passage, DOC_ID = gold
    candidate index (so identical documents are recognised as accidental hits).
    """
    import tensorflow as tf  # Lazy: building the benchmark needs no TensorFlow.

    cols = training_examples(reqa, question_ids)
    if not cols[features.QUERY]:
        raise ValueError("training_pairs: no question ids given.")
    return tf.data.Dataset.from_tensor_slices(
        {k: tf.constant(v, dtype=tf.string) for k, v in cols.items()})
