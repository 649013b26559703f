"""Serving: the model artifacts and the SavedModels a server runs.

`export` (the model format: SavedModel + config + metadata with its file manifest; save,
verify, load; `term_weight_export` for term-weight models; `model_card`: the typed metadata;
`card_rendering`: the MODEL_CARD.md rendered from it) and retrieve: `retrieve` (the
`retrieve` SavedModel: query strings to top-k ids) and `corpus_index` (a large corpus encoded
with an export on Apache Beam). Loading by name is the catalogue's (`tt_zoo.zoo`).
"""
