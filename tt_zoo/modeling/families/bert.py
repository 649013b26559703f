"""The ``bert`` family: `tt_zoo.modeling.towers.BertTower` (the Model Garden's BERT encoder,
Chang et al. 2020, Sec. 4.1), its Hugging Face converter (``model_type`` "bert": all-MiniLM-L6-v2
and the BERT miniatures, `tt_zoo.modeling.checkpoints.bert_checkpoint`) and BERT's packing
(``[CLS] a [SEP] b [SEP]``, Devlin et al. 2019, Sec. 3)."""

from __future__ import annotations

from tt_zoo.errors import ArtifactError
from tt_zoo.modeling import architectures
from tt_zoo.modeling.checkpoints.bert_checkpoint import (BertConfig, as_int,
                                                         canonical_weight_names, expected_shapes,
                                                         hidden_activation, hidden_and_heads,
                                                         layer_norm_eps,
                                                         set_encoder_weights)


def build_tower(settings: architectures.TowerSettings, name: str):
    from tt_zoo.modeling.towers import BertTower

    return BertTower(settings.vocab_size, settings.embedding_dim, size=settings.size,
                     max_sequence_length=settings.max_sequence_length,
                     dropout_rate=settings.dropout_rate, pooling=settings.pooling,
                     init_checkpoint=settings.init_checkpoint, name=name, **settings.shape)


def read_huggingface_config(config: dict, path: str) -> BertConfig:
    """A ``BertModel`` config.json as a `BertConfig`; `ArtifactError` naming `path` and the key."""
    hidden, heads = hidden_and_heads(config, path)
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ArtifactError(f"{path}: position_embedding_type "
                            f"{config['position_embedding_type']!r} is not supported "
                            "(expected 'absolute').")
    return BertConfig(vocab_size=as_int(config, "vocab_size", path), hidden_size=hidden,
                      num_layers=as_int(config, "num_hidden_layers", path),
                      num_attention_heads=heads,
                      intermediate_size=as_int(config, "intermediate_size", path),
                      max_position_embeddings=as_int(config, "max_position_embeddings", path),
                      type_vocab_size=as_int(config, "type_vocab_size", path, 2),
                      inner_activation=hidden_activation(config.get("hidden_act", "gelu"), path),
                      layer_norm_eps=layer_norm_eps(config, path))


def tower_settings(c: BertConfig) -> dict:
    return dict(num_layers=c.num_layers, hidden_size=c.hidden_size,
                num_attention_heads=c.num_attention_heads, inner_dim=c.intermediate_size,
                max_sequence_length=c.max_position_embeddings, type_vocab_size=c.type_vocab_size,
                inner_activation=c.inner_activation)


BERT = architectures.register(architectures.Architecture(
    name="bert", build_tower=build_tower,
    converter=architectures.CheckpointConverter(
        model_types=("bert",), read_config=read_huggingface_config,
        weight_names=canonical_weight_names, expected_shapes=expected_shapes,
        tower_settings=tower_settings,
        set_weights=lambda tower, checkpoint: set_encoder_weights(tower.encoder, checkpoint),
        copied="every encoder weight (embeddings, all transformer layers, pooler)")))
