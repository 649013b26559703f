"""`tt_zoo.load(name_or_path)`: a pretrained model, ready to encode, index and fine-tune;
`tt_zoo.load_term_weighter(name_or_path)`: a term-weight model's document weighter.

A registered name is found through the catalogue (`tt_zoo.zoo.registry`, `tt_zoo.artifacts.download`);
an export directory is read and verified by `tt_zoo.artifacts.export` (or
`tt_zoo.artifacts.term_weight_export`). What `load` gives: a `ZooModel` (a two-tower export; it
and its `TextIndex` are `tt_zoo.zoo.zoo_model`'s) or, for the other kinds, a model of
`tt_zoo.zoo.kind_models`.
"""

from __future__ import annotations

import pathlib
from typing import Optional, Sequence

from tt_zoo import _keras_env

_keras_env.check_legacy_keras()  # before TensorFlow is imported below, with a clear message

from tt_zoo.arguments import as_path  # noqa: E402
from tt_zoo.atomic_io import recover_replaced  # noqa: E402
from tt_zoo.errors import ArtifactError, TtZooError  # noqa: E402
from tt_zoo.modeling.kinds import KINDS, LATE_INTERACTION, TERM_WEIGHTS  # noqa: E402
from tt_zoo.artifacts import export as export_lib, float16_storage  # noqa: E402
from tt_zoo.artifacts.model_card import ModelCard  # noqa: E402
from tt_zoo.artifacts import download  # noqa: E402
from tt_zoo.zoo import registry  # noqa: E402
from tt_zoo.zoo.registry import get_spec  # noqa: E402
# What `load` gives for a two-tower export, and its index (`TextIndex`: named here, as before).
from tt_zoo.zoo.zoo_model import TextIndex, ZooModel  # noqa: E402,F401


def find_artifact(name_or_path, kinds: Sequence[str] = KINDS):
    """``(path, spec)`` of a registered name or an export directory (spec None for a path):
    the one way `load` and `load_term_weighter` find an artifact.

    A shipped name is looked for in the git clone's saved_models/, then in the cache
    (``$TT_ZOO_HOME/models/``, default ``~/.cache/tt_zoo``), else downloaded into the cache from
    ``$TT_ZOO_BASE_URL`` or the registry's URL, sha256-verified (`tt_zoo.artifacts.download`; no
    release is published yet: the weights ship in the git clone). An artifact whose weights are
    stored in float16 gives the path of its float32 copy in the cache (`loadable`). A name of a
    kind (`tt_zoo.modeling.kinds.KINDS`) not in `kinds` raises `TtZooError` naming its loader.

    Raises:
      UnknownModelError: (a KeyError) an unknown or empty name (suggesting close matches).
      FileNotFoundError: a registered name whose weights are not shipped (with the recipe
        command that trains it).
      ArtifactError: a path that is not a directory (a file is named as one) or does not exist.
    """
    path, spec = locate_artifact(name_or_path, kinds)
    return loadable(path, spec.sha256 if spec is not None else None), spec


def locate_artifact(name_or_path, kinds: Sequence[str] = KINDS):
    """``(path, spec)`` of a registered name or an export directory as `find_artifact` finds
    it, but as stored: a float16 artifact's own folder, not yet made loadable."""
    if isinstance(name_or_path, str) and not name_or_path.strip():
        raise registry.UnknownModelError(registry.unknown_model_message(name_or_path))
    path = as_path(name_or_path, "name_or_path")
    recover_replaced(path)  # a replace killed between its renames: the old version is back
    if path.is_dir():
        return path, None
    if registry.looks_like_path(str(name_or_path)):
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


def loadable(path, expected_sha256: Optional[str] = None) -> pathlib.Path:
    """What the loader reads of the artifact found at `path` (`float16_storage.loadable`: the
    folder itself, or a float16 artifact's float32 copy), with the folder of the model it
    shares arrays with (`_base_of`)."""
    return float16_storage.loadable(path, expected_sha256, base=_base_of(path))


def open_artifact(name_or_path, kinds: Sequence[str] = KINDS):
    """``(path, spec, metadata)``: the artifact found as `find_artifact` finds it, verified
    once (`float16_storage.open_export`: against the registry's sha256 for a name; a float16
    artifact materialised into its float32 copy, which is the path), as `load` reads it.
    Raises as `find_artifact` does, and `ArtifactError` for a damaged artifact (naming the
    copy in the cache to delete, if it is one)."""
    path, spec = locate_artifact(name_or_path, kinds)
    base = _base_of(path)
    try:
        found, metadata = float16_storage.open_export(
            path, spec.sha256 if spec is not None else None, base=base)
    except ArtifactError as e:
        if spec is None or not download.in_cache(path):
            raise
        raise ArtifactError(f"{e} (This copy is in tt_zoo's cache: delete {path} and load "
                            f"{spec.name!r} again to download it anew.)") from e
    return found, spec, metadata


def _base_of(path) -> Optional[pathlib.Path]:
    """The folder of the model whose arrays the float16 artifact at `path` reads
    (`float16_storage.shared_from`), found as any artifact is; None for any other export."""
    shared_from = float16_storage.shared_from(path)
    return locate_artifact(shared_from)[0] if shared_from is not None else None


def _wrong_kind(what, kind: str) -> str:
    loader = "tt_zoo.load_term_weighter" if kind == TERM_WEIGHTS else "tt_zoo.load"
    return f"{what} is a {kind.replace('_', '-')} model: load it with {loader}."


def load(name_or_path) -> ZooModel:
    """Loads a registered model by name (e.g. "ict_bfs_wlp_512") or an export directory by path:
    a two-tower model (`ZooModel`), a late-interaction one (ColBERT, ``colbert_*``:
    `tt_zoo.zoo.kind_models.LateInteractionZooModel`) or a term-weight one (HDCT, ``hdct_*``:
    `tt_zoo.zoo.kind_models.TermWeightZooModel`, whose ``weighter`` is `load_term_weighter`'s).
    Each one's ``index(passages, titles=...)`` is a `tt_zoo.retrieval.search.TextSearcher`.

    A shipped name is found as `find_artifact` says (the clone, the cache, else a verified
    download). A registered name whose weights are not shipped raises FileNotFoundError with
    the recipe command that trains it; an unknown name raises `tt_zoo.UnknownModelError` (a
    KeyError) suggesting close matches;
    a corrupted or truncated directory raises `ArtifactError` (sha256 checked against the
    registry); a download that cannot reach its URL raises `DownloadError` naming the URL and
    the folder where the files may be placed by hand.
    """
    from tt_zoo.zoo import kind_models

    path, spec, metadata = open_artifact(name_or_path)
    kind = ModelCard.from_dict(metadata).artifact_kind
    if kind == TERM_WEIGHTS:
        from tt_zoo.artifacts import term_weight_export
        weighter = term_weight_export.load_term_weighter(path, metadata=metadata)
        return kind_models.TermWeightZooModel(weighter, spec=spec, path=path, metadata=metadata)
    keras_model = export_lib.load_keras_model(path)
    export_lib.check_card_matches_model(path, metadata, keras_model)
    wrapper = kind_models.LateInteractionZooModel if kind == LATE_INTERACTION else ZooModel
    return wrapper(keras_model, spec=spec, path=path, metadata=metadata)


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
    from tt_zoo.artifacts import term_weight_export

    path, _, metadata = open_artifact(name_or_path, kinds=(TERM_WEIGHTS,))
    return term_weight_export.load_term_weighter(path, metadata=metadata, **options)


def load_index(path, model=None):
    """The index saved at folder `path`, of any kind, ready to search with query text
    (``search(query, k) -> [Hit]``, ``search_batch(queries, k) -> [[Hit]]``), with no passage
    encoded again: a two-tower model's (``model.index(...).save(path)``, ``tt-zoo export
    --index-output``, ``tt-zoo index``), a ColBERT or HDCT model's, BM25's or a fusion of two.

    The model that built it is loaded by what the index records (its registered name or its
    export's path) unless `model` (a loaded model, or a name or path) is given; either way its
    weights are checked against the ones that encoded the passages.

    Example:
    >>> index = tt_zoo.load_index("runs/index/squad_sample")  # doctest: +SKIP
    >>> index.search("who discovered penicillin?", k=3)  # doctest: +SKIP

    Raises:
      ArtifactError: not a saved index, a changed file, or a model other than the one that built
        it; an index that does not record how to load its model (pass `model`).
    """
    from tt_zoo.retrieval import passage_index as passage_lib
    from tt_zoo.zoo.zoo_model import TEXT_INDEX_FILE

    root = as_path(path, "path")
    recover_replaced(root)
    models = {}

    def model_for(record, listed_in):
        if model is not None:
            if not isinstance(model, (str, pathlib.Path)):
                return model
            if str(model) not in models:  # a name or path: loaded once
                models[str(model)] = load(model)
            return models[str(model)]
        source = record.get("source") if isinstance(record, dict) else None
        if source is None and isinstance(record, dict) and registry.registered_name(
                str(record.get("name"))):
            source = record["name"]  # an index saved before sources were recorded
        if source is None:
            raise ArtifactError(f"{listed_in} does not record where its model loads from "
                                f"(recorded: {record!r}): pass model=NAME_OR_PATH.")
        if source not in models:
            models[source] = load(source)
        return models[source]

    def load_folder(folder: pathlib.Path):
        if (folder / TEXT_INDEX_FILE).is_file():
            from tt_zoo.retrieval.index import read_json
            listed_in = folder / TEXT_INDEX_FILE
            return TextIndex.load(folder, model_for(read_json(listed_in).get("model"), listed_in))
        if not (folder / passage_lib.PASSAGE_INDEX_FILE).is_file():
            raise ArtifactError(f"{folder} is not a saved tt_zoo index (it holds neither "
                                f"{TEXT_INDEX_FILE} nor {passage_lib.PASSAGE_INDEX_FILE}).")
        manifest = passage_lib.read_passage_index(folder)[0]
        kind = manifest["settings"].get("kind")
        if kind == "bm25":
            return passage_lib.load_bm25_index(folder)
        if kind == "fusion":
            first, second = (load_folder(folder / part) for part in passage_lib.FUSION_PARTS)
            return passage_lib.fuse(first, second,
                                    **passage_lib.fusion_options(manifest["settings"]))
        listed_in = folder / passage_lib.PASSAGE_INDEX_FILE
        return model_for(manifest.get("model"), listed_in).load_index(folder)

    if not root.is_dir():
        raise ArtifactError(f"{root} is not a folder holding a saved tt_zoo index.")
    return load_folder(root)
