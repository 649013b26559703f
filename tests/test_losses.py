"""Hand-worked checks of the corrected sampled softmax (Chang et al. 2020, Sec. 2)."""

import math
import pathlib
import subprocess
import sys

import pytest
import tensorflow as tf

from helpers import assert_layer_round_trip
from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss

# Two queries, two in-batch documents (the positives), one hard negative:
#   queries   q0 = [1, 0], q1 = [0, 1]
#   documents d0 = [2, 1], d1 = [1, 3]   hard negative h = [0, 0]
# All-pair scores (rows: queries; columns: d0, d1, h):  [[2, 1, 0],
#                                                        [1, 3, 0]]
QUERIES = tf.constant([[1.0, 0.0], [0.0, 1.0]])
DOCUMENTS = tf.constant([[2.0, 1.0], [1.0, 3.0]])
HARD = tf.constant([[0.0, 0.0]])


def softmax_xent(row, label):
    return -(row[label] - math.log(sum(math.exp(v) for v in row)))


def test_plain_in_batch_softmax():
    loss = CorrectedSampledSoftmaxLoss(remove_accidental_hits=False)(QUERIES, DOCUMENTS)
    # Scores [[2, 1], [1, 3]]: row 0 -> -log(e^2/(e^2+e^1)) = 0.31326;
    # row 1 -> -log(e^3/(e^1+e^3)) = 0.12693; mean = 0.22009.
    assert float(loss) == pytest.approx((0.313262 + 0.126928) / 2, abs=1e-5)


def test_logq_correction_and_accidental_hits_on_2x3_scores():
    # q(d0) = 0.5, q(d1) = 0.25, q(h) = 1.0. Corrected logits = score - log q:
    #   [[2 + 0.6931, 1 + 1.3863, 0],      = [[2.6931, 2.3863, 0],
    #    [1 + 0.6931, 3 + 1.3863, 0]]         [1.6931, 4.3863, 0]]
    probs = tf.constant([0.5, 0.25])
    layer = CorrectedSampledSoftmaxLoss(remove_accidental_hits=False)
    loss = layer(QUERIES, DOCUMENTS, document_ids=tf.constant(["a", "b"]),
                 sampling_probabilities=probs, hard_negative_embeddings=HARD,
                 hard_negative_ids=tf.constant(["h"]),
                 hard_negative_sampling_probabilities=tf.constant([1.0]))
    # row 0: e^2.6931 = 14.78, e^2.3863 = 10.87, e^0 = 1 -> -log(14.78 / 26.65) = 0.58969
    # row 1: e^1.6931 = 5.44, e^4.3863 = 80.34, e^0 = 1 -> -log(80.34 / 86.77) = 0.07707
    row0 = softmax_xent([2.6931472, 2.3862944, 0.0], 0)
    row1 = softmax_xent([1.6931472, 4.3862944, 0.0], 1)
    assert row0 == pytest.approx(0.58969, abs=1e-4) and row1 == pytest.approx(0.07707, abs=1e-4)
    assert float(loss) == pytest.approx((row0 + row1) / 2, abs=1e-5)

    # d0 and d1 are the same passage (id "a" twice): each row's other column is an accidental
    # hit and is masked, leaving [[2.6931, -inf, 0], [-inf, 4.3863, 0]].
    masked = CorrectedSampledSoftmaxLoss(remove_accidental_hits=True)(
        QUERIES, DOCUMENTS, document_ids=tf.constant(["a", "a"]), sampling_probabilities=probs,
        hard_negative_embeddings=HARD, hard_negative_ids=tf.constant(["h"]),
        hard_negative_sampling_probabilities=tf.constant([1.0]))
    row0 = softmax_xent([2.6931472, 0.0], 0)  # -log(14.78 / 15.78) = 0.06548
    row1 = softmax_xent([4.3862944, 0.0], 0)  # -log(80.34 / 81.34) = 0.01237
    assert row0 == pytest.approx(0.06548, abs=1e-4) and row1 == pytest.approx(0.01237, abs=1e-4)
    assert float(masked) == pytest.approx((row0 + row1) / 2, abs=1e-5)
    assert float(masked) < float(loss)


def test_correction_can_be_switched_off():
    probs = tf.constant([0.5, 0.25])
    off = CorrectedSampledSoftmaxLoss(remove_accidental_hits=False, sampling_correction=False)
    plain = CorrectedSampledSoftmaxLoss(remove_accidental_hits=False)
    assert float(off(QUERIES, DOCUMENTS, sampling_probabilities=probs)) == pytest.approx(
        float(plain(QUERIES, DOCUMENTS)))


def test_bad_inputs_are_named():
    layer = CorrectedSampledSoftmaxLoss()
    with pytest.raises(ValueError, match="document_ids"):
        layer(QUERIES, DOCUMENTS)
    with pytest.raises(ValueError, match=r"2D"):
        CorrectedSampledSoftmaxLoss(remove_accidental_hits=False)(QUERIES[0], DOCUMENTS)


def test_config_round_trip():
    layer = CorrectedSampledSoftmaxLoss(temperature=0.5, cross_replica_negatives=False)
    args = dict(document_embeddings=DOCUMENTS, document_ids=tf.constant(["a", "b"]))
    # The shared case: config through JSON, the same config, the same loss (allclose)...
    clone = assert_layer_round_trip(layer, QUERIES, **args)
    # ...and, as pinned before, to pytest.approx's default (rel 1e-6).
    assert float(clone(QUERIES, **args)) == pytest.approx(float(layer(QUERIES, **args)))


def test_cross_replica_loss_equals_single_device_loss():
    """MirroredStrategy over 2 logical CPUs: same loss and gradients as one device on the batch."""
    script = pathlib.Path(__file__).parent / "scripts" / "cross_replica_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CROSS_REPLICA_OK" in result.stdout, result.stdout


def test_the_loss_name_does_not_depend_on_what_the_process_built_before():
    """Its config is in a pretraining run's recorded settings: a run resumed in a process (a
    notebook) that built another model first must still match them."""
    first, second = CorrectedSampledSoftmaxLoss(), CorrectedSampledSoftmaxLoss()
    assert first.get_config() == second.get_config()
    assert second.name == "corrected_sampled_softmax_loss"
