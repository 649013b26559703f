"""A post-norm Transformer's blocks at inference in bfloat16, on the AMX units where the CPU has
them: one loop for every encoder family whose blocks are BERT's (BERT, MiniLM, MPNet).

Chang et al. 2020, Sec. 2 ("Inference"): a corpus is embedded once, offline, so its encoding
is the cost of serving it. Two forms of the same function, chosen when it is traced:

- **Weights as constants** (`weights_as_constants`: the library's ``encode_*``, which traces
  its bfloat16 towers with the weights of the moment and traces again when they change). Each
  projection is ``MatMul + BiasAdd`` (``+ Gelu`` for the inner one) on a constant kernel, which
  TensorFlow fuses into oneDNN's inner product with the bias and the activation as post-ops;
  with a constant kernel oneDNN reorders it once into its blocked layout and runs
  ``brgemm:avx10_1_512_amx``, the tiles. What is left between the matmuls (the split into heads,
  residual + layer norm, the merge) is one XLA kernel each (`tt_zoo.modeling.fused_epilogues`).
- **Weights as variables** (anything else: a training copy evaluated, a loop of one's own).
  A fused ``MatMul + BiasAdd`` on a variable kernel is oneDNN's inner product on the plain
  layout, ``x64:gemm:jit``, which does not use the tiles; so every matmul runs alone, as a plain
  ``MatMul`` (``brg_matmul:avx10_1_512_amx``), and bias and activation join the XLA kernels.

In both the attention logits are one oneDNN matmul with the scale and the padding mask as
post-ops, and residuals, layer norms and softmax statistics stay float32. A family describes
each block as a `BlockWeights` (its own variable names, its own score terms: BERT adds the
padding mask to the attention logits, MPNet its relative position bias too).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from typing import Callable, Iterable, Optional

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


_TRACING = threading.local()


@contextlib.contextmanager
def weights_as_constants():
    """While a function is traced inside this, `matrix` and `vector` read each block weight's
    value of the moment as a graph constant, and `blocks_bfloat16` takes its constant-weight
    form (module docstring). The caller owns staleness: a function traced here must be traced
    again when the weights change (`tt_zoo.modeling.inference.EncodeCache` does)."""
    previous = getattr(_TRACING, "constants", False)
    _TRACING.constants = True
    try:
        yield
    finally:
        _TRACING.constants = previous


def _constants() -> bool:
    return getattr(_TRACING, "constants", False)


def f32(variable) -> tf.Tensor:
    """A variable's float32 value.

    Under mixed_bfloat16 a layer's variable is an ``AutoCastVariable`` that reads as bfloat16
    inside the layer's call: its float32 variable is read instead, since casting the bfloat16
    read back would round every weight to bfloat16 and cast whole tables (the word embeddings
    too) twice at every call."""
    if hasattr(variable, "true_dtype"):  # an AutoCastVariable: its float32 variable, uncast
        variable = variable._variable  # pylint: disable=protected-access
    return tf.cast(variable, tf.float32)


def _block_weight(variable) -> tf.Tensor:
    """A block's kernel or bias in float32: under `weights_as_constants` a constant of its
    value of the moment (what oneDNN's weight reorder needs; embedding tables, read by `f32`,
    stay variables: a gather needs no reorder, and tracing tens of MB of constants is slow)."""
    if not _constants():
        return f32(variable)
    with tf.init_scope():  # eager, even while a function is being traced
        value = f32(variable).numpy()
    return tf.constant(value)  # in the traced graph: a Const node


def matrix(variable, rows: int) -> tf.Tensor:
    """A dense layer's kernel (an EinsumDense's may be 3-D) as float32 [rows, units]."""
    return tf.reshape(_block_weight(variable), [rows, -1])


def vector(variable) -> tf.Tensor:
    return tf.reshape(_block_weight(variable), [-1])


def blocks_bfloat16(x: tf.Tensor, batch: tf.Tensor, length: tf.Tensor, mask_adder: tf.Tensor,
                    blocks: Iterable[BlockWeights],
                    position_bias: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Runs `blocks` on float32 rows x [batch * length, hidden]; returns float32 rows.

    `mask_adder`, float32 [batch, 1, 1, length] (0 at real keys, -1e9 at padded ones), and
    `position_bias`, float32 [1 or batch, heads, length, length] if the family has one (MPNet),
    are added to every layer's attention logits; each is cast to bfloat16 once.

    Per block: the fused QKV projection, then the split into heads (XLA); the logits as one
    oneDNN matmul with two post-ops, the scale 1 / sqrt(head_dim) and `mask_adder`
    (``_MklFusedBatchMatMulV2``, not a pass over the logits for each), plus any position bias,
    then oneDNN's softmax; the context matmul and the heads merged (XLA); the output
    projection, then residual and layer norm (XLA); the inner projection and its activation;
    the output projection, then residual and layer norm (XLA). Where the bias and the
    activation go depends on the form (module docstring): post-ops of the projection with
    constant weights, the XLA kernel after it otherwise.
    """
    bf16 = tf.bfloat16
    constants = _constants()
    x_bf16, mask_adder = tf.cast(x, bf16), tf.cast(mask_adder, bf16)
    # The graph rewriter fuses MatMul * constant + adder only where its shape inference sees
    # these ranks and the adder's broadcast axes (an XLA call's outputs carry no shape).
    mask_adder = tf.ensure_shape(mask_adder, [None, 1, 1, None])
    if position_bias is not None:
        position_bias = tf.cast(position_bias, bf16)

    def project(rows, kernel, bias, activation=None):
        """(rows @ kernel + bias, activated if given; None) in bfloat16, the bias and activation
        as post-ops with constant weights, in an XLA kernel otherwise; without an activation
        and with variable weights (the bare product, the bias), for the XLA kernel that follows
        to add the bias."""
        product = tf.matmul(rows, tf.cast(kernel, bf16))
        if not constants:
            if activation is None:
                return product, bias
            return fused_epilogues.bias_activation(product, bias, activation), None
        product = tf.nn.bias_add(product, tf.cast(bias, bf16))
        return (product if activation is None else activation(product)), None

    for block in blocks:
        scale = tf.constant(1.0 / math.sqrt(float(block.query_kernel.shape[-1] // block.heads)),
                            bf16)
        qkv, bias = project(
            x_bf16, tf.concat([block.query_kernel, block.key_kernel, block.value_kernel], 1),
            tf.concat([block.query_bias, block.key_bias, block.value_bias], 0))
        query, key, value = fused_epilogues.split_heads(tf.reshape(qkv, [batch, length, -1]),
                                                        bias, block.heads)
        query, key = (tf.ensure_shape(part, [None, block.heads, None, None])
                      for part in (query, key))
        logits = tf.matmul(query, key, transpose_b=True) * scale + mask_adder
        if position_bias is not None:
            logits += position_bias
        context = fused_epilogues.merge_heads(tf.matmul(tf.nn.softmax(logits), value))
        x, x_bf16 = _residual_norm(*project(context, block.out_kernel, block.out_bias), x,
                                   block.attention_norm)
        inner, _ = project(x_bf16, block.inner_kernel, block.inner_bias, block.activation)
        x, x_bf16 = _residual_norm(*project(inner, block.output_kernel, block.output_bias), x,
                                   block.output_norm)
    return x


def _residual_norm(projected: tf.Tensor, bias: Optional[tf.Tensor], residual: tf.Tensor,
                   norm: Norm):
    return fused_epilogues.residual_layer_norm(projected, bias, residual, norm.gamma, norm.beta,
                                               norm.epsilon)


def layer_norm(x: tf.Tensor, norm) -> tf.Tensor:
    """`tf.keras.layers.LayerNormalization` over the last axis, with its own epsilon, float32."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + norm.epsilon) * f32(norm.gamma) + f32(norm.beta)


def keras_norm(layer) -> Norm:
    """A Keras LayerNormalization as a `Norm`."""
    return Norm(f32(layer.gamma), f32(layer.beta), layer.epsilon)

