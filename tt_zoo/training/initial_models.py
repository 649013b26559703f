"""The model a training run starts from: towers at their random initialisation, shaped by the
run's settings (``--init none``: Chang et al. 2020's "no pretraining" rows), or a loaded model
at the run's token budgets; each with what its card says of it (`with_sizes` adds the sizes).

`ModelArguments` is the run-config group that says which (``tt-zoo finetune``'s; ``tt-zoo
multitask`` extends it). Used by `tt_zoo.training.finetune_run` and
`tt_zoo.training.multitask_run`.
"""

from __future__ import annotations

from typing import Optional


def build_untrained(given, lengths, seed: int):
    """The "no pretraining" model: towers at their random initialisation (seeded), with the
    paper's choices ([CLS], separate towers; `tt_zoo.zoo.registry.PAPER`). `given`: the model
    settings (``encoder``, ``size``, ``num_layers``, ``hidden_size``, ``num_attention_heads``,
    ``inner_dim``, ``embedding_dim``, ``vocab``, ``name``); `lengths`: ``query_length``,
    ``document_length``. Returns (the Keras model, what the card says of it)."""
    import tensorflow as tf  # noqa: PLC0415

    from tt_zoo.zoo import build, registry  # noqa: PLC0415

    tf.keras.utils.set_random_seed(seed)
    shape = {k: getattr(given, k) for k in ("num_layers", "hidden_size", "num_attention_heads",
                                            "inner_dim") if getattr(given, k) is not None}
    bert = given.encoder == "bert"
    spec = registry.ModelSpec(name=given.name or f"none_{given.embedding_dim}",
                              encoder=given.encoder, tower_size=given.size if bert else None,
                              embedding_dim=given.embedding_dim, pretraining="none",
                              options=registry.PAPER)
    model = build.build_untrained(spec, given.vocab,
                                  query_length=lengths.query_length,
                                  document_length=lengths.document_length,
                                  tower_shape=shape if bert else None)
    model.build_by_calling()
    size = given.size if not shape else (
        f"L{model.query_tower.shape_.num_layers}/H{model.query_tower.shape_.hidden_size}")
    info = {"name": spec.name, "encoder": given.encoder,
            "tower_size": size if bert else None, "pretraining": "none",
            "vocabulary": str(given.vocab)}
    return model, info


def load_pretrained(name_or_path: str, lengths, name: Optional[str] = None):
    """(the loaded zoo model, its Keras model at `lengths`, what the card says of it; named
    `name`, else the loaded model's name + _reqa)."""
    from tt_zoo.modeling.pair_model import with_sequence_lengths  # noqa: PLC0415
    from tt_zoo.zoo.loading import load  # noqa: PLC0415

    zoo_model = load(name_or_path)
    model = with_sequence_lengths(zoo_model.keras_model, lengths.query_length,
                                  lengths.document_length)
    zoo_model.keras_model = model
    spec, arch = zoo_model.spec, zoo_model.card.architecture
    info = {"name": name or f"{zoo_model.name}_reqa",
            "encoder": spec.encoder if spec else (arch.encoder or "?"),
            "tower_size": spec.tower_size if spec else arch.tower_size,
            "pretraining": zoo_model.pretraining, "base_model": str(name_or_path)}
    return zoo_model, model, info


def with_sizes(model, info: dict, log=print) -> dict:
    """`info` with the model's embedding dim, sequence lengths and parameter count (logged)."""
    from tt_zoo.artifacts import export as export_lib  # noqa: PLC0415

    info.update(embedding_dim=model.embedding_dim,
                query_length=model.query_preprocessor.seq_length,
                document_length=model.document_preprocessor.seq_length,
                parameters=export_lib.count_parameters(model))
    log(f"Model: {info}")
    return info
