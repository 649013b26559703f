"""Artifacts: what a trained model is on disk and on the wire, below the catalogue.

`export` (the model format: SavedModel + config + metadata.json with its file manifest and
format version; write, verify, load) and `term_weight_export` (the term-weight kind's);
`model_card` (metadata.json typed, `ModelCard`) and `card_rendering` (the MODEL_CARD.md rendered
from it); `float16_storage` (a compact float16 artifact and the float32 copy materialised from
it, reading a shared base from the folder the loader hands it); `download` (a shipped artifact's
folder: the clone, the cache, or a verified download). The per-file manifest every artifact
kind records (models, indexes, pair sets) is `tt_zoo.manifest`, on the ground floor beside
`atomic_io`. Finding an artifact by name is the catalogue's (`tt_zoo.zoo`), which uses these.
"""
