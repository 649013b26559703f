"""Serving export: a SavedModel with raw-string signatures, plus metadata and a model card.

The SavedModel holds the tokenizer in the graph (tensorflow-text ops only, no Python), so stock
TF Serving serves it. Signatures:

- ``encode_query``: ``query`` tf.string [batch] -> ``embedding`` float32 [batch, dim].
- ``encode_document``: ``title`` (title or sentence), ``passage`` tf.string [batch] ->
  ``embedding`` [batch, dim] (titles and passages of other counts: InvalidArgument).
- The ReQA convention (Ahmad et al. 2019), so the ReQA evaluation tool scores a tt_zoo model
  unchanged: ``query_encoder`` and ``response_encoder`` each take ``examples``, serialized
  `tf.train.Example` strings [batch] with bytes features ``inp_text``, ``inp_context`` (query
  side; the query tower encodes ``inp_text``, as SQuAD questions have no context) or
  ``res_text``, ``res_context`` (response side: the sentence and its passage), and return
  ``{"outputs": [batch, dim]}``.

A late-interaction (ColBERT) model (`tt_zoo.modeling.late_interaction_model`) exports token
vectors instead:

- ``encode_query_tokens``: ``query`` tf.string [batch] -> ``token_vectors`` float32
  [batch, length, m] and ``mask`` int32 [batch, length] (1 on the tokens MaxSim scores; with
  [MASK] augmentation every position of the fixed query length).
- ``encode_document_tokens``: ``title``, ``passage`` -> ``token_vectors``, ``mask`` (padding and
  punctuation 0); ``serving_default`` = ``encode_query_tokens``.

Each signature runs the towers on its request batch padded only to the batch's longest text
(`tt_zoo.modeling.inference.cut_to_longest`; padding is masked, so the embeddings are those of
the full length).

Beside it: ``config.json`` (the Keras config with the vocabulary, so `tt_zoo.load` rebuilds the
trainable model from the SavedModel's own variables), ``metadata.json`` (with the file manifest
and the layout's ``format_version``, `FORMAT_VERSION`, which `verify_export` compares) and
``MODEL_CARD.md``, both written and read through `tt_zoo.artifacts.model_card.ModelCard` (the card
rendered by `tt_zoo.artifacts.card_rendering.render_card`).

metadata.json holds the manifest, so it is not in it; what of it changes what the model
computes is pinned by files that are: the keys only the card records (task markers, a compact
artifact's float16 ``storage`` with the arrays it shares, `BEHAVIOUR_KEYS`) are copied into
``behaviour.json`` and must agree with it; the kind must be the one config.json's model class is
(`check_kind`); and the facts the weights determine (dimension, token budgets, vocabulary size,
scoring) must agree with the model config.json rebuilds (`check_card_matches_model`). An edited
card is refused, not obeyed.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from tt_zoo._version import __version__
from tt_zoo.atomic_io import (json_text, recover_replaced, write_directory, write_json,
                              write_text)
from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.manifest import check_format_version, describe_files, manifest_digest, verify_files
from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER
from tt_zoo.modeling.late_interaction_model import LateInteractionModel
from tt_zoo.modeling.models import TwoTowerModel
from tt_zoo.modeling.pair_model import PairModel
from tt_zoo.artifacts.card_rendering import render_card
from tt_zoo.artifacts.model_card import (DEFAULT_SIGNATURE, MAXSIM, METADATA_FILE,
                                       MODEL_CARD_FILE, LateInteractionSettings, ModelCard)

CONFIG_FILE = "config.json"  # the Keras config: `tt_zoo.load` rebuilds the model from it
MANIFEST_EXCLUDES = (METADATA_FILE, MODEL_CARD_FILE)
# The keys of metadata.json that change what a loaded model computes and that nothing else in
# the export records: copied into BEHAVIOUR_FILE, which the file manifest covers, and checked
# against it on load (`check_behaviour`). An export without the file records none of them.
# ``storage`` counts when it describes a compact float16 artifact (`COMPACT_WEIGHTS`: which
# arrays it reads from which shipped model, `tt_zoo.artifacts.float16_storage`); the record of a
# float32 copy materialised from one is provenance (its weights are its own variables/).
BEHAVIOUR_KEYS = ("task_markers", "default_task_class", "storage")
BEHAVIOUR_FILE = "behaviour.json"
COMPACT_WEIGHTS = "float16"  # `Storage.weights` of a compact artifact
FLOAT16_DIR = "variables_float16"  # a compact artifact's weights, in place of variables/
# The model class config.json rebuilds, by the kind an export's card states (`check_kind`).
KIND_CLASSES = {TWO_TOWER: "TwoTowerModel", LATE_INTERACTION: "LateInteractionModel",
                TERM_WEIGHTS: "TermWeightModel"}
DOCUMENT_SIGNATURE = "encode_document"
SIGNATURES = ("encode_query", DOCUMENT_SIGNATURE, "query_encoder", "response_encoder")
# A late-interaction model's signatures (token vectors and their mask).
TOKEN_SIGNATURES = ("encode_query_tokens", "encode_document_tokens")
# A term-weight model's one signature (`tt_zoo.artifacts.term_weight_export`).
TERM_WEIGHT_SIGNATURE = "term_weights"
# The layout of an export (this module's and `tt_zoo.artifacts.term_weight_export`'s), recorded in
# metadata.json as "format_version"; an export without one is format 1. Raise it when a later
# tt_zoo changes the layout, so older readers refuse the new exports instead of misreading them.
# 1: SavedModel, config.json, metadata.json with its file manifest, card. (Exports made before
# 2026-11-28 also hold assets/vocab.txt, a plain copy of the vocabulary that config.json and the
# graph already carry; no reader uses it, and the manifest covers it where it is.)
FORMAT_VERSION = 1
FORMAT_NAME = "tt_zoo model export"  # how the format is named in errors


def check_same_rows(signature: str, title, passage) -> None:
    """In a document signature: an InvalidArgument error unless `title` and `passage` hold as
    many rows (one title a passage; "" for none), which the request then gets, not the
    shorter count."""
    tf.debugging.assert_equal(
        tf.size(title), tf.size(passage),
        message=f"{signature}: title and passage must hold as many rows (one title, or \"\", a "
                "passage)")


class _ServingModule(tf.Module):
    """The SavedModel root: the Keras model under `model`, and the four signatures."""

    def __init__(self, model: TwoTowerModel):
        super().__init__()
        self.model = model

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="query")])
    def encode_query(self, query):
        return {"embedding": self.model.embed_queries(query, training=False, cut_padding=True)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="title"),
                                  tf.TensorSpec([None], tf.string, name="passage")])
    def encode_document(self, title, passage):
        check_same_rows(DOCUMENT_SIGNATURE, title, passage)
        return {"embedding": self.model.embed_documents(title, passage, training=False,
                                                      cut_padding=True)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def query_encoder(self, examples):
        parsed = _parse_examples(examples, ("inp_text", "inp_context"))
        return {"outputs": self.model.embed_queries(parsed["inp_text"], training=False,
                                                    cut_padding=True)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def response_encoder(self, examples):
        parsed = _parse_examples(examples, ("res_text", "res_context"))
        return {"outputs": self.model.embed_documents(parsed["res_text"], parsed["res_context"],
                                                      training=False, cut_padding=True)}


class _TokenServingModule(tf.Module):
    """The SavedModel root of a `LateInteractionModel`: the Keras model and two signatures."""

    def __init__(self, model: LateInteractionModel):
        super().__init__()
        self.model = model

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="query")])
    def encode_query_tokens(self, query):
        return self.model.embed_queries(query, training=False, cut_padding=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="title"),
                                  tf.TensorSpec([None], tf.string, name="passage")])
    def encode_document_tokens(self, title, passage):
        check_same_rows(TOKEN_SIGNATURES[1], title, passage)
        return self.model.embed_documents(title, passage, training=False, cut_padding=True)


def serving_signatures(model: PairModel) -> tuple:
    """(module, {signature name: function}) of the SavedModel a model exports to: token
    signatures for a `LateInteractionModel`, single-vector ones for a `TwoTowerModel`."""
    if isinstance(model, LateInteractionModel):
        module, names = _TokenServingModule(model), TOKEN_SIGNATURES
    else:
        module, names = _ServingModule(model), SIGNATURES
    functions = {name: getattr(module, name) for name in names}
    return module, {DEFAULT_SIGNATURE: functions[names[0]], **functions}


class QueryEncoder(tf.Module):
    """The query tower as a trackable callable: tf.string [batch] -> float32 [batch, dim].

    Pass it where a serving graph needs phi(q) with its variables tracked (e.g.
    `tt_zoo.serving.retrieve.export_retrieval_model`).
    """

    def __init__(self, model: TwoTowerModel):
        super().__init__(name="query_encoder")
        self.model = model

    def __call__(self, queries):
        return self.model.embed_queries(queries, training=False, cut_padding=True)


def _parse_examples(examples, keys):
    spec = {k: tf.io.FixedLenFeature([], tf.string, default_value="") for k in keys}
    return tf.io.parse_example(examples, spec)


def serialize_reqa_examples(texts, contexts, prefix: str) -> list:
    """Builds serialized tf.train.Examples with `{prefix}_text` / `{prefix}_context` features."""
    out = []
    for text, context in zip(texts, contexts):
        feature = {f"{prefix}_text": _bytes_feature(text),
                   f"{prefix}_context": _bytes_feature(context)}
        out.append(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())
    return out


def _bytes_feature(value):
    value = value.encode("utf-8") if isinstance(value, str) else value
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def count_parameters(model: PairModel) -> int:
    variables = {id(v): v for v in model.trainable_variables}
    return int(sum(v.shape.num_elements() for v in variables.values()))


def library_versions() -> dict:
    import tensorflow_recommenders as tfrs
    import tensorflow_text
    return {"tt_zoo": __version__, "tensorflow": tf.__version__,
            "tensorflow_text": tensorflow_text.__version__, "tensorflow_recommenders":
            tfrs.__version__}


def _without_keras_traces():
    """Saves only our signatures and the variables, not Keras' per-layer call traces.

    `tt_zoo.load` rebuilds the Keras model from config.json and serving uses the signatures, so
    the traces (half of saved_model.pb, and most of the export time) serve nothing. tf-keras
    exposes the switch only as a private context manager; without it, the export keeps them.
    """
    try:
        from tf_keras.src.saving.legacy.saved_model import utils as keras_saved_model_utils
    except ImportError:  # Another Keras 2 layout: keep the traces.
        import contextlib
        return contextlib.nullcontext()
    return keras_saved_model_utils.keras_option_scope(save_traces=False,
                                                      in_tf_saved_model_scope=True)


def is_model_export(path) -> bool:
    """Whether `path` holds a tt_zoo model export (which a new export may replace)."""
    return all(tf.io.gfile.exists(os.path.join(str(path), name))
               for name in (METADATA_FILE, CONFIG_FILE, "saved_model.pb"))


def export_saved_model(model: PairModel, path, metadata: Optional[dict] = None, *,
                       overwrite: bool = False) -> dict:
    """Exports a model for serving, atomically (built in a temp dir, then renamed; to a URL such
    as gs://, uploaded with metadata.json last: `tt_zoo.atomic_io.write_directory`).

    Args:
      model: a built `TwoTowerModel` or `LateInteractionModel` (a `PairModel`).
      path: the export directory: new, empty, or an earlier tt_zoo export (replaced); any
        other existing folder is refused (FileExistsError) unless `overwrite`.
      metadata: extra fields for metadata.json (name, training data, steps, metrics, ...).
      overwrite: replace whatever is at `path`.

    Returns:
      the metadata written, including the artifact's file manifest and its sha256
      (`tt_zoo.manifest`).

    Raises:
      TtZooError: a `metadata` value of the wrong type (`ModelCard`), or task markers the
        loader would refuse (`check_markers`), before anything is written.
    """
    card = ModelCard.from_dict(metadata or {})
    check_markers(card.architecture.task_markers, card.architecture.default_task_class,
                  f"the metadata of export {path}")

    def fill(staging: pathlib.Path) -> None:
        serving_model = _inference_copy(model)
        module, signatures = serving_signatures(serving_model)
        with _without_keras_traces():
            tf.saved_model.save(module, str(staging), signatures=signatures)
        with open(staging / CONFIG_FILE, "w", encoding="utf-8") as f:
            json.dump(serving_model.artifact_config(), f, allow_nan=False)
        # What these weights are (derived here) overrides anything passed in `metadata`.
        arch = card.architecture
        arch.embedding_dim = serving_model.embedding_dim
        arch.parameters = count_parameters(serving_model)
        arch.query_length = serving_model.query_preprocessor.seq_length
        arch.document_length = serving_model.document_preprocessor.seq_length
        arch.vocab_size = serving_model.query_preprocessor.vocab_size
        arch.signatures = list(signatures)
        if isinstance(serving_model, LateInteractionModel):
            arch.scoring = MAXSIM
            arch.late_interaction = late_interaction_settings(serving_model)

    return write_export(path, card, fill, overwrite=overwrite, is_replaceable=is_model_export,
                        what="tt_zoo model export")


def write_export(path, card: ModelCard, fill: Callable[[pathlib.Path], None], *,
                 overwrite: bool, is_replaceable: Callable, what: str) -> dict:
    """Writes an export (this module's, `tt_zoo.artifacts.term_weight_export`'s) atomically: built
    in a temp folder, then renamed; to a URL such as gs://, uploaded with metadata.json last
    (`tt_zoo.atomic_io.write_directory`). `fill(staging)` saves the model's files and sets the
    fields of `card` they decide; then come behaviour.json (`write_behaviour`), the provenance
    (`stamp_provenance`), metadata.json and the card. Returns the metadata written."""
    meta = {}

    def build(staging: pathlib.Path) -> None:
        fill(staging)
        write_behaviour(card, staging)
        stamp_provenance(card, staging)
        meta.update(card.to_dict())
        write_metadata_and_card(staging, meta)

    write_directory(path, build, overwrite=overwrite, is_replaceable=is_replaceable, what=what,
                    last=(METADATA_FILE,))
    return meta


def behaviour_of(metadata: dict) -> dict:
    """The `BEHAVIOUR_KEYS` a card's metadata sets (None counts as not set; ``storage`` only a
    compact artifact's)."""
    values = {key: metadata[key] for key in BEHAVIOUR_KEYS if metadata.get(key) is not None}
    storage = values.get("storage")
    if isinstance(storage, dict) and storage.get("weights") != COMPACT_WEIGHTS:
        del values["storage"]
    return values


def write_behaviour(card: ModelCard, staging: pathlib.Path) -> None:
    """Writes `BEHAVIOUR_FILE` into an export being built when its card sets a behaviour key,
    else removes one copied in (before the manifest is taken, so the manifest covers it)."""
    values = behaviour_of(card.to_dict())
    if values:
        write_json(staging / BEHAVIOUR_FILE, values, indent=2, sort_keys=True)
    elif (staging / BEHAVIOUR_FILE).is_file():
        (staging / BEHAVIOUR_FILE).unlink()


def check_markers(markers, default, where) -> None:
    """Raises `TtZooError` naming `where` unless `markers` (task class -> marker word) and the
    `default` class are what a loader takes: both None, or a mapping of each class to one
    word with `default` one of its classes. `export_saved_model` checks before it writes,
    `check_behaviour` when it loads."""
    if markers is not None and (not isinstance(markers, dict) or not markers or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() and len(v.split()) == 1
            for k, v in markers.items())):
        raise TtZooError(f"{where}: task_markers must map each task class to one marker word "
                         f"(got {markers!r}).")
    if (markers is None) != (default is None) or (markers and default not in markers):
        raise TtZooError(f"{where}: default_task_class {default!r} must be one of the classes "
                         f"of task_markers ({sorted(markers or {})}).")


def _short(values: dict) -> str:
    """`values` for a message: each value's repr cut to 120 characters."""
    return "{" + ", ".join(f"{k!r}: {repr(v)[:120]}" for k, v in sorted(values.items())) + "}"


def check_behaviour(path: pathlib.Path, metadata: dict, files: dict) -> None:
    """Raises `ArtifactError` unless metadata.json's `BEHAVIOUR_KEYS` are what `BEHAVIOUR_FILE`
    (in the file manifest `files`, already verified) records, and are well formed: markers a
    {task class: one word} mapping, the default class one of its classes."""
    meta_path = path / METADATA_FILE
    pinned = {}
    if BEHAVIOUR_FILE in files:
        try:
            pinned = json.loads((path / BEHAVIOUR_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ArtifactError(f"{path / BEHAVIOUR_FILE} cannot be read ({e}).") from e
    recorded = behaviour_of(metadata)
    if recorded != pinned:
        keys = sorted(k for k in set(recorded) | set(pinned) if recorded.get(k) != pinned.get(k))
        differ = {k: recorded[k] for k in keys if k in recorded}
        written = {k: pinned[k] for k in keys if k in pinned}
        raise ArtifactError(
            f"{meta_path}: {', '.join(keys)} {_short(differ) if differ else 'absent'} differ "
            f"from what the export was written with ({BEHAVIOUR_FILE}, covered by the file "
            f"manifest: {_short(written) if written else 'none'}); metadata.json was edited "
            "after the export, and these keys change the model's embeddings. Restore "
            "metadata.json, or export the model again.")
    try:
        check_markers(recorded.get("task_markers"), recorded.get("default_task_class"),
                      meta_path)
    except TtZooError as e:
        raise ArtifactError(str(e)) from None


def check_kind(path: pathlib.Path, metadata: dict, files: dict) -> None:
    """Raises `ArtifactError` naming metadata.json when the kind its card states (``kind``,
    ``scoring``: `ModelCard.artifact_kind`) is not the kind of the model class config.json (in
    the file manifest `files`, already verified) rebuilds: how an export loads follows its
    kind, and config.json pins it."""
    if CONFIG_FILE not in files:
        return
    try:
        config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the loader names what is wrong with config.json
    model_class = config.get("class_name") if isinstance(config, dict) else None
    kind = ModelCard.from_dict(metadata).artifact_kind
    if model_class in KIND_CLASSES.values() and KIND_CLASSES.get(kind) != model_class:
        raise ArtifactError(
            f"{path / METADATA_FILE} says the export is a {kind} model (kind "
            f"{metadata.get('kind')!r}, scoring {metadata.get('scoring')!r}), but "
            f"{path / CONFIG_FILE} (covered by the file manifest) rebuilds a {model_class}: the "
            "card was edited after the export. Restore metadata.json, or export the model "
            "again.")


def check_card_matches_model(path, metadata: dict, model) -> None:
    """Raises `ArtifactError` naming metadata.json when a fact the card states about the weights
    (embedding dimension, token budgets, vocabulary size, two-tower or late interaction)
    differs from the model config.json rebuilt (`load_keras_model`): the card was edited."""
    card = ModelCard.from_dict(metadata)
    arch = card.architecture
    actual = {"embedding_dim": model.embedding_dim,
              "query_length": model.query_preprocessor.seq_length,
              "document_length": model.document_preprocessor.seq_length,
              "vocab_size": model.query_preprocessor.vocab_size}
    differ = [f"{key} {getattr(arch, key)} (the model: {value})" for key, value in actual.items()
              if getattr(arch, key) is not None and getattr(arch, key) != value]
    late = isinstance(model, LateInteractionModel)
    if (card.architecture.scoring == MAXSIM) != late:
        differ.append(f"scoring {card.architecture.scoring!r} (the model: "
                      f"{'late interaction' if late else 'one vector a text'})")
    if differ:
        raise ArtifactError(f"{pathlib.Path(path) / METADATA_FILE} says {'; '.join(differ)} "
                            f"as rebuilt from {CONFIG_FILE}: the card was edited after the "
                            "export. Restore metadata.json, or export the model again.")


def stamp_provenance(card: ModelCard, staging: pathlib.Path) -> None:
    """Sets what every export stamps on its card (this module's and
    `tt_zoo.artifacts.term_weight_export`'s): the layout's version, the library versions, the
    date, and the manifest of the files in `staging` with its sha256 (`tt_zoo.manifest`)."""
    provenance = card.provenance
    provenance.format_version = FORMAT_VERSION
    provenance.versions = library_versions()
    provenance.exported = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds")
    provenance.files = describe_files(staging, skip=MANIFEST_EXCLUDES)
    provenance.sha256 = manifest_digest(provenance.files)


def late_interaction_settings(model: LateInteractionModel) -> LateInteractionSettings:
    """What a late-interaction export records beside the shared fields: token size, query
    augmentation and markers, how many punctuation tokens the document side drops (their ids:
    config.json, the tower's ``punctuation_ids``), how its query tokens are weighted (None,
    not written: once each)."""
    query = model.query_preprocessor
    return LateInteractionSettings(
        token_dim=model.embedding_dim,
        query_augmentation="[MASK]" if query.mask_augmentation else None,  # None: not written
        query_marker=f"segment (type) id {query.marker_type_id}",
        document_marker="segment ids 0 (title) and 1 (passage)",
        document_punctuation_tokens_masked=len(model.tower.punctuation_ids),
        query_token_weights=model.query_token_weights)


def _inference_copy(model):
    """A copy of a model (a `PairModel`, a `TermWeightModel`) with the same weights but no
    optimizer, so exports carry no Adam slots."""
    if not model.built:
        model.build_by_calling()
    if getattr(model, "optimizer", None) is None:
        return model
    clone = tf.keras.layers.deserialize(model.artifact_config())
    if not clone.built:
        clone.build_by_calling()
    clone.set_weights(model.get_weights())
    return clone


def update_metadata(path, **fields) -> dict:
    """Adds fields (e.g. measured metrics) to an export's metadata.json and regenerates its
    MODEL_CARD.md (any kind: `render_card`); the weights and their manifest are unchanged
    (neither file is in it). A field of the wrong type raises `TtZooError` before anything is
    written."""
    path = pathlib.Path(path)
    pinned = sorted(set(fields) & set(BEHAVIOUR_KEYS))
    if pinned:
        raise TtZooError(f"update_metadata cannot change {', '.join(pinned)} of {path}: they "
                         "change the model's embeddings and are fixed at export; export the "
                         "model again with them.")
    meta = json.loads((path / METADATA_FILE).read_text(encoding="utf-8"))
    card = ModelCard.from_dict({**meta, **fields})
    return write_metadata_and_card(path, card.to_dict())


def write_metadata_and_card(directory, meta: dict) -> dict:
    """Writes an export's metadata.json (keys sorted) and the MODEL_CARD.md rendered from that
    file's contents as a reader gets them back (so a card re-rendered from metadata.json later
    is the same to the byte); returns the metadata as written."""
    directory = pathlib.Path(directory)
    text = json_text(meta, where=directory / METADATA_FILE, indent=2, sort_keys=True)
    written = json.loads(text)
    write_text(directory / METADATA_FILE, text)
    write_text(directory / MODEL_CARD_FILE, render_card(ModelCard.from_dict(written)))
    return written


def verify_export(path, expected_sha256: Optional[str] = None) -> dict:
    """Checks an export is complete and undamaged; returns its metadata.

    metadata.json's file manifest must hash to `expected_sha256` (the registry's, for a shipped
    model) or to the sha256 recorded beside it, and every file must match its entry. A float32
    copy materialised from a float16 artifact (`tt_zoo.artifacts.float16_storage`) whose sha256
    is `expected_sha256` is checked against its own manifest's.
    Raises `ArtifactError` naming what is missing or differs.
    """
    path = pathlib.Path(path)
    recover_replaced(path)  # a replace killed between its renames: the old version is back
    if not path.is_dir():
        raise not_an_export_directory(path)
    meta_path = path / METADATA_FILE
    try:
        metadata = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{path} is not a tt_zoo export: {meta_path.name} is missing.")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{meta_path} is corrupted ({e}).") from e
    if not isinstance(metadata, dict):
        raise ArtifactError(f"{meta_path} holds {type(metadata).__name__}, not a JSON object.")
    # Before anything else: a later layout may keep its manifest elsewhere.
    check_format_version(ModelCard.format_version_of(metadata), FORMAT_VERSION,
                         listed_in=meta_path, what=FORMAT_NAME)
    try:
        provenance = ModelCard.from_dict(metadata).provenance
    except TtZooError as e:
        raise ArtifactError(f"{meta_path} is not a valid model card: {e}") from e
    expected = expected_sha256 or provenance.sha256
    storage = provenance.storage
    if expected_sha256 and storage is not None and storage.materialised_from == expected_sha256:
        expected = provenance.sha256  # a float32 copy of the registry's float16 artifact
    files = provenance.files
    if not expected or not isinstance(files, dict):
        raise ArtifactError(f"{meta_path} records no sha256 and file manifest, so the files of "
                            f"{path} cannot be verified; every tt_zoo export since 0.2 records "
                            "them. Export the model again.")
    actual = manifest_digest(files)
    if actual != expected:
        raise ArtifactError(_manifest_mismatch(path, actual, expected, expected_sha256,
                                               provenance.sha256))
    verify_files(path, files, listed_in=meta_path)
    check_behaviour(path, metadata, files)
    check_kind(path, metadata, files)
    return metadata


def _manifest_mismatch(path, actual: str, expected: str, registry_sha256: Optional[str],
                       recorded: Optional[str]) -> str:
    """Why an export's manifest is not the expected one: another whole export than the
    registry's (its manifest is the one its metadata.json records: a ship cut short before
    it updated the registry, or a folder replaced), else damage."""
    if registry_sha256 and actual == recorded:
        return (f"{path} holds another export than the registry's model: its file manifest "
                f"hashes to {actual[:16]}… (as its metadata.json records), the registry "
                f"records {expected[:16]}…. A `tt-zoo ship` that was cut short after it copied "
                "the export leaves this: run it again to finish (it lists the new sha256), or "
                "restore the directory from git.")
    return (f"Saved model {path} is corrupted or truncated: its file manifest hashes to "
            f"{actual[:16]}… but {'the registry' if registry_sha256 else 'metadata.json'} "
            f"records {expected[:16]}…. Re-train it or restore the directory from git.")


def not_an_export_directory(path) -> ArtifactError:
    """The error for a path that is no export directory: a file (named as one, with the folder
    to load when it is a file of an export), or nothing at all."""
    path = pathlib.Path(path)
    expected = (f"expected an export directory holding {METADATA_FILE} and saved_model.pb (as "
                "`model.export` writes), or a registered model name (tt_zoo.list_models())")
    if path.is_file():
        inside = (f"; load its folder {path.parent}" if path.name in (
            METADATA_FILE, CONFIG_FILE, MODEL_CARD_FILE, "saved_model.pb", "fingerprint.pb")
            and (path.parent / METADATA_FILE).is_file() else "")
        return ArtifactError(f"{path} is a file, not a model export directory: {expected}"
                             f"{inside}.")
    if path.exists():
        return ArtifactError(f"{path} is not a directory: {expected}.")
    return ArtifactError(f"Saved model directory {path} does not exist ({expected}).")


class LoadedEncoder:
    """An export's ``encode_document`` signature, loaded as TF Serving or a
    ``tf.saved_model.load`` user loads it: ``(titles, texts)`` -> float32 `[n, dim]`, in the
    order given (no sorting by length), `batch_size` documents a call (all at once when None).
    Holds the loaded SavedModel, which its signature needs alive."""

    def __init__(self, path):
        import tensorflow_text  # noqa: F401,PLC0415  (registers the tokenizer's ops)

        self._loaded = tf.saved_model.load(str(path))
        if DOCUMENT_SIGNATURE not in self._loaded.signatures:
            raise TtZooError(f"{path} has no {DOCUMENT_SIGNATURE} signature (it has "
                             f"{sorted(self._loaded.signatures)}).")
        self._encode = self._loaded.signatures[DOCUMENT_SIGNATURE]

    def __call__(self, titles: Sequence[str], texts: Sequence[str],
                 batch_size: Optional[int] = None) -> np.ndarray:
        titles, texts = list(titles), list(texts)
        step = batch_size or len(texts) or 1
        return np.concatenate([
            self._encode(title=tf.constant(titles[i:i + step], tf.string),
                         passage=tf.constant(texts[i:i + step], tf.string))["embedding"].numpy()
            for i in range(0, max(len(texts), 1), step)])


def load_keras_model(path) -> PairModel:
    """Rebuilds the trainable Keras model of an export from its config and SavedModel variables
    (the files are not re-hashed here: `verify_export` does that)."""
    path = pathlib.Path(path)
    config_path = path / CONFIG_FILE
    variables = path / "variables" / "variables.index"
    if not variables.is_file():
        if (path / FLOAT16_DIR).is_dir():
            raise ArtifactError(f"{path} stores its weights in float16 ({FLOAT16_DIR}/): load "
                                "it with tt_zoo.load, which materialises its float32 "
                                "SavedModel.")
    for required in (config_path, path / "saved_model.pb", variables):
        if not required.is_file():
            raise ArtifactError(f"{path} is not a complete tt_zoo export: {required.name} is "
                                "missing.")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{config_path} is not valid JSON ({e}).") from e
    try:  # Keras' safe mode refuses code in a config (a Lambda layer): name the file
        model = tf.keras.layers.deserialize(config)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise ArtifactError(f"{config_path} does not rebuild a tt_zoo model "
                            f"({type(e).__name__}: {first}).") from e
    if not model.built:
        model.build_by_calling()
    try:
        status = tf.train.Checkpoint(model=model).read(str(path / "variables" / "variables"))
        status.expect_partial().assert_existing_objects_matched()
    except (tf.errors.OpError, ValueError, AssertionError, IndexError, KeyError) as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise ArtifactError(f"Could not restore the weights of {path} ({type(e).__name__}: "
                            f"{first}).") from e
    return model
