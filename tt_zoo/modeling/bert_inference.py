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
`encode_sequence_bfloat16` instead: the blocks run as
`tt_zoo.modeling.transformer_bfloat16.blocks_bfloat16` (every matmul in bfloat16 on the AMX
matrix units, traced by the library's ``encode_*`` with the weights as constants so that bias
and GELU ride on the projections; the rest in XLA kernels; layer norms, residuals and softmax
statistics float32); embeddings come within cosine 0.9999 of float32 (`results/amx_encode.md`).
"""

from __future__ import annotations

import math
from typing import Dict

import tensorflow as tf

from tt_zoo.modeling import transformer_bfloat16 as bf16_blocks
from tt_zoo.modeling.transformer_bfloat16 import f32 as _f32, layer_norm as _layer_norm

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


def _attention(x: tf.Tensor, mask_adder: tf.Tensor, block, batch: tf.Tensor,
               length: tf.Tensor) -> tf.Tensor:
    """The block's multi-head self-attention on float32 rows x [batch * length, hidden]: one
    QKV matmul, scaled dot products with padded keys masked, the output projection."""
    attention = block._attention_layer  # pylint: disable=protected-access
    heads, head_dim = attention._num_heads, attention._key_dim  # pylint: disable=protected-access
    width = x.shape[-1]
    parts = (attention._query_dense, attention._key_dense, attention._value_dense)  # pylint: disable=protected-access
    kernel = tf.concat([tf.reshape(_f32(p.kernel), [width, heads * head_dim]) for p in parts], 1)
    bias = tf.concat([tf.reshape(_f32(p.bias), [heads * head_dim]) for p in parts], axis=0)
    qkv = tf.nn.bias_add(tf.matmul(x, kernel), bias)  # [batch * length, 3 * hidden]
    qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, heads, head_dim]), [2, 0, 3, 1, 4])
    query = qkv[0] * (1.0 / math.sqrt(float(head_dim)))  # [batch, heads, length, head_dim]
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
    # expand_dims, not [:, None, None, :]: the same tensor, and an op TFLite has natively.
    return x, batch, length, tf.expand_dims(tf.expand_dims((1.0 - mask) * _MASK_ADDER, 1), 1)


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


def _block_weights(block, hidden: int) -> bf16_blocks.BlockWeights:
    """A Model Garden `TransformerEncoderBlock` (post-norm) as `BlockWeights`."""
    # pylint: disable=protected-access
    attention = block._attention_layer
    inner_dense, output_dense = block._intermediate_dense, block._output_dense
    parts = (attention._query_dense, attention._key_dense, attention._value_dense)
    kernels = [bf16_blocks.matrix(p.kernel, hidden) for p in parts]
    biases = [bf16_blocks.vector(p.bias) for p in parts]
    return bf16_blocks.BlockWeights(
        *kernels, *biases, heads=attention._num_heads,
        out_kernel=bf16_blocks.matrix(attention._output_dense.kernel, hidden),
        out_bias=bf16_blocks.vector(attention._output_dense.bias),
        attention_norm=bf16_blocks.keras_norm(block._attention_layer_norm),
        inner_kernel=bf16_blocks.matrix(inner_dense.kernel, hidden),
        inner_bias=bf16_blocks.vector(inner_dense.bias),
        activation=block._intermediate_activation_layer.activation,
        output_kernel=bf16_blocks.matrix(output_dense.kernel, inner_dense.kernel.shape[-1]),
        output_bias=bf16_blocks.vector(output_dense.bias),
        output_norm=bf16_blocks.keras_norm(block._output_layer_norm))


def encode_sequence_bfloat16(encoder, inputs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """`encode_sequence` with every matmul in bfloat16, on the AMX units where the CPU has them
    (`tt_zoo.modeling.transformer_bfloat16.blocks_bfloat16`): float32 hidden states
    [batch, length, hidden]."""
    x, batch, length, mask_adder = _embedded(encoder, inputs)
    hidden = x.shape[-1]
    blocks = (_block_weights(b, hidden)
              for b in encoder._transformer_layers)  # pylint: disable=protected-access
    x = bf16_blocks.blocks_bfloat16(x, batch, length, mask_adder, blocks)
    return tf.reshape(x, [batch, length, hidden])
