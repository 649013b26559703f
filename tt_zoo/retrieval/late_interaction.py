"""Late interaction (ColBERT): MaxSim scores and re-ranking any first stage by them.

Khattab & Zaharia, SIGIR 2020, Sec. 3.1 and 3.5: a query is a bag of L2-normalised token vectors
E_q `[n_q, m]`, a document a bag E_d `[n_d, m]` (padding and punctuation dropped), and

    S(q, d) = sum over query tokens i of  max over document tokens j of  E_q[i] . E_d[j]

(MaxSim). Sec. 3.5 re-ranks a first stage's top k (1,000 BM25 documents on MS MARCO) by S.

- `maxsim` / `maxsim_flat`: S of one query against many documents (ragged), float32 math on
  float16 or float32 vectors (TensorFlow ops on NumPy arrays), blocked so the `[tokens, n_q]`
  similarity matrix stays small.
- `MaxSimReranker` (a `tt_zoo.retrieval.search.Searcher` over text queries) and `rerank`: ask a
  text-query first stage (`BM25Retriever`, or a dense searcher wrapped by
  `tt_zoo.retrieval.search.QueryEncodingSearcher`) for its top `depth`, re-order them by exact
  MaxSim with the document token vectors of a `tt_zoo.retrieval.token_store.TokenStore` (or
  encoded on the fly from the texts).

Measured on a synthetic 20K passages x 100 tokens x m = 64 in a float16 store, 32-token
queries, BM25 first stage, 2 busy CPU cores (query encoding not counted): depth 100 re-ranks
in 2.1 ms a query (BM25 itself 2.4 ms; 218 queries/s in all), depth 1,000 in 19 ms.

The end-to-end search (Sec. 3.6: an ANN index over every document token) is
`tt_zoo.retrieval.token_index.TokenIndex`.

The encoders are two callables of the late-interaction tower: ``encode_query_tokens(texts)`` and
``encode_document_tokens(texts, titles=None)``, each returning one float32 `[n_i, m]` array per
text.

Bad inputs: an empty (or all-whitespace) query string is an error naming its position (a
ColBERT query is padded with [MASK] to its full length, so an empty one would still "match"
something); a first stage that returns fewer than `depth` (or no) candidates for a query gives
that query a correct short result, padded with -1 rows and NaN scores as every `SearchResult`.
A document without token vectors scores 0, as in training (`tt_zoo.modeling.maxsim`).
"""

from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence

import numpy as np

from tt_zoo.retrieval.search import SearchResult, Searcher, check_k

# Similarities are computed for documents holding at most this many tokens at a time:
# [BLOCK_TOKENS, n_q] float32 is 8 MiB for a 32-token query.
BLOCK_TOKENS = 1 << 16


# -- validation ---------------------------------------------------------------------------------

def check_token_vectors(vectors, what: str, dim: Optional[int] = None) -> np.ndarray:
    """`vectors` as a 2D floating `[n, m]` array (float16 kept, anything else float32); with
    `dim`, `m` must equal it."""
    array = np.asarray(vectors)
    if array.ndim != 2:
        raise ValueError(f"The {what} must be 2D [num_tokens, dim] (got shape {array.shape}).")
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"The {what} must be floating point (got dtype {array.dtype}).")
    if dim is not None and array.shape[1] != dim:
        raise ValueError(f"The {what} must have {dim} columns (got shape {array.shape}).")
    return array if array.dtype == np.float16 else array.astype(np.float32, copy=False)


def check_query_texts(queries, what: str = "queries") -> List[str]:
    """`queries` as a list of non-empty strings (not one string)."""
    if isinstance(queries, (str, bytes)):
        raise ValueError(f"The {what} must be a sequence of strings, not one string.")
    queries = list(queries)
    for position, query in enumerate(queries):
        if not isinstance(query, str):
            raise ValueError(f"Query at position {position} must be str "
                             f"(got {type(query).__name__}: {query!r}).")
        if not query.strip():
            raise ValueError(f"Query at position {position} is empty ({query!r}); late "
                             "interaction needs at least one query word.")
    return queries


def encode_queries_checked(encode_query_tokens: Callable, queries: List[str],
                           dim: Optional[int] = None) -> List[np.ndarray]:
    """`encode_query_tokens(queries)`, checked: one finite float32 `[n_i >= 1, m]` per query."""
    encoded = list(encode_query_tokens(queries))
    if len(encoded) != len(queries):
        raise ValueError(f"encode_query_tokens returned {len(encoded)} arrays for "
                         f"{len(queries)} queries.")
    out = []
    for position, vectors in enumerate(encoded):
        vectors = check_token_vectors(vectors, f"token vectors of query {position}", dim)
        if vectors.shape[0] == 0 or not np.isfinite(vectors).all():
            raise ValueError(f"The token vectors of query {position} ({queries[position]!r}) "
                             f"are empty or not finite (shape {vectors.shape}).")
        out.append(vectors.astype(np.float32, copy=False))
    return out


def flatten(documents: Sequence[np.ndarray], dim: Optional[int] = None):
    """Ragged documents `[n_i, m]` as `(vectors [sum n_i, m], offsets int64 [num_docs + 1])`:
    document i is `vectors[offsets[i]:offsets[i + 1]]`."""
    if isinstance(documents, np.ndarray) and documents.ndim == 2:
        raise ValueError("The documents must be a sequence of [n_i, dim] arrays, one per "
                         f"document (got one array of shape {documents.shape}).")
    arrays = []
    for position, vectors in enumerate(documents):
        vectors = check_token_vectors(vectors, f"token vectors of document {position}", dim)
        dim = vectors.shape[1]
        arrays.append(vectors)
    if not arrays:
        raise ValueError("No documents to score.")
    offsets = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([a.shape[0] for a in arrays], out=offsets[1:])
    dtype = np.float16 if all(a.dtype == np.float16 for a in arrays) else np.float32
    return np.concatenate(arrays).astype(dtype, copy=False), offsets


# -- MaxSim -------------------------------------------------------------------------------------

def maxsim_flat(query_vectors, vectors, offsets, *, block_tokens: int = BLOCK_TOKENS
                ) -> np.ndarray:
    """MaxSim of one query against documents stored flat (Khattab & Zaharia 2020, Sec. 3.1).

    Args:
      query_vectors: float `[n_q, m]`, the query's token vectors.
      vectors: float16 or float32 `[total_tokens, m]` (a memory map is read block by block).
      offsets: int `[num_docs + 1]`, non-decreasing from 0 to `total_tokens`; document i is
        `vectors[offsets[i]:offsets[i + 1]]`.
      block_tokens: documents are scored in blocks of about this many tokens (a document is
        never split).

    Returns:
      float32 `[num_docs]`: S(q, d) = sum_i max_j q_i . d_j, computed in float32; 0 for a
      document without tokens (as `tt_zoo.modeling.maxsim.maxsim_scores`).

    TensorFlow does the float16 -> float32 cast, the matmul and the per-document max
    (`tf.math.unsorted_segment_max`): measured 1.5 ms against 26 ms for NumPy (`astype`, `@`,
    `np.maximum.reduceat`) on 100 documents x 100 tokens x 64 dims and a 32-token query,
    2 busy CPU cores; NumPy's float16 cast alone took 4 ms.
    """
    import tensorflow as tf  # noqa: PLC0415

    query = check_token_vectors(query_vectors, "query token vectors").astype(np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != query.shape[1]:
        raise ValueError(f"The document token vectors must be [num_tokens, {query.shape[1]}] "
                         f"like the query's (got shape {vectors.shape}).")
    offsets = np.asarray(offsets, np.int64)
    if (offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0
            or offsets[-1] != vectors.shape[0] or (np.diff(offsets) < 0).any()):
        raise ValueError(f"offsets must rise from 0 to the number of token vectors "
                         f"({vectors.shape[0]}) (got {offsets[:5]}... of {offsets.size}).")
    num_docs = offsets.size - 1
    lengths = np.diff(offsets)
    scores = np.zeros(num_docs, np.float32)
    query = tf.constant(query)
    start = 0
    while start < num_docs:
        # Documents [start, stop): as many as fit in block_tokens, at least one.
        stop = int(np.searchsorted(offsets, offsets[start] + block_tokens, side="right")) - 1
        stop = min(num_docs, max(stop, start + 1))
        first, last = offsets[start], offsets[stop]
        if last > first:
            block = tf.cast(np.asarray(vectors[first:last]), tf.float32)
            similarity = tf.matmul(block, query, transpose_b=True)  # [tokens, n_q]
            segments = np.repeat(np.arange(stop - start), lengths[start:stop])
            best = tf.math.unsorted_segment_max(similarity, segments, stop - start)
            # An empty document's segment holds the lowest float; where() drops it.
            scores[start:stop] = np.where(lengths[start:stop] > 0,
                                          tf.reduce_sum(best, axis=1).numpy(), 0.0)
        start = stop
    return scores


def maxsim(query_vectors, document_vectors: Sequence[np.ndarray]) -> np.ndarray:
    """MaxSim of one query against each of a list of documents (Khattab & Zaharia, Sec. 3.1).

    Args:
      query_vectors: float `[n_q, m]`.
      document_vectors: a sequence of float16/float32 `[n_d, m]` arrays, one per document
        (ragged: `n_d` varies).

    Returns:
      float32 `[num_docs]` scores (math in float32; 0 for a document without tokens).

    Example:
    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> maxsim(q, [np.array([[0.6, 0.8], [1.0, 0.0]]), np.array([[0.0, 1.0]])])
    array([1.8, 1. ], dtype=float32)
    """
    query = check_token_vectors(query_vectors, "query token vectors")
    vectors, offsets = flatten(document_vectors, query.shape[1])
    return maxsim_flat(query, vectors, offsets)


def top_by_maxsim(query_vectors, vectors, offsets, k: int):
    """The (positions, scores) of the best `k` documents by `maxsim_flat`, best first; equal
    scores keep the documents' order (a first stage's rank breaks MaxSim ties)."""
    scores = maxsim_flat(query_vectors, vectors, offsets)
    order = np.argsort(-scores, kind="stable")[:k]
    return order, scores[order]


# -- re-ranking ---------------------------------------------------------------------------------

class MaxSimReranker:
    """Re-ranks a text-query first stage's top `depth` by exact MaxSim (ColBERT, Sec. 3.5).

    A `Searcher` over the first stage's candidates (same rows, same ids): `search(queries, k)`
    takes strings and returns a `SearchResult` whose scores are MaxSim scores.

    Args:
      first_stage: a `Searcher` that takes strings (`BM25Retriever`, a dense searcher wrapped
        by `tt_zoo.retrieval.search.QueryEncodingSearcher`, a fusion, ...).
      encode_query_tokens: `texts -> [float32 [n_i, m]]`, L2-normalised query token vectors.
      store: the candidates' token vectors (`tt_zoo.retrieval.token_store.TokenStore`, row i =
        first-stage candidate i). Or, instead:
      encode_document_tokens, texts, titles: encode each query batch's candidates on the fly
        (`encode_document_tokens(texts, titles=None) -> [float32 [n_i, m]]`; `texts[row]` and
        `titles[row]` are first-stage candidate `row`).
      depth: how many first-stage candidates to re-rank (at least `k` are asked for).

    `timings` accumulates seconds spent in the first stage, in encoding (queries and on-the-fly
    documents) and in MaxSim, and the number of queries; `queries_per_second` reads it.

    Example:
    >>> reranker = MaxSimReranker(BM25Retriever(texts), model.encode_query_tokens,
    ...                           store=TokenStore.load("runs/tokens"), depth=100)
    >>> reranker.search(["who discovered penicillin?"], k=10).ids

    References:
      Khattab & Zaharia, ColBERT, SIGIR 2020, Sec. 3.5 (re-ranking), 4.2 (its cost).
    """

    def __init__(self, first_stage: Searcher, encode_query_tokens: Callable, *, store=None,
                 encode_document_tokens: Optional[Callable] = None,
                 texts: Optional[Sequence[str]] = None,
                 titles: Optional[Sequence[str]] = None, depth: int = 100):
        if not isinstance(first_stage, Searcher):
            raise ValueError(f"MaxSimReranker: first_stage {first_stage!r} is not a Searcher "
                             "(it needs __len__ and search(queries, k)).")
        self.first_stage = first_stage
        self.encode_query_tokens = encode_query_tokens
        self.depth = check_k(depth)
        on_the_fly = encode_document_tokens is not None or texts is not None
        if (store is None) == (not on_the_fly):
            raise ValueError("MaxSimReranker needs either a token store or "
                             "encode_document_tokens with the candidates' texts (not both).")
        if store is not None:
            if len(store) != len(first_stage):
                raise ValueError(f"The token store holds {len(store)} documents; the first "
                                 f"stage searches {len(first_stage)}. They must be the same "
                                 "candidates in the same order.")
            stage_ids = getattr(first_stage, "ids", None)
            if stage_ids is not None and tuple(stage_ids) != tuple(store.ids):
                raise ValueError("The token store's ids differ from the first stage's ids; the "
                                 "store must hold the first stage's candidates in its order.")
        else:
            if encode_document_tokens is None or texts is None:
                raise ValueError("Encoding candidates on the fly needs both "
                                 "encode_document_tokens and texts.")
            if len(texts) != len(first_stage) or (titles is not None
                                                   and len(titles) != len(texts)):
                raise ValueError(f"Got {len(texts)} texts and "
                                 f"{'no' if titles is None else len(titles)} titles for a first "
                                 f"stage over {len(first_stage)} candidates.")
        self.store = store
        self.encode_document_tokens = encode_document_tokens
        self.texts, self.titles = texts, titles
        self.timings = {"queries": 0, "first_stage": 0.0, "encode": 0.0, "maxsim": 0.0}

    def __len__(self) -> int:
        return len(self.first_stage)

    @property
    def ids(self):
        """The first stage's candidate ids (rows are its rows), or None if it has none."""
        return getattr(self.first_stage, "ids", None)

    def __repr__(self) -> str:
        source = "store" if self.store is not None else "on the fly"
        return (f"MaxSimReranker({self.first_stage!r}, depth={self.depth}, "
                f"documents={source})")

    @property
    def queries_per_second(self) -> float:
        """Queries answered per second of `search` so far (first stage, encoding, MaxSim)."""
        seconds = self.timings["first_stage"] + self.timings["encode"] + self.timings["maxsim"]
        return self.timings["queries"] / seconds if seconds > 0 else float("nan")

    def search(self, queries: Sequence[str], k: int = 10) -> SearchResult:
        """The top-k of each query among its first stage's top `max(depth, k)`, by MaxSim.

        Returns:
          A `SearchResult` of width `min(k, len(self))`: rows are first-stage candidate rows,
          scores MaxSim; a query whose first stage found fewer than k candidates is padded with
          -1 rows (NaN scores). Raises ValueError for an empty query string.
        """
        queries = check_query_texts(queries)
        width = min(check_k(k), len(self))
        t = time.perf_counter()
        first = self.first_stage.search(queries, max(self.depth, width))
        t_first = time.perf_counter()
        if len(first) != len(queries):
            raise ValueError(f"The first stage returned {len(first)} results for "
                             f"{len(queries)} queries.")
        dim = self.store.dim if self.store is not None else None
        query_vectors = encode_queries_checked(self.encode_query_tokens, queries, dim)
        documents = self._documents(first.rows)
        t_encode = time.perf_counter()

        rows = np.full((len(queries), width), -1, np.int64)
        scores = np.full((len(queries), width), np.nan, np.float32)
        ids = []
        for i, (vectors, candidates) in enumerate(zip(query_vectors, first.rows)):
            valid = np.flatnonzero(candidates >= 0)
            if valid.size == 0:
                ids.append(())
                continue
            order, best = top_by_maxsim(vectors, *documents(candidates[valid]), width)
            rows[i, :order.size] = candidates[valid][order]
            scores[i, :order.size] = best
            # first.ids[i] lists the ids of the valid rows in the first stage's order.
            ids.append(tuple(first.ids[i][j] for j in order))
        t_end = time.perf_counter()
        self.timings["queries"] += len(queries)
        self.timings["first_stage"] += t_first - t
        self.timings["encode"] += t_encode - t_first
        self.timings["maxsim"] += t_end - t_encode
        return SearchResult(rows, scores, tuple(ids))

    def _documents(self, candidate_rows: np.ndarray) -> Callable:
        """A function mapping candidate rows to `(vectors, offsets)`; on the fly, the batch's
        distinct candidates are encoded once, here."""
        if self.store is not None:
            return self.store.gather
        unique = np.unique(candidate_rows[candidate_rows >= 0])
        if unique.size == 0:
            return lambda rows: None
        texts = [self.texts[r] for r in unique]
        titles = None if self.titles is None else [self.titles[r] for r in unique]
        encoded = list(self.encode_document_tokens(texts, titles=titles))
        if len(encoded) != unique.size:
            raise ValueError(f"encode_document_tokens returned {len(encoded)} arrays for "
                             f"{unique.size} documents.")
        vectors, offsets = flatten(encoded)
        lengths = np.diff(offsets)

        def gather(rows):
            position = np.searchsorted(unique, rows)
            return gather_flat(vectors, offsets, lengths, position)

        return gather


def gather_flat(vectors, offsets, lengths, positions):
    """The documents at `positions` of a flat store, as their own `(vectors, offsets)`."""
    positions = np.asarray(positions, np.int64)
    sizes = lengths[positions]
    new_offsets = np.zeros(positions.size + 1, np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    # token t of the result comes from offsets[doc] + (t - new_offsets[doc])
    shift = np.repeat(offsets[positions] - new_offsets[:-1], sizes)
    return vectors[np.arange(new_offsets[-1]) + shift], new_offsets


def rerank(first_stage: Searcher, k: int, *, queries: Sequence[str],
           encode_query_tokens: Callable, store=None,
           encode_document_tokens: Optional[Callable] = None,
           texts: Optional[Sequence[str]] = None, titles: Optional[Sequence[str]] = None,
           depth: int = 100) -> SearchResult:
    """`MaxSimReranker(first_stage, ...).search(queries, k)`: the first stage's top `depth`
    of each query re-ordered by exact MaxSim, the best `k` kept (ColBERT, Sec. 3.5)."""
    return MaxSimReranker(first_stage, encode_query_tokens, store=store,
                          encode_document_tokens=encode_document_tokens, texts=texts,
                          titles=titles, depth=depth).search(queries, k)
