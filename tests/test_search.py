"""tt_zoo.retrieval.search: the one result type, the searcher protocol and the one brute force, on
hand-worked numbers; every searcher (exact, ScaNN, BM25) answers with the same type."""

import numpy as np
import pytest

from tt_zoo.retrieval import search
from tt_zoo.retrieval.bm25 import BM25Retriever
from tt_zoo.evaluation.metrics import evaluate
from tt_zoo.retrieval.search import ExactSearcher, Hit, SearchResult, Searcher

# 4 candidates x 2 dims, 2 queries. Scores = queries @ cands.T = [[1, 0, 2, 2], [0, 3, 0, -1]].
QUERIES = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
CANDS = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 0.0], [2.0, -1.0]], np.float32)
IDS = ["w", "x", "y", "z"]


def test_exact_top_k_hand_worked():
    # Scores = queries @ cands.T = [[1, 0, 2, 2], [0, 3, 0, -1]]
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    cands = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 0.0], [2.0, -1.0]])
    ids, scores = search.exact_top_k(queries, cands, k=3)
    assert ids.tolist() == [[2, 3, 0], [1, 0, 2]]  # the tie 2 = 2 goes to the lower id
    np.testing.assert_allclose(scores, [[2, 2, 1], [3, 0, 0]])
    ids, _ = search.exact_top_k(queries, cands, k=10)  # capped at the number of candidates
    assert ids.shape == (2, 4)


def test_exact_top_k_blocks_match_a_full_sort():
    rng = np.random.default_rng(0)
    q, c = rng.normal(size=(37, 8)), rng.normal(size=(200, 8))
    ids, scores = search.exact_top_k(q, c, k=15, block_size=10)
    expected = np.argsort(-(q @ c.T), axis=1)[:, :15]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(q @ c.T, expected, 1), rtol=1e-5)


def test_exact_top_k_shape_errors():
    with pytest.raises(ValueError, match="dims differ"):
        search.exact_top_k(np.ones((2, 3)), np.ones((4, 5)), 1)
    with pytest.raises(ValueError, match="must be 2D"):
        search.exact_top_k(np.ones(3), np.ones((4, 3)), 1)


def test_exact_searcher_hand_worked():
    searcher = ExactSearcher(CANDS, IDS)
    result = searcher.search(QUERIES, k=3)
    assert result.rows.tolist() == [[2, 3, 0], [1, 0, 2]]  # the tie 2 = 2 goes to the lower row
    assert result.ids == (("y", "z", "w"), ("x", "w", "y"))
    np.testing.assert_allclose(result.scores, [[2, 2, 1], [3, 0, 0]])
    assert result.scores.dtype == np.float32 and len(result) == 2 and not result.empty.any()
    assert ExactSearcher(CANDS).search(QUERIES[:1], k=1).ids == (("2",),)  # default ids
    with pytest.raises(ValueError, match=r"query embeddings must be \[num_queries, 2\]"):
        searcher.search(np.ones((1, 3), np.float32), k=1)
    with pytest.raises(ValueError, match="k must be a positive int"):
        searcher.search(QUERIES, k=0)


def test_search_result_padding_hits_and_read_only_arrays():
    result = SearchResult.from_rows([[3, 0], [-1, -1]], [[2.5, 1.0], [0.0, 0.0]], IDS)
    assert result.ids == (("z", "w"), ())
    assert result.empty.tolist() == [False, True]
    assert np.isnan(result.scores[1]).all()
    assert result.hits(texts=["tw", "tx", "ty", "tz"]) == [
        [Hit("z", 2.5, "tz"), Hit("w", 1.0, "tw")], []]
    assert result.hits()[0][0] == Hit("z", 2.5, "", "")
    with pytest.raises(ValueError, match="read-only"):
        result.rows[0, 0] = 1
    with pytest.raises(ValueError, match=r"rows and scores must both be \[num_queries, k\]"):
        SearchResult(np.zeros((2, 3)), np.zeros((2, 2)), ((), ()))


def test_every_searcher_returns_the_one_result_type():
    index_lib = pytest.importorskip("tt_zoo.retrieval.index")
    texts = ["the cat sat", "a dog barks", "paris is in france", "dogs and birds"]
    searchers = {"exact": (ExactSearcher(CANDS, IDS), QUERIES),
                 "brute_force": (index_lib.EmbeddingIndex(CANDS, IDS, backend="brute_force"),
                                 QUERIES),
                 "scann": (index_lib.EmbeddingIndex(CANDS, IDS, backend="scann"), QUERIES),
                 "bm25": (BM25Retriever(texts, ids=IDS), ["cat", "france"])}
    for name, (searcher, queries) in searchers.items():
        assert isinstance(searcher, Searcher), name
        result = searcher.search(queries, k=2)
        assert type(result) is SearchResult, name
        assert result.rows.shape == result.scores.shape == (2, 2), name
        assert result.ids == tuple(tuple(IDS[r] for r in row if r >= 0)
                                   for row in result.rows), name
    # BM25 returns only the documents sharing a term with the query (-1 pads the rest).
    assert searchers["bm25"][0].search(["cat", "france"], k=2).rows.tolist() == [[0, -1],
                                                                                   [2, -1]]
    assert searchers["bm25"][0].search(["cat", "france"], k=1).ids == (("w",), ("y",))


def test_exact_and_scann_agree_on_a_small_set():
    index_lib = pytest.importorskip("tt_zoo.retrieval.index")
    rng = np.random.default_rng(3)
    candidates = rng.normal(size=(300, 8)).astype(np.float32)
    queries = rng.normal(size=(20, 8)).astype(np.float32)
    exact = ExactSearcher(candidates).search(queries, k=10)
    scann = index_lib.EmbeddingIndex(candidates, search.default_ids(300)).search(queries, k=10)
    assert scann.ids == exact.ids
    np.testing.assert_array_equal(scann.rows, exact.rows)
    np.testing.assert_allclose(scann.scores, exact.scores, rtol=1e-5, atol=1e-5)
    # And both agree with a plain full sort.
    np.testing.assert_array_equal(exact.rows, np.argsort(-(queries @ candidates.T), axis=1)[:, :10])


def test_evaluate_any_searcher_hand_worked():
    # Gold rows 0 and 2: query 0 ranks them [2, 3, 0] -> gold 0 at rank 3; query 1 ranks
    # [1, 0, 2] -> gold 2 at rank 3. R@1 = 0, R@3 = 1, MRR = 1/3.
    result = evaluate(ExactSearcher(CANDS), QUERIES, [0, 2], ks=(1, 3))
    assert result["exact"] == pytest.approx({"R@1": 0.0, "R@3": 1.0, "MRR": 1 / 3})
    assert (result["num_queries"], result["num_candidates"], result["index"],
            result["queries_without_results"]) == (2, 4, None, 0)
    # BM25 through the same evaluation: "dog" finds row 1 only; "zebra" finds nothing.
    bm25 = BM25Retriever(["the cat sat", "a dog barks", "paris", "france"])
    result = evaluate(bm25, ["dog", "zebra"], [1, 3], ks=(1,))
    assert result["exact"] == {"R@1": 0.5, "MRR": 0.5}
    assert result["queries_without_results"] == 1


def test_evaluate_names_what_is_wrong():
    with pytest.raises(TypeError, match="must be a built tt_zoo.retrieval.search.Searcher.*got ndarray"):
        evaluate(CANDS, QUERIES, [0, 1])
    with pytest.raises(TypeError, match="got ExactSearcher .*build_index"):  # a class, unbuilt
        evaluate(ExactSearcher(CANDS), QUERIES, [0, 1], index=ExactSearcher)
    with pytest.raises(ValueError, match="index holds 3 candidates and the searcher 4"):
        evaluate(ExactSearcher(CANDS), QUERIES, [0, 1], index=ExactSearcher(CANDS[:3]))
    with pytest.raises(ValueError, match="no queries"):
        evaluate(ExactSearcher(CANDS), QUERIES[:0], [])
