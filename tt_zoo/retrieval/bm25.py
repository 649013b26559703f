"""The BM25 baseline on ReQA, with bm25s.

Chang et al. 2020 (Sec. 4, Table 3) compare every two-tower model with BM25 over the same
candidates. Each candidate's BM25 text is the (sentence, passage) pair written as
``sentence + " " + passage`` by default (``field="sentence+passage"``): the passage gives the
vocabulary overlap and the repeated sentence up-weights the terms of the gold sentence, which
is what separates sentences of the same passage. ``field="sentence"`` or ``"passage"`` index one
side only.

Tokenization is bm25s's (lower-cased ``\\w\\w+`` tokens), with PyStemmer stemming and bm25s's
English stop words by default; both can be changed or turned off (None). BM25 parameters are
bm25s's defaults (Lucene variant, k1 = 1.5, b = 0.75).

Measured on ReQA-SQuAD(dev), all 10,570 questions, 10,255 candidates
(``python benchmarks/bm25_reqa.py``; R@k and MRR in %):

    field             stemmer  stop   R@1   R@5  R@10  R@50 R@100   MRR
    sentence+passage  english  en    67.4  85.6  90.4  96.3  97.6  75.6   (default)
    sentence+passage  None     en    64.9  83.6  88.5  95.0  96.7  73.5
    sentence+passage  english  None  67.6  85.7  90.5  96.4  97.8  75.9
    sentence          english  en    61.3  79.6  84.4  91.6  93.9  69.6
    sentence          None     en    59.3  77.2  81.5  89.6  92.0  67.4
    passage           english  en    19.9  71.1  84.8  95.2  97.1  40.5

Only sentence + passage reaches the expected R@1 ~67 / R@100 ~97.6. Passage-only text cannot
tell the sentences of a passage apart (they tie; R@1 falls to 19.9); sentence-only text loses the
passage context (R@100 93.9). The paper's BM25 R@100 of 77.9 is on the full ReQA-SQuAD
(train + dev, 101,951 candidates), ten times as many candidates as dev alone.
"""

from __future__ import annotations

import time
from typing import Optional, Sequence

import bm25s
import numpy as np

from tt_zoo.retrieval import metrics as retrieval_metrics, search

FIELDS = ("sentence+passage", "sentence", "passage")


def candidate_texts(reqa, field: str = "sentence+passage"):
    """The text BM25 indexes for each candidate, in candidate order."""
    if field == "sentence+passage":
        return [c.sentence + " " + c.passage for c in reqa.candidates]
    if field == "sentence":
        return [c.sentence for c in reqa.candidates]
    if field == "passage":
        return [c.passage for c in reqa.candidates]
    raise ValueError(f"field must be one of {FIELDS} (got {field!r}).")


def _make_stemmer(stemmer):
    if stemmer is None or callable(stemmer) or hasattr(stemmer, "stemWords"):
        return stemmer
    import Stemmer  # PyStemmer

    try:
        return Stemmer.Stemmer(stemmer)
    except KeyError as e:
        raise ValueError(f"Unknown PyStemmer language {stemmer!r}; choose one of "
                         f"{Stemmer.algorithms()} or None.") from e


class BM25Retriever:
    """A bm25s index over texts, searched with texts: a `tt_zoo.retrieval.search.Searcher`.

    Args:
      texts: the documents.
      ids: unique str ids, one per document; default their positions (`"0"`, `"1"`, ...).
      stemmer: a PyStemmer language name ("english"), a stemmer object, or None.
      stopwords: "en", a list of words, or None.
      k1, b, method: the BM25 parameters and variant (bm25s's defaults: 1.5, 0.75, "lucene").
    """

    def __init__(self, texts: Sequence[str], *, ids: Optional[Sequence[str]] = None,
                 stemmer="english", stopwords="en", k1: float = 1.5, b: float = 0.75,
                 method: str = "lucene", show_progress: bool = False):
        if len(texts) == 0:
            raise ValueError("BM25Retriever: no texts to index.")
        self.ids = tuple(search.check_ids(search.default_ids(len(texts)) if ids is None else ids,
                                          len(texts)))
        self.stemmer = _make_stemmer(stemmer)
        self.stopwords = stopwords if stopwords is not None else []
        self.show_progress = show_progress
        tokens = bm25s.tokenize(list(texts), stopwords=self.stopwords, stemmer=self.stemmer,
                                return_ids=False, show_progress=show_progress)
        self.retriever = bm25s.BM25(k1=k1, b=b, method=method)
        self.retriever.index(tokens, show_progress=show_progress)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, queries: Sequence[str], k: int) -> search.SearchResult:
        """The top-k documents of each query string, best first.

        A query with no indexed term (all its tokens unknown or stop words) gets no results:
        its `rows` are all -1 (`SearchResult.empty`).
        """
        rows, scores = self.top_rows(queries, k)
        return search.SearchResult.from_rows(rows, scores, self.ids)

    def top_rows(self, queries: Sequence[str], k: int, *, matched_only: bool = False):
        """`search` as bare arrays, for many queries at once (e.g. mining hard negatives):
        (rows int64, scores float32) `[num_queries, min(k, len(self))]`, best first, without
        the per-query id tuples of a `SearchResult`; -1 rows (score 0) for a query without an
        indexed term.

        With `matched_only`, only documents that share a term with the query (score > 0) are
        returned, -1 padding the rest, and equal scores are ordered by row (the lower first), so
        the result is defined by the scores alone. It selects among the matched documents only:
        bm25s's selection over all documents is slow when most scores tie at 0 (measured 1 ms
        of `argpartition` a query over 15K documents, 2 busy CPU cores).
        """
        if isinstance(queries, (str, bytes)):
            raise ValueError("BM25Retriever.search: queries must be a sequence of strings, "
                             "not one string.")
        k = min(search.check_k(k), len(self))
        tokens = bm25s.tokenize(list(queries), stopwords=self.stopwords, stemmer=self.stemmer,
                                return_ids=False, show_progress=False)
        vocab = self.retriever.vocab_dict
        empty = np.array([not any(t in vocab for t in q) for q in tokens], dtype=bool)
        rows = np.full((len(tokens), k), -1, dtype=np.int64)
        scores = np.zeros((len(tokens), k), dtype=np.float32)
        keep = np.flatnonzero(~empty)
        if keep.size and matched_only:
            for i in keep:
                found, top = self._top_matched([t for t in tokens[i] if t in vocab], k)
                rows[i, :found.size] = found
                scores[i, :found.size] = top
        elif keep.size:
            docs, sc = self.retriever.retrieve([tokens[i] for i in keep], k=k,
                                               show_progress=self.show_progress)
            rows[keep] = docs
            scores[keep] = sc
        return rows, scores

    def _top_matched(self, query_tokens, k: int):
        """The top-k documents with a positive score, by (score desc, row asc)."""
        all_scores = self.retriever.get_scores(query_tokens)
        matched = np.flatnonzero(all_scores > 0)
        values = all_scores[matched]
        if matched.size > k:  # everything scoring at least the k-th best, ties included
            kth = np.partition(values, matched.size - k)[matched.size - k]
            keep = values >= kth
            matched, values = matched[keep], values[keep]
        order = np.lexsort((matched, -values))[:k]
        return matched[order], values[order].astype(np.float32)


def bm25_rankings(reqa, question_ids=None, k: int = 100, stemmer="english", stopwords="en",
                  *, field: str = "sentence+passage", show_progress: bool = False) -> np.ndarray:
    """Ranks ReQA candidates for each question with BM25.

    Returns:
      ``[num_questions, k]`` candidate indices, best first; ``-1`` pads (a question with no
      indexed term gets no results).
    """
    retriever = BM25Retriever(candidate_texts(reqa, field), stemmer=stemmer,
                              stopwords=stopwords, show_progress=show_progress)
    questions = reqa.questions_for(question_ids)
    return retriever.search([q.text for q in questions], k).rows


def evaluate_bm25(reqa, question_ids=None, ks: Sequence[int] = retrieval_metrics.DEFAULT_KS,
                  stemmer="english", stopwords="en", *, field: str = "sentence+passage",
                  show_progress: bool = False) -> dict:
    """Recall@k and MRR of BM25 on ReQA (the gold candidate only counts as a hit).

    Returns:
      `tt_zoo.retrieval.metrics.evaluate`'s dict, BM25 being the searcher that scores every
      candidate (``"exact"``; ``"index"`` is None), with ``"settings"`` and the index build
      time in ``"seconds"["build"]``; ``"queries_without_results"`` counts the questions
      without an indexed term.
    """
    questions = reqa.questions_for(question_ids)
    if not questions:
        raise ValueError("evaluate_bm25: no questions to evaluate.")
    t = time.perf_counter()
    retriever = BM25Retriever(candidate_texts(reqa, field), stemmer=stemmer,
                              stopwords=stopwords, show_progress=show_progress)
    build_s = time.perf_counter() - t
    out = retrieval_metrics.evaluate(retriever, [q.text for q in questions],
                                     [q.gold_index for q in questions], ks)
    out["seconds"]["build"] = build_s
    out["settings"] = {"field": field, "stemmer": stemmer if isinstance(stemmer, str)
                       or stemmer is None else repr(stemmer),
                       "stopwords": stopwords if isinstance(stopwords, str)
                       or stopwords is None else f"{len(stopwords)} words"}
    return out
