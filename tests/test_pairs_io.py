"""Pair shards: round trip, q(d), atomic writes, and refusal of incomplete directories."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tt_zoo.data import features
from tt_zoo.data import pairs_io
from tt_zoo.data.pretraining_tasks import Pair


def _pairs():
    # doc d1 appears 3 times, d2 twice, d3 once: q(d) = 3/6, 2/6, 1/6.
    rows = [("q one", "T1", "text one", "d1", "ict"),
            ("q two", "T2", "text two", "d2", "bfs"),
            ("q three", "T1", "text one", "d1", "wlp"),
            ("q four", "T3", "text thr\u00e9e", "d3", "ict"),
            ("q five", "T1", "text one", "d1", "bfs"),
            ("q six", "T2", "text two", "d2", "wlp")]
    return [Pair(query=q, doc_title=t, doc_text=x, doc_id=d, task=k) for q, t, x, d, k in rows]


def test_round_trip_and_sampling_probs(tmp_path):
    manifest = pairs_io.write_pair_shards(_pairs(), tmp_path, num_shards=4, progress=False,
                                          config={"seed": 3})
    assert sorted(os.listdir(tmp_path)) == [
        "manifest.json"] + [f"pairs-{i:05d}-of-00004.tfrecord" for i in range(4)]
    assert manifest["num_records"] == 6
    assert [s["num_records"] for s in manifest["shards"]] == [2, 2, 1, 1]
    assert manifest["config"] == {"seed": 3}

    ds = pairs_io.read_pairs(tmp_path)
    assert ds.element_spec[features.QUERY] == tf.TensorSpec([], tf.string)
    assert ds.element_spec[features.DOC_SAMPLING_PROB] == tf.TensorSpec([], tf.float32)
    got = sorted((r[features.QUERY].decode(), r[features.DOC_TEXT].decode(),
                  r[features.DOC_ID].decode(), r[features.TASK].decode(),
                  round(float(r[features.DOC_SAMPLING_PROB]), 6))
                 for r in ds.as_numpy_iterator())
    expected = sorted((p.query, p.doc_text, p.doc_id, p.task,
                       round({"d1": 3 / 6, "d2": 2 / 6, "d3": 1 / 6}[p.doc_id], 6))
                      for p in _pairs())
    assert got == expected

    # Deterministic order: shard 0 first (records 0 and 4 round-robin), then shard 1, ...
    queries = [q.decode() for q in ds.map(lambda r: r[features.QUERY]).as_numpy_iterator()]
    assert queries == ["q one", "q five", "q two", "q six", "q three", "q four"]
    batch = next(iter(ds.batch(4)))
    assert batch[features.DOC_ID].shape == (4,)


def test_given_sampling_probs_are_written(tmp_path):
    probs = {"d1": 0.25, "d2": 0.5, "d3": 0.125}
    pairs_io.write_pair_shards(_pairs(), tmp_path, 2, sampling_probs=probs, progress=False)
    for r in pairs_io.iter_pair_records(tmp_path):
        assert r[features.DOC_SAMPLING_PROB] == probs[r[features.DOC_ID]]
    with pytest.raises(KeyError, match="no entry for doc_id 'd3'"):
        pairs_io.write_pair_shards(_pairs(), tmp_path, 2, sampling_probs={"d1": 1., "d2": 1.},
                                   progress=False)


def test_interrupted_write_leaves_nothing_readable(tmp_path):
    pairs_io.write_pair_shards(_pairs(), tmp_path, 2, progress=False)  # an older, complete run

    def broken():
        for i, p in enumerate(_pairs()):
            if i == 3:
                raise RuntimeError("reader died")
            yield p

    with pytest.raises(RuntimeError, match="reader died"):
        pairs_io.write_pair_shards(broken(), tmp_path, 2, progress=False)
    assert os.listdir(tmp_path) == []  # no manifest, no shard, no temporary or spill file
    with pytest.raises(pairs_io.IncompleteOutputError, match="incomplete output: .* no manifest"):
        pairs_io.read_pairs(tmp_path)


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip"])
def test_damaged_shard_is_refused(tmp_path, damage):
    pairs_io.write_pair_shards(_pairs(), tmp_path, 2, progress=False)
    shard = tmp_path / "pairs-00001-of-00002.tfrecord"
    data = shard.read_bytes()
    if damage == "delete":
        shard.unlink()
        match = "pairs-00001-of-00002.tfrecord listed in manifest.json is missing"
    elif damage == "truncate":
        shard.write_bytes(data[:len(data) // 2])
        match = f"has {len(data) // 2} bytes, the manifest says {len(data)}"
    else:
        shard.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        match = "sha256"
    verify = "sha256" if damage == "flip" else "size"
    with pytest.raises(pairs_io.IncompleteOutputError, match=match):
        pairs_io.read_pairs(tmp_path, verify=verify)
    if damage == "flip":
        pairs_io.read_pairs(tmp_path)  # same size: only the hash check sees it


def test_shuffle_files_keeps_the_multiset(tmp_path):
    pairs_io.write_pair_shards(_pairs(), tmp_path, 3, progress=False)
    ds = pairs_io.read_pairs(tmp_path, shuffle_files=True, seed=1, num_parallel_reads=2)
    assert sorted(q.decode() for q in ds.map(lambda r: r[features.QUERY]).as_numpy_iterator()) \
        == sorted(p.query for p in _pairs())


def test_mlm_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    examples = [{"input_word_ids": rng.integers(0, 100, 8), "input_mask": [1] * 8,
                 "input_type_ids": [0] * 8, "masked_lm_positions": [1, 2, 0],
                 "masked_lm_ids": [5, 6, 0], "masked_lm_weights": [1.0, 1.0, 0.0]}
                for _ in range(5)]
    manifest = pairs_io.write_mlm_shards(examples, tmp_path, 2, progress=False)
    assert manifest["feature_lengths"]["input_word_ids"] == 8
    ds = pairs_io.read_mlm_examples(tmp_path)
    assert ds.element_spec["input_word_ids"] == tf.TensorSpec([8], tf.int32)
    assert ds.element_spec["masked_lm_weights"] == tf.TensorSpec([3], tf.float32)
    got = sorted(tuple(r["input_word_ids"]) for r in ds.as_numpy_iterator())
    assert got == sorted(tuple(e["input_word_ids"]) for e in examples)
    with pytest.raises(ValueError, match="holds 'mlm' records, expected 'pairs'"):
        pairs_io.read_pairs(tmp_path)

    bad = examples[:2] + [dict(examples[0], masked_lm_ids=[1, 2])]
    with pytest.raises(ValueError, match="MLM example 2: feature 'masked_lm_ids' has length 2"):
        pairs_io.write_mlm_shards(bad, tmp_path / "bad", 2, progress=False)
    assert not (tmp_path / "bad" / "manifest.json").exists()


def test_manifest_is_json_with_hashes(tmp_path):
    pairs_io.write_pair_shards(_pairs(), tmp_path, 1, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["num_distinct_docs"] == 3
    assert len(manifest["shards"][0]["sha256"]) == 64
    pairs_io.read_manifest(tmp_path, verify="sha256")
