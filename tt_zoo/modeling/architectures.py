"""The architecture registry: encoder name -> its family's tower builder, checkpoint converter
and tokenizer mapping, in the manner of timm's and keras-hub's model registries.

Each family module of `tt_zoo.modeling.families` (``bert``, ``bow_mlp``, ``mpnet``) calls
`register` once with an `Architecture`; the encoder string of a model (``build_two_tower_model
(encoder=...)``, a Hugging Face ``config.json``'s ``model_type``) is looked up here once, and
nothing else in the package branches on it. Adding an architecture is one new module that
registers itself (tests/test_architectures.py adds a toy one).

Example:
  >>> from tt_zoo.modeling import architectures
  >>> architectures.get("mpnet").special_tokens.cls
  '<s>'
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Dict, Optional, Tuple

from tt_zoo.data.text import BERT_SPECIAL_TOKENS, SpecialTokens

# The families that ship with tt_zoo, imported on the first lookup.
FAMILY_MODULES = ("tt_zoo.modeling.families.bert", "tt_zoo.modeling.families.bow_mlp",
                  "tt_zoo.modeling.families.mpnet")


@dataclasses.dataclass(frozen=True)
class TowerSettings:
    """What `tt_zoo.modeling.models.build_two_tower_model` knows of a tower; each family's
    builder reads the fields it has (a Transformer its size and shape, the BoW-MLP its own)."""

    vocab_size: int
    embedding_dim: int
    size: Optional[str] = None
    max_sequence_length: int = 512
    dropout_rate: float = 0.1
    pooling: str = "cls"
    init_checkpoint: Optional[str] = None
    shape: Dict[str, Any] = dataclasses.field(default_factory=dict)  # explicit shape, options
    bow_token_embedding_dim: int = 256
    bow_hidden_dim: int = 1024
    bow_output_activation: Optional[str] = "tanh"
    bow_mlp: bool = True


@dataclasses.dataclass(frozen=True)
class CheckpointConverter:
    """Hugging Face weights -> a family's tower (`tt_zoo.modeling.checkpoints`), no PyTorch.

    Args:
      model_types: the ``config.json`` ``model_type`` values it reads.
      read_config: (config.json dict, its path) -> the family's config: ``vocab_size``,
        ``hidden_size``, ``max_length`` (the longest input its positions cover).
      weight_names: the safetensors' names -> the base model's names (a task head's prefix off).
      expected_shapes: config -> {weight name: shape} the tower needs.
      tower_settings: config -> `build_two_tower_model` keywords of the tower's shape.
      set_weights: (built tower, checkpoint) -> None, checking every shape.
      copied: what the card says was copied.
    """

    model_types: Tuple[str, ...]
    read_config: Callable[[dict, str], Any]
    weight_names: Callable[[dict], dict]
    expected_shapes: Callable[[Any], dict]
    tower_settings: Callable[[Any], dict]
    set_weights: Callable[[Any, Any], None]
    copied: str = "every encoder weight"


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One family: its encoder name, tower builder, tokenizer mapping and converter.

    Args:
      name: the encoder string (``ModelSpec.encoder``, the card's ``architecture.encoder``).
      build_tower: (`TowerSettings`, layer name) -> the Keras tower layer.
      special_tokens: how its texts are packed (`tt_zoo.data.text.SpecialTokens`).
      converter: how a Hugging Face checkpoint of it is imported; None when none is.
    """

    name: str
    build_tower: Callable[[TowerSettings, str], Any]
    special_tokens: SpecialTokens = BERT_SPECIAL_TOKENS
    converter: Optional[CheckpointConverter] = None


ARCHITECTURES: Dict[str, Architecture] = {}


def register(architecture: Architecture) -> Architecture:
    """Adds `architecture` under its name (a family module calls this once at import)."""
    if architecture.name in ARCHITECTURES and ARCHITECTURES[architecture.name] != architecture:
        raise ValueError(f"architecture {architecture.name!r} is already registered.")
    ARCHITECTURES[architecture.name] = architecture
    return architecture


def _load_families() -> None:
    for module in FAMILY_MODULES:
        importlib.import_module(module)


def get(name: str) -> Architecture:
    """The registered architecture `name`; ValueError naming the known ones otherwise."""
    _load_families()
    if name not in ARCHITECTURES:
        raise ValueError(f"Unknown encoder {name!r}; expected one of "
                         f"{', '.join(repr(n) for n in sorted(ARCHITECTURES))}.")
    return ARCHITECTURES[name]


def for_model_type(model_type, source: str) -> Architecture:
    """The architecture whose converter reads Hugging Face ``model_type``; `ArtifactError`
    naming `source` (the config file) and the types tt_zoo imports otherwise."""
    from tt_zoo.errors import ArtifactError

    _load_families()
    for architecture in ARCHITECTURES.values():
        if architecture.converter and model_type in architecture.converter.model_types:
            return architecture
    known = sorted(t for a in ARCHITECTURES.values() if a.converter
                   for t in a.converter.model_types)
    raise ArtifactError(f"{source}: model_type {model_type!r} is not supported; tt_zoo imports "
                        f"checkpoints of model_type {', '.join(known)} (its registered "
                        "architectures: tt_zoo.modeling.architectures).")
