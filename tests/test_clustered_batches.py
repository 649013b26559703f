"""Clustered (progressive) batches, ProQA Sec. 3.2 (tt_zoo.training.clustered_batches)."""

import json
import pathlib
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from helpers import kill_at_first_checkpoint, tiny_model, tiny_vocab
from tt_zoo.data import features as F
from tt_zoo.training import loop as training
from tt_zoo.training.clustered_batches import (ClusteredStepOrder, ClusterOrderError,
                                               batches_from_clusters, default_num_clusters)
from tt_zoo.training.step_data import step_batches, tokenize_pair_set

REPO = pathlib.Path(__file__).resolve().parents[1]
# Four topics on disjoint words of the tiny vocabulary: every document of a topic is the same
# bag of words (in its own order), so a bag-of-words tower embeds a topic as one point.
TOPICS = [words.split() for words in ("penicillin fleming alexander discovered",
                                      "paris capital france city", "river seine flows through",
                                      "water boils degrees london")]
N, BATCH, EVERY = 120, 8, 8  # an epoch is 15 steps: round 1 (steps 8-15) straddles two


def topic_pairs(n=N, seed=0):
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, len(TOPICS), n)
    pairs = {F.QUERY: [" ".join(rng.choice(TOPICS[t], 3)) for t in topic],
             F.DOC_TITLE: [TOPICS[t][0] for t in topic],
             F.DOC_TEXT: [" ".join(rng.permutation(TOPICS[t])) for t in topic],
             F.DOC_ID: [f"d{i}" for i in range(n)], F.DOC_SAMPLING_PROB: [1.0 / n] * n}
    return topic, pairs


@pytest.fixture(scope="module")
def setup():
    model = tiny_model("bow_mlp")
    model.build_by_calling()
    topic, pairs = topic_pairs()
    arrays = tokenize_pair_set(model, tf.data.Dataset.from_tensor_slices(pairs),
                               log=lambda *_: None)
    return model, topic, arrays


def make_order(arrays, tmp_path, **kwargs):
    options = dict(seed=0, every=EVERY, directory=str(tmp_path / "clusters"), num_clusters=4,
                   log=lambda *_: None)
    options.update(kwargs)
    return ClusteredStepOrder(arrays, BATCH, **options)


def test_batches_from_clusters_by_hand():
    # Batch 2. Cluster 0 has 3 members (one batch + 1 left over), cluster 1 has 5 (two
    # batches + 1 left over); the two leftovers make one pooled batch.
    labels = np.array([0, 1, 0, 1, 1, 0, 1, 1])
    batches, source = batches_from_clusters(labels, 2, np.random.default_rng(0))
    assert batches.shape == (4, 2) and sorted(batches.reshape(-1).tolist()) == list(range(8))
    assert sorted(source.tolist()) == [-1, 0, 1, 1]
    for rows, cluster in zip(batches, source):
        if cluster >= 0:
            assert (labels[rows] == cluster).all()
        else:
            assert sorted(labels[rows].tolist()) == [0, 1]
    with pytest.raises(ValueError, match="whole batches of 3"):
        batches_from_clusters(labels, 3, np.random.default_rng(0))
    assert default_num_clusters(100) == 25 and default_num_clusters(2) == 1


def test_rounds_hold_the_baseline_rows_each_batch_one_topic_and_are_deterministic(setup,
                                                                                  tmp_path):
    model, topic, arrays = setup
    order = make_order(arrays, tmp_path)
    baseline = make_order(arrays, tmp_path / "other")
    first_rows = order.compute_round(model, 1)
    for round_index in (1, 2):
        rows = order.compute_round(model, round_index)
        expected = baseline.baseline_rows(round_index)
        assert rows.shape == (EVERY, BATCH)
        assert sorted(rows.reshape(-1).tolist()) == sorted(expected.reshape(-1).tolist())
        assert not np.array_equal(rows, expected)
        with np.load(order.round_path(round_index)) as stored:
            np.testing.assert_array_equal(stored["rows"], rows)
            source = stored["source"]
        # Each topic is one point, so each cluster is one topic; a batch cut from one
        # cluster holds one topic; only the pooled leftovers mix, fewer than the clusters.
        for batch, cluster in zip(rows, source):
            if cluster >= 0:
                assert len(set(topic[batch])) == 1, (round_index, topic[batch])
        assert (source >= 0).sum() >= EVERY - 3  # fewer than 4 x 8 leftovers: 3 pooled at most
        # Same seed, same weights: the same order.
        np.testing.assert_array_equal(baseline.compute_round(model, round_index), rows)
    other_seed = make_order(arrays, tmp_path / "seed1", seed=1).compute_round(model, 1)
    assert not np.array_equal(other_seed, first_rows)
    assert order.stats["rounds_clustered"] == 3 and order.stats["encode_seconds"] > 0


def test_rows_before_the_start_are_the_baseline_and_a_round_waits_for_its_clustering(
        setup, tmp_path):
    model, _, arrays = setup
    order = make_order(arrays, tmp_path, start_step=2 * EVERY)
    baseline = list(step_batches(arrays, BATCH, seed=0, start_step=0, end_step=2 * EVERY)
                    .as_numpy_iterator())
    served = step_batches(arrays, BATCH, seed=0, start_step=0, end_step=3 * EVERY, order=order)
    iterator = iter(served)
    for step in range(2 * EVERY):  # rounds 0 and 1: the baseline, nothing to wait for
        np.testing.assert_array_equal(next(iterator)[F.DOC_ID], baseline[step][F.DOC_ID])
    # Round 2 is not ready: the pipeline waits; the clustering releases it.
    threading.Timer(0.5, order.compute_round, args=(model, 2)).start()
    start = time.perf_counter()
    first = next(iterator)
    assert time.perf_counter() - start > 0.3
    rows = np.load(order.round_path(2))["rows"]
    np.testing.assert_array_equal(first[F.DOC_ID], arrays[F.DOC_ID][rows[0]])
    # A pipeline waiting for a round that never comes is released by close(), with the reason.
    waiting = iter(step_batches(arrays, BATCH, seed=0, start_step=3 * EVERY, order=order))
    threading.Timer(0.5, order.close).start()
    with pytest.raises(Exception, match="round 3 .* was never made"):
        next(waiting)


def test_replicas_get_their_slices_of_the_clustered_global_batch(setup, tmp_path):
    model, _, arrays = setup
    order = make_order(arrays, tmp_path)
    rows = order.compute_round(model, 1)
    served = [list(step_batches(
        arrays, BATCH, seed=0, start_step=EVERY, end_step=2 * EVERY, order=order,
        input_context=tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=p,
                                                 num_replicas_in_sync=4)).as_numpy_iterator())
        for p in (0, 1)]
    for step in range(EVERY):
        replicas = served[0][2 * step:2 * step + 2] + served[1][2 * step:2 * step + 2]
        np.testing.assert_array_equal(np.concatenate([r[F.DOC_ID] for r in replicas]),
                                      arrays[F.DOC_ID][rows[step]])


def test_fit_clusters_each_round_from_its_first_steps_weights(setup, tmp_path):
    """In one `fit`: the pipeline (prefetching ahead) waits for each round's clustering, made
    at the round's first step; each order file is on disk before that step's checkpoint."""
    _, _, arrays = setup
    model = tiny_model("bow_mlp")
    model.build_by_calling()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2))
    order = make_order(arrays, tmp_path / "ckpt")
    steps = 2 * EVERY + 1  # clustered at steps 8 and 16
    result = training.train_resumable(
        model, lambda start: step_batches(arrays, BATCH, seed=0, start_step=start,
                                          end_step=steps, order=order),
        steps=steps, global_batch=BATCH, checkpoint_dir=str(tmp_path / "ckpt"),
        checkpoint_every=EVERY, progress=False, log=lambda *_: None,
        data_callbacks=[order.callback()])
    assert result.steps_done == steps and order.stats["rounds_clustered"] == 2
    clusters = tmp_path / "ckpt" / "clusters"
    assert sorted(p.name for p in clusters.iterdir()) == ["round-1.npz", "round-2.npz"]
    written = (clusters / "round-2.npz").stat().st_mtime_ns
    assert written <= (tmp_path / "ckpt" / f"ckpt-{2 * EVERY}.index").stat().st_mtime_ns


def test_a_resumed_run_reads_the_order_of_its_round_or_says_what_is_missing(setup, tmp_path):
    model, _, arrays = setup
    order = make_order(arrays, tmp_path)
    with pytest.raises(ClusterOrderError, match=r"round-1.npz is missing: a run resumed at a "
                                                r"step of clustered round 1 \(steps 8-15\)"):
        order.begin(model, EVERY + 3, end_step=None)
    rows = order.compute_round(model, 1)
    resumed = make_order(arrays, tmp_path)
    resumed.begin(model, EVERY + 3, end_step=None)  # inside round 1: its file
    assert resumed.stats == {**resumed.stats, "rounds_loaded": 1, "rounds_clustered": 0}
    np.testing.assert_array_equal(resumed.rows(EVERY + 3), rows[3])
    resumed.begin(model, 2 * EVERY, end_step=None)  # at round 2's first step, no file: cluster
    assert resumed.stats["rounds_clustered"] == 1
    resumed.begin(model, 2 * EVERY, end_step=None)  # now the file is the record
    assert resumed.stats["rounds_loaded"] == 2
    with pytest.raises(ClusterOrderError, match="does not hold the rows of round 1 of this run"):
        make_order(arrays, tmp_path, seed=1).begin(model, EVERY + 3, end_step=None)
    with pytest.raises(ValueError, match="start_step must be a multiple of every=8"):
        make_order(arrays, tmp_path, start_step=4)
    with pytest.raises(ValueError, match=r"cluster_length must be in \[1, 24\]"):
        make_order(arrays, tmp_path, cluster_length=25)


@pytest.mark.slow
def test_fit_under_mirrored_strategy_clusters_as_one_device():
    """MirroredStrategy over 2 logical CPUs: the same round orders and final weights as one
    device (tests/scripts/clustered_mirrored_check.py, its own process; ~30 s)."""
    script = REPO / "tests" / "scripts" / "clustered_mirrored_check.py"
    result = run([sys.executable, str(script)])
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "MIRRORED_CLUSTERED_OK" in result.stdout, result.stdout


# ---------------------------------------------------------------- the pretrain command line

STEPS, CHECKPOINT_EVERY, CLUSTER_EVERY = 40, 8, 5  # no checkpoint falls on a round's first step


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from tt_zoo.data.pairs_io import write_pair_shards
    from tt_zoo.data.pretraining_tasks import Pair
    root = tmp_path_factory.mktemp("clustered_pretrain")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    _, pairs = topic_pairs(96, seed=1)
    write_pair_shards([Pair(query=q, doc_title=t, doc_text=d, doc_id=i, task="ict")
                       for q, t, d, i in zip(pairs[F.QUERY], pairs[F.DOC_TITLE],
                                             pairs[F.DOC_TEXT], pairs[F.DOC_ID])],
                      str(root / "pairs"), num_shards=2)
    return root, vocab


def command(root, vocab, workdir, extra=()):
    return [sys.executable, str(REPO / "recipes" / "pretrain.py"), "--variant",
            "ict_bfs_wlp_128", "--pairs", str(root / "pairs"), "--vocab", str(vocab),
            "--steps", str(STEPS), "--batch-size", "8", "--checkpoint-every",
            str(CHECKPOINT_EVERY), "--tower-shape", "1,16,2", "--query-length", "16",
            "--document-length", "24", "--workdir", str(workdir),
            "--token-cache", str(root / "token_cache"), "--no-progress",
            "--cluster-every", str(CLUSTER_EVERY), "--clusters", "2", "--cluster-length", "12",
            *extra]


def final_weights(workdir):
    reader = tf.train.load_checkpoint(str(workdir / "checkpoints"))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
            if "metrics" not in k and k.endswith(".ATTRIBUTES/VARIABLE_VALUE")}


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # ~30 s; resuming exactly is in make test through test_pretrain_recipe
def test_kill_and_resume_inside_a_clustered_round_matches_an_uninterrupted_run(inputs):
    root, vocab = inputs
    straight = run(command(root, vocab, root / "straight"))
    assert straight.returncode == 0, straight.stderr[-3000:]
    rounds = STEPS // CLUSTER_EVERY - 1  # rounds 1..7 (the last round would start at STEPS)
    assert straight.stdout.count("clustered batches: round ") == rounds
    summary = json.loads((root / "straight" / "train_summary.json").read_text())
    assert summary["clustered_batches"] == {"every": CLUSTER_EVERY, "start_step": CLUSTER_EVERY,
                                            "clusters": 2, "cluster_length": 12}
    cost = summary["train_clustered_batches"]
    assert cost["rounds_clustered"] == rounds and cost["reencoding_seconds"] >= 0
    assert 0 < cost["fraction_of_train_wall_time"] < 1
    settings = json.loads((root / "straight" / "checkpoints" / "run_settings.json").read_text())
    assert settings["clustered_batches"] == summary["clustered_batches"]

    workdir = root / "killed"
    checkpoints = workdir / "checkpoints"
    returncode = kill_at_first_checkpoint(command(root, vocab, workdir), checkpoints)
    assert returncode == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = int(tf.train.latest_checkpoint(str(checkpoints)).rsplit("-", 1)[1])
    assert killed_at < STEPS and killed_at % CLUSTER_EVERY  # inside a clustered round
    needed = killed_at // CLUSTER_EVERY

    resumed = run(command(root, vocab, workdir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout and f"trained to step {STEPS}" in resumed.stdout
    assert f"round {needed} order read from" in resumed.stdout
    expected, actual = final_weights(root / "straight"), final_weights(workdir)
    assert expected.keys() == actual.keys() and len(expected) > 10
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    for r in range(1, rounds + 1):  # the orders the two runs trained on are the same
        with np.load(root / "straight" / "checkpoints" / "clusters" / f"round-{r}.npz") as a, \
                np.load(checkpoints / "clusters" / f"round-{r}.npz") as b:
            np.testing.assert_array_equal(a["rows"], b["rows"])

    # Resuming with another grouping is refused.
    other = command(root, vocab, workdir)
    other[other.index("--clusters") + 1] = "3"
    refused = run(other)
    assert refused.returncode != 0
    assert "clustered_batches: checkpoint {" in refused.stderr, refused.stderr[-3000:]
    assert "'clusters': 2" in refused.stderr and "'clusters': 3" in refused.stderr
