"""The BM25 baseline on ReQA, with bm25s.

Chang et al. 2020 (Sec. 4, Table 3) compare every two-tower model with BM25 over the same
candidates. Each candidate's BM25 text is the (sentence, passage) pair written as
``sentence + " " + passage`` by default (``field="sentence+passage"``): the passage gives the
vocabulary overlap and the repeated sentence up-weights the terms of the gold sentence, which
is what separates sentences of the same passage. ``field="sentence"`` or ``"passage"`` index one
side only.

Tokenization is bm25s's (lower-cased ``\\w\\w+`` tokens), with PyStemmer stemming and bm25s's
English stop words by default; both can be changed or turned off (None): the term space of
`tt_zoo.data.terms.TermSpace`. BM25 parameters are bm25s's defaults (Lucene variant, k1 = 1.5,
b = 0.75).

Learned term weights (HDCT, Dai & Callan, WWW 2020, Sec. 3.2-3.3): ``BM25Retriever(texts,
weights=...)`` indexes each text as a bag of pseudo term frequencies instead of its counts.
``weights[i]`` is a `TermWeights`, {term: y in [0, 1]} for text i (e.g. from
`tt_zoo.retrieval.term_weighting`); a weighted term's tf is ``pseudo_term_frequency(y) =
round(N * sqrt(y))`` (N = ``weight_scale``, default 100, rounded half up). The texts still
define each document's terms: a weight re-weights a term of its text and never adds a term the
text lacks, and occurrences the weighting did not read (``TermWeights.seen``: a ReQA sentence
prepended to its weighted passage, words past a window cap, a word BERT's tokenizer spelled
otherwise) keep their plain count, added to the pseudo tf. bm25s builds the index itself from
the pseudo documents (each term id repeated tf times, generated one document at a time), so
document lengths are pseudo lengths, as in HDCT, and the scoring is bm25s's. ``weights=None``
is plain BM25, unchanged.

Measured on ReQA-SQuAD(dev), all 10,570 questions, 10,255 candidates
(``python -m benchmarks.bm25_reqa``; R@k and MRR in %):

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

import array
import collections
import collections.abc
import dataclasses
import io
from typing import Dict, Mapping, Optional, Sequence

import bm25s
import numpy as np

from tt_zoo.data.terms import TermSpace
from tt_zoo.retrieval import search

# HDCT's N (Dai & Callan 2020, Sec. 3.3: tf_BERT(t, d) = round(N * sqrt(y_t,d))).
DEFAULT_WEIGHT_SCALE = 100

FIELDS = ("sentence+passage", "sentence", "passage")
UNREAD = ("plain", "weighted")  # BM25Retriever(unread=...): occurrences the weighting did not read


def candidate_texts(reqa, field: str = "sentence+passage"):
    """The text BM25 indexes for each candidate, in candidate order."""
    if field == "sentence+passage":
        return [c.sentence + " " + c.passage for c in reqa.candidates]
    if field == "sentence":
        return [c.sentence for c in reqa.candidates]
    if field == "passage":
        return [c.passage for c in reqa.candidates]
    raise ValueError(f"field must be one of {FIELDS} (got {field!r}).")


@dataclasses.dataclass(frozen=True)
class TermWeights:
    """One document's learned term weights, in BM25's term space (`tt_zoo.data.terms`).

    Attributes:
      weights: {term: y}, y in [0, 1] (HDCT's predicted importance of the term).
      seen: {term: occurrences the weighting read}, or None when it read every occurrence of
        its terms in the document's BM25 text. Occurrences beyond `seen` keep their plain
        count in the index (see the module docstring).
    """

    weights: Mapping[str, float]
    seen: Optional[Mapping[str, int]] = None


def pseudo_term_frequency(weights, scale: int = DEFAULT_WEIGHT_SCALE) -> np.ndarray:
    """HDCT's tf_BERT = round(scale * sqrt(y)), rounded half up, for y in [0, 1] (array-like):
    y = 1 gives `scale`, y = 0.25 gives scale / 2, and y < 1 / (4 scale^2) gives 0 (the term
    leaves the document). Dai & Callan 2020, Sec. 3.3."""
    y = np.asarray(weights, dtype=np.float64)
    if y.size and (not np.isfinite(y).all() or y.min() < 0 or y.max() > 1):
        raise ValueError(f"Term weights must be in [0, 1] (got min {y.min()}, max {y.max()}).")
    return np.floor(scale * np.sqrt(y) + 0.5).astype(np.int64)


class _PseudoDocuments:
    """The pseudo documents as bm25s reads token-id documents: `len` and each document's term
    ids, each repeated tf times, made on demand (bm25s reads the corpus three times; a
    578K-document corpus of pseudo tfs near 100 would not fit in memory as Python lists)."""

    def __init__(self, term_ids: np.ndarray, tfs: np.ndarray, offsets: np.ndarray):
        self.term_ids, self.tfs, self.offsets = term_ids, tfs, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> list:
        start, end = self.offsets[i], self.offsets[i + 1]
        return np.repeat(self.term_ids[start:end], self.tfs[start:end]).tolist()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


class BM25Retriever:
    """A bm25s index over texts, searched with texts: a `tt_zoo.retrieval.search.Searcher`.

    Args:
      texts: the documents.
      ids: unique str ids, one per document; default their positions (`"0"`, `"1"`, ...).
      stemmer: a PyStemmer language name ("english"), a stemmer object, or None.
      stopwords: "en", a list of words, or None.
      k1, b, method: the BM25 parameters and variant (bm25s's defaults: 1.5, 0.75, "lucene").
      weights: None (plain BM25), or one `TermWeights` per text, made in the same term space
        (stemmer, stop words): HDCT's weighted index (see the module docstring).
      weight_scale: N of the pseudo term frequency round(N * sqrt(y)).
      unread: how occurrences of a weighted term that the weighting did not read count
        (`TermWeights.seen`): "plain" adds their plain count to the pseudo tf; "weighted" scales
        the pseudo tf by occurrences / read occurrences, so a ReQA sentence prepended to its
        weighted passage doubles its terms' pseudo tfs as the repeated sentence doubles their
        counts in plain BM25.

    Example:
      >>> BM25Retriever(["a cat", "a dog"], weights=[TermWeights({"cat": 0.04}),
      ...                                          TermWeights({"dog": 1.0})])

    References:
      Dai & Callan, Context-Aware Document Term Weighting for Ad-Hoc Search (HDCT), WWW 2020,
      Sec. 3.3 (pseudo term frequencies in a standard BM25 index).
    """

    def __init__(self, texts: Sequence[str], *, ids: Optional[Sequence[str]] = None,
                 stemmer="english", stopwords="en", k1: float = 1.5, b: float = 0.75,
                 method: str = "lucene", show_progress: bool = False,
                 weights: Optional[Sequence[TermWeights]] = None,
                 weight_scale: int = DEFAULT_WEIGHT_SCALE, unread: str = "plain"):
        if len(texts) == 0:
            raise ValueError("BM25Retriever: no texts to index.")
        self.ids = tuple(search.check_ids(search.default_ids(len(texts)) if ids is None else ids,
                                          len(texts)))
        self.terms = TermSpace(stemmer, stopwords)
        self.stemmer = self.terms.stemmer
        self.stopwords = self.terms.stopwords
        self.weight_scale = weight_scale
        if unread not in UNREAD:
            raise ValueError(f"unread must be one of {UNREAD} (got {unread!r}).")
        self.unread = unread
        self.weighted_fraction = None  # of the texts' term occurrences, with `weights`
        tokens = self.terms.tokenize(texts, show_progress=show_progress)
        self.retriever = bm25s.BM25(k1=k1, b=b, method=method)
        if weights is None:
            self.retriever.index(tokens, show_progress=show_progress)
        else:
            documents, vocab = self._pseudo_documents(tokens, weights)
            self.retriever.index(bm25s.tokenization.Tokenized(ids=documents, vocab=vocab),
                                 show_progress=show_progress)

    def _pseudo_documents(self, tokens, weights):
        """(`_PseudoDocuments`, vocabulary {term: id}) of the texts' terms with `weights`."""
        if isinstance(weights, (str, bytes, Mapping)) or len(weights) != len(tokens):
            raise ValueError(f"BM25Retriever: weights must be a sequence of one TermWeights per "
                             f"text ({len(tokens)} texts; got {type(weights).__name__}"
                             f"{'' if isinstance(weights, Mapping) else f' of {len(weights)}'}).")
        if isinstance(self.weight_scale, bool) or not isinstance(self.weight_scale, int) or \
                self.weight_scale <= 0:
            raise ValueError(f"weight_scale must be a positive int (got {self.weight_scale!r}).")
        # Compact arrays, not lists: a 578K-document corpus holds about 40M (term, tf) entries.
        vocab = {}
        term_ids, tfs, offsets = array.array("i"), array.array("i"), array.array("q", [0])
        weighted = total = 0
        for i, (doc_tokens, doc_weights) in enumerate(zip(tokens, weights)):
            if not isinstance(doc_weights, TermWeights):
                raise ValueError(f"BM25Retriever: weights[{i}] must be a TermWeights (got "
                                 f"{type(doc_weights).__name__}).")
            counts = collections.Counter(doc_tokens)
            known = [t for t in counts if t in doc_weights.weights]
            try:
                pseudo = dict(zip(known, pseudo_term_frequency(
                    [doc_weights.weights[t] for t in known], self.weight_scale).tolist()))
            except ValueError as e:
                raise ValueError(f"BM25Retriever: weights[{i}]: {e}") from None
            seen = doc_weights.seen
            for term, count in counts.items():
                if term in pseudo:
                    read = count if seen is None else min(count, int(seen.get(term, 0)))
                    if self.unread == "weighted" and read:
                        tf = round(pseudo[term] * count / read)  # each occurrence as a read one
                    else:
                        tf = pseudo[term] + count - read
                    weighted += read
                else:
                    tf = count
                total += count
                if tf > 0:
                    term_ids.append(vocab.setdefault(term, len(vocab)))
                    tfs.append(tf)
            offsets.append(len(term_ids))
        if not vocab:
            raise ValueError("BM25Retriever: the weighted documents hold no term (every weight "
                             "rounds to a pseudo tf of 0 and no text has an unweighted term).")
        self.weighted_fraction = weighted / total if total else 0.0
        documents = _PseudoDocuments(np.frombuffer(term_ids, np.int32),
                                     np.frombuffer(tfs, np.int32), np.frombuffer(offsets, np.int64))
        return documents, vocab

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, queries: Sequence[str], k: int) -> search.SearchResult:
        """The top-k documents of each query string, best first (`top_rows`): only documents
        that share a term with the query, so a query gets fewer than k results when fewer
        documents match, and none when it has no indexed term (all its tokens unknown or stop
        words; `SearchResult.empty`)."""
        rows, scores = self.top_rows(queries, k)
        return search.SearchResult.from_rows(rows, scores, self.ids)

    def top_rows(self, queries: Sequence[str], k: int):
        """`search` as bare arrays, for many queries at once (e.g. mining hard negatives):
        (rows int64, scores float32) `[num_queries, min(k, len(self))]`, best first, without
        the per-query id tuples of a `SearchResult`.

        Only documents that share a term with the query (score > 0) are returned, -1 (score 0)
        padding the rest, and equal scores are ordered by row (the lower first), so the result
        is defined by the scores alone. The top k are selected among the matched documents
        only: bm25s's own `retrieve` partitions all documents' scores, which is slow when most
        tie at 0 (`results/bm25_speed.md`: 31 times the queries/s over the 130,638 ODQA
        passages at k = 100, 23 times over open-domain ReQA's 578,086, the same scores).
        """
        if isinstance(queries, (str, bytes)):
            raise ValueError("BM25Retriever.search: queries must be a sequence of strings, "
                             "not one string.")
        k = min(search.check_k(k), len(self))
        tokens = self.terms.tokenize(queries)
        rows = np.full((len(tokens), k), -1, dtype=np.int64)
        scores = np.zeros((len(tokens), k), dtype=np.float32)
        for i, query_tokens in enumerate(tokens):
            all_scores = self._all_scores(query_tokens)
            if all_scores is not None:
                found, top = self._top_matched(all_scores, k)
                rows[i, :found.size] = found
                scores[i, :found.size] = top
        return rows, scores

    def _all_scores(self, query_tokens):
        """Every document's score for one tokenized query, or None when none of its tokens is
        indexed (every score 0)."""
        vocab = self.retriever.vocab_dict
        known = [t for t in query_tokens if t in vocab]
        return self.retriever.get_scores(known) if known else None

    def scores_at(self, queries: Sequence[str], rows) -> list:
        """The BM25 score of each query against given documents: for query i, float32 scores
        of the documents at ``rows[i]`` (any ints in ``[0, len(self))``), 0 where a document
        shares no term with it (e.g. to score a teacher's candidates lexically too)."""
        if isinstance(queries, (str, bytes)):
            raise ValueError("BM25Retriever.scores_at: one sequence of rows per query string "
                             "(got one string, not a sequence of queries).")
        if len(queries) != len(rows):
            raise ValueError("BM25Retriever.scores_at: one sequence of rows per query string "
                             f"(got {len(rows)} row lists for {len(queries)} queries).")
        out = []
        for query_tokens, at in zip(self.terms.tokenize(queries), rows):
            at = np.asarray(at, np.int64)
            if at.size and (at.min() < 0 or at.max() >= len(self)):
                raise ValueError(f"BM25Retriever.scores_at: rows must lie in [0, {len(self)}) "
                                 f"(got {at.min()}..{at.max()}).")
            all_scores = self._all_scores(query_tokens)
            out.append(np.zeros(at.size, np.float32) if all_scores is None
                       else np.asarray(all_scores, np.float32)[at])
        return out

    @staticmethod
    def _top_matched(all_scores, k: int):
        """The top-k documents with a positive score, by (score desc, row asc)."""
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
      ``[num_questions, k]`` candidate indices, best first; ``-1`` pads (a question gets only
      the candidates that share a term with it; none without an indexed term).
    """
    retriever = BM25Retriever(candidate_texts(reqa, field), stemmer=stemmer,
                              stopwords=stopwords, show_progress=show_progress)
    questions = reqa.questions_for(question_ids)
    return retriever.search([q.text for q in questions], k).rows


class CorpusTermWeights(collections.abc.Sequence):
    """The term weights of a corpus as compact arrays; item i is document i's `TermWeights`.

    Documents that share a (title, passage) share one row (`doc_rows`). Build one with
    `tt_zoo.retrieval.term_weighting.weigh_corpus`, or `from_term_weights` from a list. (Here,
    beside BM25, so that a saved HDCT index loads without TensorFlow.)
    """

    def __init__(self, vocabulary: Sequence[str], offsets: np.ndarray, term_ids: np.ndarray,
                 weights: np.ndarray, seen: np.ndarray, doc_rows: Optional[np.ndarray] = None):
        self.vocabulary = list(vocabulary)
        self.offsets, self.term_ids = np.asarray(offsets, np.int64), np.asarray(term_ids, np.int32)
        self.weights, self.seen = np.asarray(weights, np.float32), np.asarray(seen, np.int32)
        num_rows = len(self.offsets) - 1
        self.doc_rows = (np.arange(num_rows, dtype=np.int64) if doc_rows is None
                         else np.asarray(doc_rows, np.int64))
        if len(self.doc_rows) and (self.doc_rows.min() < 0 or self.doc_rows.max() >= num_rows):
            raise ValueError(f"doc_rows must index the {num_rows} weighted rows.")

    @property
    def num_rows(self) -> int:
        """Distinct documents weighted."""
        return len(self.offsets) - 1

    def __len__(self) -> int:
        return len(self.doc_rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row = self.doc_rows[i]
        start, end = self.offsets[row], self.offsets[row + 1]
        terms = [self.vocabulary[t] for t in self.term_ids[start:end]]
        return TermWeights(dict(zip(terms, self.weights[start:end].tolist())),
                           dict(zip(terms, self.seen[start:end].tolist())))

    @classmethod
    def from_term_weights(cls, documents: Sequence[TermWeights]) -> "CorpusTermWeights":
        """Compact arrays of a list of `TermWeights` (every one with its `seen` counts)."""
        vocab: Dict[str, int] = {}
        offsets, term_ids, weights, seen = [0], [], [], []
        for doc in documents:
            if doc.seen is None:
                raise ValueError("CorpusTermWeights stores seen counts: every TermWeights needs "
                                 "`seen`.")
            for term, weight in doc.weights.items():
                term_ids.append(vocab.setdefault(term, len(vocab)))
                weights.append(weight)
                seen.append(doc.seen.get(term, 0))
            offsets.append(len(term_ids))
        return cls(list(vocab), offsets, term_ids, weights, seen)

    @classmethod
    def concatenate(cls, parts: Sequence["CorpusTermWeights"]) -> "CorpusTermWeights":
        """The rows of several parts, in order, over one vocabulary (no `doc_rows`)."""
        vocab: Dict[str, int] = {}
        offsets, term_ids, weights, seen = [np.zeros(1, np.int64)], [], [], []
        for part in parts:
            remap = np.array([vocab.setdefault(t, len(vocab)) for t in part.vocabulary],
                             np.int32)
            offsets.append(part.offsets[1:] + offsets[-1][-1] - part.offsets[0])
            term_ids.append(remap[part.term_ids] if len(part.term_ids) else part.term_ids)
            weights.append(part.weights)
            seen.append(part.seen)
        cat = (lambda xs, dtype: np.concatenate(xs) if xs else np.zeros(0, dtype))  # noqa: E731
        return cls(list(vocab), np.concatenate(offsets), cat(term_ids, np.int32),
                   cat(weights, np.float32), cat(seen, np.int32))

    def save(self, path) -> None:
        """Writes the rows (not `doc_rows`) as one .npz, through a temp file and a rename."""
        from tt_zoo.atomic_io import open_for_replace  # noqa: PLC0415

        with open_for_replace(path, "wb") as f:
            np.savez(f, vocabulary=np.array(self.vocabulary, dtype=str), offsets=self.offsets,
                     term_ids=self.term_ids, weights=self.weights, seen=self.seen)

    @classmethod
    def load(cls, path) -> "CorpusTermWeights":
        """The rows `save` wrote to `path` (local, or gs:// through tf.io.gfile)."""
        from tt_zoo.atomic_io import is_remote  # noqa: PLC0415
        from tt_zoo.errors import ArtifactError  # noqa: PLC0415

        if is_remote(path):
            import tensorflow as tf  # noqa: PLC0415
            opener = tf.io.gfile.GFile
        else:
            opener = open
        try:
            with opener(str(path), "rb") as f, np.load(io.BytesIO(f.read())) as z:
                return cls(z["vocabulary"].tolist(), z["offsets"], z["term_ids"], z["weights"],
                           z["seen"])
        except (OSError, ValueError, KeyError) as e:
            raise ArtifactError(f"{path} is not a readable term-weight cache part ({e}).") from e
