"""Open-domain QA answer recall: factoid questions against 100-word passages with titles.

The benchmark of DPR (Karpukhin et al. 2020, Sec. 5.1, "top-k retrieval accuracy"): a question is
answered at k when one of the top k passages *contains an answer*. Answers are matched as DrQA
(Chen et al. 2017) and DPR do: a string answer hits when its normalised token sequence occurs
contiguously in the passage's normalised tokens (:func:`normalize_tokens`: unicode NFD, lower
case, punctuation and the articles a/an/the removed); a CuratedTREC answer is a regular
expression (Baudis & Sedivy 2015) that hits on any match in the NFD passage text, case-insensitive.
As DPR does, only the passage text is matched, not its title (`tt_zoo.data.answer_passages`,
which training reads too). Recall is over the *answerable* questions: those with at least one
passage in the collection that holds an answer.

The question sets (WebQuestions, CuratedTREC, any JSONL; the named sets and their splits, the
validation sets :data:`VALIDATION`) are `tt_zoo.data.question_sets`'; the passages
(`Collection`: `tt_zoo.data.passages.word_passages`, DPR's disjoint 100-word blocks, of any
article source) are `tt_zoo.data.passage_collection`'s. Both are named here too. Any
`tt_zoo.retrieval.search.Searcher` is scored by :func:`answer_recall`.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Dict, FrozenSet, List, Optional, Sequence

import numpy as np

# The answer matching (AnswerIndex, has_answer, normalize_tokens, AnswerSets, answerable) and
# the passages are data/'s, which training reads too: named here as before they moved.
from tt_zoo.data.answer_passages import (AnswerIndex, AnswerSets, answerable,  # noqa: F401
                                         answered_passages, has_answer, normalize_tokens,
                                         search_equivalent)
from tt_zoo.data.passage_collection import Collection, passage_collection  # noqa: F401
# NAMED_SETS, OdqaFormatError and read_questions: named here too, as before they moved to data/.
from tt_zoo.data.question_sets import (NAMED_SETS, REGEX_FLAGS, VALIDATION,  # noqa: F401
                                       OdqaFormatError, OdqaQuestion, QuestionSet,
                                       load_question_set, read_questions)

KS = (1, 5, 20, 100)


# -- the metric -------------------------------------------------------------------------------

def answer_recall(ranked_rows, answer_rows: Sequence[FrozenSet[int]],
                  ks: Sequence[int] = KS) -> Dict[str, float]:
    """Top-k answer recall: the fraction of questions with an answer-holding passage among
    their first k rows (``ranked_rows`` ``[num_questions, >= max(ks)]``, -1 padding a short
    result, as `SearchResult.rows`).

    >>> answer_recall([[4, 2, -1], [0, 1, 3]], [frozenset({2}), frozenset({7})], ks=(1, 2))
    {'R@1': 0.0, 'R@2': 0.5}
    """
    ranked = np.asarray(ranked_rows)
    if ranked.ndim != 2 or ranked.shape[0] != len(answer_rows):
        raise ValueError(f"answer_recall: ranked_rows must be [{len(answer_rows)}, k] "
                         f"(got shape {ranked.shape}).")
    if ranked.shape[1] < max(ks):
        raise ValueError(f"answer_recall: {ranked.shape[1]} ranked rows per question, fewer "
                         f"than k = {max(ks)}.")
    first = np.full(len(answer_rows), np.inf)
    for i, (row, gold) in enumerate(zip(ranked, answer_rows)):
        hits = [rank for rank, r in enumerate(row) if r >= 0 and int(r) in gold]
        if hits:
            first[i] = hits[0]
    return {f"R@{k}": float(np.mean(first < k)) if len(first) else 0.0 for k in ks}


def r_precision(ranked_rows, answer_rows: Sequence[FrozenSet[int]]) -> float:
    """Mean R-precision (KILT's retrieval metric, used by Maillard et al. 2021, Sec. 5): for
    each question, the share of its first R rows that hold an answer, R = the number of
    passages holding an answer, capped at the rows ranked (``ranked_rows`` ``[n, depth]``,
    -1 padding).

    >>> r_precision([[4, 2, -1], [0, 1, 3]], [frozenset({2, 4}), frozenset({1, 7, 8, 9})])
    0.6666666666666666
    """
    ranked = np.asarray(ranked_rows)
    if ranked.ndim != 2 or ranked.shape[0] != len(answer_rows):
        raise ValueError(f"r_precision: ranked_rows must be [{len(answer_rows)}, depth] "
                         f"(got shape {ranked.shape}).")
    if not len(answer_rows):
        return 0.0
    values = []
    for row, gold in zip(ranked, answer_rows):
        r = min(len(gold), ranked.shape[1])
        values.append(sum(1 for x in row[:r] if x >= 0 and int(x) in gold) / r if r else 0.0)
    return float(np.mean(values))


def evaluate_sets(searcher, queries_for, sets: Sequence[AnswerSets],
                  ks: Sequence[int] = KS) -> Dict[str, dict]:
    """Answer recall of one `Searcher` on each set and on their union (``"all"``).

    Args:
      searcher: any `tt_zoo.retrieval.search.Searcher` over the collection's rows.
      queries_for: maps a list of question texts to what ``searcher.search`` takes (the texts
        for BM25, the query embeddings for a dense searcher).
    """
    out = {}
    union_rows, union_gold = [], []
    for s in sets:
        if not s.questions:
            out[s.name] = {"num_questions": s.num_questions, "answerable": 0,
                           "skipped": len(s.skipped)}
            continue
        result = searcher.search(queries_for([q.text for q in s.questions]), max(ks))
        rows = np.full((len(s.questions), max(ks)), -1, np.int64)
        rows[:, :result.rows.shape[1]] = result.rows
        out[s.name] = {"num_questions": s.num_questions, "answerable": s.num_answerable,
                       "skipped": len(s.skipped), **answer_recall(rows, s.rows, ks)}
        union_rows.append(rows)
        union_gold.extend(s.rows)
    if len(sets) > 1 and union_rows:
        out["all"] = {"num_questions": sum(s.num_questions for s in sets),
                      "answerable": len(union_gold), "skipped": sum(len(s.skipped) for s in sets),
                      **answer_recall(np.concatenate(union_rows), union_gold, ks)}
    return out


SET_DESCRIPTIONS = {"all": "validation (WebQuestions val + CuratedTREC train)"}


def card_tables(per_set: Dict[str, dict], num_passages: int) -> Dict[str, Dict[str, float]]:
    """A model card's tables (title -> {R@k: %}) of one model's answer recall per question set
    (`evaluate_sets`'s dict): the one wording both the ship stage and `benchmarks/odqa.py`
    write, so a card never holds the same measurement twice."""
    return {f"ODQA answer recall zero-shot, {SET_DESCRIPTIONS.get(name, name)}, "
            f"{recall['answerable']:,} answerable of {recall['num_questions']:,} questions, "
            f"{num_passages:,} 100-word Wikispeedia passages (%)":
            {k: round(100 * v, 2) for k, v in recall.items() if k.startswith("R@")}
            for name, recall in per_set.items()}


def format_table(results: dict, ks) -> str:
    """Answer recall as a text table (`tt-zoo odqa`'s, `tt-zoo multitask --eval`'s): one row a
    retriever, a column group a question set: answerable count, then R@k (in %)."""
    sets = list(next(iter(results.values())).keys())
    width = max(12, max(map(len, results)))
    head = f"{'retriever':<{width}}" + "".join(f" | {s} (n)" + "".join(
        f" {'R@' + str(k):>6}" for k in ks) for s in sets)
    lines = [head, "-" * len(head)]
    for name, per_set in results.items():
        cells = []
        for s in sets:
            r = per_set[s]
            pad = max(0, len(f"{s} (n)") - len(f"({r['answerable']})"))  # align under "SET (n)"
            cells.append(f" | {'':<{pad}}({r['answerable']})"
                         + "".join(f" {100 * r.get(f'R@{k}', 0):>6.1f}" for k in ks))
        lines.append(f"{name:<{width}}" + "".join(cells))
    return "\n".join(lines)


# -- searchers and the whole benchmark --------------------------------------------------------

def bm25_searcher(collection: Collection):
    """BM25 (bm25s, the package's default settings) over "title text" of every passage."""
    from tt_zoo.retrieval.bm25 import BM25Retriever  # noqa: PLC0415

    return BM25Retriever(collection.bm25_texts, ids=collection.ids)


def dense_searcher(model, collection: Collection, cache_path=None, progress: bool = False):
    """Exact inner-product search over `model`'s passage embeddings psi(title, text), encoded
    to ``cache_path`` (resumable, `document_embeddings.encode_documents_to_file`) or in memory."""
    from tt_zoo.retrieval.search import ExactSearcher  # noqa: PLC0415

    if cache_path is None:
        embeddings = model.encode_documents(collection.texts, titles=collection.titles)
    else:
        from tt_zoo.evaluation.document_embeddings import encode_documents_to_file  # noqa: PLC0415
        embeddings = np.asarray(encode_documents_to_file(
            model, collection.texts, collection.titles, cache_path, progress=progress))
    return ExactSearcher(embeddings, collection.ids)


@dataclasses.dataclass
class Benchmark:
    """A collection, its answer index and the answerable questions of each set: built once,
    then any number of searchers are scored on it (:meth:`score`)."""

    collection: Collection
    sets: List[AnswerSets]
    source: str
    words: int

    @classmethod
    def build(cls, articles, question_sets: Sequence[QuestionSet], words: int = 100,
              limit_articles: Optional[int] = None, progress: bool = False,
              cache_dir=None) -> "Benchmark":
        """Cuts the passages and finds each question's answer rows
        (`tt_zoo.data.answer_passages.answered_passages`; cached in ``cache_dir``)."""
        found = answered_passages(articles, question_sets, words, limit_articles, progress,
                                  cache_dir)
        return cls(found.collection, found.sets, str(articles), words)

    def score(self, searcher, queries_for=lambda texts: texts, ks: Sequence[int] = KS) -> dict:
        return evaluate_sets(searcher, queries_for, self.sets, ks)

    def score_model(self, model, cache_path=None, ks: Sequence[int] = KS,
                    progress: bool = False) -> dict:
        searcher = dense_searcher(model, self.collection, cache_path, progress)
        return self.score(searcher, model.encode_queries, ks)

    def describe(self) -> dict:
        return {"source": self.source, "passage_words": self.words,
                "num_passages": len(self.collection),
                "sets": {s.name: {"num_questions": s.num_questions,
                                  "answerable": s.num_answerable,
                                  "skipped": [list(x) for x in s.skipped]} for s in self.sets}}


def validation_benchmark(data_dir, articles=None, progress: bool = False,
                         cache_dir=None) -> Benchmark:
    """The validation questions (:data:`VALIDATION`) over ``data_dir/wikispeedia`` (or
    ``articles``), 100-word passages."""
    data_dir = pathlib.Path(data_dir)
    sets = [load_question_set(name, data_dir) for name in VALIDATION]
    return Benchmark.build(articles or data_dir / "wikispeedia", sets, progress=progress,
                           cache_dir=cache_dir)
