"""Serving: the SavedModels a server runs and the corpus indexing around them.

`retrieve` (the `retrieve` SavedModel: query strings to top-k ids), `corpus_index` (a large
corpus encoded with an export on Apache Beam) and `export_run` (`tt-zoo export`'s run: a
checkpoint exported, with its index). The model format itself, its card, float16 storage and
download are `tt_zoo.artifacts`'; loading by name is the catalogue's (`tt_zoo.zoo`).
"""
