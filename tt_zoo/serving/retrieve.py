"""The `retrieve` SavedModel: raw query strings in, the top-k candidate ids and scores out.

Chang et al., ICLR 2020, Section 2 ("Inference"): phi(q) is computed at query time and the
candidates' psi(d) are searched by maximum inner product, here inside one SavedModel with the
TFRS `ScaNN` or `BruteForce` top-k layers (the in-process index is
`tt_zoo.retrieval.index.EmbeddingIndex`). A ScaNN SavedModel needs ScaNN's TensorFlow ops at
serving time: `import scann` before `tf.saved_model.load` (or use `load_retrieval_model`, which
does it), or serve it with a TF Serving ModelServer linked with ScaNN's ops (the stock one links
TensorFlow's and tensorflow-text's only; ScaNN publishes such images, ``google/tf-serving-scann``,
for the TF versions it builds them for). The brute-force backend needs no ScaNN ops.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import uuid
from typing import Optional, Sequence

import tensorflow as tf

from tt_zoo.atomic_io import write_directory, write_json
from tt_zoo.manifest import check_format_version
from tt_zoo.retrieval.index import ScannConfig, check_backend, read_json
from tt_zoo.retrieval.search import check_embeddings, check_ids, check_k
from tt_zoo.artifacts.export import _without_keras_traces

RETRIEVAL_CONFIG_FILE = "assets.extra/tt_zoo_retrieval.json"
# The layout of a `retrieve` SavedModel and its settings file; `load_retrieval_model` refuses a
# newer one (`tt_zoo.manifest.check_format_version`). 1: the settings as `build_retrieval_module`.
RETRIEVE_FORMAT_VERSION = 1


def _no_config(layer):
    """A TFRS top-k layer's ``get_config``: it has none (its query model is an object, not a
    setting), said the way Keras' SavedModel writer skips quietly (TFRS's own default warns
    "non-serializable objects" once per save)."""
    raise NotImplementedError(f"{type(layer).__name__} holds its query model: it is saved in "
                              "a SavedModel, not as a config.")


def _brute_force_top_k(query_encoder, k: int):
    """TFRS `BruteForce` top-k (exact scores), quiet when saved (`_no_config`)."""
    import tensorflow_recommenders as tfrs  # pylint: disable=import-outside-toplevel

    class _BruteForce(tfrs.layers.factorized_top_k.BruteForce):
        get_config = _no_config

    return _BruteForce(query_model=query_encoder, k=k, name="brute_force_top_k")


def _make_scann_top_k(query_encoder, k: int, config: ScannConfig):
    """A TFRS `ScaNN` top-k layer whose searcher is built with `config` (tree or exact)."""
    import tensorflow_recommenders as tfrs  # pylint: disable=import-outside-toplevel
    from tt_zoo._native_logs import import_scann  # pylint: disable=import-outside-toplevel
    import_scann()  # its C++ logs at tt_zoo's level
    from scann.scann_ops.py import scann_ops  # pylint: disable=import-outside-toplevel

    class _ConfiguredScaNN(tfrs.layers.factorized_top_k.ScaNN):
        """TFRS ScaNN with our `ScannConfig` (TFRS's own builder has no exact-scoring mode,
        which tiny corpora need, and no anisotropic threshold)."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)

            def build_searcher(candidates):
                builder = scann_ops.builder(db=candidates, num_neighbors=self._k,
                                            distance_measure="dot_product")
                return config.configure(builder, int(candidates.shape[0])).build(
                    shared_name=f"{self.name}/{uuid.uuid4()}")

            self._build_searcher = build_searcher

        get_config = _no_config

    return _ConfiguredScaNN(query_model=query_encoder, k=k, name="scann_top_k")


def _probe_encoder(query_encoder, dim: int):
    probe = query_encoder(tf.constant(["probe query one", "probe query two"]))
    if not isinstance(probe, tf.Tensor) or probe.dtype != tf.float32 \
            or probe.shape.rank != 2 or probe.shape[0] != 2 or probe.shape[1] != dim:
        shape = getattr(probe, "shape", None)
        raise ValueError(
            "query_encoder must map a tf.string [batch] tensor to float32 [batch, "
            f"{dim}] to match the candidate embeddings (got {type(probe).__name__} "
            f"{getattr(probe, 'dtype', '')} of shape {shape} for a batch of 2).")


class RetrievalModule(tf.Module):
    """Query strings -> top-k candidate (scores, ids): the `retrieve` SavedModel's root.

    Built by `build_retrieval_module`; `serve` is the serving signature.

    Args:
      top_k: a TFRS `TopK` layer (`ScaNN` or `BruteForce`) indexed over the candidates, whose
        `query_model` is the query encoder.
      k: results per query.
      settings: JSON-ready description (backend, k, num_candidates, dim, ScaNN settings).
    """

    def __init__(self, top_k, k: int, settings: dict, **kwargs):
        super().__init__(name=kwargs.pop("name", "retrieve"), **kwargs)
        self.top_k = top_k
        self.k = k
        # Kept as a JSON string: tf.Module would wrap a dict for tracking.
        self.settings_json = json.dumps(settings, sort_keys=True)

    @property
    def settings(self) -> dict:
        return json.loads(self.settings_json)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="queries")])
    def serve(self, queries):
        """`queries: [batch]` strings -> `{"scores": [batch, k] float32, "ids": [batch, k]}`."""
        scores, top_ids = self.top_k(queries, k=self.k)
        return {"scores": tf.ensure_shape(scores, [None, self.k]),
                "ids": tf.ensure_shape(top_ids, [None, self.k])}


def build_retrieval_module(query_encoder, candidate_embeddings, candidate_ids: Sequence[str],
                           k: int = 10, backend: str = "scann",
                           scann_config: Optional[ScannConfig] = None) -> RetrievalModule:
    """Builds the in-process `RetrievalModule` that `export_retrieval_model` saves.

    Args: as `export_retrieval_model`, without `path` and `overwrite`.
    """
    check_backend(backend)
    embeddings = check_embeddings(candidate_embeddings)
    ids = check_ids(candidate_ids, embeddings.shape[0])
    k = min(check_k(k), len(ids))
    num, dim = embeddings.shape
    _probe_encoder(query_encoder, dim)

    if backend == "scann":
        scann_config = scann_config or ScannConfig.for_size(num)
        if not scann_config.is_exact and scann_config.num_reordering_candidates < k:
            # The serving op searches with the built-in re-ordering depth; keep it >= k.
            scann_config = dataclasses.replace(scann_config, num_reordering_candidates=k)
        top_k = _make_scann_top_k(query_encoder, k, scann_config)
    else:
        if scann_config is not None:
            raise ValueError("scann_config is only for backend='scann'.")
        top_k = _brute_force_top_k(query_encoder, k)
    top_k.index(tf.constant(embeddings), tf.constant(ids, dtype=tf.string))
    settings = {
        "format": "tt_zoo.retrieve",
        "format_version": RETRIEVE_FORMAT_VERSION,
        "backend": backend,
        "k": k,
        "num_candidates": num,
        "dim": dim,
        "scann": scann_config.to_json() if scann_config else None,
        "needs_scann_ops": backend == "scann",
    }
    return RetrievalModule(top_k, k, settings)


def export_retrieval_model(query_encoder, candidate_embeddings, candidate_ids: Sequence[str],
                           path, k: int = 10, backend: str = "scann",
                           scann_config: Optional[ScannConfig] = None,
                           overwrite: bool = False) -> pathlib.Path:
    """Exports a `retrieve` SavedModel: raw query strings in, top-k candidates out.

    The serving signature `serving_default` takes `queries: tf.string [None]` and returns
    `{"scores": float32 [batch, k], "ids": string [batch, k]}` (k capped at the number of
    candidates), best first. `backend="brute_force"` uses TFRS `BruteForce` (stock TF ops);
    `backend="scann"` uses TFRS `ScaNN`, whose ops must be registered before loading:
    `import scann` first, or use `load_retrieval_model`, or serve with the TF Serving build
    that includes ScaNN. Settings go to `assets.extra/tt_zoo_retrieval.json` in the
    SavedModel. Written atomically (temp dir, then rename).

    Unlike `EmbeddingIndex.search`, the ScaNN serving op has no fall-back when the searched
    leaves hold fewer than k candidates (it pads); the default `ScannConfig.for_size` searches
    at least 25 leaves of about sqrt(n) candidates each, so this needs k in the hundreds.

    Args:
      query_encoder: Keras model or callable mapping `tf.string [batch]` to
        `float32 [batch, dim]` (phi in Chang et al. 2020, Section 2).
      candidate_embeddings: float `[num_candidates, dim]` candidate embeddings psi(d).
      candidate_ids: unique string ids, one per candidate.
      path: the SavedModel directory to create.
      k: results per query.
      backend: `"scann"` or `"brute_force"`.
      scann_config: ScaNN settings; default `ScannConfig.for_size(num_candidates)`.
      overwrite: replace an existing directory at `path`.

    Returns:
      The SavedModel path.
    """
    module = build_retrieval_module(query_encoder, candidate_embeddings, candidate_ids, k=k,
                                    backend=backend, scann_config=scann_config)
    return save_retrieval_module(module, path, overwrite=overwrite)


def save_retrieval_module(module: RetrievalModule, path, overwrite: bool = False) -> pathlib.Path:
    """Saves a `RetrievalModule` as a SavedModel at `path`, atomically."""
    needs_scann = module.settings["needs_scann_ops"]

    def build(tmp: pathlib.Path) -> None:
        options = tf.saved_model.SaveOptions(
            namespace_whitelist=["Scann"] if needs_scann else None)
        # Only the signature and the variables, as the model export saves: without Keras'
        # per-layer metadata, which warns about the query tower's loss layers and TFRS's
        # layers (no config to save) and serves nothing here.
        with _without_keras_traces():
            tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.serve},
                                options=options)
        write_json(tmp / RETRIEVAL_CONFIG_FILE, module.settings, indent=2, sort_keys=True)

    return write_directory(
        path, build, overwrite=overwrite, what="tt_zoo retrieve SavedModel",
        is_replaceable=lambda p: (p / RETRIEVAL_CONFIG_FILE).is_file())


def load_retrieval_model(path):
    """Loads a `retrieve` SavedModel, registering ScaNN's TF ops first when it needs them;
    one written in a newer format than this tt_zoo reads is an `ArtifactError`."""
    root = pathlib.Path(path)
    settings = read_json(root / RETRIEVAL_CONFIG_FILE)
    check_format_version(settings.get("format_version"), RETRIEVE_FORMAT_VERSION,
                         listed_in=root / RETRIEVAL_CONFIG_FILE, what="tt_zoo retrieve SavedModel")
    if settings.get("needs_scann_ops"):
        from tt_zoo._native_logs import import_scann  # pylint: disable=import-outside-toplevel
        import_scann()  # registers ScaNN's TF ops, its C++ logs at tt_zoo's level
    return tf.saved_model.load(str(root))
