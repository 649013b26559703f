"""An untrained model of a registered variant: what `tt-zoo pretrain` starts from; and the
same variant restored from a pretraining checkpoint: what `tt-zoo export --variant` exports.

The spec (`tt_zoo.zoo.registry.ModelSpec`) says the encoder, tower size, embedding size, token
budgets and options (pooling, tower sharing, score scale; Chang et al. 2020, Sec. 2 and 4.1);
`build_untrained` makes the freshly initialised Keras model of it (`tt_zoo.modeling`),
`restore_from_checkpoint` that model with a checkpoint's weights.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Optional

from tt_zoo.errors import ArtifactError
from tt_zoo.zoo.registry import ModelSpec, get_spec


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
    from tt_zoo.modeling.models import build_two_tower_model
    from tt_zoo.modeling.pair_model import with_sequence_lengths
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
    # (Each family's builder reads its own fields of the shape: `tt_zoo.modeling.architectures`.)
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


def restore_from_checkpoint(variant: str, checkpoint, vocabulary,
                            query_length: Optional[int] = None,
                            document_length: Optional[int] = None):
    """The registered `variant` built over `vocabulary` (`build_untrained`; the token budgets
    the spec's unless given) with the weights of the latest checkpoint in `checkpoint` (a
    pretrain workdir, whose checkpoints/ it reads, or a checkpoint directory), as a
    `tt_zoo.zoo.zoo_model.ZooModel` whose metadata is the workdir's train_summary.json (when
    there is one) naming the variant, its encoder and the checkpoint.

    Raises:
      UnknownModelError: an unregistered `variant`.
      ArtifactError: no checkpoint in the folder.
    """
    import tensorflow as tf  # noqa: PLC0415

    from tt_zoo.artifacts.model_card import ModelCard  # noqa: PLC0415
    from tt_zoo.zoo.zoo_model import ZooModel  # noqa: PLC0415

    spec = get_spec(variant)
    root = pathlib.Path(checkpoint)
    ckpt_dir = root / "checkpoints" if (root / "checkpoints").is_dir() else root
    latest = tf.train.latest_checkpoint(str(ckpt_dir))
    if latest is None:
        raise ArtifactError(f"no checkpoint found in {ckpt_dir}")
    model = build_untrained(spec, vocabulary, query_length=query_length,
                            document_length=document_length)
    model.build_by_calling()
    tf.train.Checkpoint(model=model).read(latest).expect_partial().assert_existing_objects_matched()
    summary_file = root / "train_summary.json"
    card = ModelCard.from_dict(json.loads(summary_file.read_text())
                               if summary_file.is_file() else {})
    card.name, card.training.pretraining = spec.name, spec.pretraining
    card.architecture.encoder, card.architecture.tower_size = spec.encoder, spec.tower_size
    card.training.checkpoint = os.path.basename(latest)
    return ZooModel(model, metadata=card.to_dict())
