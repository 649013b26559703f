"""Score fusion: one `Searcher` over two searchers of the same candidate list.

Each searcher's top `depth` candidates of a query are merged into one ranking, by

- **reciprocal-rank fusion** (RRF; Cormack, Clarke and Buettcher, SIGIR 2009, Sec. 2):
  ``score(d) = sum over the two rankings r that hold d of 1 / (rrf_k + r(d))``, r(d) the 1-based
  rank, ``rrf_k = 60`` as in the paper; it reads ranks only, so no score scale matters;
- a **convex combination** of normalised scores (Bruch, Gai and Ingber, ACM TOIS 2023, "An
  Analysis of Fusion Functions for Hybrid Retrieval", Sec. 4: ``w * norm(a) + (1 - w) * norm(b)``,
  which they find more accurate than RRF once w is tuned on a few queries); ``norm`` is the
  min-max normalisation of Lee (SIGIR 1997) of each searcher's scores over its own top `depth`
  of that query: its best candidate gets 1, its `depth`-th 0, and a candidate missing from that
  list gets the list's floor, 0. A list whose scores all tie gives each of its candidates 1.

**Filled scores** (``fill_depth``): the floor of 0 is a guess, and an optimistic one: a
candidate missing from a list scores below that list's `depth`-th. With ``fill_depth > depth``
each searcher is searched to `fill_depth`, and a candidate of the other list's top `depth` that
this list holds deeper gets its own normalised score (below 0: the same min and max of the
top `depth`) and its own rank; one missing even there gets the `fill_depth`-th score's (the
bound on its own). The union, and the normalisation, stay those of the two top-`depth` lists.

Only candidates in either top-`depth` list are ranked, so a result is at most ``2 * depth`` long
(then -1 padded to ``min(k, number of candidates)``). Equal fused scores go to the first
searcher's order, then the second's, then the lower row (in a convex combination with weight
below 0.5, to the second's order first); so ``weight=1.0`` returns the first searcher's own
ranking (its list, then the second's other candidates) and ``weight=0.0`` the second's. A
sub-result with -1 rows or NaN scores (BM25 finds nothing for a query without an indexed term)
simply has fewer candidates: such a query's fused list is the other searcher's.

`choose_fusion_weight` picks the convex weight on validation queries: each searcher is searched
once at `depth` (`FusionSearcher.search_both`), then every weight of the grid is a cheap re-sort
(`FusionInputs.convex`).

Example:
>>> from tt_zoo.retrieval.search import ExactSearcher
>>> a = ExactSearcher(np.eye(3, dtype="float32"), ["x", "y", "z"])
>>> fused = FusionSearcher(a, a, method="rrf", depth=2)
>>> fused.search(np.array([[0.0, 2.0, 1.0]], "float32"), k=3).ids
(('y', 'z'),)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from tt_zoo.retrieval.search import SearchResult, check_built_searcher, check_k

METHODS = ("rrf", "convex")
DEFAULT_DEPTH = 100
DEFAULT_RRF_K = 60
WEIGHT_GRID = tuple(round(0.05 * i, 2) for i in range(21))  # 0.0, 0.05, ..., 1.0


def candidate_ids(searcher, what: str = "searcher") -> Tuple[str, ...]:
    """A searcher's candidate ids, in its row order (its `ids` attribute)."""
    ids = getattr(searcher, "ids", None)
    if ids is None:
        raise TypeError(f"{what} ({type(searcher).__name__}) has no `ids`: score fusion needs each "
                        "searcher's candidate ids, to check both search one candidate list.")
    if len(ids) != len(searcher):
        raise ValueError(f"{what} ({type(searcher).__name__}) has {len(ids)} ids for "
                         f"{len(searcher)} candidates.")
    return tuple(ids)


def check_same_candidates(first, second) -> Tuple[str, ...]:
    """The candidate ids both searchers share; raises ValueError when their lists differ."""
    for what, s in (("the first searcher", first), ("the second searcher", second)):
        check_built_searcher(s, f"score fusion: {what}")
    ids_a = candidate_ids(first, "the first searcher")
    ids_b = candidate_ids(second, "the second searcher")
    if len(ids_a) != len(ids_b):
        raise ValueError(f"score fusion: the first searcher has {len(ids_a):,} candidates and "
                         f"the second {len(ids_b):,}; both must search the same candidate list.")
    if ids_a != ids_b:
        at = next(i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y)
        raise ValueError(f"score fusion: the two searchers' candidate lists differ at row {at} "
                         f"(ids {ids_a[at]!r} and {ids_b[at]!r}); both must hold the same ids in "
                         "the same order.")
    return ids_a


def _ranked_list(result: SearchResult, depth: int, num_queries: int, num_candidates: int,
                 what: str, fill_depth: Optional[int] = None):
    """One sub-result's top `depth`: rows (-1 where missing), 1-based ranks (inf where missing),
    min-max normalised scores (0 where missing), all float64 but the rows. With `fill_depth`, also
    its top `fill_depth` normalised by the same min and max, as `_Fill`."""
    if not isinstance(result, SearchResult):
        raise TypeError(f"score fusion: {what}.search returned {type(result).__name__}, not a "
                        "SearchResult.")
    if len(result) != num_queries:
        raise ValueError(f"score fusion: {what} returned {len(result)} result rows for "
                         f"{num_queries} queries.")
    deep_rows = result.rows[:, :fill_depth or depth]
    deep_scores = result.scores[:, :fill_depth or depth].astype(np.float64)
    rows, scores = deep_rows[:, :depth], deep_scores[:, :depth]
    valid = (rows >= 0) & np.isfinite(scores)
    if (deep_rows >= num_candidates).any():
        raise ValueError(f"score fusion: {what} returned row {int(deep_rows.max())}, beyond "
                         f"its {num_candidates} candidates.")
    rows = np.where(valid, rows, -1)
    deep_valid = (deep_rows >= 0) & np.isfinite(deep_scores)
    ordered = np.sort(np.where(deep_valid, deep_rows, -1), axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
    if repeated.any():
        q, j = np.argwhere(repeated)[0]
        raise ValueError(f"score fusion: {what} returned row {int(ordered[q, j])} twice for "
                         f"query {int(q)}.")
    ranks = np.where(valid, np.cumsum(valid, axis=1), np.inf)
    high = np.where(valid, scores, -np.inf).max(axis=1, initial=-np.inf)[:, None]
    low = np.where(valid, scores, np.inf).min(axis=1, initial=np.inf)[:, None]
    spread = np.where(high > low, high - low, 1.0)
    normalised = np.where(valid, np.where(high > low, (scores - low) / spread, 1.0), 0.0)
    if fill_depth is None:
        return rows, ranks, normalised, None
    deep = np.where(deep_valid, np.where(high > low, (deep_scores - low) / spread, 1.0), np.inf)
    return rows, ranks, normalised, _Fill(np.where(deep_valid, deep_rows, -1), deep,
                                          num_candidates)


class _Fill:
    """One searcher's top `fill_depth` of each query, looked up by (query, row): each row's
    1-based rank and normalised score there; a row it does not hold gets rank inf and the lowest
    normalised score it returned (0 where it returned none)."""

    def __init__(self, rows: np.ndarray, normalised: np.ndarray, num_candidates: int):
        self.n = num_candidates
        held = rows >= 0
        self.floor = np.where(held, normalised, np.inf).min(axis=1, initial=np.inf)
        self.floor = np.where(np.isfinite(self.floor), self.floor, 0.0)
        keys = self._keys(rows)[held]
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.ranks = np.cumsum(held, axis=1)[held][order].astype(np.float64)
        self.normalised = normalised[held][order]

    def _keys(self, rows: np.ndarray) -> np.ndarray:
        return np.arange(len(rows))[:, None] * (self.n + 1) + rows

    def lookup(self, rows: np.ndarray):
        """(ranks, normalised) of `rows` (int64 `[num_queries, width]`, -1 pads)."""
        floor = np.where(rows >= 0, self.floor[:, None], 0.0)
        if not len(self.keys):
            return np.full(rows.shape, np.inf), floor
        keys = self._keys(rows)  # a pad's key is no row's: (query - 1, row n)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = (rows >= 0) & (self.keys[at] == keys)
        return (np.where(found, self.ranks[at], np.inf),
                np.where(found, self.normalised[at], floor))


class FusionInputs:
    """Both searchers' top-`depth` lists for a batch of queries, merged per query once.

    Every fused ranking of these queries (`rrf`, `convex` at any weight) is then one sort.

    Attributes:
      rows: int64 `[num_queries, width]`, each query's candidates in either list (-1 pads).
      ranks: float64 `[2, num_queries, width]`, each candidate's 1-based rank in the first and
        second list (inf where missing).
      normalised: float64 `[2, num_queries, width]`, its min-max normalised score in each list
        (0 where missing; with `fill_depth`, filled from the deeper lists, see the module).
    """

    def __init__(self, first: SearchResult, second: SearchResult, *, depth: int,
                 candidate_ids: Sequence[str], fill_depth: Optional[int] = None):
        n = len(candidate_ids)
        num_queries = len(first)
        self.candidate_ids = candidate_ids
        self.num_candidates = n
        parts = [_ranked_list(r, depth, num_queries, n, what, fill_depth)
                 for r, what in ((first, "the first searcher"), (second, "the second searcher"))]
        widths = [p[0].shape[1] for p in parts]
        # Every (query, list entry) joins the group of its row: sort the two lists' rows together
        # (missing entries last, as row n), and number the distinct rows of each query.
        joined = np.concatenate([np.where(p[0] < 0, n, p[0]) for p in parts], axis=1)
        width = joined.shape[1]
        order = np.argsort(joined, axis=1, kind="stable")
        ordered = np.take_along_axis(joined, order, axis=1)
        new = np.ones_like(ordered, dtype=bool)
        new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        group = np.cumsum(new, axis=1) - 1
        flat = (np.arange(num_queries)[:, None] * width + group).ravel()
        union = np.full(num_queries * width, n, dtype=np.int64)
        union[flat] = ordered.ravel()
        self.rows = np.where(union < n, union, -1).reshape(num_queries, width)
        self.ranks = np.full((2, num_queries * width), np.inf)
        self.normalised = np.zeros((2, num_queries * width))
        source = order.ravel()
        for i, (rows, ranks, normalised, _) in enumerate(parts):
            offset = 0 if i == 0 else widths[0]
            mine = (source >= offset) & (source < offset + widths[i])
            mine &= ordered.ravel() < n
            column = source[mine] - offset
            query = np.repeat(np.arange(num_queries), width)[mine]
            self.ranks[i, flat[mine]] = ranks[query, column]
            self.normalised[i, flat[mine]] = normalised[query, column]
        self.ranks = self.ranks.reshape(2, num_queries, width)
        self.normalised = self.normalised.reshape(2, num_queries, width)
        for i, fill in enumerate(p[3] for p in parts):
            if fill is not None:
                missing = (self.rows >= 0) & np.isinf(self.ranks[i])
                ranks, normalised = fill.lookup(self.rows)
                self.ranks[i] = np.where(missing, ranks, self.ranks[i])
                self.normalised[i] = np.where(missing, normalised, self.normalised[i])
        # Tie orders: one list's order, then the other's, then the lower row (the union is in
        # row order); each by stable sorts from the last key to the first.
        self._tie_orders = []
        for lead, then in ((0, 1), (1, 0)):
            by_then = np.argsort(self.ranks[then], axis=1, kind="stable")
            self._tie_orders.append(np.take_along_axis(by_then, np.argsort(
                np.take_along_axis(self.ranks[lead], by_then, axis=1), axis=1, kind="stable"),
                axis=1))

    def __len__(self) -> int:
        return self.rows.shape[0]

    def rrf_scores(self, rrf_k: float = DEFAULT_RRF_K) -> np.ndarray:
        """`[num_queries, width]` sum of 1 / (rrf_k + rank) over the lists holding each row."""
        return (1.0 / (rrf_k + self.ranks)).sum(axis=0)  # 1 / inf = 0 for a missing one

    def convex_scores(self, weight: float) -> np.ndarray:
        """`[num_queries, width]` weight * norm(first) + (1 - weight) * norm(second)."""
        return weight * self.normalised[0] + (1.0 - weight) * self.normalised[1]

    def top(self, scores: np.ndarray, k: int, ties_to: int = 0) -> SearchResult:
        """The `k` best rows by `scores` (`[num_queries, width]`, over `rows`), ties broken by
        the rank in list `ties_to` (0: the first, 1: the second), then in the other, then by
        the row; -1 pads to ``min(k, n)``."""
        k = min(check_k(k), self.num_candidates)
        scores = np.where(self.rows >= 0, scores, -np.inf)
        tie_order = self._tie_orders[ties_to]
        order = np.take_along_axis(tie_order, np.argsort(
            -np.take_along_axis(scores, tie_order, axis=1), axis=1, kind="stable"), axis=1)
        order = order[:, :k]
        rows = np.full((len(self), k), -1, dtype=np.int64)
        out = np.full((len(self), k), np.nan, dtype=np.float64)
        rows[:, :order.shape[1]] = np.take_along_axis(self.rows, order, axis=1)
        out[:, :order.shape[1]] = np.take_along_axis(scores, order, axis=1)
        return SearchResult.from_rows(rows, out, self.candidate_ids)

    def rrf(self, k: int, rrf_k: float = DEFAULT_RRF_K) -> SearchResult:
        return self.top(self.rrf_scores(rrf_k), k)

    def convex(self, k: int, weight: float) -> SearchResult:
        """Ties go to the order of the list with the larger weight (the first at 0.5)."""
        return self.top(self.convex_scores(weight), k, ties_to=0 if weight >= 0.5 else 1)


def check_fill_depth(fill_depth, depth: int) -> Optional[int]:
    """None, or a whole number above `depth` (ValueError naming both otherwise)."""
    if fill_depth is None:
        return None
    if isinstance(fill_depth, bool) or not isinstance(fill_depth, (int, np.integer)) \
            or fill_depth <= depth:
        raise ValueError(f"fill_depth must be None or a whole number above depth ({depth}); "
                         f"got {fill_depth!r}.")
    return int(fill_depth)


def _check_weight(weight) -> float:
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.floating, np.integer)) \
            or not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"The fusion weight must be a number in [0, 1] (got {weight!r}).")
    return float(weight)


class FusionSearcher:
    """Reciprocal-rank fusion or a convex combination of two searchers of one candidate list.

    Args:
      first, second: `Searcher`s over the same candidates (same ids in the same order, each
        with an `ids` attribute), searched with the same queries (both text-query searchers,
        e.g. `BM25Retriever` and a `QueryEncodingSearcher` over an `ExactSearcher`).
      method: "rrf" or "convex".
      weight: the first searcher's share in "convex" (the second gets 1 - weight).
      depth: how many of each searcher's candidates are fused per query.
      rrf_k: the constant of "rrf".
      fill_depth: None (a candidate missing from one list gets its floor), or a depth beyond
        `depth` to which each searcher is searched, to fill in the scores and ranks of the
        other list's candidates (the module's "filled scores").

    Example:
    >>> fused = FusionSearcher(bm25, dense, method="convex", weight=0.3)  # doctest: +SKIP
    >>> fused.search(["who discovered penicillin?"], k=10)                # doctest: +SKIP
    """

    def __init__(self, first, second, *, method: str = "rrf", weight: float = 0.5,
                 depth: int = DEFAULT_DEPTH, rrf_k: float = DEFAULT_RRF_K,
                 fill_depth: Optional[int] = None):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS} (got {method!r}).")
        self.ids = check_same_candidates(first, second)
        self.first, self.second = first, second
        self.method = method
        self.weight = _check_weight(weight)
        self.depth = check_k(depth)
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, (int, float)) or not (
                math.isfinite(rrf_k) and rrf_k >= 0):
            raise ValueError(f"rrf_k must be a finite number >= 0 (got {rrf_k!r}).")
        self.rrf_k = rrf_k
        self.fill_depth = check_fill_depth(fill_depth, self.depth)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if v is not None)
        return f"FusionSearcher({settings})"

    def describe(self) -> dict:
        """The settings: method, weight (convex only), depth, rrf_k (rrf only), fill_depth
        (when given)."""
        return {"method": self.method,
                "weight": self.weight if self.method == "convex" else None,
                "depth": self.depth,
                "rrf_k": self.rrf_k if self.method == "rrf" else None,
                **({"fill_depth": self.fill_depth} if self.fill_depth else {})}

    def search_both(self, queries) -> FusionInputs:
        """Each searcher's top `depth` of each query, merged (`FusionInputs`)."""
        if isinstance(queries, (str, bytes)):
            raise ValueError("FusionSearcher.search: queries must be a sequence, not one string.")
        depth = min(self.depth, len(self))
        searched = min(self.fill_depth or depth, len(self))
        return FusionInputs(self.first.search(queries, searched),
                            self.second.search(queries, searched), depth=depth,
                            candidate_ids=self.ids,
                            fill_depth=searched if searched > depth else None)

    def search(self, queries, k: int = 10) -> SearchResult:
        """The fused top-k of each query (at most 2 * depth candidates, -1 padding the rest)."""
        k = min(check_k(k), len(self))
        if isinstance(queries, (str, bytes)):
            raise ValueError("FusionSearcher.search: queries must be a sequence, not one string.")
        if len(queries) == 0:
            return SearchResult.of_no_queries(k)
        inputs = self.search_both(queries)
        if self.method == "rrf":
            return inputs.rrf(k, self.rrf_k)
        return inputs.convex(k, self.weight)


@dataclasses.dataclass(frozen=True)
class WeightChoice:
    """The convex weight chosen on validation queries, and the metric of every grid weight.

    Attributes:
      weight: the grid weight with the highest metric (the lowest such weight on a tie).
      values: grid weight -> metric value, in grid order.
      num_queries, depth, k: the validation queries scored, the fusion depth, the result length.
    """

    weight: float
    values: Dict[float, float]
    num_queries: int
    depth: int
    k: int

    def as_dict(self) -> dict:
        return {"weight": self.weight, "num_queries": self.num_queries, "depth": self.depth,
                "k": self.k, "grid": [[w, v] for w, v in self.values.items()]}


def choose_fusion_weight(first, second, queries, metric: Callable[[np.ndarray], float], *,
                         grid: Sequence[float] = WEIGHT_GRID, depth: int = DEFAULT_DEPTH,
                         k: Optional[int] = None,
                         fill_depth: Optional[int] = None) -> WeightChoice:
    """Chooses the convex combination's weight on validation queries.

    Each searcher is searched once per query at `depth`; every grid weight is then a re-sort
    of the same lists.

    Args:
      first, second: the searchers, as for `FusionSearcher`.
      queries: the validation queries (never the reported ones).
      metric: the fused rows (`SearchResult.rows`, int64 `[num_queries, k]`, -1 padding) ->
        a number, higher is better: e.g. ReQA's MRR against the gold rows, or ODQA's top-20
        answer recall against each question's answer rows.
      grid: the weights tried (each in [0, 1]).
      depth: the fusion depth.
      k: the fused result length the metric sees (default `depth`).
      fill_depth: as `FusionSearcher`.

    Returns:
      A `WeightChoice`.
    """
    grid = [_check_weight(w) for w in grid]
    if not grid:
        raise ValueError("choose_fusion_weight: the weight grid is empty.")
    if isinstance(queries, (str, bytes)) or len(queries) == 0:
        raise ValueError("choose_fusion_weight: no validation queries (a non-empty sequence of "
                         "queries is needed).")
    fusion = FusionSearcher(first, second, method="convex", depth=depth, fill_depth=fill_depth)
    k = fusion.depth if k is None else check_k(k)
    inputs = fusion.search_both(queries)
    values = {}
    for w in grid:
        value = metric(inputs.convex(k, w).rows)
        if not isinstance(value, (int, float, np.floating, np.integer)) or not np.isfinite(value):
            raise ValueError(f"choose_fusion_weight: the metric returned {value!r} at weight "
                             f"{w}; it must return a finite number.")
        values[w] = float(value)
    best = max(values.values())
    weight = next(w for w in grid if values[w] == best)
    return WeightChoice(weight, values, len(queries), fusion.depth, k)
