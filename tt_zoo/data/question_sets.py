"""Open-domain QA question sets: factoid questions and their answers, as DPR (Karpukhin et al.
2020, Sec. 5.1) evaluates on them and as training (multi-task QA tasks, query adaptation) reads
them; `tt_zoo.evaluation.odqa` scores answer recall over them.

Questions: WebQuestions (Berant et al. 2013) JSON ``[{"qId", "qText", "answers"}]``, CuratedTREC
TSV ``id, type, question, answer regex``, or any JSONL of ``{"question", "answers" |
"answer_regex"}``. Named sets resolve under ``$TT_ZOO_DATA/odqa``; the splits:

* validation = ``webquestions-val`` + ``curatedtrec-train`` (:data:`VALIDATION`): choose
  settings on these, never train on them;
* ``webquestions-trainmodel`` may be trained on (:data:`TRAIN`); ``webquestions-devtest`` is for
  final checks;
* the test splits of both are deliberately absent and measured elsewhere.

A question whose regular expression does not compile (under :data:`REGEX_FLAGS`, as answers are
matched) is reported in :attr:`QuestionSet.skipped` and left out, never fatal.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import Optional, Tuple

from tt_zoo.errors import TtZooError

NAMED_SETS = {
    "webquestions-trainmodel": "webquestions/trainmodel.json",
    "webquestions-val": "webquestions/val.json",
    "webquestions-devtest": "webquestions/devtest.json",
    "curatedtrec-train": "curatedtrec/curated-train.tsv",
}
VALIDATION = ("webquestions-val", "curatedtrec-train")
TRAIN = ("webquestions-trainmodel",)  # what query adaptation trains on by default
REGEX_FLAGS = re.IGNORECASE | re.UNICODE | re.MULTILINE


class OdqaFormatError(TtZooError):
    """A question file that cannot be read; the message names the file and the line."""


@dataclasses.dataclass(frozen=True)
class OdqaQuestion:
    """A question and its answers: strings, or one regular expression (CuratedTREC)."""

    id: str
    text: str
    answers: Tuple[str, ...] = ()
    answer_regex: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class QuestionSet:
    """The questions of one set, and those left out with the reason (e.g. a bad regex)."""

    name: str
    questions: Tuple[OdqaQuestion, ...]
    skipped: Tuple[Tuple[str, str], ...] = ()


def _check_regex(pattern: str) -> Optional[str]:
    try:
        re.compile(pattern, REGEX_FLAGS)
    except re.error as e:
        return f"answer regex {pattern!r} does not compile ({e})"
    return None


def _from_record(record, where: str, skipped: list) -> Optional[OdqaQuestion]:
    if not isinstance(record, dict):
        raise OdqaFormatError(f"{where}: expected a JSON object, got {type(record).__name__}.")
    text = record.get("question", record.get("qText"))
    qid = str(record.get("id", record.get("qId", where)))
    if not isinstance(text, str) or not text.strip():
        raise OdqaFormatError(f"{where}: expected a non-empty 'question' (or 'qText') string.")
    if "answer_regex" in record:
        regex = record["answer_regex"]
        if not isinstance(regex, str) or not regex:
            raise OdqaFormatError(f"{where}: 'answer_regex' must be a non-empty string.")
        problem = _check_regex(regex)
        if problem:
            skipped.append((qid, problem))
            return None
        return OdqaQuestion(qid, text.strip(), answer_regex=regex)
    answers = record.get("answers")
    if (not isinstance(answers, list) or not answers
            or not all(isinstance(a, str) for a in answers)):
        raise OdqaFormatError(f"{where}: expected 'answers' (a non-empty list of strings) or "
                              "'answer_regex'.")
    return OdqaQuestion(qid, text.strip(), answers=tuple(answers))


def read_questions(path, name: Optional[str] = None) -> QuestionSet:
    """Reads WebQuestions JSON (``.json``), CuratedTREC TSV (``.tsv``) or JSONL (``.jsonl``)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise OdqaFormatError(f"question file {path} does not exist.")
    name = name or path.stem
    skipped: list = []
    questions = []
    if path.suffix == ".tsv":
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 4:
                raise OdqaFormatError(f"{path}:{number}: expected 4 tab-separated fields (id, "
                                      f"type, question, answer regex), got {len(fields)}.")
            qid, _, text, regex = fields
            question = _from_record({"id": qid, "question": text, "answer_regex": regex},
                                    f"{path}:{number}", skipped)
            if question:
                questions.append(question)
    elif path.suffix == ".json":
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise OdqaFormatError(f"{path}:{e.lineno}: not valid JSON ({e.msg}).") from e
        if not isinstance(records, list):
            raise OdqaFormatError(f"{path}: expected a JSON list of questions.")
        for i, record in enumerate(records):
            question = _from_record(record, f"{path}: item {i}", skipped)
            if question:
                questions.append(question)
    elif path.suffix == ".jsonl":
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise OdqaFormatError(f"{path}:{number}: not valid JSON ({e.msg}).") from e
            question = _from_record(record, f"{path}:{number}", skipped)
            if question:
                questions.append(question)
    else:
        raise OdqaFormatError(f"{path}: expected a .json (WebQuestions), .tsv (CuratedTREC) "
                              "or .jsonl question file.")
    return QuestionSet(name, tuple(questions), tuple(skipped))


def load_question_set(name_or_path, data_dir) -> QuestionSet:
    """A named set (:data:`NAMED_SETS`, under ``data_dir/odqa``) or a question file."""
    if name_or_path in NAMED_SETS:
        path = pathlib.Path(data_dir) / "odqa" / NAMED_SETS[name_or_path]
        if not path.is_file():
            raise OdqaFormatError(f"question set {name_or_path!r}: {path} does not exist (set "
                                  "TT_ZOO_DATA to the shared data folder).")
        return read_questions(path, name_or_path)
    return read_questions(name_or_path)


__all__ = ["NAMED_SETS", "VALIDATION", "TRAIN", "REGEX_FLAGS", "OdqaFormatError", "OdqaQuestion",
           "QuestionSet", "read_questions", "load_question_set"]
