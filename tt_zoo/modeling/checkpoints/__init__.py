"""Checkpoint import: a public pretrained BERT becomes a tt_zoo two-tower model.

Contriever (Izacard et al. 2021) and Spider (Ram et al. 2022) start from BERT before their pair
tasks, and the MLM baseline of Chang et al. 2020 (Sec. 5.1, Table 3) is BERT itself: this is how
the zoo starts from a public checkpoint instead of random weights. Two formats are read, with no
PyTorch or transformers at run time:

* a Hugging Face / sentence-transformers folder of a registered architecture (BERT, MPNet:
  `tt_zoo.modeling.architectures`; `huggingface.read_huggingface_folder`: config.json,
  model.safetensors, vocab.txt or tokenizer.json, the pooling config);
* a Google BERT checkpoint (`google_bert.read_google_checkpoint`: bert_config.json,
  bert_model.ckpt.*, vocab.txt).

`import_checkpoint` builds a `TwoTowerModel` of the checkpoint's own shape, casing, vocabulary
(in the in-graph tf-text preprocessor), pooling and normalisation, one shared tower (as the
checkpoint was trained), with the checkpoint's weights set by its family's converter. The tower
computes the checkpoint's sentence embeddings (tests: an independent NumPy forward; the
published all-MiniLM-L6-v2 vectors). An `embedding_dim` other than the hidden size adds a
projection that starts from random weights and is recorded as new.

Example:
  >>> model, origin = import_checkpoint("all-MiniLM-L6-v2/")  # doctest: +SKIP
  >>> model.encode_queries(["The weather is lovely today."]).shape  # doctest: +SKIP
  (1, 384)
"""

from __future__ import annotations

import pathlib
from typing import Optional, Tuple

from tt_zoo.errors import ArtifactError
from tt_zoo.modeling.checkpoints.bert_checkpoint import Checkpoint, BertConfig
from tt_zoo.modeling.checkpoints.google_bert import is_google_folder, read_google_checkpoint
from tt_zoo.modeling.checkpoints.huggingface import (is_huggingface_folder,
                                                     read_huggingface_folder)

__all__ = ["Checkpoint", "BertConfig", "read_checkpoint", "import_checkpoint",
           "build_model", "NEW_PROJECTION"]

# Both formats' tokenizers (BERT's reference `tokenization.py`, Hugging Face's BertNormalizer)
# strip accents and lower-case without NFKC folding: the imported preprocessor does the same, so
# its token ids are the checkpoint's ("km²" stays one token; see `TextPreprocessor`).
CHECKPOINT_CASE_FOLDING = "unicode_lower"
NEW_PROJECTION = "cls_projection"  # the layer an `embedding_dim` other than the hidden size adds
DEFAULT_QUERY_LENGTH = 64  # the paper's query budget (Sec. 5.1)
DEFAULT_TEMPERATURE = 0.05  # cosine / 0.05: sentence-transformers' MultipleNegativesRankingLoss scale 20


def read_checkpoint(path, expected_sha256: Optional[str] = None) -> Checkpoint:
    """Reads a checkpoint folder of either format (`expected_sha256`: of a Hugging Face
    folder's model.safetensors). Raises `ArtifactError` naming the folder and what a
    checkpoint folder holds when it is neither."""
    folder = pathlib.Path(path)
    if not folder.is_dir():
        raise ArtifactError(f"{folder} is not a folder (expected a BERT checkpoint folder: "
                            "config.json + model.safetensors, or bert_config.json + "
                            "bert_model.ckpt.*).")
    if is_google_folder(folder):
        return read_google_checkpoint(folder)
    if is_huggingface_folder(folder):
        return read_huggingface_folder(folder, expected_sha256)
    raise ArtifactError(f"{folder} is not a BERT checkpoint: expected config.json + "
                        "model.safetensors (Hugging Face / sentence-transformers) or "
                        "bert_config.json + bert_model.ckpt.* + vocab.txt (Google BERT).")


def build_model(checkpoint: Checkpoint, *, embedding_dim: Optional[int] = None,
                query_length: int = DEFAULT_QUERY_LENGTH,
                document_length: Optional[int] = None,
                temperature: float = DEFAULT_TEMPERATURE, dropout_rate: float = 0.1):
    """A `TwoTowerModel` holding `checkpoint`'s weights (see the module docstring).

    Args:
      embedding_dim: None (or the hidden size) embeds in the hidden size with no new layer;
        another size adds a randomly initialised projection (`NEW_PROJECTION`).
      query_length: the query token budget.
      document_length: the document budget; None takes the checkpoint's ``max_seq_length``.
      temperature: the training loss's softmax temperature on cosine scores (a normalising
        checkpoint) or raw inner products.
    """
    from tt_zoo.modeling import architectures
    from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
    from tt_zoo.modeling.models import build_two_tower_model

    c = checkpoint.config
    converter = architectures.get(checkpoint.encoder).converter
    document_length = document_length or checkpoint.max_seq_length
    longest = max(query_length, document_length)
    if longest > c.max_length:
        raise ValueError(f"{checkpoint.source} covers {c.max_length} positions; "
                         f"query length {query_length} / document length {document_length} "
                         "do not fit.")
    dim = embedding_dim or c.hidden_size
    model = build_two_tower_model(
        checkpoint.vocabulary, encoder=checkpoint.encoder, size=None, embedding_dim=dim,
        query_length=query_length, document_length=document_length, share_towers=True,
        dropout_rate=dropout_rate, pooling=checkpoint.pooling,
        normalize_embeddings=checkpoint.normalize,
        loss=CorrectedSampledSoftmaxLoss(temperature=temperature),
        lower_case=checkpoint.lower_case, case_folding=CHECKPOINT_CASE_FOLDING,
        projection=dim != c.hidden_size, **converter.tower_settings(c))
    model.build_by_calling()
    converter.set_weights(model.query_tower, checkpoint)
    return model


def import_checkpoint(path, *, expected_sha256: Optional[str] = None,
                      **build_options) -> Tuple[object, dict]:
    """``(model, origin)``: `build_model` of the checkpoint at `path`, and what the card
    records of it (`tt_zoo.artifacts.model_card.Origin` fields: where it came from, the weight
    files' sha256, which weights were copied and which layers are new)."""
    from tt_zoo.modeling import architectures

    checkpoint = read_checkpoint(path, expected_sha256)
    model = build_model(checkpoint, **build_options)
    new = [NEW_PROJECTION] if getattr(model.query_tower, "projection", None) is not None else []
    origin = {"from": str(path), "sha256": ";".join(f"{k}={v}" for k, v in
                                                     sorted(checkpoint.files.items())),
              "copied": architectures.get(checkpoint.encoder).converter.copied,
              "new": new}
    return model, origin
