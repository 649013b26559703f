"""The plain-matmul inference forward of the BERT tower equals the Model Garden layers."""

import numpy as np
import pytest
import tensorflow as tf
from official.nlp.modeling import networks

from tt_zoo.modeling import bert_inference
from tt_zoo.modeling.inference import mixed_bfloat16_copy, sync_weights
from tt_zoo.modeling.towers import BertTower


def _packed(batch=5, length=19, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(batch, length)).astype(np.int32)
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length  # one full row, the others padded
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
    types = ((np.arange(length)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int32)
    return {"input_word_ids": tf.constant(ids * mask), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant(types)}


def _trained_looking(layer, seed=1):
    """Weights drawn far from the initialiser (layer norms and biases included), so a term the
    forward left out would show."""
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        scale = 0.3 if len(variable.shape) > 1 else 0.5
        base = 1.0 if "gamma" in variable.name else 0.0
        variable.assign(base + scale * rng.standard_normal(variable.shape).astype(np.float32))


@pytest.mark.parametrize("heads,hidden,inner,layers", [(2, 16, 24, 2), (4, 32, 64, 3)])
def test_sequence_output_equals_the_encoder_layers(heads, hidden, inner, layers):
    encoder = networks.BertEncoderV2(vocab_size=50, hidden_size=hidden, num_layers=layers,
                                     num_attention_heads=heads, inner_dim=inner,
                                     max_sequence_length=32)
    packed = _packed()
    encoder(packed)
    _trained_looking(encoder)
    assert bert_inference.supports(encoder)
    expected = encoder(packed, training=False)["sequence_output"].numpy()
    got = bert_inference.encode_sequence(encoder, packed).numpy()
    real = packed["input_mask"].numpy().astype(bool)  # padded positions are never read
    np.testing.assert_allclose(got[real], expected[real], atol=1e-5)


def test_an_encoder_it_does_not_reproduce_is_refused():
    norm_first = networks.BertEncoderV2(vocab_size=50, hidden_size=16, num_layers=1,
                                        num_attention_heads=2, inner_dim=24, norm_first=True)
    narrow = networks.BertEncoderV2(vocab_size=50, hidden_size=16, num_layers=1,
                                    num_attention_heads=2, inner_dim=24, embedding_width=8)
    assert not bert_inference.supports(norm_first)
    assert not bert_inference.supports(narrow)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_the_tower_runs_it_at_inference_with_the_same_embeddings(pooling):
    tower = BertTower(vocab_size=50, embedding_dim=8, size=None, num_layers=2, hidden_size=16,
                      num_attention_heads=2, inner_dim=24, max_sequence_length=32,
                      pooling=pooling)
    packed = _packed()
    tower(packed)
    _trained_looking(tower)
    layers = tower(packed, training=False, plain_inference=False).numpy()
    plain = tower(packed, training=False).numpy()
    np.testing.assert_allclose(plain, layers, atol=1e-5)
    # Inside a tf.function too (how encode_* and the serving signatures call it).
    traced = tf.function(lambda p: tower(p, training=False))(packed).numpy()
    np.testing.assert_allclose(traced, layers, atol=1e-5)
    # Training keeps the layers: dropout makes two calls differ.
    assert not np.allclose(tower(packed, training=True).numpy(),
                           tower(packed, training=True).numpy())


def test_a_mixed_bfloat16_tower_runs_the_plain_forward_with_bfloat16_matmuls(monkeypatch):
    """Under mixed_bfloat16 the plain forward runs (its matmuls in bfloat16, the rest float32):
    close to the float32 forward and to the bfloat16 layers, and it is what the tower calls."""
    tower = BertTower(vocab_size=50, embedding_dim=8, size=None, num_layers=2, hidden_size=16,
                      num_attention_heads=2, inner_dim=24, max_sequence_length=32)
    packed = _packed()
    tower(packed, training=False)
    _trained_looking(tower)
    want = tower(packed, training=False).numpy()
    copy = mixed_bfloat16_copy(tower, packed)  # as encode_*(precision="bfloat16") makes it
    sync_weights(copy, tower)
    calls = []
    plain = bert_inference.encode_sequence
    monkeypatch.setattr(bert_inference, "encode_sequence",
                        lambda encoder, inputs: calls.append(encoder.compute_dtype)
                        or plain(encoder, inputs))
    got = tf.cast(copy(packed, training=False), tf.float32).numpy()
    assert calls == ["bfloat16"]
    layers = tf.cast(copy(packed, training=False, plain_inference=False), tf.float32).numpy()
    cosine = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cosine.min() > 0.99
    assert np.abs(got - want).max() > 1e-4  # bfloat16 rounding shows: not the float32 graph
    np.testing.assert_allclose(got, layers, atol=0.1 * np.abs(want).max())
