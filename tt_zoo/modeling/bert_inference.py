"""The BERT encoder's inference forward pass written as plain matmuls (no dropout, no Einsum).

Chang et al. 2020, Sec. 4.1: the towers are BERT Transformers, and Sec. 2 ("Inference"): every
candidate's embedding is computed once, offline, so encoding a corpus is the cost of serving it.
The Model Garden's `BertEncoderV2` computes its projections with `EinsumDense` layers; on the CPU
those run as Einsum ops that oneDNN cannot fuse with their bias and activation, and the profile
of the tiny BERT on 100-word passages put 69% of the time in Einsum, 14% in the separate bias
adds and ~10% in GELU (`results/encode_speed.md`). This forward reads the same variables and
computes the same function with 2-D MatMul + BiasAdd (+ GELU), the patterns TensorFlow's CPU
graph rewriter can fuse into oneDNN calls (the speed-up is measured; the fusion itself was not
inspected op by op), and with the query, key and value projections of a layer as one matmul. Only the post-norm encoder of BERT is covered (`norm_first=False`, no
embedding projection, no output range), which is what `BertTower` builds; `supports` says so.

The result equals the layers' within float32 round-off (tests pin it at 1e-5), so the library's
``encode_*`` and the exported serving signatures use it, and training keeps the layers.

An encoder built under the ``mixed_bfloat16`` policy (``precision="bfloat16"`` of the
``encode_*`` calls) runs the same graph with every matmul's inputs in bfloat16 (float32
accumulation and output; layer norms, softmax and residuals stay float32): on CPUs with AMX or
AVX512-BF16 the matmuls run several times faster, at a cost in recall that is measured
(`results/checkpoints.md`).
"""

from __future__ import annotations

import math
from typing import Dict

import tensorflow as tf

# BertEncoderV2's masked softmax adds this to the scores of padded keys (tf-keras' Softmax).
_MASK_ADDER = -1e9


def supports(encoder) -> bool:
    """True when `encoder` (a Model Garden `BertEncoderV2`) is the post-norm BERT this forward
    reproduces: no embedding projection, no output range, no norm-first or Linformer blocks
    (each block's own inner activation layer is applied, whichever it is)."""
    config = encoder.get_config()
    blocks = getattr(encoder, "_transformer_layers", None)
    return bool(blocks) and (
        config.get("embedding_width") in (None, config.get("hidden_size"))
        and config.get("output_range") is None and not config.get("norm_first")
        and getattr(encoder, "_embedding_projection", None) is None
        and all(not getattr(b, "_norm_first", True) and getattr(b, "_output_range", None) is None
                and getattr(b, "_linformer_dim", None) is None for b in blocks))


def _layer_norm(x: tf.Tensor, norm) -> tf.Tensor:
    """`tf.keras.layers.LayerNormalization` over the last axis, with its own epsilon."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + norm.epsilon) * _f32(norm.gamma) + _f32(norm.beta)


def _f32(variable) -> tf.Tensor:
    """A variable's value in float32 (under mixed_bfloat16 a layer reads it autocast)."""
    return tf.cast(variable, tf.float32)


def _matmul(a: tf.Tensor, b: tf.Tensor, dtype: tf.DType, **kwargs) -> tf.Tensor:
    """``tf.matmul`` with its inputs in `dtype` (float32 or bfloat16; no-op casts in float32)."""
    return tf.matmul(tf.cast(a, dtype), tf.cast(b, dtype), **kwargs)


def _dense_2d(x: tf.Tensor, dense, units: int, dtype: tf.DType = tf.float32,
              out: tf.DType = tf.float32) -> tf.Tensor:
    """An `EinsumDense` (or `Dense`) applied to rows x [n, in] as one MatMul + BiasAdd in
    `dtype`, the result in `out` (the next op's dtype: a bfloat16 result that feeds another
    bfloat16 matmul is not cast back and forth)."""
    kernel = tf.reshape(dense.kernel, [-1, units])
    bias = tf.cast(tf.reshape(dense.bias, [units]), dtype)
    return tf.cast(tf.nn.bias_add(_matmul(x, kernel, dtype), bias), out)


def _attention(x: tf.Tensor, mask_adder: tf.Tensor, block, batch: tf.Tensor,
               length: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """The block's multi-head self-attention on rows x [batch * length, hidden]: one QKV matmul,
    scaled dot products with padded keys masked (softmax in float32), the output projection;
    matmuls in `dtype`, the result float32."""
    attention = block._attention_layer  # pylint: disable=protected-access
    heads, head_dim = attention._num_heads, attention._key_dim  # pylint: disable=protected-access
    hidden = heads * head_dim
    width = x.shape[-1]
    parts = (attention._query_dense, attention._key_dense, attention._value_dense)  # pylint: disable=protected-access
    kernel = tf.concat([tf.reshape(p.kernel, [width, hidden]) for p in parts], axis=1)
    bias = tf.cast(tf.concat([tf.reshape(p.bias, [hidden]) for p in parts], axis=0), dtype)
    qkv = tf.nn.bias_add(_matmul(x, kernel, dtype), bias)  # [batch * length, 3 * hidden]
    qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, heads, head_dim]), [2, 0, 3, 1, 4])
    query = qkv[0] * tf.cast(1.0 / math.sqrt(float(head_dim)), dtype)  # [batch, heads, length, head_dim]
    scores = tf.cast(_matmul(query, qkv[1], dtype, transpose_b=True), tf.float32) + mask_adder
    context = _matmul(tf.nn.softmax(scores, axis=-1), qkv[2], dtype)
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch * length, hidden])
    return _dense_2d(context, attention._output_dense, width, dtype)  # pylint: disable=protected-access


def sequence_output(encoder, packed: Dict[str, tf.Tensor], training=None,
                    plain_inference: bool = True) -> tf.Tensor:
    """The final hidden states [batch, length, hidden] of a Model Garden BERT `encoder` on
    `packed` inputs: through `encode_sequence` at inference (``training=False``) when
    `plain_inference` is set, the encoder computes in float32 or bfloat16 with float32
    variables and `supports` it; through the encoder's own layers otherwise (training,
    dropout, other precisions). Every BERT tower of tt_zoo calls its encoder through here."""
    if (training is False and plain_inference and encoder.variable_dtype == "float32"
            and encoder.compute_dtype in ("float32", "bfloat16") and supports(encoder)):
        if not encoder.built:
            encoder(packed, training=False)  # creates the variables encode_sequence reads
        return encode_sequence(encoder, packed)
    return encoder(packed, training=training)["sequence_output"]


def encode_sequence(encoder, inputs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """The final hidden states [batch, length, hidden] of `encoder` (a `BertEncoderV2` that
    `supports` accepts) on packed inputs (`input_word_ids`, `input_mask`, `input_type_ids`:
    [batch, length], length at most the encoder's `max_sequence_length`), as
    ``encoder(inputs, training=False)["sequence_output"]`` computes them; float32, with the
    matmuls in the encoder's compute dtype (float32, or bfloat16 under mixed_bfloat16)."""
    # pylint: disable=protected-access
    dtype = tf.as_dtype(encoder.compute_dtype)
    ids = inputs["input_word_ids"]
    batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
    word_table = encoder._embedding_layer.embeddings
    hidden = word_table.shape[-1]
    embeddings = (tf.gather(_f32(word_table), ids)
                  + _f32(encoder._position_embedding_layer._position_embeddings)[tf.newaxis,
                                                                                   :length]
                  + tf.gather(_f32(encoder._type_embedding_layer.embeddings),
                              inputs["input_type_ids"]))
    x = tf.reshape(_layer_norm(embeddings, encoder._embedding_norm_layer), [-1, hidden])
    mask = tf.cast(inputs["input_mask"], x.dtype)
    mask_adder = ((1.0 - mask) * _MASK_ADDER)[:, tf.newaxis, tf.newaxis, :]
    for block in encoder._transformer_layers:
        attended = _layer_norm(x + _attention(x, mask_adder, block, batch, length, dtype),
                               block._attention_layer_norm)
        inner_dense = block._intermediate_dense
        # MatMul + BiasAdd + the activation: one fused oneDNN call; its result stays in the
        # matmul dtype for the next matmul.
        inner = _dense_2d(attended, inner_dense, inner_dense.kernel.shape[-1], dtype, out=dtype)
        inner = tf.cast(block._intermediate_activation_layer(inner), dtype)
        x = _layer_norm(attended + _dense_2d(inner, block._output_dense, hidden, dtype),
                        block._output_layer_norm)
    return tf.reshape(x, [batch, length, hidden])
