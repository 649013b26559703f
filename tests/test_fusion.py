"""Score fusion (tt_zoo.retrieval.fusion): hand-worked RRF and convex numbers on fake searchers,
ties, short and padded sub-results, candidate-list checks, the weight chooser; and the
text-query adapter `QueryEncodingSearcher`."""

import numpy as np
import pytest

from tt_zoo.evaluation import odqa
from tt_zoo.retrieval.fusion import (FusionSearcher, WEIGHT_GRID, choose_fusion_weight)
from tt_zoo.retrieval.search import ExactSearcher, QueryEncodingSearcher, SearchResult

IDS = ["a", "b", "c", "d"]


class Fixed:
    """A Searcher whose (rows, scores) per query are given; -1 rows pad, NaN scores there.
    Counts its searches."""

    def __init__(self, results, ids=IDS):
        self.results, self.ids, self.calls = results, list(ids), 0

    def __len__(self):
        return len(self.ids)

    def search(self, queries, k):
        self.calls += 1
        rows = np.full((len(queries), k), -1)
        scores = np.full((len(queries), k), np.nan)
        for i, q in enumerate(queries):
            r, s = self.results[q]
            rows[i, :min(k, len(r))] = r[:k]
            scores[i, :min(k, len(s))] = s[:k]
        return SearchResult.from_rows(rows, scores, self.ids)


# first:  a (3.0), b (2.0), c (1.0)     -> min-max: a 1, b 0.5, c 0; d missing (0)
# second: c (0.9), a (0.5), d (0.1)     -> min-max: c 1, a 0.5, d 0; b missing (0)
FIRST = Fixed({"q": ([0, 1, 2], [3.0, 2.0, 1.0])})
SECOND = Fixed({"q": ([2, 0, 3], [0.9, 0.5, 0.1])})


def test_rrf_hand_worked():
    # rrf_k = 60: a 1/61 + 1/62, b 1/62, c 1/63 + 1/61, d 1/63.
    out = FusionSearcher(FIRST, SECOND, method="rrf").search(["q"], k=4)
    assert out.ids == (("a", "c", "b", "d"),)
    np.testing.assert_allclose(out.scores[0], [1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62, 1 / 63],
                               rtol=1e-6)
    # rrf_k = 1: a 1/2 + 1/3, c 1/4 + 1/2, b 1/3, d 1/4.
    out = FusionSearcher(FIRST, SECOND, method="rrf", rrf_k=1).search(["q"], k=3)
    np.testing.assert_allclose(out.scores[0], [5 / 6, 3 / 4, 1 / 3], rtol=1e-6)
    assert out.rows.tolist() == [[0, 2, 1]]


def test_convex_hand_worked():
    # w = 0.5: a .5*1 + .5*.5 = .75, b .5*.5 = .25, c .5*1 = .5, d 0.
    out = FusionSearcher(FIRST, SECOND, method="convex", weight=0.5).search(["q"], k=4)
    assert out.ids == (("a", "c", "b", "d"),)
    np.testing.assert_allclose(out.scores[0], [0.75, 0.5, 0.25, 0.0], atol=1e-7)
    # w = 0.2: a .2 + .8*.5 = .6, b .2*.5 = .1, c .8, d 0.
    out = FusionSearcher(FIRST, SECOND, method="convex", weight=0.2).search(["q"], k=4)
    assert out.ids == (("c", "a", "b", "d"),)
    np.testing.assert_allclose(out.scores[0], [0.8, 0.6, 0.1, 0.0], atol=1e-7)


def test_depth_cuts_each_list_before_normalising():
    # depth 2: first a (3), b (2) -> a 1, b 0; second c (.9), a (.5) -> c 1, a 0.
    # w = 0.5: a .5, c .5 (tie: a is ranked by the first searcher), b 0, d never seen.
    fused = FusionSearcher(FIRST, SECOND, method="convex", weight=0.5, depth=2)
    out = fused.search(["q"], k=4)
    assert out.rows.tolist() == [[0, 2, 1, -1]]
    np.testing.assert_allclose(out.scores[0, :3], [0.5, 0.5, 0.0])
    assert np.isnan(out.scores[0, 3]) and out.ids == (("a", "c", "b"),)
    assert fused.describe() == {"method": "convex", "weight": 0.5, "depth": 2, "rrf_k": None}
    assert FusionSearcher(FIRST, SECOND).describe() == {"method": "rrf", "weight": None,
                                                       "depth": 100, "rrf_k": 60}


def test_filled_scores_replace_the_floor_with_the_deeper_lists_own():
    # depth 2, fill_depth 3. First's top 2 a (3), b (2) -> a 1, b 0; deeper, c (1) -> (1-2)/1 = -1.
    # Second's top 2 c (.9), a (.5) -> c 1, a 0; deeper, d (.1) -> (.1-.5)/.4 = -1; b is not in
    # its top 3, so it gets that list's lowest, -1. w = 0.5: a .5, c (-1 + 1)/2 = 0, b -.5
    # (the floor gave c .5, b 0). d is in neither top 2: not ranked.
    fused = FusionSearcher(FIRST, SECOND, method="convex", weight=0.5, depth=2, fill_depth=3)
    out = fused.search(["q"], k=4)
    assert out.rows.tolist() == [[0, 2, 1, -1]]
    np.testing.assert_allclose(out.scores[0, :3], [0.5, 0.0, -0.5], atol=1e-12)
    assert fused.describe()["fill_depth"] == 3
    # RRF reads the deeper ranks: c is third in the first list; b is in no top 3 of the second.
    out = FusionSearcher(FIRST, SECOND, method="rrf", depth=2, fill_depth=3).search(["q"], k=3)
    np.testing.assert_allclose(out.scores[0], [1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62])
    # A deeper list cut short (two results for a fill depth of 4) gives its own lowest: the same.
    out = FusionSearcher(FIRST, Fixed({"q": ([2, 0], [0.9, 0.5])}), method="convex",
                         weight=0.5, depth=2, fill_depth=4).search(["q"], k=3)
    np.testing.assert_allclose(out.scores[0], [0.5, 0.0, 0.0], atol=1e-12)  # a, c, b (floor 0)
    # A searcher that finds nothing (BM25 for a query without an indexed term): the other's.
    out = FusionSearcher(FIRST, Fixed({"q": ([], [])}), method="convex", weight=0.5, depth=2,
                         fill_depth=3).search(["q"], k=2)
    assert out.ids == (("a", "b"),)
    np.testing.assert_allclose(out.scores[0], [0.5, 0.0], atol=1e-12)
    # fill_depth must lie beyond depth.
    for bad in (2, 1, 2.5, True):
        with pytest.raises(ValueError, match="fill_depth must be None or a whole number above "
                                             r"depth \(2\)"):
            FusionSearcher(FIRST, SECOND, depth=2, fill_depth=bad)


def test_filled_scores_of_many_queries_match_a_per_query_reference():
    # Random lists of 3 queries over 30 candidates: every fused score equals the one worked
    # query by query with dictionaries (depth 5, fill 12).
    rng = np.random.default_rng(0)
    ids = [str(i) for i in range(30)]
    lists = []
    for _ in range(2):
        results = {}
        for q in "xyz":
            rows = rng.permutation(30)[:12]
            results[q] = (list(rows), sorted(rng.normal(size=12), reverse=True))
        lists.append(Fixed(results, ids))
    out = FusionSearcher(*lists, method="convex", weight=0.3, depth=5, fill_depth=12).search(
        list("xyz"), k=10)
    for i, q in enumerate("xyz"):
        norms = []
        for searcher in lists:
            rows, scores = searcher.results[q]
            low, high = min(scores[:5]), max(scores[:5])
            norms.append({r: (s - low) / (high - low) for r, s in zip(rows, scores)})
        union = set(lists[0].results[q][0][:5]) | set(lists[1].results[q][0][:5])
        want = {r: 0.3 * norms[0].get(r, min(norms[0].values()))
                + 0.7 * norms[1].get(r, min(norms[1].values())) for r in union}
        got = {int(r): float(s) for r, s in zip(out.rows[i], out.scores[i]) if r >= 0}
        assert got.keys() == union
        for r in union:
            assert got[r] == pytest.approx(want[r], abs=1e-6)  # results hold float32


def test_ties_go_to_the_first_searchers_order_then_the_seconds():
    # (In a convex combination below weight .5 they go to the second's order first.)
    first = Fixed({"q": ([0, 1], [1.0, 0.0])})
    second = Fixed({"q": ([1, 0], [1.0, 0.0])})
    # RRF: a and b both 1/61 + 1/62; convex .5: both .5. The first searcher ranks a first.
    for fused in (FusionSearcher(first, second, method="rrf"),
                  FusionSearcher(first, second, method="convex", weight=0.5)):
        assert fused.search(["q"], k=2).ids == (("a", "b"),)
        assert FusionSearcher(second, first, method=fused.method).search(
            ["q"], k=2).ids == (("b", "a"),)
    # The first has nothing; the second's two tie on score (min-max gives both 1): its order.
    empty = Fixed({"q": ([], [])})
    tied = Fixed({"q": ([3, 1], [0.5, 0.5])})
    out = FusionSearcher(empty, tied, method="convex", weight=0.5).search(["q"], k=3)
    assert out.rows.tolist() == [[3, 1, -1]]
    np.testing.assert_allclose(out.scores[0, :2], [0.5, 0.5])


def test_short_padded_and_nan_sub_results():
    # BM25 finds one candidate for q1 and none for q2 (-1 rows, NaN scores); a NaN score at a
    # real row counts as missing too.
    bm25 = Fixed({"q1": ([2, -1, -1], [1.5, np.nan, np.nan]), "q2": ([], [])})
    dense = Fixed({"q1": ([0, 2, 1, 3], [0.9, 0.8, 0.3, 0.1]),
                   "q2": ([3, 1, 0, 2], [0.4, 0.3, 0.2, 0.1])})
    rrf = FusionSearcher(bm25, dense, method="rrf").search(["q1", "q2"], k=4)
    # q1: c 1/61 + 1/62, a 1/61, b 1/63, d 1/64; q2 is the dense ranking alone.
    assert rrf.rows.tolist() == [[2, 0, 1, 3], [3, 1, 0, 2]]
    np.testing.assert_allclose(rrf.scores[1], [1 / 61, 1 / 62, 1 / 63, 1 / 64], rtol=1e-6)
    # convex .5, q1: c .5*1 + .5*(.7/.8), a .5*1, b .5*(.2/.8), d 0.
    convex = FusionSearcher(bm25, dense, method="convex", weight=0.5).search(["q1", "q2"], 4)
    assert convex.rows[0].tolist() == [2, 0, 1, 3]
    np.testing.assert_allclose(convex.scores[0], [0.5 + 0.4375, 0.5, 0.125, 0.0], atol=1e-6)
    nan_inside = Fixed({"q1": ([2, 0], [1.0, np.nan]), "q2": ([], [])})
    out = FusionSearcher(nan_inside, dense, method="convex", weight=1.0).search(["q1"], k=2)
    assert out.rows.tolist() == [[2, 0]]  # row 0 kept only through the dense list


def test_k_beyond_the_candidates_and_empty_query_lists():
    fused = FusionSearcher(FIRST, SECOND, method="rrf")
    out = fused.search(["q"], k=50)
    assert out.rows.shape == (1, 4) and sorted(out.rows[0]) == [0, 1, 2, 3]
    none = fused.search([], k=10)
    assert none.rows.shape == (0, 4) and len(none) == 0
    assert FIRST.calls and SECOND.calls  # searched above, never for the empty list
    with pytest.raises(ValueError, match="not one string"):
        fused.search("q", k=2)
    with pytest.raises(ValueError, match="positive int"):
        fused.search(["q"], k=0)


def test_weight_one_is_the_first_searchers_ranking():
    # The first list ties b and c on score; weight 1.0 keeps its order, then the second's.
    ids = list("abcde")
    first = Fixed({"q": ([4, 2, 0], [0.9, 0.9, 0.1])}, ids)
    second = Fixed({"q": ([1, 3, 2, 0, 4], [5.0, 4.0, 3.0, 2.0, 1.0])}, ids)
    out = FusionSearcher(first, second, method="convex", weight=1.0).search(["q"], k=5)
    assert out.rows.tolist() == [[4, 2, 0, 1, 3]]
    # With real exact searchers: the first searcher's top-k exactly.
    rng = np.random.default_rng(0)
    emb_a, emb_b = rng.normal(size=(30, 4)), rng.normal(size=(30, 4))
    queries = rng.normal(size=(5, 4)).astype("float32")
    a, b = ExactSearcher(emb_a), ExactSearcher(emb_b)
    fused = FusionSearcher(a, b, method="convex", weight=1.0, depth=10)
    np.testing.assert_array_equal(fused.search(queries, k=10).rows, a.search(queries, 10).rows)
    zero = FusionSearcher(a, b, method="convex", weight=0.0, depth=10)
    np.testing.assert_array_equal(zero.search(queries, k=10).rows, b.search(queries, 10).rows)


def test_mismatched_candidate_lists_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="4 candidates and the second 5"):
        FusionSearcher(FIRST, Fixed({}, list("abcde")))
    with pytest.raises(ValueError, match=r"differ at row 2 \(ids 'c' and 'x'\)"):
        FusionSearcher(FIRST, Fixed({}, ["a", "b", "x", "d"]))

    class NoIds:
        def __len__(self):
            return 4

        def search(self, queries, k):
            raise AssertionError

    with pytest.raises(TypeError, match="has no `ids`"):
        FusionSearcher(FIRST, NoIds())
    with pytest.raises(TypeError, match="built Searcher"):
        FusionSearcher(FIRST, ExactSearcher)
    with pytest.raises(ValueError, match=r"weight must be a number in \[0, 1\]"):
        FusionSearcher(FIRST, SECOND, method="convex", weight=1.5)
    with pytest.raises(ValueError, match="method must be one of"):
        FusionSearcher(FIRST, SECOND, method="sum")
    with pytest.raises(ValueError, match="rrf_k"):
        FusionSearcher(FIRST, SECOND, rrf_k=-1)
    twice = Fixed({"q": ([1, 1], [1.0, 0.5])})
    with pytest.raises(ValueError, match="returned row 1 twice for query 0"):
        FusionSearcher(twice, SECOND).search(["q"], k=2)


def test_the_weight_chooser_finds_the_known_weight_searching_once():
    # Three candidates. q1 (gold a): first a 1, b 0; second b 1, a 0 -> a = w, b = 1 - w:
    #   a first iff w >= .5 (at .5 the tie goes to the first searcher's a).
    # q2 (gold c): first b 1, c .5, a 0; second c 1, b 0 -> c = 1 - .5 w, b = w:
    #   c first iff w < 2/3.  Both right on the grid only for w in .5, .55, .6, .65.
    ids = list("abc")
    first = Fixed({"q1": ([0, 1], [1.0, 0.0]), "q2": ([1, 2, 0], [1.0, 0.5, 0.0])}, ids)
    second = Fixed({"q1": ([1, 0], [1.0, 0.0]), "q2": ([2, 1], [1.0, 0.0])}, ids)
    gold = np.array([0, 2])
    choice = choose_fusion_weight(first, second, ["q1", "q2"],
                                  lambda rows: float(np.mean(rows[:, 0] == gold)), depth=3)
    assert (first.calls, second.calls) == (1, 1)  # one search each for the 21 weights
    assert list(choice.values) == list(WEIGHT_GRID)
    assert [w for w, v in choice.values.items() if v == 1.0] == [0.5, 0.55, 0.6, 0.65]
    assert choice.values[0.45] == choice.values[0.7] == 0.5
    assert choice.weight == 0.5 and (choice.num_queries, choice.depth, choice.k) == (2, 3, 3)
    assert choice.as_dict()["grid"][10] == [0.5, 1.0]
    # An ODQA answer-set metric: q2 is answered by b or c, first at any w; q1 needs w >= .5.
    answers = [frozenset({0}), frozenset({1, 2})]
    by_answers = choose_fusion_weight(
        first, second, ["q1", "q2"],
        lambda rows: odqa.answer_recall(rows, answers, ks=(1,))["R@1"], grid=(0.0, 0.4, 0.8))
    assert by_answers.values == {0.0: 0.5, 0.4: 0.5, 0.8: 1.0} and by_answers.weight == 0.8
    with pytest.raises(ValueError, match="no validation queries"):
        choose_fusion_weight(first, second, [], lambda rows: 0.0)
    with pytest.raises(ValueError, match="finite number"):
        choose_fusion_weight(first, second, ["q1"], lambda rows: float("nan"))


def test_query_encoding_searcher_plugs_a_dense_searcher_beside_bm25():
    from tt_zoo.retrieval.bm25 import BM25Retriever

    texts = ["penicillin was discovered by fleming", "paris is the capital of france",
             "the seine flows through paris", "water boils at one hundred degrees"]
    ids = ["p0", "p1", "p2", "p3"]
    # A query points at the candidate whose index is its length mod 4.
    dense = QueryEncodingSearcher(
        lambda qs: np.eye(4, dtype="float32")[[len(q) % 4 for q in qs]],
        ExactSearcher(np.eye(4, dtype="float32"), ids))
    assert len(dense) == 4 and dense.ids == tuple(ids)
    assert dense.search(["abcde"], k=1).ids == (("p1",),)
    assert dense.search([], k=9).rows.shape == (0, 4)
    with pytest.raises(ValueError, match="not one string"):
        dense.search("abc", k=1)
    with pytest.raises(TypeError, match="callable"):
        QueryEncodingSearcher(None, dense)
    bm25 = BM25Retriever(texts, ids=ids)
    fused = FusionSearcher(bm25, dense, method="rrf", depth=2)
    # "zzz" has no indexed term: BM25 returns nothing and the dense ranking stands alone.
    out = fused.search(["who discovered penicillin", "zzz"], k=4)
    assert out.ids[0][0] == "p0" and out.ids[1][0] == "p3"
    assert (out.rows[1] >= 0).sum() == 2  # depth 2 of the dense list only
