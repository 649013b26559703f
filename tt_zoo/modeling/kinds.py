"""The model families: what an artifact is, and so how it loads (no TensorFlow).

One embedding per text (a two-tower model, Chang et al. 2020, Sec. 2: `models.TwoTowerModel`),
one vector per token scored by MaxSim (ColBERT, Khattab & Zaharia, SIGIR 2020:
`late_interaction_model.LateInteractionModel`), or one weight per document term for a BM25 index
(HDCT, Dai & Callan, WWW 2020: `term_weights.TermWeightModel`). The registry gives every name
one of them (`tt_zoo.zoo.registry.ModelSpec.kind`) and an export records it
(`tt_zoo.artifacts.model_card.ModelCard.artifact_kind`); ``two_tower`` and ``late_interaction``
exports load with ``tt_zoo.load``, ``term_weights`` exports with ``tt_zoo.load_term_weighter``.
"""

TWO_TOWER, LATE_INTERACTION, TERM_WEIGHTS = "two_tower", "late_interaction", "term_weights"
KINDS = (TWO_TOWER, LATE_INTERACTION, TERM_WEIGHTS)
