"""tt_zoo: two-tower retrieval models pretrained with paragraph-level tasks.

Chang, Yu, Chang, Yang, Kumar. Pre-training Tasks for Embedding-based Large-scale Retrieval.
ICLR 2020.

    import tt_zoo
    model = tt_zoo.load("ict_bfs_wlp_512")
    index = model.index(passages)
    hits = index.search(["who discovered penicillin?"], k=10)

`list_models()` names the models that load (`list_models(include_recipes=True)`: every
registered variant, most of them recipes to train). Each model also has a timm-style
``ARCH.TAG`` name, which loads the same model: ``tt_zoo.load("bert_tiny_512.ict_bfs_wlp")`` is
``ict_bfs_wlp_512``; ``list_models("bow_mlp_512.*", arch_tag=True)`` lists them. `load` gives every kind: two-tower,
late-interaction (ColBERT) and term-weight (HDCT) models, and each one's
`index(passages, titles=...)` searches query text into the same `Hit`s
(`tt_zoo.retrieval.search.TextSearcher`); `bm25_index` is BM25's, `fuse` fuses two:

    colbert = tt_zoo.load("colbert_ict_bfs_wlp_crop_span_qgen_64").index(passages, titles=titles)
    fused = tt_zoo.fuse(tt_zoo.bm25_index(passages, titles=titles), colbert, weight=0.7)
    hits = fused.search("who discovered penicillin?", k=10)

Every index saves to a folder (``index.save(path)``, or ``tt-zoo index``) and loads back, with
the model that built it, by `load_index`: nothing is encoded again.

    index = tt_zoo.load_index("runs/index/sample")
    hits = index.search("who discovered penicillin?", k=10)

`load_term_weighter` gives a term-weight model's document weighter alone:

    weighter = tt_zoo.load_term_weighter("hdct_ict_bfs_wlp_crop_span_qgen")
    weights = weighter.weigh(titles, passages)   # one TermWeights per document, for BM25
"""

from tt_zoo import _keras_env

# Listing models and reading specs load no TensorFlow; `load` (and any module that needs
# TensorFlow) imports it, with Keras 2 as tf.keras.
_keras_env.check_legacy_keras(import_tensorflow=False)

from tt_zoo._version import __version__  # noqa: E402

from tt_zoo.errors import (ArtifactError, DownloadError, TtZooError,  # noqa: E402
                           UnknownModelError)
from tt_zoo.zoo.registry import get_spec, list_models  # noqa: E402

__all__ = ["load", "load_index", "load_term_weighter", "bm25_index", "fuse", "list_models",
           "get_spec", "util", "ArtifactError", "DownloadError", "TtZooError",
           "UnknownModelError", "__version__"]


def __getattr__(name):
    # TensorFlow is imported on first use of a loader, not by `import tt_zoo`.
    if name in ("load", "load_index", "load_term_weighter"):
        _keras_env.check_legacy_keras()
        from tt_zoo.zoo import loading
        return getattr(loading, name)
    if name in ("bm25_index", "fuse"):
        _keras_env.check_legacy_keras()
        from tt_zoo.retrieval import passage_index
        return getattr(passage_index, name)
    if name == "util":  # sentence-transformers' util over embeddings (NumPy only)
        import importlib
        return importlib.import_module("tt_zoo.util")
    raise AttributeError(f"module 'tt_zoo' has no attribute {name!r}")


def __dir__():
    # The public API (the loaders included, which load lazily), not the subpackages.
    return sorted(__all__)
