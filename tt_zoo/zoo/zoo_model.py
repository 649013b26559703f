"""A loaded two-tower model (`ZooModel`) and its index over passages (`TextIndex`).

What `tt_zoo.load` (`tt_zoo.zoo.loading`) gives for a two-tower export, and the base of what it
gives for the other kinds (`tt_zoo.zoo.kind_models`): `CardIdentity` (a loaded model's card and
name, for every kind), `ZooModel` (encoders, indexing, evaluation, fine-tuning and export of the
Keras model) and `weights_sha256` (the identity of a model's weights that a saved index
records and checks).
"""

from __future__ import annotations

import datetime
import hashlib
import numbers
import pathlib
from typing import List, Optional, Sequence, Union

import numpy as np

from tt_zoo import _keras_env

_keras_env.check_legacy_keras()  # before TensorFlow is imported below, with a clear message

from tt_zoo.arguments import (as_documents, as_path, as_string_list, as_texts,  # noqa: E402
                              decoded)
from tt_zoo.atomic_io import json_text, recover_replaced, write_directory, write_json  # noqa: E402
from tt_zoo.errors import ArtifactError, TtZooError  # noqa: E402
from tt_zoo.retrieval.search import Hit  # noqa: E402,F401  (TextIndex.search returns Hits)
from tt_zoo.artifacts import export as export_lib  # noqa: E402
from tt_zoo.artifacts.model_card import ModelCard  # noqa: E402
from tt_zoo.zoo.registry import ModelSpec  # noqa: E402

PASSAGES_FILE = "passages.jsonl"
TEXT_INDEX_FILE = "text_index.json"  # format, the model, and the manifest of every other file
TEXT_INDEX_FORMAT = "tt_zoo.TextIndex"
# 2: the manifest covers embeddings/ too, and "model" records the model that made them;
# 1 (none recorded: `tt_zoo.manifest.check_format_version`): passages.jsonl only.
TEXT_INDEX_FORMAT_VERSION = 2
# What `ZooModel.encode` passes on to the encoders besides its sentence-transformers arguments.
_ENCODE_OPTIONS = frozenset({"bucketing", "precision", "jit_compile"})


def weights_sha256(keras_model) -> str:
    """The sha256 of a model's weights (each array's shape, dtype and bytes, in order): what
    an index records of the model that made its embeddings, and checks at load."""
    digest = hashlib.sha256()
    for array in keras_model.get_weights():
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape};".encode("ascii"))
        digest.update(array.tobytes())
    return digest.hexdigest()


def model_source(model) -> Optional[str]:
    """What `tt_zoo.load` takes to load `model` again, as a saved index records it: its
    registered name, else the absolute path of its export (None: neither is known)."""
    if getattr(model, "spec", None) is not None:
        return model.spec.name
    path = getattr(model, "path", None)
    return str(pathlib.Path(path).resolve()) if path else None


def model_identity(model: "ZooModel") -> dict:
    """What a saved index records of the model that made its embeddings: its name, the sha256
    of its weights (`weights_sha256`: fine-tuning changes it), its embedding dimension and
    `model_source` (what `tt_zoo.load_index` loads it by)."""
    return {"name": model.name, "weights_sha256": weights_sha256(model.keras_model),
            "embedding_dim": int(model.keras_model.embedding_dim),
            "source": model_source(model)}


def check_model_identity(recorded, model: "ZooModel", listed_in) -> None:
    """Raises `ArtifactError` naming both models unless `model` is the one `recorded`
    (`model_identity`) says made the index's embeddings."""
    if not isinstance(recorded, dict) or not {"name", "weights_sha256",
                                              "embedding_dim"} <= set(recorded):
        raise ArtifactError(f"{listed_in} does not record the model that made the index's "
                            "embeddings (name, weights_sha256, embedding_dim).")
    ours = model_identity(model)
    if (recorded["weights_sha256"], recorded["embedding_dim"]) != (
            ours["weights_sha256"], ours["embedding_dim"]):
        raise ArtifactError(
            f"{listed_in}: this index's embeddings were made by {recorded['name']!r} (weights "
            f"sha256 {str(recorded['weights_sha256'])[:16]}…, dim {recorded['embedding_dim']}), "
            f"not by the model loading it, {ours['name']!r} (weights sha256 "
            f"{ours['weights_sha256'][:16]}…, dim {ours['embedding_dim']}): its queries would "
            "be searched against another model's embeddings. Load it with the model that built "
            "it, or build the index again with this one (model.index(passages).save(path)).")


def _is_text_index(path: pathlib.Path) -> bool:
    return (path / TEXT_INDEX_FILE).is_file() or ((path / PASSAGES_FILE).is_file()
                                                  and (path / "embeddings").is_dir())


class TextIndex:
    """An index over passages encoded by a two-tower model; search with raw query strings.

    Built by `ZooModel.index`; the embedding search is `tt_zoo.retrieval.index.EmbeddingIndex` (ScaNN or
    brute force). A `tt_zoo.retrieval.search.TextSearcher`, as every model's index is.
    """

    def __init__(self, model: "ZooModel", embedding_index, texts: Sequence[str],
                 titles: Sequence[str]):
        self.model = model
        self.embedding_index = embedding_index
        self.texts = list(texts)
        self.titles = list(titles)

    def __len__(self):
        return len(self.texts)

    def __repr__(self):
        return (f"TextIndex(model={self.model.name!r}, passages={len(self)}, "
                f"backend={self.embedding_index.backend!r}, dim={self.embedding_index.dim})")

    @property
    def ids(self):
        """The passages' ids, in order."""
        return self.embedding_index.ids

    @property
    def description(self) -> str:
        return self.model.name

    @property
    def searcher(self):
        """The `tt_zoo.retrieval.search.Searcher` of query strings under this index: the model's
        query encoder into `embedding_index` (for `tt_zoo.fuse` and evaluation)."""
        from tt_zoo.retrieval.search import QueryEncodingSearcher
        return QueryEncodingSearcher(self.model.encode_queries, self.embedding_index)

    def search_batch(self, queries: Sequence[str], k: int = 10,
                     **encode_options) -> List[List[Hit]]:
        """`search` of a sequence of query strings: one list of hits a query."""
        if isinstance(queries, (str, bytes)):
            raise ValueError("search_batch: queries must be a sequence of strings, not one "
                             "string (search takes one).")
        queries = as_string_list(queries, "queries")
        return self.search(queries, k, **encode_options) if queries else []

    def search(self, queries: Union[str, Sequence[str]], k: int = 10,
               **encode_options) -> Union[List[Hit], List[List[Hit]]]:
        """Top-k hits for each query string, best first: the
        `tt_zoo.retrieval.search.SearchResult` of `embedding_index` (a `Searcher`) for the
        encoded queries, seen as `Hit`s. A single string gives its one list of hits.
        `encode_options` go to `ZooModel.encode_queries` (`batch_size`, `show_progress_bar`)."""
        queries, single = as_texts(queries, "queries")  # (an iterable is read once, here)
        embeddings = self.model.encode_queries(queries, **encode_options)
        hits = self.embedding_index.search(embeddings, k).hits(self.texts, self.titles)
        return hits[0] if single else hits

    def save(self, path, overwrite: bool = False) -> pathlib.Path:
        """Saves the embedding index (ScaNN's own serializer; ids in a plain file) and passages.

        `path` must be new, empty or an earlier saved TextIndex (replaced atomically); any other
        existing folder is refused (FileExistsError) unless `overwrite`.
        """
        from tt_zoo.manifest import describe_files

        path = as_path(path, "path")
        model = model_identity(self.model)

        def build(staging: pathlib.Path) -> None:
            self.embedding_index.save(staging / "embeddings", overwrite=True)
            self._save_numpy_query_tower(staging)
            passages = staging / PASSAGES_FILE
            with open(passages, "w", encoding="utf-8") as f:
                for cid, title, text in zip(self.embedding_index.ids, self.titles, self.texts):
                    f.write(json_text({"id": cid, "title": title, "text": text}, where=passages,
                                      indent=None) + "\n")
            write_json(staging / TEXT_INDEX_FILE, {
                "format": TEXT_INDEX_FORMAT, "format_version": TEXT_INDEX_FORMAT_VERSION,
                "model": model, "files": describe_files(staging)})

        return write_directory(path, build, overwrite=overwrite, is_replaceable=_is_text_index,
                               what="saved tt_zoo TextIndex")

    def _save_numpy_query_tower(self, staging: pathlib.Path) -> None:
        """The model's query tower in NumPy, for searches without TensorFlow
        (`tt_zoo.retrieval.numpy_queries`), when it is found to equal the model's."""
        from tt_zoo.retrieval import numpy_queries

        encoder = numpy_queries.of_model(self.model.keras_model, bool(self.model.task_markers))
        if encoder is not None:
            probes = [t[:300] for pair in zip(self.titles[:32], self.texts[:32]) for t in pair
                      if t.strip()]
            numpy_queries.save_if_exact(encoder, staging, self.model.encode_queries,
                                         self.embedding_index, probes)

    @classmethod
    def load(cls, path, model: "ZooModel") -> "TextIndex":
        """Loads a directory written by `save`, checking every file against its sha256 and
        `model` against the one that made the embeddings (`check_model_identity`)."""
        from tt_zoo.retrieval.index import EmbeddingIndex, read_json
        from tt_zoo.manifest import check_format_version, verify_files
        path = as_path(path, "path")
        recover_replaced(path)
        manifest_path = path / TEXT_INDEX_FILE
        if not manifest_path.is_file():
            raise ArtifactError(f"{path} is not a saved TextIndex (or was saved by a tt_zoo "
                                f"without {TEXT_INDEX_FILE}; save it again): "
                                f"{manifest_path} is missing.")
        manifest = read_json(manifest_path)
        version = check_format_version(manifest.get("format_version"),
                                       TEXT_INDEX_FORMAT_VERSION, listed_in=manifest_path,
                                       what=TEXT_INDEX_FORMAT)
        if version < 2:
            raise ArtifactError(f"{manifest_path} was saved by an older tt_zoo that recorded "
                                "neither the model that made the embeddings nor their sha256, "
                                "so this index cannot be checked: build it again "
                                f"(model.index(passages).save(path); its passages are in "
                                f"{path / PASSAGES_FILE}).")
        files = manifest.get("files")
        if manifest.get("format") != TEXT_INDEX_FORMAT or not isinstance(files, dict) or (
                PASSAGES_FILE not in files):
            raise ArtifactError(f"{manifest_path} is not a {TEXT_INDEX_FORMAT} manifest listing "
                                f"{PASSAGES_FILE}.")
        verify_files(path, files, listed_in=manifest_path)
        check_model_identity(manifest.get("model"), model, manifest_path)
        embedding_index = EmbeddingIndex.load(path / "embeddings")
        if embedding_index.dim != model.keras_model.embedding_dim:
            raise ArtifactError(f"{path / 'embeddings'} holds {embedding_index.dim}-d "
                                f"embeddings; {model.name} makes "
                                f"{model.keras_model.embedding_dim}-d ones.")
        from tt_zoo.retrieval.passage_index import read_passages  # noqa: PLC0415
        passages_path = path / PASSAGES_FILE
        ids, titles, texts = read_passages(passages_path)
        if ids != list(embedding_index.ids):
            raise ArtifactError(f"{passages_path} does not match the ids of {path / 'embeddings'}.")
        return cls(model, embedding_index, texts, titles)


def optimizer_steps(keras_model) -> int:
    """Optimizer steps taken since the model was built or loaded (0 without an optimizer)."""
    optimizer = getattr(keras_model, "optimizer", None)
    return 0 if optimizer is None else int(optimizer.iterations.numpy())


class CardIdentity:
    """What a loaded model of any kind says about itself from its `spec` (registered name or
    None), `path` and `metadata`: its card and its name."""

    @property
    def card(self) -> ModelCard:
        """The metadata as a `tt_zoo.artifacts.model_card.ModelCard`."""
        return ModelCard.from_dict(self.metadata)

    @property
    def name(self) -> str:
        name = self.spec.name if self.spec else self.card.name
        return str(self.path) if name is None else name


class ZooModel(CardIdentity):
    """A loaded two-tower model: encoders, indexing, and the Keras model for fine-tuning.

    Attributes:
      keras_model: the `tt_zoo.modeling.models.TwoTowerModel` (compile and `fit` it as usual;
        a `LateInteractionModel` in a `LateInteractionZooModel`).
      spec: the registry spec, when loaded by name.
      metadata: the artifact's metadata.json (typed: `card`).
    """

    def __init__(self, keras_model, spec: Optional[ModelSpec] = None, path=None,
                 metadata: Optional[dict] = None):
        self.keras_model = keras_model
        self.spec = spec
        self.path = pathlib.Path(path) if path else None
        self.metadata = metadata or {}

    @property
    def encoder_name(self) -> str:
        arch = self.card.architecture
        enc = self.spec.encoder if self.spec else (arch.encoder or "?")
        size = self.spec.tower_size if self.spec else arch.tower_size
        return f"{enc}-{size}" if size else enc

    @property
    def pretraining(self) -> str:
        return self.spec.pretraining if self.spec else (self.card.training.pretraining or "?")

    def __repr__(self):
        return (f"ZooModel(name={self.name!r}, encoder={self.encoder_name!r}, "
                f"pretraining={self.pretraining!r}, dim={self.keras_model.embedding_dim})")

    def encode_queries(self, texts: Union[str, Sequence[str]], batch_size: int = 256,
                       show_progress_bar: Optional[bool] = None, task_class: Optional[str] = None,
                       **options) -> np.ndarray:
        """Query embeddings, float32 [len(texts), dim]; a single string gives one [dim] vector.

        `batch_size` texts go through the tower at a time. `show_progress_bar`: a tqdm bar on
        stderr; None (the default) shows one when the call runs more than 4 batches at a
        terminal or in a notebook and no other tqdm bar is open; ``TQDM_DISABLE=1`` hides it.
        `options`: `bucketing`, `precision`, `jit_compile` (see
        `tt_zoo.modeling.models.TwoTowerModel.encode_queries`).

        `task_class`: for a model trained with task markers (Maillard et al. 2021, Sec. 4.3;
        tt-zoo multitask --markers; its card's ``task_markers``), every query gets the marker
        word of this class first (`tt_zoo.data.tasks.with_marker`), as in training. None, the
        default, takes the card's ``default_task_class`` (its first QA class, "qa"), so
        ``index.search``, the ODQA and ReQA evaluations and every other caller encode queries
        as a QA task's were trained. A model without markers encodes the texts as given.

        Raises:
          ValueError: `task_class` names a class the model has no marker for (the message
            lists those it has).
        """
        listed, single = as_texts(texts, "texts")  # (an iterable is read once, here)
        texts = self._with_task_marker(listed[0] if single else listed, task_class)
        return self._single_vector("query", "encode_queries")(
            texts, batch_size=batch_size, show_progress_bar=show_progress_bar, **options)

    @property
    def task_markers(self) -> dict:
        """{task class: marker word} the model was trained with (empty: none)."""
        return dict(self.card.architecture.task_markers or {})

    def _with_task_marker(self, texts, task_class: Optional[str]):
        """`texts` with the marker of `task_class` (default: the card's) prepended."""
        from tt_zoo.data.tasks import with_marker

        architecture = self.card.architecture
        markers = architecture.task_markers or {}
        if task_class is None:
            if not markers:
                return texts
            task_class = architecture.default_task_class
            if task_class is None:
                raise TtZooError(f"{self.name}'s card records task markers {sorted(markers)} "
                                 "but no default_task_class; pass task_class=...")
        if task_class not in markers:
            known = (f"it has markers for {sorted(markers)}" if markers
                     else "it was trained without task markers")
            raise ValueError(f"{self.name} has no task marker for task class {task_class!r}: "
                             f"{known}.")
        if isinstance(texts, (str, bytes)):
            return with_marker(texts.decode("utf-8") if isinstance(texts, bytes) else texts,
                               task_class)
        return [with_marker(t.decode("utf-8") if isinstance(t, bytes) else t, task_class)
                for t in texts]

    def encode_documents(self, texts: Union[str, Sequence[str]],
                         titles: Union[None, str, Sequence[str]] = None, batch_size: int = 256,
                         show_progress_bar: Optional[bool] = None, **options) -> np.ndarray:
        """Document embeddings of (title or sentence, passage) pairs, float32 [n, dim]; a single
        string (its title one string or None) gives one [dim] vector. `batch_size`,
        `show_progress_bar` and `options` as `encode_queries`."""
        return self._single_vector("document", "encode_documents")(
            texts, titles=titles, batch_size=batch_size, show_progress_bar=show_progress_bar,
            **options)

    def _single_vector(self, side: str, method: str):
        """The Keras model's single-vector encoder `method`; a late-interaction model (a
        `LateInteractionModel`, not a `TwoTowerModel`) has none: `TtZooError` names its token
        encoder."""
        if not hasattr(self.keras_model, method):
            raise TtZooError(f"A late-interaction (ColBERT) model has no single {side} vector: "
                             f"use encode_{side}_tokens (one vector per token) and MaxSim "
                             "(score, or the re-ranker and token index of tt_zoo.retrieval).")
        return getattr(self.keras_model, method)

    # Late-interaction (ColBERT) models: token vectors instead of one vector per text.
    def encode_query_tokens(self, texts: Union[str, Sequence[str]], batch_size: int = 256,
                            show_progress_bar: Optional[bool] = None,
                            **options) -> List[np.ndarray]:
        """Query token vectors of a late-interaction model: one float32 [n_i, m] array per
        query, or the one array of a single string
        (`tt_zoo.modeling.late_interaction_model.LateInteractionModel`); `batch_size` and
        `show_progress_bar` as `encode_queries`."""
        return self._late_interaction("encode_query_tokens")(
            texts, batch_size=batch_size, show_progress_bar=show_progress_bar, **options)

    def encode_document_tokens(self, texts: Union[str, Sequence[str]],
                               titles: Union[None, str, Sequence[str]] = None,
                               batch_size: int = 256, show_progress_bar: Optional[bool] = None,
                               **options) -> List[np.ndarray]:
        """Document token vectors of a late-interaction model: one float32 [n_i, m] array per
        (title or sentence, passage), padding and punctuation removed; the one array of a
        single string. `batch_size` and `show_progress_bar` as `encode_queries`."""
        return self._late_interaction("encode_document_tokens")(
            texts, titles=titles, batch_size=batch_size, show_progress_bar=show_progress_bar,
            **options)

    def score(self, queries: Sequence[str], documents: Sequence[str],
              titles: Optional[Sequence[str]] = None, batch_size: int = 256) -> np.ndarray:
        """MaxSim scores of a late-interaction model, float32 [len(queries), len(documents)]."""
        return self._late_interaction("score")(queries, documents, titles=titles,
                                               batch_size=batch_size)

    def _late_interaction(self, method: str):
        if not hasattr(self.keras_model, "encode_query_tokens"):
            raise TtZooError(f"{self.name} is a single-vector model: it has no {method} "
                             "(encode_queries / encode_documents give its embeddings).")
        return getattr(self.keras_model, method)

    def index(self, passages: Union[str, Sequence[str]],
              titles: Union[None, str, Sequence[str]] = None,
              ids: Union[None, str, Sequence[str]] = None, backend: str = "scann",
              batch_size: int = 256, embeddings: Optional[np.ndarray] = None,
              show_progress_bar: Optional[bool] = None) -> TextIndex:
        """Encodes passages and builds a ScaNN (or exact brute-force) index over them.

        `titles` (or sentences) pair with the passages as `encode_documents` takes them; `ids`
        (str, UTF-8 bytes or int) default to "0", "1", ...; a single passage string (with a
        single title and id) indexes that one passage. Bytes passages and titles are UTF-8 text
        (kept and saved as str). `batch_size` and `show_progress_bar` go to `encode_documents`;
        `embeddings` skips the encoding when the passages' embeddings are already at hand.
        """
        from tt_zoo.retrieval.index import EmbeddingIndex
        passages, titles, single = as_documents(passages, titles)
        passages, titles = decoded(passages, "texts"), decoded(titles, "titles")
        ids = _passage_ids(ids, len(passages), single)
        if embeddings is None:
            embeddings = self.encode_documents(passages, titles=titles, batch_size=batch_size,
                                               show_progress_bar=show_progress_bar)
        else:
            shape = (len(passages), int(self.keras_model.embedding_dim))
            given = getattr(embeddings, "shape", None)
            if given is None or tuple(given) != shape:
                raise ValueError(f"embeddings must be float [{shape[0]}, {shape[1]}]: one "
                                 f"{shape[1]}-d embedding of {self.name} per passage (got "
                                 f"{type(embeddings).__name__} of shape {given}).")
        return TextIndex(self, EmbeddingIndex(embeddings, ids, backend=backend), passages, titles)

    def load_index(self, path) -> TextIndex:
        """The `TextIndex` saved at `path`, which this model must have built (its weights'
        sha256 and dimension are checked: `check_model_identity`)."""
        return TextIndex.load(path, self)

    # -- what a sentence-transformers user reaches for -----------------------------------------
    @property
    def embedding_dim(self) -> int:
        """Size of an embedding (a late-interaction model: of each token vector)."""
        return int(self.keras_model.embedding_dim)

    def get_sentence_embedding_dimension(self) -> int:
        """`embedding_dim`, by sentence-transformers' name."""
        return self.embedding_dim

    @property
    def query_length(self) -> int:
        """Tokens of a query the query tower reads ([CLS] and [SEP] included); longer queries
        are cut."""
        return int(self.keras_model.query_preprocessor.seq_length)

    @property
    def document_length(self) -> int:
        """Tokens of a (title, passage) pair the document tower reads, both [SEP]s included;
        longer pairs are cut, the longer segment first."""
        return int(self.keras_model.document_preprocessor.seq_length)

    @property
    def max_seq_length(self) -> int:
        """The longest input the model reads, in tokens: `document_length` (queries:
        `query_length`), as sentence-transformers' ``max_seq_length`` is its truncation."""
        return max(self.query_length, self.document_length)

    @property
    def similarity_fn_name(self) -> str:
        """How `similarity` scores: "cosine" for a model whose embeddings are L2-normalised,
        else "dot" (the paper's inner product, Sec. 2)."""
        return "cosine" if self.keras_model.normalize_embeddings else "dot"

    def encode(self, sentences: Union[str, Sequence[str]], prompt_name: Optional[str] = None,
               batch_size: int = 256, show_progress_bar: Optional[bool] = None, *,
               normalize_embeddings: bool = False, convert_to_numpy: bool = True,
               convert_to_tensor: bool = False, **options):
        """Embeddings of texts, as sentence-transformers' ``encode``: float32 [n, dim] (a single
        string gives one [dim] vector).

        The texts are taken as **documents** (`encode_documents`, each read up to
        `document_length` tokens: a passage is never cut to the query budget) unless
        ``prompt_name="query"`` (sentence-transformers' name for the query side) sends them
        through the query tower (`encode_queries`, `query_length` tokens, task markers). A
        model whose two sides differ (separate towers, or task markers) warns once when
        `prompt_name` is not given: queries belong on the query side.

        Args:
          sentences: a string or a sequence of strings.
          prompt_name: "query", or "document" / "passage" (the default side).
          batch_size, show_progress_bar: as `encode_queries`.
          normalize_embeddings: L2-normalise each embedding (cosine scores by dot product).
          convert_to_numpy: a NumPy array (the default); False with `convert_to_tensor` False
            gives a list of [dim] arrays, as sentence-transformers does.
          convert_to_tensor: a `tf.Tensor` instead of a NumPy array.
          options: `bucketing`, `precision`, `jit_compile` (`encode_queries`).

        Example:
          >>> model.encode(["Fleming discovered penicillin."], normalize_embeddings=True).shape
          (1, 384)
          >>> model.encode(["who discovered penicillin?"], prompt_name="query").shape
          (1, 384)
        """
        import warnings  # noqa: PLC0415

        unknown = sorted(set(options) - _ENCODE_OPTIONS)
        if unknown:
            raise TypeError(f"encode() got unexpected keyword argument(s) {unknown}; it takes "
                            "prompt_name ('query' or 'document'), batch_size, show_progress_bar, "
                            "normalize_embeddings, convert_to_numpy, convert_to_tensor and "
                            f"{', '.join(sorted(_ENCODE_OPTIONS))}.")
        if prompt_name not in (None, "query", "document", "passage"):
            raise ValueError(f"prompt_name must be 'query', 'document' or 'passage' (got "
                             f"{prompt_name!r}): which tower encodes the texts.")
        if prompt_name is None and self._sides_differ() and not self._warned_encode:
            self._warned_encode = True
            warnings.warn(f"{self.name}.encode() embeds texts as documents (its document "
                          f"tower, up to {self.document_length} tokens); its queries are encoded "
                          "differently: pass prompt_name='query' (or call encode_queries) for "
                          "queries, prompt_name='document' to silence this.", UserWarning,
                          stacklevel=2)
        encode = self.encode_queries if prompt_name == "query" else self.encode_documents
        embeddings = encode(sentences, batch_size=batch_size,
                            show_progress_bar=show_progress_bar, **options)
        if normalize_embeddings:
            norms = np.linalg.norm(embeddings, axis=-1, keepdims=True)
            embeddings = (embeddings / np.maximum(norms, 1e-12)).astype(np.float32)
        if convert_to_tensor:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            return tf.convert_to_tensor(embeddings)
        if not convert_to_numpy and embeddings.ndim == 2:
            return list(embeddings)
        return embeddings

    _warned_encode = False

    def _sides_differ(self) -> bool:
        """Whether a query is encoded otherwise than a document of the same text: separate
        towers, or task markers on the query side."""
        return (not getattr(self.keras_model, "share_towers", False)) or bool(self.task_markers)

    def similarity(self, a, b) -> np.ndarray:
        """Scores of every row of `a` against every row of `b`, float32 [len(a), len(b)], as the
        model scores a query and a document (sentence-transformers' ``similarity``): cosine
        for a model with normalised embeddings, the inner product otherwise
        (`similarity_fn_name`). A single [dim] vector counts as one row.

        Example:
          >>> q = model.encode_queries(["who discovered penicillin?"])
          >>> d = model.encode_documents(["Fleming found it."], titles=["Penicillin"])
          >>> model.similarity(q, d).shape
          (1, 1)
        """
        if hasattr(self.keras_model, "encode_query_tokens"):
            raise TtZooError(f"{self.name} is a late-interaction model: score texts with "
                             "model.score(queries, documents) (MaxSim over token vectors).")
        rows = [self._embedding_rows(x, name) for x, name in ((a, "a"), (b, "b"))]
        if rows[0].shape[1] != rows[1].shape[1]:
            raise ValueError(f"a and b must have the same embedding size (got {rows[0].shape} "
                             f"and {rows[1].shape}).")
        if self.similarity_fn_name == "cosine":
            rows = [r / np.maximum(np.linalg.norm(r, axis=1, keepdims=True), 1e-12)
                    for r in rows]
        return (rows[0] @ rows[1].T).astype(np.float32)

    def _embedding_rows(self, x, name: str) -> np.ndarray:
        if isinstance(x, (str, bytes)) or (isinstance(x, (list, tuple)) and x
                                           and isinstance(x[0], (str, bytes))):
            raise TypeError(f"{name} must be embeddings, not texts: encode them first "
                            "(model.encode_queries / model.encode_documents).")
        from tt_zoo.util import embedding_rows  # noqa: PLC0415
        return embedding_rows(x, name)

    # -- Keras: the loaded object trains, evaluates and predicts as the model it wraps -------------
    def compile(self, *args, **kwargs):
        return self.keras_model.compile(*args, **kwargs)

    def fit(self, *args, **kwargs):
        return self.keras_model.fit(*args, **kwargs)

    def evaluate(self, pairs, batch_size: int = 32, verbose: int = 0, **kwargs) -> dict:
        """In-batch retrieval metrics on (query, document) pairs, by Keras' ``evaluate``:
        {"loss": the sampled-softmax loss the model trains with (each query against its
        batch's documents, Chang et al. 2020, Sec. 2), "in_batch_top1": the share of queries
        whose own document scores highest in their batch, ...}.

        `pairs`: a batched `tf.data.Dataset` of pair dicts (as `fit` takes), a dict of string
        lists ``{"query", "doc_text", "doc_title"?}``, or a list of (query, passage) or (query,
        title, passage) tuples; the last two are batched by `batch_size` (the in-batch
        numbers depend on it: larger batches are harder). A model not compiled yet is
        compiled with Keras' defaults (its optimizer untouched by evaluation). Keras'
        ``return_dict`` is accepted and changes nothing: the result is always a dict.
        """
        kwargs.pop("return_dict", None)  # Keras' flag: this evaluate always returns a dict
        if not getattr(self.keras_model, "_is_compiled", False):
            self.keras_model.compile()
        return self.keras_model.evaluate(_pair_dataset(pairs, batch_size), verbose=verbose,
                                         return_dict=True, **kwargs)

    def predict(self, pairs, batch_size: int = 32, verbose: int = 0, **kwargs) -> dict:
        """Keras' ``predict`` on pairs (as `evaluate` takes them): {"query_embeddings": [n,
        dim], "document_embeddings": [n, dim]}. Texts alone: `encode_queries` /
        `encode_documents`."""
        return self.keras_model.predict(_pair_dataset(pairs, batch_size), verbose=verbose,
                                        **kwargs)

    def summary(self, *args, **kwargs):
        """The Keras model's ``summary`` (its towers, preprocessors and parameter counts)."""
        return self.keras_model.summary(*args, **kwargs)

    def fine_tuned_card(self, name: str, steps: int):
        """The card of weights trained `steps` steps further from this model's, finished now
        (`ModelCard.fine_tuned`): its lineage names this model, and its folder only when it was
        loaded by path (a registered name's folder, the clone or the cache, is this machine's)."""
        return self.card.fine_tuned(
            name=name, base_name=self.name,
            base_path=str(self.path) if self.path and self.spec is None else None, steps=steps,
            finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))

    def export(self, path, metadata: Optional[dict] = None, overwrite: bool = False) -> dict:
        """Writes a serving SavedModel (see `tt_zoo.artifacts.export.export_saved_model`).

        Weights unchanged since loading keep this model's card. Weights trained since (its
        optimizer has taken steps, e.g. after `compile` and `fit`) get a card of their own: their
        lineage (the base model's name, sha256 and training; the steps taken here, and when),
        the architecture facts that still hold, and none of the base model's metrics, which
        were not measured on these weights. `metadata` adds what it was fine-tuned on and any
        metric measured on the new weights.
        """
        steps = optimizer_steps(self.keras_model)
        if steps == 0:
            card = self.card
            card.provenance.sha256 = None  # the export's own
        else:
            card = self.fine_tuned_card(f"{self.name}_finetuned", steps)
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict or None (got {type(metadata).__name__}).")
        meta = {**card.to_dict(), **(metadata or {})}
        return export_lib.export_saved_model(self.keras_model, as_path(path, "path"), meta,
                                             overwrite=overwrite)


def _passage_ids(ids, count: int, single: bool) -> List[str]:
    """`ZooModel.index`'s `ids` as strings: None gives "0".."count-1"; a single passage takes
    one id; else a sequence of `count` ids (str, UTF-8 bytes or int). Raises TypeError or
    ValueError naming `ids`."""
    if ids is None:
        return [str(i) for i in range(count)]
    if single and isinstance(ids, (str, bytes, numbers.Integral)) and not isinstance(ids, bool):
        ids = [ids]
    elif isinstance(ids, (str, bytes)):
        raise TypeError(f"ids must be a sequence of ids, not a single string ({ids!r}).")
    elif isinstance(ids, (dict, set)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a sequence of ids (str or int), one a passage (got "
                        f"{type(ids).__name__}: {ids!r:.80}).")
    ids = list(ids)
    for i, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, (str, bytes, numbers.Integral)):
            raise TypeError(f"ids[{i}] must be a str or an int (got {type(value).__name__}: "
                            f"{value!r:.80}).")
    if len(ids) != count:
        raise ValueError(f"ids and texts differ in length ({len(ids)} vs {count}).")
    return [str(i) for i in decoded(ids, "ids")]


def _pair_dataset(pairs, batch_size: int):
    """`ZooModel.evaluate`'s `pairs` as a batched dataset of pair dicts (see there)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from tt_zoo.data import features as F  # pylint: disable=import-outside-toplevel

    if isinstance(pairs, tf.data.Dataset):
        return pairs
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1 (got {batch_size!r}).")
    expected = ("pairs must be a batched tf.data.Dataset of pair dicts, a dict of string lists "
                f"{{{F.QUERY!r}, {F.DOC_TEXT!r}, {F.DOC_TITLE!r} (optional)}}, or a list of "
                "(query, passage) or (query, title, passage) tuples")
    if isinstance(pairs, dict):
        missing = [k for k in (F.QUERY, F.DOC_TEXT) if k not in pairs]
        if missing:
            raise ValueError(f"{expected} (got a dict without {missing}).")
        columns = {k: as_texts(v, k)[0] for k, v in pairs.items()
                   if k in (F.QUERY, F.DOC_TITLE, F.DOC_TEXT)}
    elif isinstance(pairs, (list, tuple)) and pairs and all(
            isinstance(p, (list, tuple)) and len(p) in (2, 3) for p in pairs):
        columns = {F.QUERY: [p[0] for p in pairs], F.DOC_TEXT: [p[-1] for p in pairs],
                   F.DOC_TITLE: [p[1] if len(p) == 3 else "" for p in pairs]}
        columns = {k: as_texts(v, k)[0] for k, v in columns.items()}
    else:
        raise TypeError(f"{expected} (got {type(pairs).__name__}: {pairs!r:.80}).")
    columns.setdefault(F.DOC_TITLE, [""] * len(columns[F.QUERY]))
    sizes = {k: len(v) for k, v in columns.items()}
    if len(set(sizes.values())) != 1 or not columns[F.QUERY]:
        raise ValueError(f"pairs' columns must be non-empty and of one length (got {sizes}).")
    return tf.data.Dataset.from_tensor_slices(columns).batch(batch_size)
