"""Serving: model artifacts, loading by name, and the SavedModels a server runs.

`export` (the model format: SavedModel + config + metadata with its file manifest; save,
verify, load), `retrieve` (the `retrieve` SavedModel: query strings to top-k ids), `registry`
(every variant and what is shipped), `download` (weights by name: clone, cache or URL) and
`zoo` (`tt_zoo.load`, `ZooModel`, `TextIndex`); `corpus_index` encodes a large corpus with an
export on Apache Beam.
"""
