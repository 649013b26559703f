"""Which passages of a collection hold a question's answer: the answer rows that make a QA
set's positives for training (`tt_zoo.mining.task_sources`, `tt_zoo.training`) and its
relevance for evaluation (`tt_zoo.evaluation.odqa`).

Answers are matched as DrQA (Chen et al. 2017) and DPR (Karpukhin et al. 2020, Sec. 5.1) do: a
string answer hits when its normalised token sequence occurs contiguously in the passage's
normalised tokens (:func:`normalize_tokens`: unicode NFD, lower case, punctuation and the
articles a/an/the removed); a CuratedTREC answer is a regular expression (Baudis & Sedivy 2015)
that hits on any match in the NFD passage text, case-insensitive. Only the passage text is
matched, not its title. `answered_passages` cuts the passages (`passage_collection`) and finds
each set's answerable questions, the rows cached by a digest of the passages and questions.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import pathlib
import re
import unicodedata
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from tt_zoo.data.passage_collection import Collection, passage_collection
from tt_zoo.data.question_sets import REGEX_FLAGS, OdqaQuestion, QuestionSet

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
# Punctuation and symbols go (as SQuAD's normalize_answer drops string.punctuation), and with
# them NFD's combining accents, which are not word characters: "Padmé" matches "Padme".
_NOT_WORD = re.compile(r"[^\w\s]", re.UNICODE)
_SEPARATOR = "\n"  # between passages in the searched text; no answer token holds it


# -- normalisation and matching -----------------------------------------------------------

def normalize_tokens(text: str) -> List[str]:
    """DPR's answer normalisation: NFD, lower case, punctuation (and combining accents)
    removed, articles removed, whitespace tokens.

    >>> normalize_tokens("The Rhine's  Delta, U.S.A.")
    ['rhines', 'delta', 'usa']
    """
    text = _NOT_WORD.sub("", unicodedata.normalize("NFD", text).lower())
    return _ARTICLES.sub(" ", text).split()


def has_answer(question: OdqaQuestion, passage_text: str) -> bool:
    """Whether one passage holds an answer (the rule of :class:`AnswerIndex`, for one text)."""
    if question.answer_regex is not None:
        return re.search(question.answer_regex, unicodedata.normalize("NFD", passage_text),
                         REGEX_FLAGS) is not None
    return bool(AnswerIndex([passage_text]).rows_with_answer(question))


def _answer_key(answer: str) -> str:
    tokens = normalize_tokens(answer)
    return " " + " ".join(tokens) + " " if tokens else ""


class AnswerIndex:
    """Finds, for many questions at once, the passages that hold an answer.

    String answers go through an inverted index of the answers' own tokens (built in one pass
    over the passages), then an exact check of the token sequence in each candidate passage.
    Regular expressions search one newline-joined NFD text of all passages (offsets map back
    to rows by bisection); a leading or trailing ``.*`` is dropped first (it changes no match of
    a search, but costs quadratic time on each line: 30 s for ``.*Eureka.*`` over 28K passages).
    """

    def __init__(self, passage_texts: Sequence[str]):
        self._normalized = [" " + " ".join(normalize_tokens(t)) + " " for t in passage_texts]
        self._raw_texts = [unicodedata.normalize("NFD", t).replace(_SEPARATOR, " ")
                           for t in passage_texts]
        self._raw_starts, position = [], 0
        for t in self._raw_texts:
            self._raw_starts.append(position)
            position += len(t) + len(_SEPARATOR)
        self._raw = _SEPARATOR.join(self._raw_texts)
        self.num_passages = len(passage_texts)

    def rows_with_answer(self, question: OdqaQuestion) -> FrozenSet[int]:
        """The rows of the passages that hold one of the question's answers."""
        return self.rows_with_answers([question])[0]

    def rows_with_answers(self, questions: Sequence[OdqaQuestion]) -> List[FrozenSet[int]]:
        """`rows_with_answer` of each question, sharing one pass over the passages."""
        keys = {a: _answer_key(a) for q in questions for a in q.answers}
        wanted = {t for key in keys.values() for t in key.split()}
        postings: Dict[str, List[int]] = {t: [] for t in wanted}
        if wanted:
            for row, text in enumerate(self._normalized):
                for token in wanted.intersection(text.split()):
                    postings[token].append(row)
        out = []
        for q in questions:
            if q.answer_regex is not None:
                out.append(self._regex_rows(q.answer_regex))
                continue
            rows = set()
            for answer in q.answers:
                key = keys[answer]
                if not key:
                    continue
                rarest = min((postings[t] for t in key.split()), key=len)
                rows.update(r for r in rarest if key in self._normalized[r])
            out.append(frozenset(rows))
        return out

    def _regex_rows(self, regex: str) -> FrozenSet[int]:
        pattern = re.compile(search_equivalent(regex), REGEX_FLAGS)
        rows = set()
        for match in pattern.finditer(self._raw):
            first = bisect.bisect_right(self._raw_starts, match.start()) - 1
            last = bisect.bisect_right(self._raw_starts, max(match.start(), match.end() - 1)) - 1
            if first == last:
                rows.add(first)
            else:  # the match ran across a separator: search those passages alone
                rows.update(r for r in range(first, last + 1)
                            if pattern.search(self._raw_texts[r]))
        return frozenset(rows)


def search_equivalent(regex: str) -> str:
    """``regex`` without a leading ``.*`` or a trailing unescaped ``.*``: the same passages
    match under ``re.search`` (``.`` may match nothing), without the quadratic scan.

    >>> search_equivalent(".*Eureka.*")
    'Eureka'
    """
    while regex.startswith(".*") and len(regex) > 2:
        regex = regex[2:]
    while regex.endswith(".*") and not regex.endswith("\\.*") and len(regex) > 2:
        regex = regex[:-2]
    return regex


# -- the answerable questions of a collection ----------------------------------------------

@dataclasses.dataclass(frozen=True)
class AnswerSets:
    """The questions of a set that the collection can answer, and their answer rows."""

    name: str
    questions: Tuple[OdqaQuestion, ...]
    rows: Tuple[FrozenSet[int], ...]
    num_questions: int
    skipped: Tuple[Tuple[str, str], ...]

    @property
    def num_answerable(self) -> int:
        return len(self.questions)


def answerable(question_set: QuestionSet, index: AnswerIndex) -> AnswerSets:
    """Keeps the questions with at least one passage that holds an answer."""
    return _keep_answerable(question_set, index.rows_with_answers(question_set.questions))


def _keep_answerable(question_set: QuestionSet, rows) -> AnswerSets:
    kept = [(q, r) for q, r in zip(question_set.questions, rows) if r]
    return AnswerSets(question_set.name, tuple(q for q, _ in kept), tuple(r for _, r in kept),
                      len(question_set.questions), question_set.skipped)


def _digest(collection: Collection, question_set: QuestionSet) -> str:
    """sha256 of the passages (ids, texts) and the questions (ids, answers, regexes)."""
    h = collection.fingerprint()
    h.update(json.dumps([dataclasses.astuple(q) for q in question_set.questions]).encode())
    return h.hexdigest()[:24]


@dataclasses.dataclass
class AnsweredPassages:
    """A collection and the answerable questions of each set over it, with their rows."""

    collection: Collection
    sets: List[AnswerSets]


def answer_sets(collection: Collection, question_sets: Sequence[QuestionSet],
                cache_dir=None) -> List[AnswerSets]:
    """Each set's answerable questions over `collection` and their answer rows. With
    ``cache_dir``, the rows are kept there, keyed by a sha256 of the passages and of the
    questions (the CuratedTREC regular expressions take minutes over 130K passages)."""
    index = None
    sets = []
    for question_set in question_sets:
        cache = None
        if cache_dir is not None:
            cache = pathlib.Path(cache_dir) / f"answers-{_digest(collection, question_set)}.json"
        if cache is not None and cache.is_file():
            stored = json.loads(cache.read_text())
            rows = [frozenset(stored[q.id]) for q in question_set.questions]
            sets.append(_keep_answerable(question_set, rows))
            continue
        index = index or AnswerIndex(collection.texts)
        found = answerable(question_set, index)
        sets.append(found)
        if cache is not None:
            from tt_zoo.atomic_io import write_json  # noqa: PLC0415
            rows = dict(zip((q.id for q in found.questions), map(sorted, found.rows)))
            write_json(cache, {q.id: rows.get(q.id, []) for q in question_set.questions})
    return sets


def answered_passages(articles, question_sets: Sequence[QuestionSet], words: int = 100,
                      limit_articles: Optional[int] = None, progress: bool = False,
                      cache_dir=None) -> AnsweredPassages:
    """The ``words``-word passages of `articles` (`passage_collection`) and each set's
    answerable questions over them (`answer_sets`, cached in ``cache_dir``)."""
    collection = passage_collection(articles, words, limit_articles, progress)
    return AnsweredPassages(collection, answer_sets(collection, question_sets, cache_dir))
