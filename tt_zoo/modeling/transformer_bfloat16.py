"""A post-norm Transformer's blocks at inference in bfloat16, on the AMX units where the CPU has
them: one loop for every encoder family whose blocks are BERT's (BERT, MiniLM, MPNet).

Chang et al. 2020, Sec. 2 ("Inference"): a corpus is embedded once, offline, so its encoding
is the cost of serving it. Every matmul runs in bfloat16 as a plain ``MatMul`` or
``BatchMatMulV2`` (oneDNN ``brg_matmul:avx10_1_512_amx``; a fused ``MatMul + BiasAdd`` would be
oneDNN's inner product, whose bfloat16 kernel for plain weights, ``x64:gemm:jit``, does not use
the tiles), and the elementwise work between them is one XLA kernel each
(`tt_zoo.modeling.fused_epilogues`). Residuals, layer norms and softmax statistics stay float32.
A family describes each block as a `BlockWeights` (its own variable names, its own score terms:
BERT adds the padding mask to the attention logits, MPNet its relative position bias too).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterable

import tensorflow as tf

from tt_zoo.modeling import fused_epilogues


@dataclasses.dataclass(frozen=True)
class Norm:
    """A LayerNormalization's float32 scale, offset and epsilon."""

    gamma: tf.Tensor
    beta: tf.Tensor
    epsilon: float


@dataclasses.dataclass(frozen=True)
class BlockWeights:
    """One post-norm block's weights, float32 tensors, kernels as [in, out]:
    x = norm1(x + attention(x) @ out_kernel + out_bias);
    x = norm2(x + activation(x @ inner_kernel + inner_bias) @ output_kernel + output_bias)."""

    query_kernel: tf.Tensor
    key_kernel: tf.Tensor
    value_kernel: tf.Tensor
    query_bias: tf.Tensor
    key_bias: tf.Tensor
    value_bias: tf.Tensor
    heads: int
    out_kernel: tf.Tensor
    out_bias: tf.Tensor
    attention_norm: Norm
    inner_kernel: tf.Tensor
    inner_bias: tf.Tensor
    activation: Callable[[tf.Tensor], tf.Tensor]
    output_kernel: tf.Tensor
    output_bias: tf.Tensor
    output_norm: Norm


def f32(variable) -> tf.Tensor:
    """A variable's value in float32 (under mixed_bfloat16 a layer reads it autocast)."""
    return tf.cast(variable, tf.float32)


def matrix(variable, rows: int) -> tf.Tensor:
    """A dense layer's kernel (an EinsumDense's may be 3-D) as float32 [rows, units]."""
    return tf.reshape(f32(variable), [rows, -1])


def vector(variable) -> tf.Tensor:
    return tf.reshape(f32(variable), [-1])


def blocks_bfloat16(x: tf.Tensor, batch: tf.Tensor, length: tf.Tensor, score_adder: tf.Tensor,
                    blocks: Iterable[BlockWeights]) -> tf.Tensor:
    """Runs `blocks` on float32 rows x [batch * length, hidden]; returns float32 rows.

    `score_adder`, float32 and broadcastable to the logits [batch, heads, length, length], is
    added to every layer's attention logits (-1e9 at padded keys, plus any position bias); it
    is cast to bfloat16 once.

    Per block: the fused QKV matmul, then bias and the split into heads (XLA; the query's part
    of the weights scaled by 1 / sqrt(head_dim)); the logits as a bfloat16 ``BatchMatMulV2`` plus
    `score_adder` and oneDNN's softmax; the context matmul and the heads merged (XLA); the
    output projection, then bias, residual and layer norm (XLA); the inner matmul, then bias and
    activation (XLA); the output matmul, then bias, residual and layer norm (XLA).
    """
    bf16 = tf.bfloat16
    x_bf16, score_adder = tf.cast(x, bf16), tf.cast(score_adder, bf16)
    for block in blocks:
        scale = 1.0 / math.sqrt(float(block.query_kernel.shape[-1] // block.heads))
        kernel = tf.cast(tf.concat([block.query_kernel * scale, block.key_kernel,
                                    block.value_kernel], axis=1), bf16)
        bias = tf.concat([block.query_bias * scale, block.key_bias, block.value_bias], axis=0)
        qkv = tf.reshape(tf.matmul(x_bf16, kernel), [batch, length, -1])
        query, key, value = fused_epilogues.split_heads(qkv, bias, block.heads)
        probabilities = tf.nn.softmax(tf.matmul(query, key, transpose_b=True) + score_adder)
        context = fused_epilogues.merge_heads(tf.matmul(probabilities, value))
        x, x_bf16 = _residual_norm(tf.matmul(context, tf.cast(block.out_kernel, bf16)),
                                   block.out_bias, x, block.attention_norm)
        inner = fused_epilogues.bias_activation(
            tf.matmul(x_bf16, tf.cast(block.inner_kernel, bf16)), block.inner_bias,
            block.activation)
        x, x_bf16 = _residual_norm(tf.matmul(inner, tf.cast(block.output_kernel, bf16)),
                                   block.output_bias, x, block.output_norm)
    return x


def _residual_norm(projected: tf.Tensor, bias: tf.Tensor, residual: tf.Tensor, norm: Norm):
    return fused_epilogues.residual_layer_norm(projected, bias, residual, norm.gamma, norm.beta,
                                               norm.epsilon)


def layer_norm(x: tf.Tensor, norm) -> tf.Tensor:
    """`tf.keras.layers.LayerNormalization` over the last axis, with its own epsilon, float32."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + norm.epsilon) * f32(norm.gamma) + f32(norm.beta)


def keras_norm(layer) -> Norm:
    """A Keras LayerNormalization as a `Norm`."""
    return Norm(f32(layer.gamma), f32(layer.beta), layer.epsilon)

