"""BertTower and BowMlpTower: shapes, masking, config round trip, checkpoint init."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import assert_layer_round_trip
from tt_zoo.modeling.towers import BERT_SIZES, BertTower, BowMlpTower, resolve_bert_shape

IDS = tf.constant([[2, 7, 8, 3, 0, 0], [2, 9, 3, 0, 0, 0]])
PACKED = {"input_word_ids": IDS, "input_mask": tf.cast(IDS > 0, tf.int32),
          "input_type_ids": tf.zeros_like(IDS)}


def test_bert_tower_shapes_and_round_trip():
    tower = BertTower(vocab_size=20, embedding_dim=8, size="tiny", max_sequence_length=16)
    out = tower(PACKED)
    assert out.shape == (2, 8)
    assert tower.encoder.get_config()["num_layers"] == 2
    assert_layer_round_trip(tower, PACKED)


def test_bert_tower_uses_cls_state_linearly_without_pooler():
    tower = BertTower(vocab_size=20, embedding_dim=8, size="tiny", max_sequence_length=16,
                      dropout_rate=0.0)
    out = tower(PACKED)
    cls_state = tower.encoder(PACKED)["sequence_output"][:, 0, :]
    kernel, bias = tower.projection.get_weights()
    np.testing.assert_allclose(out, cls_state.numpy() @ kernel + bias, rtol=1e-5, atol=1e-5)


def test_the_unused_pooler_is_kept_but_not_trained():
    """The encoder's pooler (its tanh layer on [CLS]) feeds nothing, so it trains nothing: no
    "Gradients do not exist for variables [...pooler_transform...]" warning at fit. Its weights
    stay in the layer (shipped exports restore them unchanged)."""
    tower = BertTower(vocab_size=20, embedding_dim=8, size="tiny", max_sequence_length=16)
    tower(PACKED)
    pooler = [w.name for w in tower.weights if "pooler_transform" in w.name]
    assert len(pooler) == 2
    assert not [w for w in tower.trainable_weights if "pooler_transform" in w.name]
    assert sorted(w.name for w in tower.non_trainable_weights) == sorted(pooler)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tower(PACKED, training=True))
    assert all(g is not None for g in tape.gradient(loss, tower.trainable_weights))
    # A config round trip keeps it so.
    clone = BertTower.from_config(tower.get_config())
    clone(PACKED)
    assert [w.name for w in clone.non_trainable_weights] == [
        w.name for w in tower.non_trainable_weights]


def test_named_and_explicit_shapes():
    assert resolve_bert_shape("mini") == BERT_SIZES["mini"]
    shape = resolve_bert_shape(None, num_layers=3, hidden_size=64, num_attention_heads=4)
    assert (shape.num_layers, shape.hidden_size, shape.inner_dim) == (3, 64, 256)
    with pytest.raises(ValueError, match="Unknown BERT tower size 'huge'"):
        resolve_bert_shape("huge")
    with pytest.raises(ValueError, match="not divisible"):
        resolve_bert_shape(None, num_layers=1, hidden_size=30, num_attention_heads=4)


def test_bert_tower_initialises_from_encoder_checkpoint(tmp_path):
    source = BertTower(vocab_size=20, embedding_dim=8, size="tiny", max_sequence_length=16)
    source(PACKED)
    path = tf.train.Checkpoint(encoder=source.encoder).write(str(tmp_path / "bert"))
    target = BertTower(vocab_size=20, embedding_dim=8, size="tiny", max_sequence_length=16,
                       init_checkpoint=path)
    for a, b in zip(source.encoder.get_weights(), target.encoder.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(FileNotFoundError, match="No BERT checkpoint"):
        BertTower(vocab_size=20, embedding_dim=8, init_checkpoint=str(tmp_path / "missing"))


def test_bow_mlp_averages_over_real_tokens_only():
    tower = BowMlpTower(vocab_size=20, embedding_dim=4, token_embedding_dim=3, hidden_dim=5)
    out = tower(PACKED)
    assert out.shape == (2, 4)
    # Extra padding must not change the embedding.
    padded = {k: tf.pad(v, [[0, 0], [0, 4]]) for k, v in PACKED.items()}
    np.testing.assert_allclose(out, tower(padded), rtol=1e-6)
    assert np.all(np.abs(out) <= 1.0)  # tanh output layer
    assert_layer_round_trip(tower, PACKED)


def test_masked_mean_hand_worked():
    from tt_zoo.modeling.towers import masked_mean
    # Row 0 averages positions 0 and 1: ([1, 2] + [3, 4]) / 2; row 1 has no real token: zeros.
    vectors = tf.constant([[[1., 2.], [3., 4.], [100., 100.]], [[5., 5.], [6., 6.], [7., 7.]]])
    mask = tf.constant([[1, 1, 0], [0, 0, 0]])
    np.testing.assert_allclose(masked_mean(vectors, mask), [[2., 3.], [0., 0.]])


def test_bert_tower_mean_pooling_is_a_linear_layer_on_the_masked_mean():
    tower = BertTower(vocab_size=20, embedding_dim=8, size="tiny", max_sequence_length=16,
                      dropout_rate=0.0, pooling="mean")
    out = tower(PACKED)
    states = tower.encoder(PACKED)["sequence_output"].numpy()
    mask = PACKED["input_mask"].numpy()[:, :, None]
    mean = (states * mask).sum(1) / mask.sum(1)
    kernel, bias = tower.projection.get_weights()
    np.testing.assert_allclose(out, mean @ kernel + bias, rtol=1e-5, atol=1e-5)
    clone = assert_layer_round_trip(tower, PACKED)
    assert clone.pooling == "mean"
    with pytest.raises(ValueError, match="Unknown pooling 'max'"):
        BertTower(vocab_size=20, embedding_dim=8, pooling="max")


def test_bow_mlp_linear_output_is_unbounded_and_round_trips():
    tower = BowMlpTower(vocab_size=20, embedding_dim=4, token_embedding_dim=3, hidden_dim=5,
                        output_activation=None)
    out = tower(PACKED)
    kernel, bias = tower.output_layer.get_weights()
    # Far past tanh's range, even when every hidden unit of this unseeded tower is off (ReLU).
    tower.output_layer.set_weights([kernel * 100.0, bias + 5.0])
    assert out.shape == (2, 4) and np.abs(tower(PACKED)).max() > 1.0
    clone = assert_layer_round_trip(tower, PACKED)
    assert clone.output_activation is None
    with pytest.raises(ValueError, match="output_activation must be 'tanh' or None"):
        BowMlpTower(vocab_size=20, output_activation="relu")
