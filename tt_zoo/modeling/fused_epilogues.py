"""The elementwise work between a bfloat16 Transformer's matmuls, each step one XLA kernel.

Chang et al. 2020, Sec. 2 ("Inference"): a corpus is embedded once, offline, so its encoding
is the cost of serving it. On a CPU with AMX, oneDNN runs a bfloat16 matmul about 5x faster
than float32, so what lies between the matmuls (the split into heads, residual + layer norm,
the merge; with variable weights also bias and GELU, `tt_zoo.modeling.transformer_bfloat16`)
becomes the larger cost: as separate TensorFlow ops over bfloat16 tensors each is one pass
through memory with slow bfloat16 arithmetic (GELU alone 7 ns an element). Each function here
fuses one such step into a single XLA kernel that reads the matmul's bfloat16 result once,
computes in float32 and writes what the next matmul reads in bfloat16.

XLA compiles each function once per input shape: callers bound the shapes (lengths rounded up
to a multiple, partial batches padded; `tt_zoo.modeling.inference`). None of them is used by
the float32 graph or by exported serving signatures (TensorFlow Serving refuses XLA kernels
unless started with ``--xla_cpu_compilation_enabled``).
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import tensorflow as tf

_COMPUTE = tf.float32


def _xla(function):
    return tf.function(function, jit_compile=True, autograph=False, reduce_retracing=False)


@_xla
def split_heads(qkv: tf.Tensor, bias: Optional[tf.Tensor],
                heads: int) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The fused query-key-value projection's result qkv [batch, length, 3 * hidden]
    (bfloat16) plus its float32 `bias` [3 * hidden] (None: already added), split into query,
    key and value, each bfloat16 [batch, heads, length, hidden // heads]."""
    batch, length = tf.shape(qkv)[0], tf.shape(qkv)[1]  # static once XLA compiles
    projected = qkv if bias is None else tf.cast(tf.cast(qkv, _COMPUTE) + bias, qkv.dtype)
    projected = tf.reshape(projected, [batch, length, 3, heads, -1])
    projected = tf.transpose(projected, [2, 0, 3, 1, 4])
    return projected[0], projected[1], projected[2]


@_xla
def merge_heads(context: tf.Tensor) -> tf.Tensor:
    """Attention output [batch, heads, length, head_dim] as rows [batch * length, hidden]."""
    shape = tf.shape(context)  # static once XLA compiles
    return tf.reshape(tf.transpose(context, [0, 2, 1, 3]),
                      [shape[0] * shape[2], shape[1] * shape[3]])


@_xla
def residual_layer_norm(projected: tf.Tensor, bias: Optional[tf.Tensor], residual: tf.Tensor,
                        gamma: tf.Tensor, beta: tf.Tensor,
                        epsilon: float) -> Tuple[tf.Tensor, tf.Tensor]:
    """LayerNorm(projected + bias + residual) of a post-norm block: `projected` bfloat16
    [rows, hidden] (a matmul's result), the rest float32 (`bias` None: already added). Returns
    the float32 rows (the next residual) and the same rows in `projected`'s dtype (the next
    matmul's input)."""
    x = tf.cast(projected, _COMPUTE) + residual
    if bias is not None:
        x += bias
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    x = (x - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta
    return x, tf.cast(x, projected.dtype)


@_xla
def bias_activation(projected: tf.Tensor, bias: tf.Tensor,
                    activation: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """activation(projected + bias), computed in float32, returned in `projected`'s dtype
    (the feed-forward block's inner layer, read by its output matmul)."""
    return tf.cast(activation(tf.cast(projected, _COMPUTE) + bias), projected.dtype)
