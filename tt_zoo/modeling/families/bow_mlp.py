"""The ``bow_mlp`` family: `tt_zoo.modeling.towers.BowMlpTower`, the paper's BoW-MLP (Chang et
al. 2020, Sec. 4.1) and, without its MLP, a static embedding model (model2vec's shape). It reads
BERT's packed ids; no checkpoint converter (a static table is distilled from a Transformer:
`tt_zoo.modeling.static_distillation`)."""

from __future__ import annotations

from tt_zoo.modeling import architectures


def build_tower(settings: architectures.TowerSettings, name: str):
    from tt_zoo.modeling.towers import BowMlpTower

    return BowMlpTower(settings.vocab_size, settings.embedding_dim,
                       token_embedding_dim=settings.bow_token_embedding_dim,
                       hidden_dim=settings.bow_hidden_dim,
                       output_activation=settings.bow_output_activation, mlp=settings.bow_mlp,
                       name=name)


BOW_MLP = architectures.register(architectures.Architecture(name="bow_mlp",
                                                            build_tower=build_tower))
