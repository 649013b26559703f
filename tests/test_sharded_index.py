"""Embedding storage (float16, int8), shards written once, and `ShardedIndex`'s merged top-k,
with hand-worked numbers (no Beam here: tests/test_corpus_index.py runs the pipeline)."""

import os
import pathlib

import numpy as np
import pytest

from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.retrieval import embedding_shards as shards
from tt_zoo.retrieval.embedding_storage import EmbeddingStorage
from tt_zoo.retrieval.search import ExactSearcher, SearchResult
from tt_zoo.retrieval.sharded_index import ShardedIndex, merge_top_k

# -- storage ------------------------------------------------------------------------------------

# Column peaks 2.54 and 1.27 -> per-dimension scales 0.02 and 0.01; row peaks 2.54 and 1.27 ->
# per-row scales 0.02 and 0.01.
X = np.array([[2.54, 0.3], [-0.5, -1.27]], np.float32)


@pytest.mark.parametrize("scale, values, scales", [
    ("row", [[127, 15], [-50, -127]], [0.02, 0.01]),
    ("dimension", [[127, 30], [-25, -127]], [0.02, 0.01]),
])
def test_int8_hand_worked(scale, values, scales):
    storage = EmbeddingStorage("int8", scale)
    got_values, got_scales = storage.encode(X)
    assert got_values.dtype == np.int8 and got_values.tolist() == values
    np.testing.assert_allclose(got_scales, scales, rtol=1e-6)
    np.testing.assert_allclose(storage.decode(got_values, got_scales),
                               np.array(values) * (np.array(scales)[:, None] if scale == "row"
                                                   else np.array(scales)[None, :]), rtol=1e-6)


def test_storage_bounds_on_random_embeddings():
    x = np.random.default_rng(0).normal(size=(200, 16)).astype(np.float32)
    x[3] = 0.0  # a row of zeros: scale 1, stored exactly
    half = EmbeddingStorage("float16")
    values, scales = half.encode(x)
    assert values.dtype == np.float16 and scales is None
    assert (np.abs(half.decode(values) - x) <= np.abs(x) * 2.0 ** -11 + 2.0 ** -25).all()
    for scale, axis in (("row", 1), ("dimension", 0)):
        storage = EmbeddingStorage("int8", scale)
        values, scales = storage.encode(x)
        bound = (scales[:, None] if axis == 1 else scales[None, :]) / 2
        assert (np.abs(storage.decode(values, scales) - x) <= bound * (1 + 1e-6)).all(), scale
    assert EmbeddingStorage("int8").encode(x)[1][3] == 1.0
    assert EmbeddingStorage().encode(x)[0] is not None


def test_storage_refuses_what_it_cannot_keep():
    with pytest.raises(TtZooError, match="dtype must be one of float32, float16, int8"):
        EmbeddingStorage("bfloat16")
    with pytest.raises(TtZooError, match="scale is for int8 storage only"):
        EmbeddingStorage("float16", "row")
    with pytest.raises(TtZooError, match="exceed float16's range"):
        EmbeddingStorage("float16").encode(np.array([[1e6]], np.float32))
    with pytest.raises(TtZooError, match=r"need float32 scales of shape \(2,\)"):
        EmbeddingStorage("int8", "dimension").decode(np.zeros((3, 2), np.int8), np.ones(3))
    assert EmbeddingStorage("int8").scale == "row"
    assert str(EmbeddingStorage("int8", "dimension")) == "int8 (per-dimension scale)"


# -- merging ------------------------------------------------------------------------------------

def test_merge_top_k_hand_worked():
    # Shard a (rows 0-2): its top-2 a0 3.0, a2 2.0. Shard b (rows 3-4): b1 4.0, b0 2.0.
    # Merged: b1 (row 4) 4.0, a0 (row 0) 3.0, then a tie at 2.0: a2 (row 2) before b0 (row 3).
    a = SearchResult.from_rows([[0, 2]], [[3.0, 2.0]], ["a0", "a1", "a2"])
    b = SearchResult.from_rows([[1, 0]], [[4.0, 2.0]], ["b0", "b1"])
    rows, scores = merge_top_k([a, b], [0, 3], k=3)
    assert rows.tolist() == [[4, 0, 2]] and scores.tolist() == [[4.0, 3.0, 2.0]]
    rows, scores = merge_top_k([a, b], [0, 3], k=10)  # capped at the 4 results there are
    assert rows.tolist() == [[4, 0, 2, 3]]
    # A shard's -1 padding (a searcher that found fewer) ranks last and stays -1.
    short = SearchResult.from_rows([[1, -1]], [[-5.0, 0.0]], ["c0", "c1"])
    rows, scores = merge_top_k([short, b], [0, 2], k=4)
    assert rows.tolist() == [[3, 2, 1, -1]]
    assert scores[0, :3].tolist() == [4.0, 2.0, -5.0] and np.isnan(scores[0, 3])


def test_sharded_index_over_exact_shards_hand_worked():
    # q = [1, 2]: shard A [[1,0],[0,1],[1,1]] scores 1, 2, 3; shard B [[2,0],[0,3]] scores 2, 6.
    # Top-3: b1 6 (row 4), a2 3 (row 2), then the tie at 2: a1 (row 1) before b0 (row 3).
    a = ExactSearcher(np.array([[1, 0], [0, 1], [1, 1]], np.float32), ["a0", "a1", "a2"])
    b = ExactSearcher(np.array([[2, 0], [0, 3]], np.float32), ["b0", "b1"])
    index = ShardedIndex([a, b])
    q = np.array([[1.0, 2.0]], np.float32)
    result = index.search(q, k=3)
    assert result.ids == (("b1", "a2", "a1"),) and result.rows.tolist() == [[4, 2, 1]]
    assert result.scores.tolist() == [[6.0, 3.0, 2.0]]
    every = ExactSearcher(np.concatenate([a.embeddings, b.embeddings]), a.ids + b.ids)
    for k in (1, 3, 5, 10):
        expected = every.search(q, k)
        assert index.search(q, k).ids == expected.ids, k
        np.testing.assert_array_equal(index.search(q, k).scores, expected.scores)
    assert len(index) == 5 and index.is_exact


def test_sharded_index_refuses_overlapping_ids_and_other_dims():
    a = ExactSearcher(np.eye(2, dtype=np.float32), ["x", "y"])
    with pytest.raises(ValueError, match="'x' is duplicated"):
        ShardedIndex([a, ExactSearcher(np.eye(2, dtype=np.float32), ["z", "x"])])
    with pytest.raises(ValueError, match="dims differ"):
        ShardedIndex([a, ExactSearcher(np.eye(3, dtype=np.float32), ["z", "w", "v"])])


# -- shards written once ------------------------------------------------------------------------

def test_shard_of_is_crc32_not_pythons_salted_hash():
    # zlib.crc32(b"p00") % 3 == 2, ...: pinned, so every process and machine agrees.
    assert [shards.shard_of(f"p{i:02d}", 3) for i in range(8)] == [2, 0, 1, 2, 0, 1, 0, 2]
    assert shards.shard_of("é", 5) == 1  # the UTF-8 bytes
    assert shards.shard_name(3, 12) == "shard-00003-of-00012"
    with pytest.raises(TtZooError, match="num_shards must be an int from 1"):
        shards.ShardSettings(0, 3, EmbeddingStorage(), "m")


SETTINGS = shards.ShardSettings(num_shards=2, dim=3, storage=EmbeddingStorage("float16"),
                                model_sha256="m" * 64)


def _embeddings(n, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 3)).astype(np.float32)


def _stamps(folder: pathlib.Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


# Of 2 shards, ids "a", "b", "c" go to shard 1 and "d", "e" to shard 0 (crc32 % 2).


def test_a_shard_is_written_once(tmp_path):
    ids, emb = ["b", "a", "c"], _embeddings(3)
    meta = shards.write_shard(tmp_path, 1, ids, emb, SETTINGS)
    folder = tmp_path / "shard-00001-of-00002"
    assert meta["written"] and meta["num_passages"] == 3
    assert (folder / "ids.txt").read_text() == "a\nb\nc\n"  # rows sorted by id
    stored = np.load(folder / "embeddings.npy")
    assert stored.dtype == np.float16
    np.testing.assert_array_equal(stored, emb[[1, 0, 2]].astype(np.float16))
    before = _stamps(folder)
    again = shards.write_shard(tmp_path, 1, ["c", "a", "b"], emb[[2, 1, 0]], SETTINGS)
    assert not again["written"] and _stamps(folder) == before
    with pytest.raises(shards.ShardConflictError, match="differ from the 2 of this run"):
        shards.write_shard(tmp_path, 1, ["a", "b"], emb[:2], SETTINGS)
    other = shards.ShardSettings(2, 3, EmbeddingStorage("float32"), "m" * 64)
    with pytest.raises(shards.ShardConflictError, match="other settings"):
        shards.write_shard(tmp_path, 1, ids, emb, other)
    assert _stamps(folder) == before
    assert not list(tmp_path.glob(".shard-*"))  # no temp folder left


def test_duplicate_id_is_named(tmp_path):
    with pytest.raises(shards.DuplicateIdError, match="passage id 'a' occurs 2 times"):
        shards.write_shard(tmp_path, 1, ["a", "b", "a"], _embeddings(3), SETTINGS)
    with pytest.raises(TtZooError, match="passage id 'd' belongs to shard 0"):
        shards.write_shard(tmp_path, 1, ["a", "d"], _embeddings(2), SETTINGS)
    assert not list(tmp_path.iterdir())


def test_a_worker_that_loses_the_race_keeps_the_winners_shard(tmp_path, monkeypatch):
    """Two attempts of one shard: the second finds no shard before building (the first had not
    finished), then its rename fails on the first's complete folder: it writes nothing."""
    ids, emb = ["a", "b"], _embeddings(2)
    shards.write_shard(tmp_path, 1, ids, emb, SETTINGS)
    folder = tmp_path / "shard-00001-of-00002"
    before = _stamps(folder)
    real = shards._complete_shard
    calls = []

    def not_yet_then_real(*args, **kwargs):
        calls.append(1)
        return None if len(calls) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(shards, "_complete_shard", not_yet_then_real)
    meta = shards.write_shard(tmp_path, 1, ids, emb, SETTINGS)
    assert not meta["written"] and len(calls) == 2
    assert _stamps(folder) == before and not list(tmp_path.glob(".shard-*"))


def test_prepare_output_ignores_temp_folders_and_refuses_what_is_not_a_shard(tmp_path):
    shards.write_shard(tmp_path, 0, ["d"], _embeddings(1), SETTINGS)
    debris = tmp_path / ".shard-00001-of-00002.tmp-killed"  # a killed worker's half shard
    debris.mkdir()
    (debris / "ids.txt").write_text("b\n")
    assert shards.prepare_output(tmp_path, SETTINGS) == {0}
    assert not debris.exists()
    half = tmp_path / "shard-00001-of-00002"
    half.mkdir()
    (half / "ids.txt").write_text("b\n")  # files but no shard.json: not ours to replace
    with pytest.raises(shards.ShardConflictError, match="holds files but no shard.json"):
        shards.prepare_output(tmp_path, SETTINGS)
    (half / "ids.txt").unlink()
    (tmp_path / "shard-00000-of-00003").mkdir()
    with pytest.raises(shards.ShardConflictError, match="shards of another run"):
        shards.prepare_output(tmp_path, SETTINGS)


def test_a_damaged_shard_is_refused_not_replaced(tmp_path):
    shards.write_shard(tmp_path, 1, ["a", "b"], _embeddings(2), SETTINGS)
    npy = tmp_path / "shard-00001-of-00002" / "embeddings.npy"
    npy.write_bytes(npy.read_bytes()[:-4])
    with pytest.raises(shards.ShardConflictError, match="embeddings.npy is corrupted"):
        shards.prepare_output(tmp_path, SETTINGS)
    with pytest.raises(shards.ShardConflictError, match="embeddings.npy is corrupted"):
        shards.write_shard(tmp_path, 1, ["a", "b"], _embeddings(2), SETTINGS)


def _written(tmp_path, storage=EmbeddingStorage(), n=40):
    """Two shards of `n` random embeddings (ids "p00", ...) and their manifest."""
    settings = shards.ShardSettings(2, 3, storage, "m" * 64)
    ids = [f"p{i:02d}" for i in range(n)]
    emb = _embeddings(n, seed=1)
    for s in range(2):
        rows = [i for i, x in enumerate(ids) if shards.shard_of(x, 2) == s]
        shards.write_shard(tmp_path, s, [ids[i] for i in rows], emb[rows], settings)
    shards.write_manifest(tmp_path, settings)
    return dict(zip(ids, emb))


@pytest.mark.parametrize("merge", [False, True])
def test_loaded_shards_search_as_exact_search_over_all(tmp_path, merge):
    by_id = _written(tmp_path, EmbeddingStorage("int8"))
    index = ShardedIndex.load(tmp_path, merge=merge)
    assert len(index.shards) == (1 if merge else 2) and sorted(index.ids) == sorted(by_id)
    # What is searched is what is stored: the int8 embeddings, decoded.
    decoded = np.concatenate([shards.read_shard(tmp_path, f"shard-0000{s}-of-00002",
                                                EmbeddingStorage("int8"))[1] for s in range(2)])
    np.testing.assert_allclose(decoded, np.stack([by_id[i] for i in index.ids]), atol=0.02)
    exact = ExactSearcher(decoded, index.ids)
    queries = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    for k in (1, 7, 40):
        got, expected = index.search(queries, k), exact.search(queries, k)
        assert got.ids == expected.ids, k
        np.testing.assert_allclose(got.scores, expected.scores, rtol=1e-5, atol=1e-6)


def test_load_refuses_an_unfinished_or_changed_output(tmp_path):
    _written(tmp_path)
    ids_file = tmp_path / "shard-00001-of-00002" / "ids.txt"
    ids_file.write_text(ids_file.read_text().replace("p", "q"))
    with pytest.raises(ArtifactError, match=r"ids.txt is corrupted"):
        ShardedIndex.load(tmp_path)
    os.remove(tmp_path / "manifest.json")
    with pytest.raises(ArtifactError, match="manifest.json is missing.*did not finish"):
        ShardedIndex.load(tmp_path)


def test_an_empty_shard_has_no_index_and_is_skipped(tmp_path):
    settings = shards.ShardSettings(2, 3, EmbeddingStorage("int8", "dimension"), "m" * 64)
    # shard_of("p04", 2) == 0: shard 1 gets no passage.
    shards.write_shard(tmp_path, 0, ["p04"], _embeddings(1), settings)
    empty = shards.write_shard(tmp_path, 1, [], np.zeros((0, 3), np.float32), settings)
    assert empty["num_passages"] == 0 and "index/index.json" not in empty["files"]
    assert np.load(tmp_path / "shard-00001-of-00002" / "embeddings.npy").shape == (0, 3)
    manifest = shards.write_manifest(tmp_path, settings)
    assert [s["num_passages"] for s in manifest["shards"]] == [1, 0]
    index = ShardedIndex.load(tmp_path)
    assert index.ids == ("p04",) and len(index.shards) == 1
