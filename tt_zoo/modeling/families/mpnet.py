"""The ``mpnet`` family: MPNet (Song et al., NeurIPS 2020, *MPNet: Masked and Permuted
Pre-training for Language Understanding*) as a tower, its Hugging Face converter and its
tokenizer mapping: what all-mpnet-base-v2 (sentence-transformers) is built of.

What differs from BERT (source: Hugging Face transformers' ``models/mpnet/modeling_mpnet.py``,
``MPNetEmbeddings``, ``MPNetEncoder.compute_position_bias``, ``relative_position_bucket``):

* embeddings: word + learned absolute position, no token types; positions are numbered as
  RoBERTa numbers them, from ``padding_idx + 1`` = 2 (`MPNetTower`'s ``position_offset``); then
  LayerNorm (eps 1e-5).
* a relative position bias, T5's (Raffel et al. 2020, Sec. 2.1): each key - query offset falls
  in one of 32 buckets (bidirectional: 16 a side; exact up to 8, then logarithmic up to 128,
  `relative_position_bucket`); one table [buckets, heads] gives a bias per head that is computed
  once per forward pass and added to every layer's attention logits.
* texts are packed ``<s> a </s>`` and ``<s> a </s></s> b </s>``, padded with ``<pad>`` (id 1):
  `SPECIAL_TOKENS`; the WordPiece vocabulary and BERT's normaliser are BERT's kind.

The blocks are otherwise BERT's post-norm blocks (q, k, v, o projections; an erf-GELU
feed-forward). One forward (`MPNetTower.sequence_output`) serves training (dropout where
Hugging Face has it) and inference, written as plain 2-D matmuls with the query, key and value
projections as one, in the tower's compute dtype (bfloat16 under ``mixed_bfloat16``; layer
norms, softmax and residuals float32), as `tt_zoo.modeling.bert_inference` does for BERT.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
import tensorflow as tf

from tt_zoo.data.text import SpecialTokens
from tt_zoo.errors import ArtifactError
from tt_zoo.modeling import architectures
from tt_zoo.modeling import transformer_bfloat16 as bf16_blocks
from tt_zoo.modeling.bert_inference import _MASK_ADDER, _dense_2d, _matmul
from tt_zoo.modeling.transformer_bfloat16 import f32 as _f32, layer_norm as _layer_norm
from tt_zoo.modeling.checkpoints.bert_checkpoint import (TransformerConfig, as_int,
                                                         hidden_activation, hidden_and_heads,
                                                         layer_norm_eps, layer_shapes)
from tt_zoo.modeling.towers import INNER_ACTIVATIONS, POOLINGS, masked_mean, resolve_bert_shape

# MPNetTokenizer's (tokenizer.json: RobertaProcessing, pad "<pad>"): ids <s> 0, <pad> 1, </s> 2.
SPECIAL_TOKENS = SpecialTokens(pad="<pad>", unk="[UNK]", cls="<s>", sep="</s>", mask="<mask>",
                               pair_separators=2)
NUM_BUCKETS = 32
MAX_DISTANCE = 128
POSITION_OFFSET = 2  # MPNetEmbeddings' padding_idx (1) + 1: the first token's position id


def relative_position_bucket(relative_position, num_buckets: int = NUM_BUCKETS,
                             max_distance: int = MAX_DISTANCE) -> np.ndarray:
    """T5's bidirectional bucket of each relative position (key - query), as MPNet computes it.

    Half the buckets are for keys before the query, half for keys after (``num_buckets // 2``
    added); within a half, distances below ``num_buckets // 4`` are their own bucket, longer
    ones share logarithmically wider buckets up to `max_distance`, beyond which all fall in the
    last. In float32 and truncated, as ``MPNetEncoder.relative_position_bucket`` does (its
    bucket boundaries, e.g. 16 -> 10, 32 -> 12, 64 -> 14, are float32 results).

    Example:
      >>> relative_position_bucket(np.array([0, -1, 1, -7, -8, -15, -16, -128, 5000]))
      array([ 0,  1, 17,  7,  8,  9, 10, 15, 31])
    """
    n = -np.asarray(relative_position, np.int64)  # query - key: > 0 for keys before the query
    half = num_buckets // 2
    bucket = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    ratio = np.maximum(n, 1).astype(np.float32) / np.float32(max_exact)
    scaled = (np.log(ratio) / np.float32(math.log(max_distance / max_exact))
              * np.float32(half - max_exact))
    large = np.minimum(max_exact + scaled.astype(np.int64), half - 1)
    return bucket + np.where(n < max_exact, n, large)


def _initializer():
    """BERT's (and MPNet's) initialiser, a new instance per variable (one shared unseeded
    instance would give every variable the same values)."""
    return tf.keras.initializers.TruncatedNormal(stddev=0.02)


class _MPNetLayer(tf.keras.layers.Layer):
    """One post-norm block's sublayers (``MPNetLayer``); `MPNetTower.sequence_output` reads them."""

    def __init__(self, hidden: int, inner: int, epsilon: float, **kwargs):
        super().__init__(**kwargs)
        self.hidden, self.inner = hidden, inner
        self.q, self.k, self.v, self.o = (tf.keras.layers.Dense(
            hidden, kernel_initializer=_initializer(), name=n) for n in "qkvo")
        self.attention_norm = tf.keras.layers.LayerNormalization(epsilon=epsilon,
                                                                 name="attention_layer_norm")
        self.intermediate = tf.keras.layers.Dense(inner, kernel_initializer=_initializer(),
                                                  name="intermediate")
        self.output_dense = tf.keras.layers.Dense(hidden, kernel_initializer=_initializer(),
                                                  name="output")
        self.output_norm = tf.keras.layers.LayerNormalization(epsilon=epsilon,
                                                              name="output_layer_norm")

    def build(self, input_shape=None):
        for dense in (self.q, self.k, self.v, self.o):
            dense.build((None, self.hidden))
        self.intermediate.build((None, self.hidden))
        self.output_dense.build((None, self.inner))
        self.attention_norm.build((None, self.hidden))
        self.output_norm.build((None, self.hidden))
        super().build(input_shape)


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class MPNetTower(tf.keras.layers.Layer):
    """An MPNet encoder whose embedding pools its final hidden states (mean over real tokens,
    as all-mpnet-base-v2, or the first token's), optionally followed by a linear layer.

    Args:
      vocab_size: size of the WordPiece vocabulary (all-mpnet-base-v2: 30,527).
      embedding_dim: the output size; without `projection` it must equal the hidden size.
      size: a named shape of `tt_zoo.modeling.towers.BERT_SIZES` ("base": 12/768/12/3072), or
        None with an explicit shape below.
      num_layers, hidden_size, num_attention_heads, inner_dim: explicit shape.
      max_sequence_length: the longest input the position table covers (its rows:
        `position_offset` more; all-mpnet-base-v2: 512 of 514).
      dropout_rate: dropout of the embeddings, attention probabilities and block outputs.
      pooling: "mean" or "cls".
      inner_activation: the feed-forward activation (a key of `INNER_ACTIVATIONS`; "gelu":
        the erf form, Hugging Face's "gelu").
      layer_norm_epsilon: the layer norms' epsilon (MPNet: 1e-5).
      relative_attention_num_buckets, relative_max_distance: the relative position buckets.
      position_offset: the first token's position id (MPNet: padding index 1 + 1).
      projection: a linear layer to `embedding_dim` after pooling (named ``cls_projection``).
      **kwargs: passed to `tf.keras.layers.Layer`.

    Example:
      >>> tower = MPNetTower(vocab_size=100, embedding_dim=16, size=None, num_layers=1,
      ...                    hidden_size=16, num_attention_heads=2, inner_dim=32)
      >>> tower({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}).shape
      TensorShape([2, 16])

    References:
      Song et al. 2020, Sec. 2 (MPNet); Raffel et al. 2020, Sec. 2.1 (relative position
      buckets); Reimers & Gurevych 2019 (mean pooling); Chang et al. 2020, Sec. 4.1 (a
      Transformer tower whose pooled output is the embedding).
    """

    amx_inference = True  # as `tt_zoo.modeling.towers.BertTower`'s

    def __init__(self, vocab_size: int, embedding_dim: int = 768, size: Optional[str] = "base",
                 num_layers: Optional[int] = None, hidden_size: Optional[int] = None,
                 num_attention_heads: Optional[int] = None, inner_dim: Optional[int] = None,
                 max_sequence_length: int = 512, dropout_rate: float = 0.1,
                 pooling: str = "mean", inner_activation: str = "gelu",
                 layer_norm_epsilon: float = 1e-5,
                 relative_attention_num_buckets: int = NUM_BUCKETS,
                 relative_max_distance: int = MAX_DISTANCE,
                 position_offset: int = POSITION_OFFSET, projection: bool = False, **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"Unknown pooling {pooling!r}; expected one of {POOLINGS}.")
        if inner_activation not in INNER_ACTIVATIONS:
            raise ValueError(f"Unknown inner_activation {inner_activation!r}; expected one of "
                             f"{sorted(INNER_ACTIVATIONS)}.")
        if min(vocab_size, embedding_dim, max_sequence_length,
               relative_attention_num_buckets) <= 0 or relative_attention_num_buckets % 4:
            raise ValueError("MPNetTower: vocab_size, embedding_dim, max_sequence_length must be "
                             "positive and relative_attention_num_buckets a positive multiple "
                             f"of 4 (got {vocab_size}, {embedding_dim}, {max_sequence_length}, "
                             f"{relative_attention_num_buckets}).")
        self.vocab_size, self.embedding_dim, self.size = vocab_size, embedding_dim, size
        self.num_layers, self.hidden_size = num_layers, hidden_size
        self.num_attention_heads, self.inner_dim = num_attention_heads, inner_dim
        self.shape_ = resolve_bert_shape(size, num_layers, hidden_size, num_attention_heads,
                                         inner_dim)
        self.max_sequence_length = int(max_sequence_length)
        self.dropout_rate = dropout_rate
        self.pooling = pooling
        self.inner_activation = inner_activation
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.relative_attention_num_buckets = int(relative_attention_num_buckets)
        self.relative_max_distance = int(relative_max_distance)
        self.position_offset = int(position_offset)
        self.use_projection = bool(projection)
        hidden = self.shape_.hidden_size
        if not self.use_projection and embedding_dim != hidden:
            raise ValueError(f"An MPNet tower without a projection embeds in its hidden size "
                             f"{hidden} (got embedding_dim {embedding_dim}).")
        self.word_embeddings = tf.keras.layers.Embedding(
            vocab_size, hidden, embeddings_initializer=_initializer(), name="word_embeddings")
        self.position_embeddings = tf.keras.layers.Embedding(
            self.max_sequence_length + self.position_offset, hidden,
            embeddings_initializer=_initializer(), name="position_embeddings")
        self.embedding_norm = tf.keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name="embeddings_layer_norm")
        self.relative_attention_bias = tf.keras.layers.Embedding(
            self.relative_attention_num_buckets, self.shape_.num_attention_heads,
            embeddings_initializer=_initializer(), name="relative_attention_bias")
        self.blocks = [_MPNetLayer(hidden, self.shape_.inner_dim, self.layer_norm_epsilon,
                                   name=f"layer_{n}") for n in range(self.shape_.num_layers)]
        # float32 under mixed_bfloat16 too: it drops from the float32 residual stream.
        self.dropout = tf.keras.layers.Dropout(dropout_rate, dtype="float32")
        self.projection = tf.keras.layers.Dense(
            embedding_dim, kernel_initializer=_initializer(),
            name="cls_projection") if self.use_projection else None
        # The bucket of every key - query offset the position table allows, computed once.
        longest = self.max_sequence_length
        self._offset_buckets = relative_position_bucket(
            np.arange(-(longest - 1), longest), self.relative_attention_num_buckets,
            self.relative_max_distance).astype(np.int32)

    def build(self, input_shape=None):
        hidden = self.shape_.hidden_size
        for table in (self.word_embeddings, self.position_embeddings,
                      self.relative_attention_bias):
            table.build((None,))
        self.embedding_norm.build((None, hidden))
        for block in self.blocks:
            block.build()
        if self.projection is not None:
            self.projection.build((None, hidden))
        super().build(input_shape)

    def position_bias(self, length: tf.Tensor) -> tf.Tensor:
        """The relative position bias [1, heads, length, length] (float32) every layer adds to
        its attention logits: ``MPNetEncoder.compute_position_bias``."""
        offsets = (tf.range(length)[tf.newaxis, :] - tf.range(length)[:, tf.newaxis]
                   + (self.max_sequence_length - 1))  # key - query, as an index
        buckets = tf.gather(tf.constant(self._offset_buckets), offsets)  # [length, length]
        values = tf.gather(_f32(self.relative_attention_bias.embeddings), buckets)
        return tf.transpose(values, [2, 0, 1])[tf.newaxis]

    def _attention(self, x, bias, mask_adder, block, batch, length, dtype, training):
        """Self-attention on rows x [batch * length, hidden] -> [batch * length, hidden]."""
        heads = self.shape_.num_attention_heads
        hidden = self.shape_.hidden_size
        head_dim = hidden // heads
        parts = (block.q, block.k, block.v)
        kernel = tf.concat([p.kernel for p in parts], axis=1)  # [hidden, 3 * hidden]
        qkv_bias = tf.cast(tf.concat([p.bias for p in parts], axis=0), dtype)
        qkv = tf.nn.bias_add(_matmul(x, kernel, dtype), qkv_bias)
        qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, heads, head_dim]), [2, 0, 3, 1, 4])
        scores = tf.cast(_matmul(qkv[0], qkv[1], dtype, transpose_b=True), tf.float32)
        scores = scores / math.sqrt(head_dim) + bias + mask_adder  # [batch, heads, len, len]
        probs = self.dropout(tf.nn.softmax(scores, axis=-1), training=training)
        context = _matmul(probs, qkv[2], dtype)  # [batch, heads, length, head_dim]
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch * length, hidden])
        return _dense_2d(context, block.o, hidden, dtype)

    def _block_weights(self, block, activation) -> bf16_blocks.BlockWeights:
        """One block as `tt_zoo.modeling.transformer_bfloat16.BlockWeights`."""
        hidden, inner = self.shape_.hidden_size, self.shape_.inner_dim
        m, v = bf16_blocks.matrix, bf16_blocks.vector
        return bf16_blocks.BlockWeights(
            m(block.q.kernel, hidden), m(block.k.kernel, hidden), m(block.v.kernel, hidden),
            v(block.q.bias), v(block.k.bias), v(block.v.bias),
            heads=self.shape_.num_attention_heads, out_kernel=m(block.o.kernel, hidden),
            out_bias=v(block.o.bias), attention_norm=bf16_blocks.keras_norm(block.attention_norm),
            inner_kernel=m(block.intermediate.kernel, hidden),
            inner_bias=v(block.intermediate.bias), activation=activation,
            output_kernel=m(block.output_dense.kernel, inner),
            output_bias=v(block.output_dense.bias),
            output_norm=bf16_blocks.keras_norm(block.output_norm))

    def sequence_output(self, ids: tf.Tensor, mask: tf.Tensor, training=None) -> tf.Tensor:
        """The final hidden states [batch, length, hidden] (float32) of token ids and mask
        [batch, length] (real tokens first, as `TextPreprocessor` packs them), with dropout
        when `training`; matmuls in the tower's compute dtype."""
        dtype = tf.as_dtype(self.compute_dtype)
        hidden = self.shape_.hidden_size
        batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
        positions = tf.range(length) + self.position_offset
        x = (tf.gather(_f32(self.word_embeddings.embeddings), ids)
             + tf.gather(_f32(self.position_embeddings.embeddings), positions)[tf.newaxis])
        x = self.dropout(_layer_norm(x, self.embedding_norm), training=training)
        x = tf.reshape(x, [-1, hidden])
        bias = self.position_bias(length)  # computed once, shared by the layers
        mask_adder = ((1.0 - tf.cast(mask, tf.float32)) * _MASK_ADDER)[:, tf.newaxis,
                                                                          tf.newaxis, :]
        activation = INNER_ACTIVATIONS[self.inner_activation]
        if not training and dtype == tf.bfloat16:  # inference on the AMX units
            x = bf16_blocks.blocks_bfloat16(x, batch, length, mask_adder,
                                            (self._block_weights(b, activation)
                                             for b in self.blocks), position_bias=bias)
            return tf.reshape(x, [batch, length, hidden])
        for block in self.blocks:
            attended = self._attention(x, bias, mask_adder, block, batch, length, dtype,
                                       training)
            x = _layer_norm(x + self.dropout(attended, training=training), block.attention_norm)
            inner = _dense_2d(x, block.intermediate, self.shape_.inner_dim, dtype, out=dtype)
            inner = tf.cast(activation(inner), dtype)
            out = _dense_2d(inner, block.output_dense, hidden, dtype)
            x = _layer_norm(x + self.dropout(out, training=training), block.output_norm)
        return tf.reshape(x, [batch, length, hidden])

    def call(self, inputs, training=None):
        """Encodes packed inputs.

        Args:
          inputs: dict with `input_word_ids` and `input_mask` [batch, seq_length] (an
            `input_type_ids` is ignored: MPNet has no token types).
          training: True runs dropout.

        Returns:
          embeddings: [batch, embedding_dim].
        """
        mask = inputs["input_mask"]
        states = self.sequence_output(inputs["input_word_ids"], mask, training)
        pooled = states[:, 0, :] if self.pooling == "cls" else masked_mean(states, mask)
        return pooled if self.projection is None else self.projection(pooled)

    @property
    def token_embedding_table(self) -> tf.keras.layers.Layer:
        """The WordPiece embedding layer (frozen in query adaptation)."""
        return self.word_embeddings

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_dim=self.embedding_dim,
                      size=self.size, num_layers=self.num_layers, hidden_size=self.hidden_size,
                      num_attention_heads=self.num_attention_heads, inner_dim=self.inner_dim,
                      max_sequence_length=self.max_sequence_length,
                      dropout_rate=self.dropout_rate, pooling=self.pooling,
                      inner_activation=self.inner_activation,
                      layer_norm_epsilon=self.layer_norm_epsilon,
                      relative_attention_num_buckets=self.relative_attention_num_buckets,
                      relative_max_distance=self.relative_max_distance,
                      position_offset=self.position_offset, projection=self.use_projection)
        return config


def build_tower(settings: architectures.TowerSettings, name: str) -> MPNetTower:
    if settings.init_checkpoint:
        raise ValueError("An MPNet tower starts from a Hugging Face checkpoint "
                         "(tt-zoo import-checkpoint), not init_checkpoint "
                         f"{settings.init_checkpoint!r}.")
    return MPNetTower(settings.vocab_size, settings.embedding_dim, size=settings.size,
                      max_sequence_length=settings.max_sequence_length,
                      dropout_rate=settings.dropout_rate, pooling=settings.pooling, name=name,
                      **settings.shape)


# -- the Hugging Face converter (``MPNetModel`` names; linear weights [out, in]) -------------

@dataclasses.dataclass(frozen=True)
class MPNetConfig(TransformerConfig):
    """The shape of an MPNet encoder, as Hugging Face's ``config.json`` gives it."""

    relative_attention_num_buckets: int
    inner_activation: str
    layer_norm_eps: float

    @property
    def max_length(self) -> int:
        """The longest input the position table covers (its first two rows unused)."""
        return self.max_position_embeddings - POSITION_OFFSET


def read_huggingface_config(config: dict, path: str) -> MPNetConfig:
    """An ``MPNetModel`` config.json as an `MPNetConfig`; `ArtifactError` naming `path`."""
    hidden, heads = hidden_and_heads(config, path)
    c = MPNetConfig(vocab_size=as_int(config, "vocab_size", path), hidden_size=hidden,
                    num_layers=as_int(config, "num_hidden_layers", path),
                    num_attention_heads=heads,
                    intermediate_size=as_int(config, "intermediate_size", path),
                    max_position_embeddings=as_int(config, "max_position_embeddings", path),
                    relative_attention_num_buckets=as_int(
                        config, "relative_attention_num_buckets", path, NUM_BUCKETS),
                    inner_activation=hidden_activation(config.get("hidden_act", "gelu"), path),
                    layer_norm_eps=layer_norm_eps(config, path, 1e-5, fixed=False))
    if c.max_length <= 0 or c.relative_attention_num_buckets % 4:
        raise ArtifactError(f"{path}: max_position_embeddings {c.max_position_embeddings} must "
                            f"exceed {POSITION_OFFSET} and relative_attention_num_buckets "
                            f"{c.relative_attention_num_buckets} be a multiple of 4.")
    return c


def weight_names(weights: dict) -> dict:
    """``MPNetModel`` names (an ``MPNetForMaskedLM``'s ``mpnet.`` prefix off), float32; the
    ``position_ids`` buffer dropped."""
    return {(k[len("mpnet."):] if k.startswith("mpnet.") else k): np.asarray(v, np.float32)
            for k, v in weights.items() if not k.endswith("position_ids")}


def expected_shapes(c: MPNetConfig) -> dict:
    """{``MPNetModel`` weight name: shape} of an encoder of `c` (pooler excluded)."""
    h, i = c.hidden_size, c.intermediate_size
    shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, h),
              "embeddings.position_embeddings.weight": (c.max_position_embeddings, h),
              "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,),
              "encoder.relative_attention_bias.weight": (c.relative_attention_num_buckets,
                                                         c.num_attention_heads)}
    for n in range(c.num_layers):
        shapes.update(layer_shapes(f"encoder.layer.{n}.", h, i,
                                   [f"attention.attn.{part}" for part in "qkvo"],
                                   "attention.LayerNorm"))
    return shapes


def tower_settings(c: MPNetConfig) -> dict:
    return dict(num_layers=c.num_layers, hidden_size=c.hidden_size,
                num_attention_heads=c.num_attention_heads, inner_dim=c.intermediate_size,
                max_sequence_length=c.max_length, inner_activation=c.inner_activation,
                layer_norm_epsilon=c.layer_norm_eps,
                relative_attention_num_buckets=c.relative_attention_num_buckets)


def set_weights(tower: MPNetTower, checkpoint) -> None:
    """Copies `checkpoint`'s ``MPNetModel`` weights into a built `MPNetTower` of its shape
    (linear weights transposed to Keras kernels), checking every shape."""
    w = checkpoint.weights

    def assign(variable, name, transpose=False):
        value = w[name].T if transpose else w[name]
        if tuple(variable.shape) != value.shape:
            raise ArtifactError(f"{checkpoint.source}: weight {name!r} of shape {value.shape} "
                                f"does not fit the tower's {tuple(variable.shape)}.")
        variable.assign(value)

    def linear(dense, name):
        assign(dense.kernel, name + ".weight", transpose=True)
        assign(dense.bias, name + ".bias")

    def norm(layer, name):
        assign(layer.gamma, name + ".weight")
        assign(layer.beta, name + ".bias")

    assign(tower.word_embeddings.embeddings, "embeddings.word_embeddings.weight")
    assign(tower.position_embeddings.embeddings, "embeddings.position_embeddings.weight")
    norm(tower.embedding_norm, "embeddings.LayerNorm")
    assign(tower.relative_attention_bias.embeddings, "encoder.relative_attention_bias.weight")
    for n, block in enumerate(tower.blocks):
        p = f"encoder.layer.{n}."
        for part in "qkvo":
            linear(getattr(block, part), f"{p}attention.attn.{part}")
        norm(block.attention_norm, f"{p}attention.LayerNorm")
        linear(block.intermediate, f"{p}intermediate.dense")
        linear(block.output_dense, f"{p}output.dense")
        norm(block.output_norm, f"{p}output.LayerNorm")


MPNET = architectures.register(architectures.Architecture(
    name="mpnet", build_tower=build_tower, special_tokens=SPECIAL_TOKENS,
    converter=architectures.CheckpointConverter(
        model_types=("mpnet",), read_config=read_huggingface_config, weight_names=weight_names,
        expected_shapes=expected_shapes, tower_settings=tower_settings, set_weights=set_weights,
        copied="every encoder weight (embeddings, relative position bias, all transformer "
               "layers; not the unused pooler)")))
