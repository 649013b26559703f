"""Late-interaction search (ColBERT, Khattab & Zaharia 2020): MaxSim on hand-worked numbers,
re-ranking any first stage, the resumable token store and the end-to-end token index, with fake
encoders (a fixed random unit vector per word, so shared words match exactly)."""

import hashlib

import numpy as np
import pytest

from tt_zoo.errors import ArtifactError
from tt_zoo.retrieval.bm25 import BM25Retriever
from tt_zoo.retrieval.index import IndexFileError
from tt_zoo.retrieval.late_interaction import MaxSimReranker, maxsim, maxsim_flat, rerank
from tt_zoo.retrieval.search import ExactSearcher, QueryEncodingSearcher, SearchResult, Searcher
from tt_zoo.retrieval.token_index import TokenIndex
from tt_zoo.retrieval.token_store import TokenStore, TokenStoreError

DIM = 8


def word_vector(word: str, dim: int = DIM) -> np.ndarray:
    """A deterministic random unit vector per word."""
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


class FakeEncoder:
    """encode_query_tokens / encode_document_tokens: one vector per word (titles first)."""

    def __init__(self, dim: int = DIM):
        self.dim = dim
        self.document_calls = []  # the texts of every encode_document_tokens call

    def encode_query_tokens(self, texts):
        return [np.stack([word_vector(w, self.dim) for w in t.split()]) for t in texts]

    def encode_document_tokens(self, texts, titles=None):
        self.document_calls.append(list(texts))
        titles = titles or [""] * len(texts)
        return [np.stack([word_vector(w, self.dim) for w in (title + " " + text).split()])
                if (title + text).strip() else np.zeros((0, self.dim), np.float32)
                for text, title in zip(texts, titles)]


def corpus(num_docs: int, vocabulary: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [" ".join(f"t{w}" for w in rng.integers(0, vocabulary, rng.integers(3, 12)))
            for _ in range(num_docs)]


def all_scores(encoder, texts, query):
    return maxsim(encoder.encode_query_tokens([query])[0], encoder.encode_document_tokens(texts))


def brute_force(encoder, texts, query, k):
    """The exact MaxSim top-k over every document, ties to the lower row."""
    scores = all_scores(encoder, texts, query)
    order = np.argsort(-scores, kind="stable")[:k]
    return order, scores[order]


def assert_is_top_k(result, i, encoder, texts, query, k):
    """Row i of `result` is an exact MaxSim top-k (documents of equal score in any order: a
    re-ranker breaks ties by first-stage rank)."""
    scores = all_scores(encoder, texts, query)
    np.testing.assert_allclose(result.scores[i], np.sort(scores)[::-1][:k], rtol=1e-6)
    np.testing.assert_allclose(scores[result.rows[i]], result.scores[i], rtol=1e-6)
    assert len(set(result.rows[i])) == k


# -- MaxSim -------------------------------------------------------------------------------------

# Query tokens q1 = (1, 0), q2 = (0, 1). Dot products, max per query token, sum:
#   d0 = [(0.6, 0.8), (1, 0)]: q1 -> max(0.6, 1) = 1,      q2 -> max(0.8, 0) = 0.8   S = 1.8
#   d1 = [(0, 1)]:             q1 -> 0,                    q2 -> 1                   S = 1.0
#   d2 = []:                   no tokens (as in training: tt_zoo.modeling.maxsim)    S = 0
#   d3 = [(-0.6, 0.8)]:        q1 -> -0.6,                 q2 -> 0.8                 S = 0.2
QUERY = np.array([[1.0, 0.0], [0.0, 1.0]])
DOCS = [np.array([[0.6, 0.8], [1.0, 0.0]]), np.array([[0.0, 1.0]]), np.zeros((0, 2)),
        np.array([[-0.6, 0.8]])]


def test_maxsim_hand_worked():
    np.testing.assert_allclose(maxsim(QUERY, DOCS), [1.8, 1.0, 0.0, 0.2], rtol=1e-6)
    # float16 storage (0.6 -> 0.6001, 0.8 -> 0.7998), float32 math.
    np.testing.assert_allclose(maxsim(QUERY, [d.astype(np.float16) for d in DOCS]),
                               [1.8, 1.0, 0.0, 0.2], atol=1e-3)
    assert maxsim(QUERY, DOCS).dtype == np.float32


def test_maxsim_flat_blocks_and_empty_documents():
    # The same 4 documents flat: offsets [0, 2, 3, 3, 4]; blocks of 1 token score one
    # document at a time, the default block all at once.
    vectors = np.concatenate(DOCS).astype(np.float16)
    offsets = [0, 2, 3, 3, 4]
    for block in (1, 2, 1 << 15):
        np.testing.assert_allclose(maxsim_flat(QUERY, vectors, offsets, block_tokens=block),
                                   [1.8, 1.0, 0.0, 0.2], atol=1e-3)
    with pytest.raises(ValueError, match="offsets must rise"):
        maxsim_flat(QUERY, vectors, [0, 2, 5])
    with pytest.raises(ValueError, match="must be 2D"):
        maxsim(QUERY[0], DOCS)
    with pytest.raises(ValueError, match="must have 2 columns"):
        maxsim(QUERY, [np.ones((2, 3))])


def test_maxsim_matches_a_loop_on_random_documents():
    rng = np.random.default_rng(1)
    docs = [rng.normal(size=(rng.integers(1, 9), 5)) for _ in range(50)]
    query = rng.normal(size=(4, 5))
    expected = [(query @ d.T).max(axis=1).sum() for d in docs]
    np.testing.assert_allclose(maxsim(query, docs), expected, rtol=1e-5)


# -- re-ranking ---------------------------------------------------------------------------------

QUERIES = ["t1 t2 t3", "t7 t30 t31 t5", "t12"]


@pytest.mark.parametrize("documents", ["store", "on_the_fly"])
def test_rerank_of_the_whole_corpus_is_brute_force_maxsim(documents):
    encoder = FakeEncoder()
    texts = corpus(60)
    bm25 = BM25Retriever(texts, stemmer=None, stopwords=None)
    source = ({"store": TokenStore.from_documents(encoder.encode_document_tokens(texts),
                                                  dtype="float32")}
              if documents == "store" else
              {"encode_document_tokens": encoder.encode_document_tokens, "texts": texts})
    reranker = MaxSimReranker(bm25, encoder.encode_query_tokens, depth=len(texts), **source)
    assert isinstance(reranker, Searcher) and len(reranker) == 60
    result = reranker.search(QUERIES, k=10)
    for i, query in enumerate(QUERIES):
        assert_is_top_k(result, i, encoder, texts, query, 10)
        assert result.ids[i] == tuple(str(r) for r in result.rows[i])
    assert reranker.timings["queries"] == 3 and reranker.queries_per_second > 0
    # The function form gives the same result.
    again = rerank(bm25, 10, queries=QUERIES, encode_query_tokens=encoder.encode_query_tokens,
                   depth=60, **source)
    np.testing.assert_array_equal(again.rows, result.rows)


def test_rerank_of_a_dense_first_stage_keeps_its_candidates():
    # A dense first stage searched with text: the mean of the word vectors.
    encoder = FakeEncoder()
    texts = corpus(30, seed=2)
    doc_emb = np.stack([d.mean(0) for d in encoder.encode_document_tokens(texts)])
    dense = QueryEncodingSearcher(
        lambda qs: np.stack([q.mean(0) for q in encoder.encode_query_tokens(qs)]),
        ExactSearcher(doc_emb, [f"d{i}" for i in range(30)]))
    store = TokenStore.from_documents(encoder.encode_document_tokens(texts),
                                      ids=[f"d{i}" for i in range(30)])
    result = MaxSimReranker(dense, encoder.encode_query_tokens, store=store, depth=5).search(
        QUERIES[:2], k=3)
    first = dense.search(QUERIES[:2], 5)
    for i, query in enumerate(QUERIES[:2]):
        assert set(result.rows[i]) <= set(first.rows[i])  # only the first stage's top 5
        candidates = first.rows[i]
        scores = maxsim(encoder.encode_query_tokens([query])[0],
                        [store.document(r) for r in candidates])
        np.testing.assert_array_equal(result.rows[i],
                                      candidates[np.argsort(-scores, kind="stable")[:3]])
        assert result.ids[i] == tuple(f"d{r}" for r in result.rows[i])


class ShortFirstStage:
    """A first stage that finds only rows 3 and 1 (in that order) for any query."""

    def __len__(self):
        return 6

    def search(self, queries, k):
        rows = np.full((len(queries), k), -1)
        rows[:, :2] = [3, 1]
        return SearchResult.from_rows(rows, np.ones((len(queries), k)), list("abcdef"))


def test_a_short_first_stage_gives_a_short_result():
    encoder = FakeEncoder()
    texts = ["t1 t9", "t1 t2", "t5", "t8 t9", "t2", "t3"]
    store = TokenStore.from_documents(encoder.encode_document_tokens(texts), ids=list("abcdef"))
    result = MaxSimReranker(ShortFirstStage(), encoder.encode_query_tokens,
                            store=store).search(["t1 t2"], k=4)
    # "t1 t2" against row 1 "t1 t2": 1 + 1 = 2 (exact matches), beats row 3 "t8 t9".
    assert result.rows.tolist() == [[1, 3, -1, -1]]
    assert result.ids == (("b", "d"),)
    assert result.scores[0, 0] == pytest.approx(2.0, abs=2e-3)
    assert np.isnan(result.scores[0, 2:]).all()
    # A query BM25 cannot match at all (no indexed term): an empty result, not an error.
    bm25 = BM25Retriever(texts, ids=list("abcdef"), stemmer=None, stopwords=None)
    empty = MaxSimReranker(bm25, encoder.encode_query_tokens, store=store).search(
        ["t77", "t5"], k=2)
    assert empty.empty.tolist() == [True, False] and empty.rows[1, 0] == 2


def test_bad_queries_and_mismatched_inputs_are_clear_errors():
    encoder = FakeEncoder()
    texts = corpus(6)
    store = TokenStore.from_documents(encoder.encode_document_tokens(texts))
    bm25 = BM25Retriever(texts, stemmer=None, stopwords=None)
    reranker = MaxSimReranker(bm25, encoder.encode_query_tokens, store=store)
    with pytest.raises(ValueError, match="position 1 is empty"):
        reranker.search(["t1", "  "], k=3)
    with pytest.raises(ValueError, match="not one string"):
        reranker.search("t1", k=3)
    with pytest.raises(ValueError, match="k must be a positive int"):
        reranker.search(["t1"], k=0)
    with pytest.raises(ValueError, match="holds 5 documents"):
        MaxSimReranker(bm25, encoder.encode_query_tokens, store=TokenStore.from_documents(
            encoder.encode_document_tokens(texts[:5])))
    with pytest.raises(ValueError, match="ids differ from the first stage"):
        MaxSimReranker(bm25, encoder.encode_query_tokens, store=TokenStore.from_documents(
            encoder.encode_document_tokens(texts), ids=list("abcdef")))
    with pytest.raises(ValueError, match="either a token store"):
        MaxSimReranker(bm25, encoder.encode_query_tokens)
    with pytest.raises(ValueError, match="must have 8 columns"):
        MaxSimReranker(bm25, FakeEncoder(dim=4).encode_query_tokens, store=store).search(
            ["t1"], 2)


# -- the token store ----------------------------------------------------------------------------

def test_token_store_save_load_round_trip_and_tampering(tmp_path):
    encoder = FakeEncoder()
    documents = encoder.encode_document_tokens(["t1 t2", "", "t3 t4 t5"])
    for dtype, itemsize in (("float16", 2), ("float32", 4)):
        store = TokenStore.from_documents(documents, ids=["x", "y", "z"], dtype=dtype)
        path = store.save(tmp_path / dtype)
        loaded = TokenStore.load(path)
        assert loaded.ids == ("x", "y", "z") and loaded.dtype == dtype
        assert loaded.offsets.tolist() == [0, 2, 2, 5]
        np.testing.assert_array_equal(loaded.vectors, store.vectors)
        assert isinstance(loaded.vectors.base, np.memmap) or isinstance(loaded.vectors,
                                                                         np.memmap)
        # 5 tokens x 8 dims x itemsize + 4 offsets x 8 bytes, over 3 passages.
        assert loaded.bytes_per_passage == pytest.approx((5 * 8 * itemsize + 32) / 3)
    vectors_file = tmp_path / "float16" / "vectors.bin"
    data = bytearray(vectors_file.read_bytes())
    data[3] ^= 0xFF
    vectors_file.write_bytes(bytes(data))
    with pytest.raises(TokenStoreError, match="vectors.bin is corrupted"):
        TokenStore.load(tmp_path / "float16")
    vectors_file.write_bytes(bytes(data[:-2]))
    with pytest.raises(ArtifactError, match="truncated"):
        TokenStore.load(tmp_path / "float16")
    with pytest.raises(TokenStoreError, match="is missing"):
        TokenStore.load(tmp_path / "nothing")


class Killed(Exception):
    pass


def test_token_store_build_resumes_after_a_kill_with_identical_bytes(tmp_path):
    texts = corpus(23, seed=3)
    titles = [f"t{i % 4}" for i in range(23)]
    clean = TokenStore.build(tmp_path / "clean", FakeEncoder().encode_document_tokens, texts,
                             titles, chunk=5, progress=False)

    crashing = FakeEncoder()

    def encode_then_die(batch, titles=None):
        if len(crashing.document_calls) == 3:  # killed after 3 finished chunks (15 docs)
            raise Killed()
        return crashing.encode_document_tokens(batch, titles=titles)

    with pytest.raises(Killed):
        TokenStore.build(tmp_path / "resumed", encode_then_die, texts, titles, chunk=5,
                         progress=False)
    partial = tmp_path / ".resumed.partial"
    assert not (tmp_path / "resumed").exists() and partial.is_dir()
    with open(partial / "vectors.bin", "ab") as f:  # a 4th chunk cut short by the kill
        f.write(b"\x01" * 100)

    rerun = FakeEncoder()
    resumed = TokenStore.build(tmp_path / "resumed", rerun.encode_document_tokens, texts,
                               titles, chunk=5, progress=False)
    assert rerun.document_calls == [texts[15:20], texts[20:23]]  # finished chunks not redone
    assert not partial.exists()
    for name in ("vectors.bin", "offsets.npy", "ids.txt", "token_store.json"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "clean" / name
                                                              ).read_bytes(), name
    assert resumed.digest == clean.digest and len(resumed) == 23
    # Each document holds its title's word then its text's words.
    np.testing.assert_array_equal(resumed.document(7)[0], word_vector("t3").astype(np.float16))

    # Other texts start a new build (nothing to resume) and replace the saved store.
    other = TokenStore.build(tmp_path / "resumed", FakeEncoder().encode_document_tokens,
                             texts[:4], chunk=5, progress=False)
    assert len(other) == 4


def test_token_store_build_checks_the_encoder_output(tmp_path):
    with pytest.raises(ValueError, match="returned 1 arrays for documents 0..1"):
        TokenStore.build(tmp_path / "s", lambda t, titles=None: [np.ones((1, 4))],
                         ["a", "b"], progress=False)
    with pytest.raises(ValueError, match="document 1 are not finite"):
        TokenStore.build(tmp_path / "s", lambda t, titles=None: [np.ones((1, 4)),
                                                                 np.full((2, 4), np.nan)],
                         ["a", "b"], progress=False)
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a saved tt_zoo TokenStore"):
        TokenStore.build(tmp_path / "user", FakeEncoder().encode_document_tokens, ["t1"],
                         progress=False)


# -- the token index ----------------------------------------------------------------------------

def test_token_index_exact_over_a_tiny_store_equals_brute_force(tmp_path):
    # Under 1,000 tokens ScaNN scores every token exactly; k' = all tokens makes every document
    # with a token a candidate, so the result is the brute-force MaxSim ranking.
    encoder = FakeEncoder()
    texts = corpus(40, seed=4)
    store = TokenStore.from_documents(encoder.encode_document_tokens(texts), dtype="float32")
    index = TokenIndex(store, encoder.encode_query_tokens, token_k=store.num_tokens)
    assert index.scann_config.is_exact
    result = index.search(QUERIES, k=5)
    for i, query in enumerate(QUERIES):
        rows, scores = brute_force(encoder, texts, query, 5)
        np.testing.assert_array_equal(result.rows[i], rows)
        np.testing.assert_allclose(result.scores[i], scores, rtol=1e-6)
    # k' = 1: each query token's single nearest token is an exact match of that word, so the
    # candidates are documents holding a query word; "t12" gives at most one document.
    narrow = index.with_search_settings(token_k=1).search(["t12"], k=3)
    assert (narrow.rows[0] >= 0).sum() == 1 and "t12" in texts[narrow.rows[0, 0]].split()


def test_token_index_finds_the_brute_force_top1_and_round_trips(tmp_path):
    encoder = FakeEncoder(dim=16)
    texts = corpus(300, vocabulary=400, seed=5)
    store = TokenStore.build(tmp_path / "store", encoder.encode_document_tokens, texts,
                             chunk=128, progress=False)
    assert store.num_tokens > 1000  # a partitioned ScaNN index
    index = TokenIndex(store, encoder.encode_query_tokens, token_k=100)
    assert not index.scann_config.is_exact
    index = index.with_search_settings(num_leaves_to_search=index.scann_config.num_leaves)
    queries = [" ".join(t.split()[:4]) for t in texts[:12]]
    result = index.search(queries, k=3)
    for i, query in enumerate(queries):
        rows, _ = brute_force(encoder, texts, query, 1)
        assert result.rows[i, 0] == rows[0], query
    memory = index.memory()
    # float16: 16 dims x 2 bytes a token, plus 8 bytes of offsets a passage.
    assert memory["store_bytes_per_passage"] == pytest.approx(
        store.num_tokens * 32 / 300 + 8, rel=0.01)
    assert memory["index_bytes"] > 0

    path = index.save(tmp_path / "index")
    loaded = TokenIndex.load(path, store, encoder.encode_query_tokens)
    np.testing.assert_array_equal(loaded.with_search_settings(
        num_leaves_to_search=index.scann_config.num_leaves).search(queries, 3).rows, result.rows)
    other = TokenStore.from_documents(encoder.encode_document_tokens(texts[:10]))
    other.save(tmp_path / "other")
    with pytest.raises(IndexFileError, match="another token store"):
        TokenIndex.load(path, TokenStore.load(tmp_path / "other"), encoder.encode_query_tokens)
    codes = next(p for p in (path / "scann").iterdir() if p.name.endswith(".npy"))
    data = bytearray(codes.read_bytes())
    data[-1] ^= 0xFF
    codes.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="corrupted"):
        TokenIndex.load(path, store, encoder.encode_query_tokens)
    with pytest.raises(ValueError, match="was not loaded from disk"):
        TokenIndex(other, encoder.encode_query_tokens).save(tmp_path / "unsaved")
