"""Pairs tokenized once and served in a step-indexed order (tt_zoo.training.step_data)."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from helpers import tiny_model
from tt_zoo.data import features as F
from tt_zoo.training.step_data import (cached_tokenize_pair_set, num_rows, step_batches,
                                       tokenize_on_host, tokenize_pair_set)

N = 10


def arrays(n=N):
    return {"x": {"ids": np.arange(n, dtype=np.int32)[:, None] * np.ones((1, 3), np.int32),
                  "mask": np.ones((n, 3), np.int8)},
            "row": np.arange(n, dtype=np.int64)}


def rows_of(dataset):
    return [batch["row"].tolist() for batch in dataset.as_numpy_iterator()]


def test_every_epoch_is_a_permutation_and_batches_straddle_epochs():
    # Batch 4 over 10 rows: steps 0-4 cover 20 positions = exactly two epochs.
    batches = rows_of(step_batches(arrays(), 4, seed=3, start_step=0, end_step=5))
    flat = sum(batches, [])
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:]) == list(range(10))
    assert flat[:10] != flat[10:]  # each epoch has its own order
    assert batches != rows_of(step_batches(arrays(), 4, seed=4, start_step=0, end_step=5))


def test_a_resumed_run_sees_exactly_the_remaining_batches():
    straight = rows_of(step_batches(arrays(), 4, seed=0, start_step=0, end_step=7))
    resumed = rows_of(step_batches(arrays(), 4, seed=0, start_step=4, end_step=7))
    assert resumed == straight[4:]


def test_input_pipelines_serve_their_replicas_slices_of_each_global_batch():
    """2 input pipelines x 2 replicas each (as 2 TPU hosts or workers): pipeline p yields, for
    every step, replica 2p's then replica 2p+1's quarter of the global batch."""
    global_batches = rows_of(step_batches(arrays(), 8, seed=1, start_step=2, end_step=4))
    served = [rows_of(step_batches(
        arrays(), 8, seed=1, start_step=2, end_step=4,
        input_context=tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=p,
                                                 num_replicas_in_sync=4))) for p in (0, 1)]
    for step, rows in enumerate(global_batches):
        replicas = served[0][2 * step:2 * step + 2] + served[1][2 * step:2 * step + 2]
        assert sum(replicas, []) == rows and all(len(r) == 2 for r in replicas)
    with pytest.raises(ValueError, match="global batch 6 must be a multiple of the 4 replicas"):
        step_batches(arrays(), 6, seed=0, start_step=0, input_context=tf.distribute.InputContext(
            num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=4))


def test_fit_under_mirrored_strategy_equals_one_device():
    """MirroredStrategy over 2 logical CPUs, fed by `distribute_step_batches` with
    cross-replica negatives: the same loss, logged numbers and weights as one device, for the
    BERT and the BoW-MLP towers (tests/scripts/mirrored_fit_check.py, its own process)."""
    script = pathlib.Path(__file__).parent / "scripts" / "mirrored_fit_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "MIRRORED_FIT_OK" in result.stdout, result.stdout


def test_dtypes_shapes_and_errors():
    batch = next(iter(step_batches(arrays(), 4, seed=0, start_step=0, end_step=1)))
    assert batch["x"]["mask"].dtype == tf.int32  # compact int8 storage, int32 to the model
    assert batch["x"]["ids"].shape == (4, 3)
    with pytest.raises(ValueError, match=r"batch_size must be in \[1, 10\]"):
        step_batches(arrays(), 11, seed=0, start_step=0)
    bad = arrays()
    bad["row"] = bad["row"][:5]
    with pytest.raises(ValueError, match="same number of rows"):
        num_rows(bad)


def pair_set(n=12):
    return tf.data.Dataset.from_tensor_slices({
        F.QUERY: [f"who discovered penicillin {i}?" for i in range(n)],
        F.DOC_TITLE: ["penicillin"] * n, F.DOC_TEXT: ["alexander fleming discovered it."] * n,
        F.DOC_ID: [f"d{i % 5}" for i in range(n)], F.DOC_SAMPLING_PROB: [0.2] * n,
        F.TASK: ["ict"] * n})


def test_tokenize_pair_set_matches_the_model_tokenizer_and_trains():
    model = tiny_model(pooling="mean", share_towers=True)
    tokens = tokenize_pair_set(model, pair_set(), batch_size=5, log=lambda *_: None)
    assert num_rows(tokens) == 12
    assert tokens[F.QUERY_INPUTS]["input_word_ids"].shape == (12, 16)
    assert tokens[F.DOCUMENT_INPUTS]["input_mask"].dtype == np.int8
    expected = model.query_preprocessor(tf.constant(["who discovered penicillin 3?"]))
    np.testing.assert_array_equal(tokens[F.QUERY_INPUTS]["input_word_ids"][3],
                                  expected["input_word_ids"][0])
    assert tokens[F.DOC_ID][0] == tokens[F.DOC_ID][5] != tokens[F.DOC_ID][1]  # hashed ids
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2))
    history = model.fit(step_batches(tokens, 4, seed=0, start_step=0, end_step=6),
                        steps_per_epoch=6, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_tokenize_on_host_leaves_no_strings_for_the_step():
    """What pretraining and fine-tuning feed the step: numbers only (XLA has no strings), the
    same ids as the serving tokenizer, DOC_ID hashed so equal ids stay equal."""
    model = tiny_model(pooling="mean", share_towers=True)
    batch = next(iter(pair_set().batch(6)))
    out = tokenize_on_host(model, batch)
    leaves = tf.nest.flatten(out)
    assert leaves and all(t.dtype != tf.string for t in leaves)
    assert F.TASK not in out and out[F.DOC_ID].dtype == tf.int64
    assert out[F.DOC_ID][0] == out[F.DOC_ID][5] != out[F.DOC_ID][1]
    served = model.query_preprocessor(batch[F.QUERY])["input_word_ids"]
    np.testing.assert_array_equal(out[F.QUERY_INPUTS]["input_word_ids"], served)


def test_token_cache_is_keyed_by_the_inputs(tmp_path):
    from tt_zoo.data.pairs_io import write_pair_shards
    from tt_zoo.data.pretraining_tasks import Pair
    pairs = [Pair(f"who discovered penicillin {i}?", "penicillin", "fleming did.", f"d{i}",
                  "ict") for i in range(8)]
    write_pair_shards(pairs, str(tmp_path / "pairs"), num_shards=1)
    messages = []
    model = tiny_model()
    first = cached_tokenize_pair_set(model, str(tmp_path / "pairs"), str(tmp_path / "cache"),
                                     log=messages.append)
    again = cached_tokenize_pair_set(model, str(tmp_path / "pairs"), str(tmp_path / "cache"),
                                     log=messages.append)
    assert messages[0].startswith("tokenized 8 pairs") and messages[1].startswith("read 8")
    np.testing.assert_array_equal(first[F.DOCUMENT_INPUTS]["input_word_ids"],
                                  again[F.DOCUMENT_INPUTS]["input_word_ids"])
    fewer = cached_tokenize_pair_set(model, str(tmp_path / "pairs"), str(tmp_path / "cache"),
                                     max_pairs=3, log=messages.append)
    assert num_rows(fewer) == 3 and messages[2].startswith("tokenized 3")
    assert len(list((tmp_path / "cache").glob("tokens-*.npz"))) == 2
    assert not list((tmp_path / "cache").glob(".*tmp*"))
