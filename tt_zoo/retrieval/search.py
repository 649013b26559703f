"""One searcher protocol, one result type and the one brute-force top-k.

Chang et al., ICLR 2020, Section 2 ("Inference"): a two-tower model scores f(q, d) =
<phi(q), psi(d)>, so retrieval is maximum inner product search (MIPS) over the candidate
embeddings psi(d), computed once; Section 4 compares every model with BM25 over the same
candidates. All of these are searchers over a fixed, ordered list of candidates:

- `ExactSearcher` (here): brute force over embeddings, the exact top-k by inner product;
- `tt_zoo.retrieval.index.EmbeddingIndex`: ScaNN (approximate) or brute force (this module's
  `ExactSearcher`), with save/load;
- `tt_zoo.retrieval.bm25.BM25Retriever`: BM25 over texts;
- `QueryEncodingSearcher` (here): text queries through a query encoder into any of the embedding
  searchers above, so a dense model and BM25 are searched alike (`tt_zoo.retrieval.fusion`).

Each has `len(searcher)` (the number of candidates) and `search(queries, k) -> SearchResult`,
with queries of the searcher's kind (embeddings `[num_queries, dim]` or strings). A
`SearchResult` holds, per query and best first, the candidates' row numbers (their positions in
the searcher's candidate list, which evaluation compares with the gold rows), their scores and
their ids; `SearchResult.hits` is the per-query `Hit` view that
`tt_zoo.zoo.zoo_model.TextIndex.search` returns.

`exact_top_k` is the only brute-force top-k in tt_zoo (TensorFlow matmul + `tf.math.top_k`;
measured 1.2-1.5x faster in batches and 1.5-2.8x for one query than NumPy argpartition on 10k x
512 and 50k x 256 candidates, 2 CPU cores).
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Protocol, Sequence, Tuple, runtime_checkable

import numpy as np

# Brute-force scoring works on query blocks of this size so [block, n] scores fit in memory.
QUERY_BLOCK = 1024


@dataclasses.dataclass(frozen=True)
class Hit:
    """One search result: the candidate's id, score, and text."""

    id: str
    score: float
    text: str
    title: str = ""


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """The top-k candidates of each query, best first.

    Attributes:
      rows: int64 `[num_queries, k]`, each candidate's position in the searcher's candidate list;
        -1 pads a query with fewer than k results (BM25 gives none to a query without an
        indexed term).
      scores: float32 `[num_queries, k]`, inner products (embedding searchers) or BM25 scores;
        NaN where `rows` is -1.
      ids: per query, the candidate ids of its rows (without the padding).

    The arrays are read-only.
    """

    rows: np.ndarray
    scores: np.ndarray
    ids: Tuple[Tuple[str, ...], ...]

    def __post_init__(self):
        rows = np.array(self.rows, dtype=np.int64)
        scores = np.array(self.scores, dtype=np.float32)
        if rows.ndim != 2 or rows.shape != scores.shape:
            raise ValueError(f"SearchResult: rows and scores must both be [num_queries, k] "
                             f"(got rows {rows.shape}, scores {scores.shape}).")
        ids = tuple(tuple(row) for row in self.ids)
        if len(ids) != rows.shape[0]:
            raise ValueError(f"SearchResult: ids has {len(ids)} rows for {rows.shape[0]} queries.")
        rows.setflags(write=False)
        scores.setflags(write=False)
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "ids", ids)

    @classmethod
    def from_rows(cls, rows, scores, candidate_ids: Sequence[str]) -> "SearchResult":
        """The result for `rows` (-1 pads) and `scores` of a searcher over `candidate_ids`."""
        rows = np.asarray(rows, dtype=np.int64)
        scores = np.where(rows < 0, np.nan, np.asarray(scores, dtype=np.float32))
        table = np.asarray(candidate_ids, dtype=object)
        return cls(rows, scores, tuple(tuple(table[row[row >= 0]]) for row in rows))

    @classmethod
    def of_no_queries(cls, width: int = 0) -> "SearchResult":
        """The result of searching no queries: `[0, width]` rows and scores."""
        return cls(np.zeros((0, width), np.int64), np.zeros((0, width), np.float32), ())

    def __len__(self) -> int:
        """The number of queries."""
        return self.rows.shape[0]

    @property
    def empty(self) -> np.ndarray:
        """bool `[num_queries]`: the queries that got no result at all."""
        return (self.rows < 0).all(axis=1)

    def hits(self, texts: Optional[Sequence[str]] = None,
             titles: Optional[Sequence[str]] = None) -> List[List[Hit]]:
        """Per query, its `Hit`s, best first; `texts[row]` and `titles[row]` fill in each hit's
        text and title when given (the searcher's candidates in its order)."""
        out = []
        for row_ids, rows, scores in zip(self.ids, self.rows, self.scores):
            out.append([Hit(cid, float(score), texts[row] if texts is not None else "",
                            titles[row] if titles is not None else "")
                        for cid, row, score in zip(row_ids, rows, scores)])
        return out


@runtime_checkable
class Searcher(Protocol):
    """Anything that searches a fixed list of candidates: `ExactSearcher`,
    `tt_zoo.retrieval.index.EmbeddingIndex` (ScaNN or brute force), `tt_zoo.retrieval.bm25.BM25Retriever`."""

    def __len__(self) -> int:
        """The number of candidates."""

    def search(self, queries, k: int) -> SearchResult:
        """The top-k candidates of each query (embeddings or strings, as the searcher takes)."""


@runtime_checkable
class TextSearcher(Protocol):
    """Passages searched with query text, answering `Hit`s: what every ``index`` of a zoo model
    returns (`tt_zoo.zoo.zoo_model.TextIndex` for a two-tower model;
    `tt_zoo.retrieval.passage_index.PassageIndex` for BM25, ColBERT re-ranking or its token
    index, HDCT's weighted BM25 and a fusion of any two), as pyserini's searchers all take text.

    Under it is one `Searcher` of query strings, `searcher` (rows and scores of the passages in
    their order: what `tt_zoo.evaluation.metrics` evaluates and `tt_zoo.retrieval.fusion` fuses);
    a dense one is a `QueryEncodingSearcher` over the vector index (`EmbeddingIndex`).
    """

    searcher: Searcher

    def __len__(self) -> int:
        """The number of passages."""

    def search(self, query, k: int = 10):
        """The top-k `Hit`s of one query string, best first (a sequence of strings gives one
        list a query, as `search_batch`)."""

    def search_batch(self, queries, k: int = 10) -> List[List[Hit]]:
        """The top-k `Hit`s of each query string, best first."""


# -- validation -------------------------------------------------------------------------------

def check_embeddings(embeddings, what: str = "candidate embeddings") -> np.ndarray:
    """`embeddings` as a contiguous float32 `[num, dim]` array, non-empty and finite."""
    array = np.asarray(embeddings)
    if array.ndim != 2:
        raise ValueError(f"The {what} must be 2D [num, dim] (got shape {array.shape}).")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"The {what} must be non-empty (got shape {array.shape}).")
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"The {what} must be floating point (got dtype {array.dtype}).")
    array = np.ascontiguousarray(array, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(array).all(axis=1))
    if bad.size:
        raise ValueError(f"The {what} hold NaN or inf in {bad.size} rows "
                         f"(first at row {int(bad[0])}).")
    return array


def check_queries(query_embeddings, dim: int) -> np.ndarray:
    """`check_embeddings` of query embeddings, which must also have `dim` columns."""
    queries = check_embeddings(query_embeddings, "query embeddings")
    if queries.shape[1] != dim:
        raise ValueError(f"The query embeddings must be [num_queries, {dim}] for this "
                         f"index (got shape {queries.shape}).")
    return queries


def check_ids(ids: Sequence[str], num_candidates: int) -> List[str]:
    """`ids` as a list: one unique, non-empty str per candidate, without newline or tab."""
    if isinstance(ids, (str, bytes)):
        raise ValueError("candidate ids must be a sequence of strings, not one string.")
    ids = list(ids)
    if len(ids) != num_candidates:
        raise ValueError(f"Got {len(ids)} candidate ids for {num_candidates} candidate "
                         "embeddings; they must match one to one.")
    seen = {}
    for position, candidate_id in enumerate(ids):
        if not isinstance(candidate_id, str):
            raise ValueError(f"Candidate id at position {position} must be str "
                             f"(got {type(candidate_id).__name__}: {candidate_id!r}).")
        if not candidate_id:
            raise ValueError(f"Candidate id at position {position} is empty.")
        if any(c in candidate_id for c in "\n\r\t"):
            raise ValueError(f"Candidate id at position {position} ({candidate_id!r}) holds a "
                             "newline, carriage return or tab; ids are stored one per line.")
        if candidate_id in seen:
            raise ValueError(f"Candidate id {candidate_id!r} is duplicated (positions "
                             f"{seen[candidate_id]} and {position}); ids must be unique.")
        seen[candidate_id] = position
    return ids


def default_ids(num_candidates: int) -> List[str]:
    """The ids of candidates given without ids: their positions, as strings."""
    return [str(i) for i in range(num_candidates)]


def check_built_searcher(searcher, who: str, hint: str = "") -> None:
    """Raises TypeError unless `searcher` is a built `Searcher` (an instance, not its class or
    a builder); `who` names it in the message, `hint` (if any) says what to pass instead."""
    if isinstance(searcher, type) or not isinstance(searcher, Searcher):
        got = getattr(searcher, "__name__", type(searcher).__name__)
        raise TypeError(f"{who} must be a built tt_zoo.retrieval.search.Searcher (a built "
                        f"Searcher answers len() and search(queries, k)); got {got}{hint}.")


def check_text_queries(queries, who: str, hint: str = "") -> list:
    """`queries` as a list; ValueError naming `who` (and `hint`, what to call instead) when it
    is one string rather than a sequence of them."""
    if isinstance(queries, (str, bytes)):
        raise ValueError(f"{who}: queries must be a sequence of strings, not one string{hint}.")
    return list(queries)


def check_k(k) -> int:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int (got {k!r}).")
    return int(k)


# -- brute force ------------------------------------------------------------------------------

def exact_top_k(query_emb, cand_emb, k: int, *, block_size: int = QUERY_BLOCK):
    """Brute-force top-k by dot product (exact MIPS), in blocks of queries.

    Args:
      query_emb: `[num_queries, dim]`.
      cand_emb: `[num_candidates, dim]`, an array or a float32 `tf.Tensor` (a searcher keeps
        its candidates as one, converted once).
      k: how many to return; capped at `num_candidates`.
      block_size: queries scored per matmul.

    Returns:
      `(rows, scores)`: int64 and float32 `[num_queries, k]`, best first; ties go to the lower
      row (`tf.math.top_k` keeps the lower index first).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    query_emb = np.asarray(query_emb, dtype=np.float32)
    if not isinstance(cand_emb, tf.Tensor):
        cand_emb = np.asarray(cand_emb, dtype=np.float32)
    q_shape, c_shape = tuple(query_emb.shape), tuple(cand_emb.shape)
    if len(q_shape) != 2 or len(c_shape) != 2:
        raise ValueError(f"Embeddings must be 2D (got query {q_shape}, candidates {c_shape}).")
    if q_shape[1] != c_shape[1]:
        raise ValueError(f"Query and candidate dims differ (got {q_shape[1]} and {c_shape[1]}).")
    if c_shape[0] == 0:
        raise ValueError("exact_top_k: no candidates.")
    if block_size < 1:
        raise ValueError(f"exact_top_k: block_size must be positive (got {block_size}).")
    k = min(check_k(k), c_shape[0])
    candidates = tf.convert_to_tensor(cand_emb, dtype=tf.float32)
    rows = np.empty((q_shape[0], k), dtype=np.int64)
    scores = np.empty((q_shape[0], k), dtype=np.float32)
    for start in range(0, q_shape[0], block_size):
        block = tf.constant(query_emb[start:start + block_size])
        values, top = tf.math.top_k(tf.linalg.matmul(block, candidates, transpose_b=True), k)
        rows[start:start + block_size] = top.numpy()
        scores[start:start + block_size] = values.numpy()
    return rows, scores


class ExactSearcher:
    """The exact top-k by inner product over candidate embeddings (brute force).

    Args:
      embeddings: float `[num_candidates, dim]` candidate embeddings psi(d).
      ids: unique str ids, one per candidate; default their positions (`"0"`, `"1"`, ...).

    Example:
    >>> ExactSearcher(np.eye(3, dtype="float32"), ["a", "b", "c"]).search(
    ...     np.array([[0.0, 2.0, 1.0]], "float32"), k=2).ids
    (('b', 'c'),)
    """

    def __init__(self, embeddings, ids: Optional[Sequence[str]] = None):
        self.embeddings = check_embeddings(embeddings)
        num, self.dim = self.embeddings.shape
        self.ids = tuple(check_ids(default_ids(num) if ids is None else ids, num))
        self._candidates = None  # a tf.Tensor, converted on the first search

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"ExactSearcher(num_candidates={len(self)}, dim={self.dim})"

    def search(self, query_embeddings, k: int = 10) -> SearchResult:
        """The exact top-k of each query, `query_embeddings` float `[num_queries, dim]`."""
        queries = check_queries(query_embeddings, self.dim)
        if self._candidates is None:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            self._candidates = tf.constant(self.embeddings)
        rows, scores = exact_top_k(queries, self._candidates, k)
        return SearchResult.from_rows(rows, scores, self.ids)


class WrappedSearcher:
    """Base of a searcher that wraps a built `Searcher` (`searcher`): its length and `ids` are
    the wrapped one's, its repr names it. A subclass adds what it does on top (encoding the
    queries, keeping results, holding the texts).

    Args:
      searcher: a built `Searcher` (`check_built_searcher`, the error naming the subclass).
    """

    def __init__(self, searcher):
        check_built_searcher(searcher, f"{type(self).__name__}: searcher")
        self.searcher = searcher

    @property
    def ids(self):
        """The wrapped searcher's candidate ids (None when it has none)."""
        return getattr(self.searcher, "ids", None)

    def __len__(self) -> int:
        return len(self.searcher)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.searcher!r})"


class QueryEncodingSearcher(WrappedSearcher):
    """A searcher over query embeddings searched with text: `search(texts, k)` is
    `searcher.search(encode_queries(texts), k)`, `len` and `ids` are the wrapped searcher's.

    Args:
      encode_queries: maps a list of strings to their float `[num_queries, dim]` embeddings
        (e.g. a zoo model's `encode_queries`, phi(q) of Chang et al. 2020, Sec. 2).
      searcher: a `Searcher` over candidate embeddings (`ExactSearcher`, `EmbeddingIndex`).

    Example:
    >>> encode = lambda texts: np.array([[0.0, 2.0, 1.0] for _ in texts], "float32")
    >>> QueryEncodingSearcher(encode, ExactSearcher(np.eye(3, dtype="float32"))).search(
    ...     ["any text"], k=2).ids
    (('1', '2'),)
    """

    def __init__(self, encode_queries, searcher):
        if not callable(encode_queries):
            raise TypeError(f"QueryEncodingSearcher: encode_queries must be callable (got "
                            f"{type(encode_queries).__name__}).")
        super().__init__(searcher)
        self.encode_queries = encode_queries

    def search(self, queries: Sequence[str], k: int = 10) -> SearchResult:
        """The top-k candidates of each query string; no queries give an empty result."""
        queries = check_text_queries(queries, "QueryEncodingSearcher.search")
        k = check_k(k)
        if not queries:
            return SearchResult.of_no_queries(min(k, len(self)))
        return self.searcher.search(self.encode_queries(queries), k)
