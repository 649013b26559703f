"""An untrained model of a registered variant: what `tt-zoo pretrain` starts from.

The spec (`tt_zoo.zoo.registry.ModelSpec`) says the encoder, tower size, embedding size, token
budgets and options (pooling, tower sharing, score scale; Chang et al. 2020, Sec. 2 and 4.1);
`build_untrained` makes the freshly initialised Keras model of it (`tt_zoo.modeling`).
"""

from __future__ import annotations

from typing import Optional

from tt_zoo.zoo.registry import ModelSpec


def build_untrained(spec: ModelSpec, vocabulary, *, query_length: Optional[int] = None,
                    document_length: Optional[int] = None, dropout_rate: float = 0.1,
                    tower_shape: Optional[dict] = None, options=None):
    """A freshly initialised `TwoTowerModel` of a registered variant (the "none" pretraining);
    a `LateInteractionModel` for a ``colbert_`` variant. An imported checkpoint's variant
    (``minilm_l6_384``) is the checkpoint itself, with its own vocabulary (`vocabulary` is not
    read): its architecture cannot be had without its weights, and what trains it further
    starts from them (``tt-zoo pretrain --variant minilm_l6_384 --init-from minilm_l6_384``).

    Args:
      spec: the variant.
      vocabulary: vocab.txt path or token list.
      query_length, document_length: override the spec's token budgets.
      tower_shape: BERT shape fields overriding the size (``num_layers``, ``hidden_size``,
        ``num_attention_heads``, ``inner_dim``, which defaults to 4 x hidden_size); a BoW-MLP
        takes ``hidden_size`` as its token embedding size and 4 x it as its hidden size.
      options: a `tt_zoo.zoo.registry.ModelOptions` overriding the spec's.
    """
    from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
    from tt_zoo.modeling.models import build_two_tower_model, with_sequence_lengths
    if spec.imported is not None:
        from tt_zoo.zoo.loading import load
        return with_sequence_lengths(load(spec.name).keras_model, query_length, document_length)
    options = options or spec.options
    shape = dict(size=spec.tower_size, **(tower_shape or {}))
    if "hidden_size" in shape:
        hidden = shape["hidden_size"]
        shape.setdefault("inner_dim", 4 * hidden)
        shape.update(bow_token_embedding_dim=hidden, bow_hidden_dim=4 * hidden)
    if spec.encoder == "colbert":
        from tt_zoo.modeling.late_interaction_model import build_late_interaction_model
        return build_late_interaction_model(
            vocabulary, embedding_dim=spec.embedding_dim,
            query_length=query_length or spec.query_length,
            document_length=document_length or spec.document_length, dropout_rate=dropout_rate,
            temperature=options.temperature,
            **{k: v for k, v in shape.items() if not k.startswith("bow_")})
    if spec.encoder != "bert":
        shape = {k: v for k, v in shape.items() if k.startswith("bow_")}
    return build_two_tower_model(vocabulary, encoder=spec.encoder,
                                 embedding_dim=spec.embedding_dim,
                                 query_length=query_length or spec.query_length,
                                 document_length=document_length or spec.document_length,
                                 dropout_rate=dropout_rate, pooling=options.pooling,
                                 share_towers=options.share_towers,
                                 normalize_embeddings=options.normalize_embeddings,
                                 bow_output_activation=options.bow_output_activation,
                                 loss=CorrectedSampledSoftmaxLoss(temperature=options.temperature),
                                 **shape)
