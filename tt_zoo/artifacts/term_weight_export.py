"""The term-weight model's artifact: a SavedModel mapping passages to weighted tokens.

HDCT (Dai & Callan, WWW 2020) weights documents offline, at indexing time; this export serves
that step. Signature (also ``serving_default``):

- ``term_weights``: ``title``, ``passage`` tf.string [batch] -> ``tokens`` tf.string
  [batch, L] (the packed WordPiece tokens, ``[CLS] title [SEP] passage [SEP]``, "" on padding),
  ``weights`` float32 [batch, L] (y in [0, 1]; 0 on padding), ``word_start`` bool [batch, L]
  (the token is a word's first piece: a word's weight). L is the batch's longest row, at most
  the model's length (longer documents are truncated as `tt_zoo.data.text.TextPreprocessor`
  does; `tt_zoo.retrieval.term_weighting.TermWeighter` windows them instead).

Tokenisation runs in the graph (tensorflow-text ops only, as the two-tower exports); merging
pieces into words and words into BM25 terms runs in Python (`tt_zoo.data.term_weight_targets`,
`tt_zoo.retrieval.term_weighting`). Beside the SavedModel: ``config.json`` (the Keras config,
vocabulary included), ``metadata.json`` (``kind: "term_weights"``, the initialisation, the
training, the term space and the pseudo-tf scale N, the sha256 file manifest, the layout's
``format_version``, as the two-tower exports) and
``MODEL_CARD.md``; `load_term_weight_model` / `load_term_weighter` read it back, verified.
"""

from __future__ import annotations

import json
import pathlib
from typing import Optional

import tensorflow as tf

from tt_zoo.data.terms import TermSpace
from tt_zoo.errors import ArtifactError
from tt_zoo.modeling.inference import cut_to_longest
from tt_zoo.modeling.term_weights import TermWeightModel
from tt_zoo.retrieval.bm25 import DEFAULT_WEIGHT_SCALE
from tt_zoo.modeling.kinds import TERM_WEIGHTS
from tt_zoo.artifacts.export import (CONFIG_FILE, METADATA_FILE, TERM_WEIGHT_SIGNATURE,
                                   _inference_copy, _without_keras_traces, count_parameters,
                                   verify_export, write_export)
from tt_zoo.artifacts.model_card import DEFAULT_SIGNATURE, ModelCard

KIND = TERM_WEIGHTS  # metadata.json's "kind" (the registry's kind of hdct_ names)


class _TermWeightModule(tf.Module):
    """The SavedModel root: the Keras model under `model`, the vocabulary, the signature."""

    def __init__(self, model: TermWeightModel):
        super().__init__()
        self.model = model
        pre = model.preprocessor
        self._vocabulary = tf.constant(pre.vocabulary, tf.string)
        self._specials = tf.constant([pre.cls_id, pre.sep_id], tf.int32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="title"),
                                  tf.TensorSpec([None], tf.string, name="passage")])
    def term_weights(self, title, passage):
        packed = cut_to_longest(self.model.preprocessor((title, passage)))
        weights = self.model(packed, training=False)
        ids, real = packed["input_word_ids"], packed["input_mask"] > 0
        tokens = tf.where(real, tf.gather(self._vocabulary, ids), "")
        special = tf.reduce_any(tf.equal(ids[:, :, tf.newaxis], self._specials), axis=-1)
        piece = tf.equal(tf.strings.substr(tokens, 0, 2), "##")
        word_start = real & ~special & ~piece
        return {"tokens": tokens, "weights": weights, "word_start": word_start}


def is_term_weight_export(path) -> bool:
    """Whether `path` holds a term-weight export (which a new one may replace)."""
    meta = pathlib.Path(path) / METADATA_FILE
    try:
        return ModelCard.from_dict(json.loads(meta.read_text(encoding="utf-8"))).kind == KIND
    except (OSError, ValueError):  # unreadable, not JSON, not a card (TtZooError)
        return False


def export_term_weight_model(model: TermWeightModel, path, metadata: Optional[dict] = None, *,
                             overwrite: bool = False) -> dict:
    """Exports a term-weight model atomically (temp folder, then rename); returns the metadata
    written (with its file manifest and sha256).

    `metadata`: what the run records (name, init, training, ...). Derived fields (kind,
    lengths, parameters, signatures, versions, the term space and N unless given) win. A value
    of the wrong type raises `TtZooError` (`ModelCard`) before anything is written.
    """
    card = ModelCard.from_dict(metadata or {})

    def fill(staging: pathlib.Path) -> None:
        serving_model = _inference_copy(model)
        module = _TermWeightModule(serving_model)
        with _without_keras_traces():
            tf.saved_model.save(module, str(staging),
                                signatures={DEFAULT_SIGNATURE: module.term_weights,
                                            TERM_WEIGHT_SIGNATURE: module.term_weights})
        (staging / CONFIG_FILE).write_text(json.dumps(serving_model.artifact_config(), allow_nan=False),
                                           encoding="utf-8")
        weighting = card.term_weighting
        if weighting.term_space is None:
            weighting.term_space = TermSpace().settings()
        if weighting.weight_scale is None:
            weighting.weight_scale = DEFAULT_WEIGHT_SCALE
        card.kind = KIND
        arch = card.architecture
        arch.document_length = serving_model.seq_length
        arch.vocab_size = serving_model.preprocessor.vocab_size
        arch.parameters = count_parameters(serving_model)
        arch.signatures = [DEFAULT_SIGNATURE, TERM_WEIGHT_SIGNATURE]

    return write_export(path, card, fill, overwrite=overwrite,
                        is_replaceable=is_term_weight_export, what="tt_zoo term-weight export")


def load_term_weight_model(path, expected_sha256: Optional[str] = None, *,
                           metadata: Optional[dict] = None) -> TermWeightModel:
    """The trainable Keras model of a term-weight export, after checking every file's sha256
    (against `expected_sha256`, the registry's, when given); `metadata`: the export's, which
    the caller verified just before (`tt_zoo.zoo.loading.open_artifact`: not hashed again)."""
    path = pathlib.Path(path)
    meta = metadata if metadata is not None else verify_export(path, expected_sha256)
    kind = ModelCard.from_dict(meta).kind
    if kind != KIND:
        raise ArtifactError(f"{path} is not a term-weight export (its metadata.json kind is "
                            f"{kind!r}, expected {KIND!r}).")
    try:
        config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ArtifactError(f"{path / CONFIG_FILE} is not readable JSON ({e}).") from e
    model = tf.keras.layers.deserialize(config)
    model.build_by_calling()
    try:
        status = tf.train.Checkpoint(model=model).read(str(path / "variables" / "variables"))
        status.expect_partial().assert_existing_objects_matched()
    except (tf.errors.OpError, ValueError, AssertionError) as e:
        first = (str(e).splitlines() or [""])[0]
        raise ArtifactError(f"Could not restore the weights of {path} ({type(e).__name__}: "
                            f"{first}).") from e
    object.__setattr__(model, "export_metadata", meta)  # not tracked by Keras
    return model


def load_term_weighter(path, expected_sha256: Optional[str] = None, *,
                       metadata: Optional[dict] = None, **options):
    """A `tt_zoo.retrieval.term_weighting.TermWeighter` on a term-weight export, in the term
    space it was trained in (`metadata` as `load_term_weight_model` takes it); `options` go to
    `TermWeighter` (max_windows, batch_size, ...)."""
    from tt_zoo.retrieval.term_weighting import TermWeighter  # noqa: PLC0415

    model = load_term_weight_model(path, expected_sha256, metadata=metadata)
    space = ModelCard.from_dict(model.export_metadata).term_weighting.term_space or {}
    terms = TermSpace(space.get("stemmer", "english"), space.get("stopwords", "en"))
    return TermWeighter(model, terms=terms, **options)
