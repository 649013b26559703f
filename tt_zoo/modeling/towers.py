"""The two encoders of Chang et al. 2020, Sec. 4.1: a BERT Transformer tower and a BoW-MLP tower.

Both take the packed inputs of `tt_zoo.data.text.TextPreprocessor` (``input_word_ids``, ``input_mask``,
``input_type_ids``, each ``[batch, seq_length]``) and return embeddings ``[batch, embedding_dim]``.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import tensorflow as tf
from official.nlp.modeling import networks

from tt_zoo.modeling import bert_inference

# The BERT miniatures of Turc et al. 2019 ("Well-Read Students Learn Better") plus BERT-base,
# the paper's encoder (Chang et al. 2020, Sec. 5.1: 12 layers; Table 5 ablates 4 layers).


@dataclasses.dataclass(frozen=True)
class BertShape:
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    inner_dim: int


POOLINGS = ("cls", "mean")

# The feed-forward activation of a BERT tower. The Model Garden's encoder defaults to GELU's tanh
# approximation (as Google's original BERT code computed it); Hugging Face's BERT "gelu" is the
# exact erf form, which an imported checkpoint of it needs (`tt_zoo.modeling.checkpoints`).
def gelu_approximate(x):
    return tf.keras.activations.gelu(x, approximate=True)


def gelu_exact(x):
    return tf.keras.activations.gelu(x, approximate=False)


INNER_ACTIVATIONS = {"gelu_approximate": gelu_approximate, "gelu": gelu_exact,
                     "relu": tf.keras.activations.relu}

BERT_SIZES: Dict[str, BertShape] = {
    "tiny": BertShape(num_layers=2, hidden_size=128, num_attention_heads=2, inner_dim=512),
    "mini": BertShape(num_layers=4, hidden_size=256, num_attention_heads=4, inner_dim=1024),
    "small": BertShape(num_layers=4, hidden_size=512, num_attention_heads=8, inner_dim=2048),
    "base": BertShape(num_layers=12, hidden_size=768, num_attention_heads=12, inner_dim=3072),
}


def resolve_bert_shape(size: Optional[str] = None, num_layers: Optional[int] = None,
                       hidden_size: Optional[int] = None,
                       num_attention_heads: Optional[int] = None,
                       inner_dim: Optional[int] = None) -> BertShape:
    """A named size with optional explicit overrides; raises on an unknown name or bad shape."""
    if size is not None and size not in BERT_SIZES:
        raise ValueError(f"Unknown BERT tower size {size!r}; expected one of {sorted(BERT_SIZES)} "
                         "or an explicit shape (num_layers, hidden_size, num_attention_heads).")
    base = BERT_SIZES[size] if size is not None else None
    if base is None and None in (num_layers, hidden_size, num_attention_heads):
        raise ValueError("Give a named `size` or all of num_layers, hidden_size and "
                         f"num_attention_heads (got {num_layers}, {hidden_size}, "
                         f"{num_attention_heads}).")
    hidden = hidden_size or base.hidden_size
    if inner_dim is None:
        # A named size keeps its own feed-forward width unless the hidden size is overridden.
        inner_dim = base.inner_dim if (base is not None and hidden_size is None) else 4 * hidden
    shape = BertShape(num_layers=num_layers or base.num_layers, hidden_size=hidden,
                      num_attention_heads=num_attention_heads or base.num_attention_heads,
                      inner_dim=inner_dim)
    if shape.hidden_size % shape.num_attention_heads:
        raise ValueError(f"hidden_size {shape.hidden_size} is not divisible by "
                         f"num_attention_heads {shape.num_attention_heads}.")
    return shape


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class BertTower(tf.keras.layers.Layer):
    """A BERT encoder whose embedding is a linear layer on an aggregate of its final hidden states.

    There is no tanh pooler (the encoder's is built but unused and not trainable). With
    `pooling="cls"` the aggregate is the final [CLS] state, as in
    Chang et al. 2020, Sec. 4.1 and Fig. 1 ("the final embedding is a linear layer on the [CLS]
    token's final hidden state"). With `pooling="mean"` it is the average of the final states of
    the real tokens (``input_mask`` == 1), the aggregator Fig. 1 uses for the BoW-MLP: towers
    trained from random initialisation at CPU scale learn several times faster with it
    (`results/pretrain_curve.md`). The encoder is the Model Garden's `BertEncoderV2`.

    Args:
      vocab_size: size of the WordPiece vocabulary.
      embedding_dim: size of the output embedding (the paper: 512; ablations 128/256).
      size: a named shape, one of "tiny" (2 layers, hidden 128), "mini" (4/256),
        "small" (4/512), "base" (12/768); or None with an explicit shape below.
      num_layers, hidden_size, num_attention_heads, inner_dim: explicit shape (override `size`).
      max_sequence_length: the longest input the position embeddings cover.
      dropout_rate: dropout of the encoder's outputs and attention.
      pooling: how the final hidden states become one vector: "cls" (the paper) or "mean".
      init_checkpoint: optional path of a Model Garden BERT checkpoint saved as
        `tf.train.Checkpoint(encoder=...)` to initialise the encoder from.
      type_vocab_size: number of segment (token type) ids; 16 is the Model Garden's default,
        a BERT checkpoint brings its own (2).
      inner_activation: the feed-forward activation, one of `INNER_ACTIVATIONS`.
      projection: False makes the embedding the pooled hidden state itself (no linear layer;
        `embedding_dim` must equal the hidden size), as a sentence-transformers checkpoint
        such as all-MiniLM-L6-v2 has it.
      **kwargs: passed to `tf.keras.layers.Layer`.

    Example:
      >>> tower = BertTower(vocab_size=100, embedding_dim=8, size="tiny")
      >>> tower({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}).shape
      TensorShape([2, 8])

    References:
      Chang et al. 2020, Sec. 4.1 and Sec. 5.1 (encoder, embedding dimension).
    """

    # Its inference runs on the AMX units in bfloat16 (`tt_zoo.modeling.transformer_bfloat16`):
    # precision="auto" of the encode_* calls chooses bfloat16 for it on such a CPU.
    amx_inference = True

    def __init__(self, vocab_size: int, embedding_dim: int = 512, size: Optional[str] = "tiny",
                 num_layers: Optional[int] = None, hidden_size: Optional[int] = None,
                 num_attention_heads: Optional[int] = None, inner_dim: Optional[int] = None,
                 max_sequence_length: int = 512, dropout_rate: float = 0.1,
                 pooling: str = "cls", init_checkpoint: Optional[str] = None,
                 type_vocab_size: int = 16, inner_activation: str = "gelu_approximate",
                 projection: bool = True, **kwargs):
        super().__init__(**kwargs)
        if vocab_size <= 0 or embedding_dim <= 0:
            raise ValueError(f"vocab_size and embedding_dim must be positive (got {vocab_size}, "
                             f"{embedding_dim}).")
        if pooling not in POOLINGS:
            raise ValueError(f"Unknown pooling {pooling!r}; expected one of {POOLINGS}.")
        if inner_activation not in INNER_ACTIVATIONS:
            raise ValueError(f"Unknown inner_activation {inner_activation!r}; expected one of "
                             f"{sorted(INNER_ACTIVATIONS)}.")
        self.pooling = pooling
        self.type_vocab_size = int(type_vocab_size)
        self.inner_activation = inner_activation
        self.use_projection = bool(projection)
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.size = size
        self.shape_ = resolve_bert_shape(size, num_layers, hidden_size, num_attention_heads,
                                         inner_dim)
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.inner_dim = inner_dim
        self.max_sequence_length = max_sequence_length
        self.dropout_rate = dropout_rate
        self.init_checkpoint = init_checkpoint
        if not self.use_projection and embedding_dim != self.shape_.hidden_size:
            raise ValueError(f"A BERT tower without a projection embeds in its hidden size "
                             f"{self.shape_.hidden_size} (got embedding_dim {embedding_dim}).")
        self.encoder = networks.BertEncoderV2(
            vocab_size=vocab_size,
            hidden_size=self.shape_.hidden_size,
            num_layers=self.shape_.num_layers,
            num_attention_heads=self.shape_.num_attention_heads,
            inner_dim=self.shape_.inner_dim,
            max_sequence_length=max_sequence_length,
            type_vocab_size=self.type_vocab_size,
            inner_activation=INNER_ACTIVATIONS[inner_activation],
            output_dropout=dropout_rate,
            attention_dropout=dropout_rate,
            name="encoder")
        # BertEncoderV2 always builds its pooler (a tanh layer on [CLS]); nothing here reads
        # it. Not trainable, so `fit` neither updates it nor warns that it has no gradients; it
        # stays built, so every export (which holds its weights) restores unchanged.
        self.encoder.pooler_layer.trainable = False
        self.projection = tf.keras.layers.Dense(
            embedding_dim, kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=0.02),
            name="cls_projection") if self.use_projection else None
        if init_checkpoint:
            self.load_encoder_checkpoint(init_checkpoint)

    def load_encoder_checkpoint(self, path: str) -> None:
        """Initialises the encoder from a checkpoint written as `tf.train.Checkpoint(encoder=...)`."""
        resolved = tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else path
        if not resolved or not tf.io.gfile.glob(resolved + "*"):
            raise FileNotFoundError(f"No BERT checkpoint found at {path!r}.")
        # Build the encoder's variables so the restore is immediate rather than deferred.
        self.encoder(_dummy_bert_inputs())
        status = tf.train.Checkpoint(encoder=self.encoder).read(resolved)
        status.expect_partial().assert_existing_objects_matched()

    def call(self, inputs, training=None, plain_inference: bool = True):
        """Encodes packed inputs.

        Args:
          inputs: dict with `input_word_ids`, `input_mask`, `input_type_ids`: [batch, seq_length].
          training: True runs dropout; with ``training=False`` (inference) and float32 compute,
            the encoder runs as `tt_zoo.modeling.bert_inference.encode_sequence` (the same
            function in fused plain matmuls, within float32 round-off of the layers; see
            `tt_zoo.modeling.bert_inference.sequence_output`).
          plain_inference: False keeps the Model Garden layers at inference too.

        Returns:
          embeddings: [batch, embedding_dim].
        """
        packed = {k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
        states = bert_inference.sequence_output(self.encoder, packed, training, plain_inference)
        # states: [batch, seq_length, hidden]
        pooled = (states[:, 0, :] if self.pooling == "cls"
                  else masked_mean(states, inputs["input_mask"]))
        return pooled if self.projection is None else self.projection(pooled)

    @property
    def token_embedding_table(self) -> tf.keras.layers.Layer:
        """The encoder's WordPiece embedding layer (frozen in query adaptation)."""
        return self.encoder.get_embedding_layer()

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_dim=self.embedding_dim, size=self.size,
                      num_layers=self.num_layers, hidden_size=self.hidden_size,
                      num_attention_heads=self.num_attention_heads, inner_dim=self.inner_dim,
                      max_sequence_length=self.max_sequence_length,
                      dropout_rate=self.dropout_rate, pooling=self.pooling,
                      type_vocab_size=self.type_vocab_size,
                      inner_activation=self.inner_activation, projection=self.use_projection,
                      # Weights travel with the model; the checkpoint is only an initialiser.
                      init_checkpoint=None)
        return config


def masked_mean(vectors: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Average of `vectors` [batch, seq_length, dim] over positions where `mask` [batch,
    seq_length] is 1; a row with no real token gives zeros. Returns [batch, dim]."""
    weights = tf.expand_dims(tf.cast(mask, vectors.dtype), -1)
    summed = tf.reduce_sum(vectors * weights, axis=1)
    return summed / tf.maximum(tf.reduce_sum(weights, axis=1), tf.cast(1.0, vectors.dtype))


def _dummy_bert_inputs():
    ids = tf.zeros([1, 2], tf.int32)
    return {"input_word_ids": ids, "input_mask": tf.ones_like(ids), "input_type_ids": ids}


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class BowMlpTower(tf.keras.layers.Layer):
    """Bag-of-words MLP tower: unigram embeddings, average pooling, a two-layer MLP.

    Average pooling runs over real tokens only (``input_mask`` == 1), so padding never dilutes
    the mean. Chang et al. 2020, Sec. 4.1 / Table 3 ("BoW-MLP"), with an embedding-dimension
    output layer. The hidden layer is tanh; the output layer is tanh too by default (the paper's
    "two-layer MLP with tanh"), or linear with `output_activation=None`: a tanh output bounds
    every score to [-dim, dim] and saturates, which slows learning (`results/pretrain_curve.md`).

    Args:
      vocab_size: size of the token vocabulary.
      embedding_dim: size of the output embedding.
      token_embedding_dim: size of each unigram embedding.
      hidden_dim: width of the first dense layer.
      output_activation: "tanh" or None (linear).
      mlp: False drops the two layers: the embedding is the average of the unigram vectors
        itself (a *static* embedding model, model2vec's shape; `embedding_dim` must equal
        `token_embedding_dim`): `tt_zoo.modeling.static_distillation` fills its table from a
        Transformer.
      **kwargs: passed to `tf.keras.layers.Layer`.

    Example:
      >>> tower = BowMlpTower(vocab_size=100, embedding_dim=8)
      >>> tower({"input_word_ids": ids, "input_mask": mask}).shape
      TensorShape([2, 8])

    References:
      Chang et al. 2020, Sec. 4.1 (BoW-MLP baseline encoder).
    """

    # `--precision auto` trains it in float32 even on a CPU with a bfloat16 unit
    # (`tt_zoo.training.precision.bfloat16_pays`): its step is an embedding sum and a small
    # MLP, and under mixed_bfloat16 it learned less of a teacher's ranking.
    TRAINS_IN_BFLOAT16 = False

    def __init__(self, vocab_size: int, embedding_dim: int = 512, token_embedding_dim: int = 256,
                 hidden_dim: int = 1024, output_activation: Optional[str] = "tanh",
                 mlp: bool = True, **kwargs):
        super().__init__(**kwargs)
        if output_activation not in ("tanh", None):
            raise ValueError(f"output_activation must be 'tanh' or None (got "
                             f"{output_activation!r}).")
        if min(vocab_size, embedding_dim, token_embedding_dim, hidden_dim) <= 0:
            raise ValueError("BowMlpTower sizes must be positive (got vocab_size="
                             f"{vocab_size}, embedding_dim={embedding_dim}, token_embedding_dim="
                             f"{token_embedding_dim}, hidden_dim={hidden_dim}).")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.token_embedding_dim = token_embedding_dim
        self.hidden_dim = hidden_dim
        self.output_activation = output_activation
        self.mlp = bool(mlp)
        if not self.mlp and embedding_dim != token_embedding_dim:
            raise ValueError(f"A BoW tower without its MLP embeds in its token_embedding_dim "
                             f"{token_embedding_dim} (got embedding_dim {embedding_dim}).")
        self.token_embeddings = tf.keras.layers.Embedding(vocab_size, token_embedding_dim,
                                                          name="unigram_embeddings")
        if self.mlp:
            self.hidden = tf.keras.layers.Dense(hidden_dim, activation="tanh", name="mlp_hidden")
            self.output_layer = tf.keras.layers.Dense(embedding_dim,
                                                      activation=output_activation,
                                                      name="mlp_output")

    def call(self, inputs):
        """Encodes packed inputs.

        Args:
          inputs: dict with `input_word_ids` and `input_mask`: [batch, seq_length].

        Returns:
          embeddings: [batch, embedding_dim].
        """
        token_vectors = self.token_embeddings(inputs["input_word_ids"])
        average = masked_mean(token_vectors, inputs["input_mask"])
        return self.output_layer(self.hidden(average)) if self.mlp else average

    @property
    def token_embedding_table(self) -> tf.keras.layers.Layer:
        """The unigram vectors (frozen in query adaptation)."""
        return self.token_embeddings

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_dim=self.embedding_dim,
                      token_embedding_dim=self.token_embedding_dim, hidden_dim=self.hidden_dim,
                      output_activation=self.output_activation, mlp=self.mlp)
        return config
