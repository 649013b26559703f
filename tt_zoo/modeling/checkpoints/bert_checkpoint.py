"""A public BERT checkpoint, read into NumPy, and its weights set into a `BertTower`.

The field's strongest unsupervised retrievers start from a pretrained BERT before their pair
tasks (Contriever, Izacard et al. 2021, Sec. 4; Spider, Ram et al. 2022, Sec. 4), and the MLM
baseline of Chang et al. 2020 (Sec. 5.1) *is* the BERT checkpoint. A `Checkpoint` is what
every reader of this package returns (`huggingface.read_huggingface_folder`,
`google_bert.read_google_checkpoint`): the encoder's shape, its weights under Hugging Face's
`BertModel` names (linear weights as [out, in]), the vocabulary, how the text is cased and how
the sentence vector is pooled. `set_encoder_weights` copies those weights into the Model Garden
`BertEncoderV2` of a tower, checking every shape, so the imported tower computes the
checkpoint's own function (the tests compare it with an independent NumPy forward).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Dict, List, Optional

import numpy as np

from tt_zoo.errors import ArtifactError

# What the imported model pools and whether it normalises (sentence-transformers' Pooling and
# Normalize modules; a plain BERT checkpoint has neither: [CLS], raw inner products).
POOLINGS = ("mean", "cls")
# The LayerNorm epsilon of the Model Garden encoder a checkpoint is imported into (fixed there:
# `BertEncoderV2` takes no other); a checkpoint trained with another is refused.
ENCODER_LAYER_NORM_EPS = 1e-12


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """The shape every Transformer encoder's ``config.json`` gives (a family's config adds its
    own fields: `BertConfig`, `tt_zoo.modeling.families.mpnet.MPNetConfig`)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int


@dataclasses.dataclass(frozen=True)
class BertConfig(TransformerConfig):
    """The shape of a BERT encoder, as Hugging Face's and Google's ``config.json`` give it."""

    type_vocab_size: int
    inner_activation: str  # a key of `tt_zoo.modeling.towers.INNER_ACTIVATIONS`
    layer_norm_eps: float = 1e-12

    @property
    def head_size(self) -> int:
        """hidden / heads: the attention scale is 1 / sqrt(head size) (all-MiniLM-L6-v2: 32)."""
        return self.hidden_size // self.num_attention_heads

    @property
    def max_length(self) -> int:
        """The longest input its absolute positions cover."""
        return self.max_position_embeddings


@dataclasses.dataclass
class Checkpoint:
    """A checkpoint read into memory (a BERT, or another registered architecture's).

    Attributes:
      config: the encoder's shape (`BertConfig`, or its family's config).
      weights: Hugging Face base-model names (BERT's: `BertModel`'s
        ``embeddings.word_embeddings.weight``, ``encoder.layer.N.attention.self.query.weight``
        as [out, in], ...) -> float32 arrays.
      vocabulary: the WordPiece tokens in id order.
      lower_case: the tokenizer lower-cases and strips accents (BERT uncased).
      pooling: "mean" (over real tokens) or "cls".
      normalize: the sentence vector is L2-normalised (cosine scores).
      max_seq_length: the longest input the checkpoint's users feed it (sentence-transformers'
        ``max_seq_length``; the position table may cover more).
      source: where it was read from, for messages and the card.
      files: {file name: sha256} of the weight files read.
      encoder: its architecture (`tt_zoo.modeling.architectures`), which checks its weights'
        shapes and builds its tower.
    """

    config: Any
    weights: Dict[str, np.ndarray]
    vocabulary: List[str]
    lower_case: bool
    pooling: str
    normalize: bool
    max_seq_length: int
    source: str
    files: Dict[str, str] = dataclasses.field(default_factory=dict)
    encoder: str = "bert"

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise ArtifactError(f"{self.source}: pooling {self.pooling!r} is not supported "
                                f"(expected one of {POOLINGS}).")
        if len(self.vocabulary) != self.config.vocab_size:
            raise ArtifactError(
                f"{self.source}: the vocabulary has {len(self.vocabulary):,} tokens but the "
                f"embedding table has {self.config.vocab_size:,} rows (expected the same).")
        check_weight_shapes(self)


def expected_shapes(config: BertConfig) -> Dict[str, tuple]:
    """{Hugging Face weight name: shape} of a BERT encoder of `config` (pooler excluded)."""
    h, i = config.hidden_size, config.intermediate_size
    shapes = {"embeddings.word_embeddings.weight": (config.vocab_size, h),
              "embeddings.position_embeddings.weight": (config.max_position_embeddings, h),
              "embeddings.token_type_embeddings.weight": (config.type_vocab_size, h),
              "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for n in range(config.num_layers):
        shapes.update(layer_shapes(f"encoder.layer.{n}.", h, i, (
            "attention.self.query", "attention.self.key", "attention.self.value",
            "attention.output.dense"), "attention.output.LayerNorm"))
    return shapes


def layer_shapes(prefix: str, h: int, i: int, attention, attention_norm: str
                 ) -> Dict[str, tuple]:
    """{Hugging Face weight name: shape} of one post-LN Transformer layer under `prefix`
    (BERT's, MPNet's): the attention's projections `attention` (an (h, h) weight and a bias
    each), its norm `attention_norm`, then the feed-forward of inner size `i` and its norm."""
    shapes = {}
    for part in attention:
        shapes[f"{prefix}{part}.weight"], shapes[f"{prefix}{part}.bias"] = (h, h), (h,)
    for norm in (attention_norm, "output.LayerNorm"):
        shapes[f"{prefix}{norm}.weight"], shapes[f"{prefix}{norm}.bias"] = (h,), (h,)
    shapes[f"{prefix}intermediate.dense.weight"] = (i, h)
    shapes[f"{prefix}intermediate.dense.bias"] = (i,)
    shapes[f"{prefix}output.dense.weight"], shapes[f"{prefix}output.dense.bias"] = (h, i), (h,)
    return shapes


def check_weight_shapes(checkpoint: Checkpoint) -> None:
    """Raises `ArtifactError` naming the source and the tensor when a weight the config calls
    for (its architecture's `expected_shapes`) is missing, of another shape, or not finite,
    or when the checkpoint holds encoder weights the config has no place for (a layer beyond
    ``num_hidden_layers``: the import would drop it and compute another function)."""
    from tt_zoo.modeling import architectures

    expected = architectures.get(checkpoint.encoder).converter.expected_shapes(checkpoint.config)
    for name, shape in expected.items():
        if name not in checkpoint.weights:
            raise ArtifactError(f"{checkpoint.source}: weight {name!r} is missing (a "
                                f"{checkpoint.encoder} encoder of "
                                f"{checkpoint.config.num_layers} layers needs it).")
        got = tuple(checkpoint.weights[name].shape)
        if got != shape:
            raise ArtifactError(f"{checkpoint.source}: weight {name!r} has shape {got}, "
                                f"expected {shape} from the config.")
    unused = sorted(n for n in checkpoint.weights
                    if n.startswith(("embeddings.", "encoder.")) and n not in expected)
    if unused:
        raise ArtifactError(
            f"{checkpoint.source}: {len(unused)} encoder weights ({', '.join(unused[:3])}"
            f"{', ...' if len(unused) > 3 else ''}) have no place in a "
            f"{checkpoint.encoder} encoder of {checkpoint.config.num_layers} layers as its config describes: the import would "
            "drop them. Check num_hidden_layers in the config.")
    for name, value in sorted(checkpoint.weights.items()):
        if not np.isfinite(value).all():
            raise ArtifactError(f"{checkpoint.source}: weight {name!r} holds NaN or infinite "
                                "values: a damaged or diverged checkpoint.")


_LEGACY_NORM = re.compile(r"LayerNorm\.(gamma|beta)$")


def canonical_weight_names(weights: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Hugging Face names without a task model's ``bert.`` prefix, old ``LayerNorm.gamma/beta``
    as ``.weight/.bias``, float32; buffers (``position_ids``) dropped."""
    out = {}
    for name, value in weights.items():
        if name.endswith("position_ids"):
            continue
        name = name[len("bert."):] if name.startswith("bert.") else name
        name = _LEGACY_NORM.sub(lambda m: "LayerNorm." + ("weight" if m.group(1) == "gamma"
                                                          else "bias"), name)
        out[name] = np.asarray(value, dtype=np.float32)
    return out


def set_encoder_weights(encoder, checkpoint: Checkpoint) -> None:
    """Copies `checkpoint`'s weights into a built Model Garden `BertEncoderV2` of its shape.

    The query, key and value projections ([out, in] = [hidden, hidden]) become the encoder's
    [hidden, heads, head size] kernels, the attention output's [heads, head size, hidden]; the
    pooler (unused by the towers) is set too when the checkpoint has one.
    """
    # pylint: disable=protected-access
    w = checkpoint.weights
    c = checkpoint.config
    heads, head = c.num_attention_heads, c.head_size

    def assign(variable, value, name):
        value = np.asarray(value, np.float32)
        if tuple(variable.shape) != value.shape:
            raise ArtifactError(f"{checkpoint.source}: weight {name!r} of shape {value.shape} "
                                f"does not fit the encoder's {tuple(variable.shape)}.")
        variable.assign(value)

    def linear(dense, name, kernel_shape):
        assign(dense.kernel, w[name + ".weight"].T.reshape(kernel_shape), name + ".weight")
        assign(dense.bias, w[name + ".bias"].reshape(dense.bias.shape), name + ".bias")

    def norm(layer, name):
        assign(layer.gamma, w[name + ".weight"], name + ".weight")
        assign(layer.beta, w[name + ".bias"], name + ".bias")

    assign(encoder._embedding_layer.embeddings, w["embeddings.word_embeddings.weight"],
           "embeddings.word_embeddings.weight")
    assign(encoder._position_embedding_layer._position_embeddings,
           w["embeddings.position_embeddings.weight"], "embeddings.position_embeddings.weight")
    assign(encoder._type_embedding_layer.embeddings, w["embeddings.token_type_embeddings.weight"],
           "embeddings.token_type_embeddings.weight")
    norm(encoder._embedding_norm_layer, "embeddings.LayerNorm")
    for n, block in enumerate(encoder._transformer_layers):
        p = f"encoder.layer.{n}."
        attention = block._attention_layer
        for part, dense in (("query", attention._query_dense), ("key", attention._key_dense),
                            ("value", attention._value_dense)):
            linear(dense, f"{p}attention.self.{part}", (c.hidden_size, heads, head))
        linear(attention._output_dense, f"{p}attention.output.dense",
               (heads, head, c.hidden_size))
        norm(block._attention_layer_norm, f"{p}attention.output.LayerNorm")
        linear(block._intermediate_dense, f"{p}intermediate.dense",
               (c.hidden_size, c.intermediate_size))
        linear(block._output_dense, f"{p}output.dense", (c.intermediate_size, c.hidden_size))
        norm(block._output_layer_norm, f"{p}output.LayerNorm")
    if "pooler.dense.weight" in w:
        linear(encoder.pooler_layer, "pooler.dense", (c.hidden_size, c.hidden_size))


def hidden_activation(name: str, source: str, *, tanh_gelu: bool = False) -> str:
    """The tower activation (`tt_zoo.modeling.towers.INNER_ACTIVATIONS`) of a config's
    ``hidden_act``. `tanh_gelu`: the checkpoint's "gelu" was the tanh approximation (Google's
    original BERT code computed it so); Hugging Face's "gelu" is the exact erf form."""
    known = {"gelu": "gelu_approximate" if tanh_gelu else "gelu", "gelu_new": "gelu_approximate",
             "gelu_pytorch_tanh": "gelu_approximate", "gelu_fast": "gelu_approximate",
             "relu": "relu"}
    if name not in known:
        raise ArtifactError(f"{source}: hidden_act {name!r} is not supported (expected one of "
                            f"{sorted(known)}).")
    return known[name]


def as_int(config: dict, key: str, source: str, default: Optional[int] = None,
           low: int = 1) -> int:
    """``config[key]`` as an int of at least `low` (default: positive), or `ArtifactError`
    naming the file and the key."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = "a positive integer" if low == 1 else f"an integer of at least {low}"
        raise ArtifactError(f"{source}: {key!r} must be {what} (got {value!r}).")
    return value


def hidden_and_heads(config: dict, source: str):
    """``(hidden_size, num_attention_heads)`` of a config.json, the first divisible by the
    second; otherwise `ArtifactError` naming `source`."""
    hidden = as_int(config, "hidden_size", source)
    heads = as_int(config, "num_attention_heads", source)
    if hidden % heads:
        raise ArtifactError(f"{source}: hidden_size {hidden} is not divisible by "
                            f"num_attention_heads {heads}.")
    return hidden, heads


def layer_norm_eps(config: dict, source: str, default: float = ENCODER_LAYER_NORM_EPS,
                   fixed: bool = True) -> float:
    """``config["layer_norm_eps"]`` (`default` when absent): a number above 0, and with `fixed`
    the encoder's own (the Model Garden BERT's epsilon is 1e-12 whatever the config says);
    otherwise `ArtifactError` naming the file and the key."""
    value = config.get("layer_norm_eps", default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or value <= 0:
        raise ArtifactError(f"{source}: 'layer_norm_eps' must be a number above 0 (got "
                            f"{value!r}).")
    if fixed and not math.isclose(value, default, rel_tol=1e-3):
        raise ArtifactError(f"{source}: 'layer_norm_eps' {value:g} is not the "
                            f"{default:g} of the encoder tt_zoo imports into; "
                            "its LayerNorms would compute other vectors than the checkpoint's.")
    return float(value)
