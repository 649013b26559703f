"""Serving: the model artifacts and the SavedModels a server runs.

`export` (the model format: SavedModel + config + metadata with its file manifest; save,
verify, load; `term_weight_export` for term-weight models; `model_card`: the typed metadata
and its MODEL_CARD.md) and retrieve: `retrieve` (the `retrieve` SavedModel: query strings to
top-k ids) and `corpus_index` (a large corpus encoded with an export on Apache Beam). Loading
by name is the catalogue's (`tt_zoo.zoo`).
"""
