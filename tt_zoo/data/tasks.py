"""Retrieval tasks as data: the unit of multi-task training (Maillard et al. 2021, Sec. 3-4).

Multi-task DPR trains one retriever on the union of several tasks' training sets. Each task is
a set of (query, positive passages, one "hard confounder") examples over a knowledge source,
plus the questions it is validated on. Here a `Task` holds exactly that, in plain Python (no
TensorFlow), so any source can produce one:

* QA over Wikispeedia passages (WebQuestions, CuratedTREC): positives found by answer match in
  BM25's top passages, as DPR builds its NQ/TriviaQA training data
  (`tt_zoo.mining.task_sources.qa_task`);
* ReQA-SQuAD(dev) cold-start splits: the gold (sentence, passage) candidate
  (`task_sources.reqa_task`);
* self-supervised pair sets (ICT/BFS/WLP, crop, span, qgen; `task_sources.pair_task`);
* any JSONL file of ``{"query", "positives", "negatives"?, "answers"?}`` (`read_task_jsonl`).

**Task classes and markers.** Maillard et al. (Sec. 4.3) try one marker token per *task class*
(QA, fact checking, ...) prepended to the query. A marker here is a lower-case alphanumeric word
(`marker_token`): WordPiece matches a whole vocabulary entry before any piece of it, so once the
word is added to the vocabulary (`tt_zoo.training.multi_task.add_task_markers`) it tokenizes to
exactly one id, in training and in an exported SavedModel alike, and a user marks a query by
prepending the word (`with_marker`).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
from typing import Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from tt_zoo.atomic_io import open_for_replace
from tt_zoo.data.inputs import open_input
from tt_zoo.data.task_choices import BATCHING, QUERY_TOWERS  # noqa: F401 (named here too)
from tt_zoo.errors import TtZooError

TASK_CLASSES = ("qa", "self_supervised")
_MARKER_PREFIX = "ttzootask"
_CLASS_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class TaskFormatError(TtZooError):
    """A task JSONL file is missing, empty or holds a malformed line; the message names the
    file, the line number and what was expected (`read_task_jsonl`)."""


def text_document_id(title: str, text: str) -> str:
    """The id of a document given without one: its title and text joined by a unit separator
    (U+001F), the rule of `tt_zoo.modeling.pair_model.text_document_ids` in Python, so the same
    document gets the same id in a task file and in a training batch."""
    return f"{title}\x1f{text}"


@dataclasses.dataclass(frozen=True)
class Document:
    """A passage of the knowledge source: its id (accidental hits are judged by it), title, text."""

    id: str
    title: str
    text: str


@dataclasses.dataclass(frozen=True)
class TaskExample:
    """One training example: a query, its positive passages (the first is trained on, DPR's
    rule), its hard confounders (Maillard et al. keep one) and, for QA, the answers that make
    a passage a positive (a re-mined confounder must hold none of them)."""

    query: str
    positives: Tuple[Document, ...]
    negatives: Tuple[Document, ...] = ()
    answers: Tuple[str, ...] = ()
    answer_regex: Optional[str] = None

    @property
    def positive(self) -> Document:
        return self.positives[0]


@dataclasses.dataclass(frozen=True)
class Task:
    """A task of multi-task training (Maillard et al. 2021, Sec. 3).

    Args:
      name: unique within a training run (e.g. "webquestions").
      task_class: what kind of task it is ("qa", "self_supervised", or any lower-case word);
        one marker token per class (`marker_token`).
      examples: the training examples.
      knowledge_source: what the passages are (e.g. "wikispeedia, 100-word passages").
      validation: the question sets it is validated on (names), never trained on.
      stats: how the examples were made (e.g. how many questions got a positive).
    """

    name: str
    task_class: str
    examples: Tuple[TaskExample, ...]
    knowledge_source: str = ""
    validation: Tuple[str, ...] = ()
    stats: Dict[str, object] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"Task name must be a non-empty string (got {self.name!r}).")
        check_task_class(self.task_class)
        if not self.examples:
            raise ValueError(f"Task {self.name!r} has no training examples.")

    def __len__(self) -> int:
        return len(self.examples)

    def subsample(self, n: int, seed: int = 0) -> "Task":
        """The few-shot version: n examples drawn without replacement (seeded), in their order.
        n >= len(self) returns the task itself."""
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"subsample: n must be a positive int (got {n!r}).")
        if n >= len(self.examples):
            return self
        keep = np.sort(np.random.default_rng(seed).choice(len(self.examples), n, replace=False))
        return dataclasses.replace(
            self, examples=tuple(self.examples[i] for i in keep),
            stats={**self.stats, "subsample": {"examples": int(n), "of": len(self.examples),
                                               "seed": int(seed)}})

    def one_example_per_positive(self, limit: int) -> "Task":
        """Each example's first `limit` positives as examples of their own (same query,
        confounders and answers): more pairs from the same questions where a question has
        several answer-holding passages (DPR trains on the first only: limit 1 keeps the task
        as it is)."""
        if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"one_example_per_positive: limit must be a positive int "
                             f"(got {limit!r}).")
        if limit == 1:
            return self
        examples = tuple(dataclasses.replace(e, positives=(p,))
                         for e in self.examples for p in e.positives[:limit])
        return dataclasses.replace(
            self, examples=examples,
            stats={**self.stats, "positives_per_question": {
                "limit": int(limit), "questions": len(self.examples),
                "examples": len(examples)}})

    def with_negatives(self, negatives: Sequence[Sequence[Document]], how: str) -> "Task":
        """The same task with each example's confounders replaced (e.g. re-mined by a trained
        model, Maillard et al. Sec. 4.4); `how` is recorded in the stats."""
        if len(negatives) != len(self.examples):
            raise ValueError(f"Task {self.name!r}: {len(negatives)} negative lists for "
                             f"{len(self.examples)} examples.")
        return dataclasses.replace(
            self, examples=tuple(dataclasses.replace(e, negatives=tuple(n))
                                 for e, n in zip(self.examples, negatives)),
            stats={**self.stats, "negatives": how})

    def describe(self) -> dict:
        """What a card or a results table records of the task."""
        return {"name": self.name, "task_class": self.task_class,
                "examples": len(self.examples), "knowledge_source": self.knowledge_source,
                "validation": list(self.validation), "stats": dict(self.stats)}


def check_task_class(task_class: str) -> str:
    if not isinstance(task_class, str) or not _CLASS_NAME.match(task_class):
        raise ValueError(f"task class must be a lower-case word such as {TASK_CLASSES} "
                         f"(got {task_class!r}).")
    return task_class


def marker_token(task_class: str) -> str:
    """The marker word of a task class: ``ttzootaskqa`` for "qa" (underscores dropped, so the
    word is one WordPiece token once in the vocabulary)."""
    return _MARKER_PREFIX + check_task_class(task_class).replace("_", "")


def with_marker(query: str, task_class: str) -> str:
    """The query as a model trained with task markers expects it: the marker word first."""
    return f"{marker_token(task_class)} {query}"


# ------------------------------------------------------------------------- task JSONL files

_EXAMPLE_KEYS = ("query", "positives", "negatives", "answers", "answer_regex")
_DOCUMENT_KEYS = ("title", "text", "id")
_DOCUMENTS = '({"title", "text", "id"?} or strings)'
_TASK_FILE_SUFFIX = re.compile(r"(\.jsonl|\.json)?(\.gz|\.bz2)?$", re.IGNORECASE)


class _LineError(Exception):
    """What is wrong with one line; `read_task_jsonl` adds the file and line number."""


def read_task_jsonl(path, *, name: Optional[str] = None, task_class: str = "qa",
                    knowledge_source: str = "", validation: Sequence[str] = ()) -> Task:
    """Reads a task from JSON Lines: one training example per line (Maillard et al. 2021,
    Sec. 3: a query, its positive passages, its hard confounders), as DPR's training files
    hold them::

        {"query": "who wrote hamlet",
         "positives": [{"title": "Hamlet", "text": "... by Shakespeare ...", "id": "p17"}],
         "negatives": ["a bare string is a passage with an empty title"],
         "answers": ["Shakespeare"], "answer_regex": null}

    ``positives`` is a non-empty list of documents, ``negatives`` (default none) a list of
    documents, ``answers`` (default none) a list of strings, ``answer_regex`` (default null) a
    Python regular expression. A document is ``{"title": str, "text": str, "id": str?}`` or a
    bare string (its text, with an empty title); a document without an id gets
    `text_document_id` (title + U+001F + text), the id a training batch gives it. Blank lines
    are skipped; unknown keys are refused (a misspelt ``"negative"`` would otherwise drop the
    confounders silently). The file may be gzip- or bzip2-compressed.

    Args:
      path: the local ``.jsonl`` file.
      name: the task's name; defaults to the file name without ``.jsonl`` (and ``.gz``).
      task_class: e.g. "qa" or "self_supervised" (`Task`).
      knowledge_source: what the passages are.
      validation: the question sets the task is validated on.

    Raises:
      TaskFormatError: the file is missing or has no example, or a line is not valid JSON or
        not an example; the message names the file, the line number and what was expected.
    """
    check_task_class(task_class)
    if isinstance(validation, str):
        raise TypeError(f"validation must be a sequence of names, not a single string "
                        f"({validation!r}).")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise TaskFormatError(f"Task file {path} does not exist or is not a file.")
    examples = []
    with open_input(path, progress=False) as (stream, _):
        for line_number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            try:
                examples.append(_example_from_line(raw))
            except _LineError as error:
                raise TaskFormatError(f"{path}:{line_number}: {error}") from error
    if not examples:
        raise TaskFormatError(f"Task file {path} holds no examples (expected one JSON object "
                              f"per line with {{\"query\", \"positives\"}}).")
    if name is None:
        name = _TASK_FILE_SUFFIX.sub("", os.path.basename(path)) or os.path.basename(path)
    return Task(name=name, task_class=task_class, examples=tuple(examples),
                knowledge_source=knowledge_source, validation=tuple(validation),
                stats={"file": path})


def write_task_jsonl(task: Task, path) -> str:
    """Writes `task`'s examples in the format of `read_task_jsonl`, every field spelt out
    (documents as ``{"id", "title", "text"}``, ids included), so reading the file back gives
    the same examples. The task's name, class and stats are not stored: they are arguments of
    `read_task_jsonl`.

    The file is written to a temp name beside `path` and renamed over it
    (`tt_zoo.atomic_io.open_for_replace`): `path` is this function's output, so an existing
    file there is replaced, and an interrupted write leaves it as it was. A path ending in
    ``.gz`` is gzip-compressed. Returns `path`.
    """
    path = os.fspath(path)
    with open_for_replace(path, "wb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.endswith(".gz") else raw
        with stream:
            for example in task.examples:
                line = json.dumps(_example_to_json(example), ensure_ascii=False)
                stream.write(line.encode("utf-8") + b"\n")
    return path


def _example_to_json(example: TaskExample) -> dict:
    return {"query": example.query,
            "positives": [_document_to_json(d) for d in example.positives],
            "negatives": [_document_to_json(d) for d in example.negatives],
            "answers": list(example.answers),
            "answer_regex": example.answer_regex}


def _document_to_json(document: Document) -> dict:
    return {"id": document.id, "title": document.title, "text": document.text}


def _example_from_line(raw: bytes) -> TaskExample:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _LineError(f"not UTF-8 ({error})") from error
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as error:
        raise _LineError(f"not valid JSON ({error})") from error
    if not isinstance(obj, dict):
        raise _LineError(f"expected a JSON object with {{\"query\", \"positives\"}} "
                         f"(got {type(obj).__name__})")
    unknown = sorted(set(obj) - set(_EXAMPLE_KEYS))
    if unknown:
        raise _LineError(f"unknown key(s) {unknown}; an example has the keys {list(_EXAMPLE_KEYS)}")
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        raise _LineError(f"'query' must be a non-empty string (got {query!r})")
    positives = obj.get("positives")
    if not isinstance(positives, list) or not positives:
        raise _LineError(f"'positives' must be a non-empty list of documents {_DOCUMENTS} "
                         f"(got {_shorten(positives)})")
    negatives = obj.get("negatives", [])
    if not isinstance(negatives, list):
        raise _LineError(f"'negatives' must be a list of documents {_DOCUMENTS} "
                         f"(got {_shorten(negatives)})")
    answers = obj.get("answers", [])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise _LineError(f"'answers' must be a list of strings (got {_shorten(answers)})")
    answer_regex = obj.get("answer_regex")
    if answer_regex is not None:
        if not isinstance(answer_regex, str):
            raise _LineError(f"'answer_regex' must be a string or null (got {answer_regex!r})")
        try:
            re.compile(answer_regex)
        except re.error as error:
            raise _LineError(f"'answer_regex' {answer_regex!r} is not a valid Python regular "
                             f"expression ({error})") from error
    return TaskExample(query=query,
                       positives=_documents(positives, "positives"),
                       negatives=_documents(negatives, "negatives"),
                       answers=tuple(answers), answer_regex=answer_regex)


def _documents(values: Iterable, key: str) -> Tuple[Document, ...]:
    return tuple(_document(v, f"'{key}'[{i}]") for i, v in enumerate(values))


def _document(value, where: str) -> Document:
    if isinstance(value, str):
        return Document(id=text_document_id("", value), title="", text=value)
    expected = '{"title": str, "text": str, "id": str?} or a string'
    if not isinstance(value, dict):
        raise _LineError(f"{where} must be a document {expected} (got {_shorten(value)})")
    unknown = sorted(set(value) - set(_DOCUMENT_KEYS))
    if unknown:
        raise _LineError(f"{where} has unknown key(s) {unknown}; a document is {expected}")
    for field in ("title", "text"):
        if not isinstance(value.get(field), str):
            raise _LineError(f"{where}[{field!r}] must be a string (got "
                             f"{_shorten(value.get(field))}); a document is {expected}")
    doc_id = value.get("id")
    if doc_id is None:
        doc_id = text_document_id(value["title"], value["text"])
    elif not isinstance(doc_id, str) or not doc_id:
        raise _LineError(f"{where}['id'] must be a non-empty string when given (got {doc_id!r})")
    return Document(id=doc_id, title=value["title"], text=value["text"])


def _shorten(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
