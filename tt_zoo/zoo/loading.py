"""`tt_zoo.load(name_or_path)`: a pretrained two-tower model, ready to encode, index and fine-tune;
`tt_zoo.load_term_weighter(name_or_path)`: a term-weight model's document weighter.

A registered name is found through the catalogue (`tt_zoo.zoo.registry`, `tt_zoo.zoo.download`);
an export directory is read and verified by `tt_zoo.serving.export` (or
`tt_zoo.serving.term_weight_export`). `ZooModel` wraps the loaded Keras model; `TextIndex` is
its index over passages.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
from typing import List, Optional, Sequence, Union

import numpy as np

from tt_zoo import _keras_env

_keras_env.check_legacy_keras()  # before TensorFlow is imported below, with a clear message

from tt_zoo.atomic_io import write_directory, write_json  # noqa: E402
from tt_zoo.errors import ArtifactError, TtZooError  # noqa: E402
from tt_zoo.modeling.kinds import KINDS, LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER  # noqa: E402
from tt_zoo.modeling.models import as_documents  # noqa: E402
from tt_zoo.retrieval.search import Hit  # noqa: E402,F401  (TextIndex.search returns Hits)
from tt_zoo.serving import export as export_lib  # noqa: E402
from tt_zoo.serving.model_card import ModelCard  # noqa: E402
from tt_zoo.zoo import download, registry  # noqa: E402
from tt_zoo.zoo.registry import ModelSpec, get_spec  # noqa: E402

PASSAGES_FILE = "passages.jsonl"
TEXT_INDEX_FILE = "text_index.json"  # format and sha256 of the files beside embeddings/
TEXT_INDEX_FORMAT = "tt_zoo.TextIndex"
TEXT_INDEX_FORMAT_VERSION = 1  # none recorded: 1 (`tt_zoo.manifest.check_format_version`)


def _is_text_index(path: pathlib.Path) -> bool:
    return (path / TEXT_INDEX_FILE).is_file() or ((path / PASSAGES_FILE).is_file()
                                                  and (path / "embeddings").is_dir())


class TextIndex:
    """An index over passages encoded by a two-tower model; search with raw query strings.

    Built by `ZooModel.index`; the embedding search is `tt_zoo.retrieval.index.EmbeddingIndex` (ScaNN or
    brute force).
    """

    def __init__(self, model: "ZooModel", embedding_index, texts: Sequence[str],
                 titles: Sequence[str]):
        self.model = model
        self.embedding_index = embedding_index
        self.texts = list(texts)
        self.titles = list(titles)

    def __len__(self):
        return len(self.texts)

    def search(self, queries: Union[str, Sequence[str]], k: int = 10,
               **encode_options) -> Union[List[Hit], List[List[Hit]]]:
        """Top-k hits for each query string, best first: the
        `tt_zoo.retrieval.search.SearchResult` of `embedding_index` (a `Searcher`) for the
        encoded queries, seen as `Hit`s. A single string gives its one list of hits.
        `encode_options` go to `ZooModel.encode_queries` (`batch_size`, `show_progress_bar`)."""
        single = isinstance(queries, (str, bytes))
        embeddings = self.model.encode_queries([queries] if single else queries,
                                               **encode_options)
        hits = self.embedding_index.search(embeddings, k).hits(self.texts, self.titles)
        return hits[0] if single else hits

    def save(self, path, overwrite: bool = False) -> pathlib.Path:
        """Saves the embedding index (ScaNN's own serializer; ids in a plain file) and passages.

        `path` must be new, empty or an earlier saved TextIndex (replaced atomically); any other
        existing folder is refused (FileExistsError) unless `overwrite`.
        """
        from tt_zoo.manifest import describe_files

        def build(staging: pathlib.Path) -> None:
            self.embedding_index.save(staging / "embeddings", overwrite=True)
            with open(staging / PASSAGES_FILE, "w", encoding="utf-8") as f:
                for cid, title, text in zip(self.embedding_index.ids, self.titles, self.texts):
                    f.write(json.dumps({"id": cid, "title": title, "text": text}) + "\n")
            write_json(staging / TEXT_INDEX_FILE, {
                "format": TEXT_INDEX_FORMAT, "format_version": TEXT_INDEX_FORMAT_VERSION,
                "files": describe_files(staging, [PASSAGES_FILE])})

        return write_directory(path, build, overwrite=overwrite, is_replaceable=_is_text_index,
                               what="saved tt_zoo TextIndex")

    @classmethod
    def load(cls, path, model: "ZooModel") -> "TextIndex":
        """Loads a directory written by `save`, checking every file against its sha256."""
        from tt_zoo.retrieval.index import EmbeddingIndex, read_json
        from tt_zoo.manifest import check_format_version, verify_files
        path = pathlib.Path(path)
        manifest_path = path / TEXT_INDEX_FILE
        if not manifest_path.is_file():
            raise ArtifactError(f"{path} is not a saved TextIndex (or was saved by a tt_zoo "
                                f"without {TEXT_INDEX_FILE}; save it again): "
                                f"{manifest_path} is missing.")
        manifest = read_json(manifest_path)
        check_format_version(manifest.get("format_version"), TEXT_INDEX_FORMAT_VERSION,
                             listed_in=manifest_path, what=TEXT_INDEX_FORMAT)
        files = manifest.get("files")
        if manifest.get("format") != TEXT_INDEX_FORMAT or not isinstance(files, dict) or (
                PASSAGES_FILE not in files):
            raise ArtifactError(f"{manifest_path} is not a {TEXT_INDEX_FORMAT} manifest listing "
                                f"{PASSAGES_FILE}.")
        verify_files(path, files, listed_in=manifest_path)
        embedding_index = EmbeddingIndex.load(path / "embeddings")
        rows = []
        passages_path = path / PASSAGES_FILE
        with open(passages_path, encoding="utf-8") as f:
            try:
                for line in f:
                    row = json.loads(line)
                    rows.append((row["id"], row["title"], row["text"]))
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
                raise ArtifactError(f"{passages_path}: line {len(rows) + 1} is not a passage "
                                    f"record with id, title, text ({e!r}).") from e
        if [r[0] for r in rows] != list(embedding_index.ids):
            raise ArtifactError(f"{passages_path} does not match the ids of {path / 'embeddings'}.")
        return cls(model, embedding_index, [r[2] for r in rows], [r[1] for r in rows])


def optimizer_steps(keras_model) -> int:
    """Optimizer steps taken since the model was built or loaded (0 without an optimizer)."""
    optimizer = getattr(keras_model, "optimizer", None)
    return 0 if optimizer is None else int(optimizer.iterations.numpy())


class ZooModel:
    """A loaded two-tower model: encoders, indexing, and the Keras model for fine-tuning.

    Attributes:
      keras_model: the `tt_zoo.modeling.models.TwoTowerModel` (compile and `fit` it as usual).
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
    def card(self) -> ModelCard:
        """The metadata as a `tt_zoo.serving.model_card.ModelCard`."""
        return ModelCard.from_dict(self.metadata)

    @property
    def name(self) -> str:
        name = self.spec.name if self.spec else self.card.name
        return str(self.path) if name is None else name

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
        texts = self._with_task_marker(texts, task_class)
        return self.keras_model.encode_queries(texts, batch_size=batch_size,
                                               show_progress_bar=show_progress_bar, **options)

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
        return self.keras_model.encode_documents(texts, titles=titles, batch_size=batch_size,
                                                 show_progress_bar=show_progress_bar, **options)

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
        default to "0", "1", ...; a single passage string (with a single title and id) indexes
        that one passage. `batch_size` and `show_progress_bar` go to `encode_documents`;
        `embeddings` skips the encoding when the passages' embeddings are already at hand.
        """
        from tt_zoo.retrieval.index import EmbeddingIndex
        single = isinstance(passages, (str, bytes))
        passages, titles, _ = as_documents(passages, titles)
        if isinstance(ids, (str, bytes)) and not single:
            raise TypeError(f"ids must be a sequence of ids, not a single string ({ids!r}).")
        ids = [str(i) for i in range(len(passages))] if ids is None else (
            [str(ids)] if single and isinstance(ids, (str, bytes)) else [str(i) for i in ids])
        if embeddings is None:
            embeddings = self.encode_documents(passages, titles=titles, batch_size=batch_size,
                                               show_progress_bar=show_progress_bar)
        return TextIndex(self, EmbeddingIndex(embeddings, ids, backend=backend), passages, titles)

    def load_index(self, path) -> TextIndex:
        return TextIndex.load(path, self)

    # Keras conveniences: the loaded object fine-tunes like the Keras model it wraps.
    def compile(self, *args, **kwargs):
        return self.keras_model.compile(*args, **kwargs)

    def fit(self, *args, **kwargs):
        return self.keras_model.fit(*args, **kwargs)

    def export(self, path, metadata: Optional[dict] = None, overwrite: bool = False) -> dict:
        """Writes a serving SavedModel (see `tt_zoo.serving.export.export_saved_model`).

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
            card = self.card.fine_tuned(
                name=f"{self.name}_finetuned", base_name=self.name,
                base_path=str(self.path) if self.path else None, steps=steps,
                finished=datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"))
        meta = {**card.to_dict(), **(metadata or {})}
        return export_lib.export_saved_model(self.keras_model, path, meta, overwrite=overwrite)


def find_artifact(name_or_path, kinds: Sequence[str] = KINDS):
    """``(path, spec)`` of a registered name or an export directory (spec None for a path):
    the one way `load` and `load_term_weighter` find an artifact.

    A shipped name is looked for in the git clone's saved_models/, then in the cache
    (``$TT_ZOO_HOME/models/``, default ``~/.cache/tt_zoo``), else downloaded into the cache from
    ``$TT_ZOO_BASE_URL`` or the registry's URL, sha256-verified (`tt_zoo.zoo.download`; no
    release is published yet: the weights ship in the git clone). A name of a kind
    (`tt_zoo.modeling.kinds.KINDS`) not in `kinds` raises `TtZooError` naming its loader.

    Raises:
      KeyError: an unknown name (listing close matches).
      FileNotFoundError: a registered name whose weights are not shipped (with the recipe
        command that trains it).
      ArtifactError: a path that is not a directory (a file is named as one) or does not exist.
    """
    path = pathlib.Path(os.fspath(name_or_path))
    if path.is_dir():
        return path, None
    given = str(name_or_path)
    if (path.exists() and given not in registry.REGISTRY) or os.sep in given \
            or given.startswith("."):
        raise export_lib.not_an_export_directory(path)
    spec = get_spec(str(name_or_path))
    if spec.kind not in kinds:
        raise TtZooError(_wrong_kind(spec.name, spec.kind))
    if spec.imported is not None:
        from tt_zoo.zoo import imported
        return imported.locate(spec), spec
    if not spec.shipped:
        raise FileNotFoundError(
            f"{spec.name!r} is registered but its weights are not shipped in saved_models/. "
            f"Train it with:\n  {spec.recipe_command()}\nthen load the exported directory "
            "by path.")
    return download.locate(spec), spec


def _wrong_kind(what, kind: str) -> str:
    loader = "tt_zoo.load_term_weighter" if kind == TERM_WEIGHTS else "tt_zoo.load"
    return f"{what} is a {kind.replace('_', '-')} model: load it with {loader}."


def _verified(path: pathlib.Path, spec: Optional[ModelSpec], verify) -> object:
    """`verify(path, expected_sha256)`, with a hint to delete a damaged copy in the cache."""
    try:
        return verify(path, spec.sha256 if spec else None)
    except ArtifactError as e:
        if spec is not None and download.in_cache(path):
            raise ArtifactError(f"{e} (This copy is in tt_zoo's cache: delete {path} and load "
                                f"{spec.name!r} again to download it anew.)") from e
        raise


def load(name_or_path) -> ZooModel:
    """Loads a registered model by name (e.g. "ict_bfs_wlp_512") or an export directory by path:
    a two-tower or a late-interaction (ColBERT, ``colbert_*``) model. Term-weight models
    (``hdct_*``) load with `load_term_weighter`.

    A shipped name is found as `find_artifact` says (the clone, the cache, else a verified
    download). A registered name whose weights are not shipped raises FileNotFoundError with
    the recipe command that trains it; an unknown name raises KeyError listing close matches;
    a corrupted or truncated directory raises `ArtifactError` (sha256 checked against the
    registry); a download that cannot reach its URL raises `DownloadError` naming the URL and
    the folder where the files may be placed by hand.
    """
    path, spec = find_artifact(name_or_path, kinds=(TWO_TOWER, LATE_INTERACTION))
    metadata = _verified(path, spec, export_lib.verify_export)
    if ModelCard.from_dict(metadata).artifact_kind == TERM_WEIGHTS:
        raise TtZooError(_wrong_kind(str(path), TERM_WEIGHTS))
    keras_model = export_lib.load_keras_model(path)
    return ZooModel(keras_model, spec=spec, path=path, metadata=metadata)


def load_term_weighter(name_or_path, **options):
    """A `tt_zoo.retrieval.term_weighting.TermWeighter` of a term-weight model (HDCT, Dai &
    Callan, WWW 2020, Sec. 3): a registered ``hdct_*`` name or a term-weight export directory
    (`tt-zoo train-term-weights`), found and sha256-verified as `load` does (the clone, the
    cache, else a download). `options` go to `TermWeighter` (max_windows, batch_size, ...).

    Example:
    >>> weighter = tt_zoo.load_term_weighter("hdct_ict_bfs_wlp_crop_span_qgen")  # doctest: +SKIP
    >>> weighter.weigh(["Penicillin"], ["Fleming found it."])[0].weights  # doctest: +SKIP

    Raises as `load` does; `TtZooError` for a two-tower or late-interaction name, and
    `ArtifactError` for a directory that is not a term-weight export.
    """
    from tt_zoo.serving import term_weight_export

    path, spec = find_artifact(name_or_path, kinds=(TERM_WEIGHTS,))
    return _verified(path, spec, lambda p, sha: term_weight_export.load_term_weighter(
        p, sha, **options))
