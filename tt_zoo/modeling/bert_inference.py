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
``encode_*`` calls, the default on CPUs with AMX: `tt_zoo.modeling.cpu_features`) runs
`encode_sequence_bfloat16` instead: every matmul in bfloat16 as a plain ``MatMul`` or
``BatchMatMulV2``, the op oneDNN runs on the AMX matrix units (``brg_matmul:avx10_1_512_amx``
in ``ONEDNN_VERBOSE``; a fused ``MatMul + BiasAdd`` would become oneDNN's inner product, whose
bfloat16 kernel for plain weights, ``x64:gemm:jit``, does not use them), with the elementwise
work between matmuls fused into XLA kernels (`tt_zoo.modeling.fused_epilogues`). Layer norms,
residuals and softmax statistics stay float32; embeddings come within cosine 0.9999 of float32
(`results/amx_encode.md`).
"""

from __future__ import annotations

import math
from typing import Dict

import tensorflow as tf

from tt_zoo.modeling import fused_epilogues

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
    `dtype` (which TensorFlow fuses into one oneDNN inner product), the result in `out`.
    (MPNet's single training and inference graph uses it in bfloat16 too.)"""
    kernel = tf.reshape(dense.kernel, [-1, units])
    bias = tf.cast(tf.reshape(dense.bias, [units]), dtype)
    return tf.cast(tf.nn.bias_add(_matmul(x, kernel, dtype), bias), out)


def _query_scale(attention) -> float:
    """The scaled dot product's factor 1 / sqrt(head_dim)."""
    return 1.0 / math.sqrt(float(attention._key_dim))  # pylint: disable=protected-access


def _scaled(x: tf.Tensor, factor: float) -> tf.Tensor:
    return x if factor == 1.0 else x * factor


def _qkv_weights(attention, width: int, dtype: tf.DType = tf.float32, query_scale: float = 1.0):
    """The block's query, key and value projections as one kernel [width, 3 * hidden] in
    `dtype` and one float32 bias [3 * hidden], the query's part multiplied by `query_scale`
    (the scaled dot product's factor can be applied to the weights instead of every score)."""
    # pylint: disable=protected-access
    hidden = attention._num_heads * attention._key_dim
    parts = (attention._query_dense, attention._key_dense, attention._value_dense)
    factors = (query_scale, 1.0, 1.0)
    kernel = tf.concat([_scaled(tf.reshape(_f32(p.kernel), [width, hidden]), f)
                        for p, f in zip(parts, factors)], axis=1)
    bias = tf.concat([_scaled(tf.reshape(_f32(p.bias), [hidden]), f)
                      for p, f in zip(parts, factors)], axis=0)
    return tf.cast(kernel, dtype), bias


def _attention(x: tf.Tensor, mask_adder: tf.Tensor, block, batch: tf.Tensor,
               length: tf.Tensor) -> tf.Tensor:
    """The block's multi-head self-attention on float32 rows x [batch * length, hidden]: one
    QKV matmul, scaled dot products with padded keys masked, the output projection."""
    attention = block._attention_layer  # pylint: disable=protected-access
    heads, head_dim = attention._num_heads, attention._key_dim  # pylint: disable=protected-access
    width = x.shape[-1]
    kernel, bias = _qkv_weights(attention, width)
    qkv = tf.nn.bias_add(tf.matmul(x, kernel), bias)  # [batch * length, 3 * hidden]
    qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, heads, head_dim]), [2, 0, 3, 1, 4])
    query = qkv[0] * _query_scale(attention)  # [batch, heads, length, head_dim]
    scores = tf.matmul(query, qkv[1], transpose_b=True) + mask_adder
    context = tf.matmul(tf.nn.softmax(scores, axis=-1), qkv[2])
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch * length, heads * head_dim])
    return _dense_2d(context, attention._output_dense, width)  # pylint: disable=protected-access


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


def _embedded(encoder, inputs: Dict[str, tf.Tensor]):
    """The encoder's normalised input embeddings as float32 rows [batch * length, hidden],
    with `batch` and `length` (scalar tensors) and the mask's additive form
    [batch, 1, 1, length] (0 for real keys, -1e9 for padding)."""
    # pylint: disable=protected-access
    ids = inputs["input_word_ids"]
    batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
    word_table = encoder._embedding_layer.embeddings
    embeddings = (tf.gather(_f32(word_table), ids)
                  + _f32(encoder._position_embedding_layer._position_embeddings)[tf.newaxis,
                                                                                   :length]
                  + tf.gather(_f32(encoder._type_embedding_layer.embeddings),
                              inputs["input_type_ids"]))
    x = tf.reshape(_layer_norm(embeddings, encoder._embedding_norm_layer),
                   [-1, word_table.shape[-1]])
    mask = tf.cast(inputs["input_mask"], tf.float32)
    return x, batch, length, ((1.0 - mask) * _MASK_ADDER)[:, tf.newaxis, tf.newaxis, :]


def encode_sequence(encoder, inputs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """The final hidden states [batch, length, hidden] of `encoder` (a `BertEncoderV2` that
    `supports` accepts) on packed inputs (`input_word_ids`, `input_mask`, `input_type_ids`:
    [batch, length], length at most the encoder's `max_sequence_length`), as
    ``encoder(inputs, training=False)["sequence_output"]`` computes them, float32: in float32
    throughout, or as `encode_sequence_bfloat16` when the encoder computes in bfloat16."""
    # pylint: disable=protected-access
    if encoder.compute_dtype == "bfloat16":
        return encode_sequence_bfloat16(encoder, inputs)
    x, batch, length, mask_adder = _embedded(encoder, inputs)
    hidden = x.shape[-1]
    for block in encoder._transformer_layers:
        attended = _layer_norm(x + _attention(x, mask_adder, block, batch, length),
                               block._attention_layer_norm)
        inner_dense = block._intermediate_dense
        # MatMul + BiasAdd + the activation: one fused oneDNN call.
        inner = block._intermediate_activation_layer(
            _dense_2d(attended, inner_dense, inner_dense.kernel.shape[-1]))
        x = _layer_norm(attended + _dense_2d(inner, block._output_dense, hidden),
                        block._output_layer_norm)
    return tf.reshape(x, [batch, length, hidden])


def _kernel(dense, rows: int, dtype: tf.DType) -> tf.Tensor:
    """A dense layer's kernel as a 2-D [rows, units] matrix in `dtype`."""
    return tf.cast(tf.reshape(_f32(dense.kernel), [rows, -1]), dtype)


def _bias(dense) -> tf.Tensor:
    return tf.reshape(_f32(dense.bias), [-1])


def encode_sequence_bfloat16(encoder, inputs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """`encode_sequence` with every matmul in bfloat16 on the AMX matrix units where the CPU
    has them (see the module docstring): float32 hidden states [batch, length, hidden].

    Per block: the QKV matmul, heads split with the bias added (one XLA kernel); the masked
    scores as a bfloat16 ``BatchMatMulV2`` + ``AddV2`` and oneDNN's softmax; the context
    matmul and the heads merged (XLA); the output projection, then bias, residual and layer
    norm (XLA); the inner matmul, then bias and activation (XLA); the output matmul, then
    bias, residual and layer norm (XLA)."""
    # pylint: disable=protected-access
    bf16 = tf.bfloat16
    x, batch, length, mask_adder = _embedded(encoder, inputs)
    hidden = x.shape[-1]
    x_bf16, mask_adder = tf.cast(x, bf16), tf.cast(mask_adder, bf16)
    for block in encoder._transformer_layers:
        attention = block._attention_layer
        kernel, bias = _qkv_weights(attention, hidden, bf16, _query_scale(attention))
        qkv = tf.reshape(tf.matmul(x_bf16, kernel), [batch, length, -1])
        query, key, value = fused_epilogues.split_heads(qkv, bias, attention._num_heads)
        probabilities = tf.nn.softmax(tf.matmul(query, key, transpose_b=True) + mask_adder)
        context = fused_epilogues.merge_heads(tf.matmul(probabilities, value))
        norm = block._attention_layer_norm
        x, x_bf16 = fused_epilogues.residual_layer_norm(
            tf.matmul(context, _kernel(attention._output_dense, hidden, bf16)),
            _bias(attention._output_dense), x, _f32(norm.gamma), _f32(norm.beta), norm.epsilon)
        inner_dense, output_dense = block._intermediate_dense, block._output_dense
        inner = fused_epilogues.bias_activation(
            tf.matmul(x_bf16, _kernel(inner_dense, hidden, bf16)), _bias(inner_dense),
            block._intermediate_activation_layer.activation)
        norm = block._output_layer_norm
        x, x_bf16 = fused_epilogues.residual_layer_norm(
            tf.matmul(inner, _kernel(output_dense, inner.shape[-1], bf16)), _bias(output_dense),
            x, _f32(norm.gamma), _f32(norm.beta), norm.epsilon)
    return tf.reshape(x, [batch, length, hidden])
