"""The two-tower model: f(q, d) = <phi(q), psi(d)>, trained with the corrected sampled softmax.

Chang et al. 2020, Sec. 2 and 4.1: two separate towers by default (no weight sharing), raw text
in, embeddings out; scores are inner products. The model is a `PairModel`
(`tt_zoo.modeling.pair_model`: a `tfrs.Model` that trains on pairs), so `model.fit` on a
`tf.data` of pair dicts (see `tt_zoo.data.features`) trains it with no custom loop; this module
adds one embedding per text and its numpy encoders, and the text-argument checks every encoder
uses.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from tt_zoo.arguments import as_documents, as_string_list, as_texts  # noqa: F401 (their home)
from tt_zoo.modeling.inference import PACKED_KEYS, EncodeOptions, encode_in_buckets, progress_bar
from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
from tt_zoo.modeling.pair_model import PairModel
from tt_zoo.data.text import DEFAULT_CASE_FOLDING, TextPreprocessor
from tt_zoo.modeling import architectures
# Registered for deserialization: a model's query tower may route per task class, and every
# family's tower class (`architectures.FAMILY_MODULES`) must be known to load its export.
from tt_zoo.modeling.routed_tower import TaskRoutedTower  # noqa: F401

architectures.get("bert")  # imports the family modules


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class TwoTowerModel(PairModel):
    """A query tower phi and a document tower psi, each with its own in-graph tokenizer.

    Args:
      query_preprocessor: `TextPreprocessor` for queries (single segment; the paper's length 64).
      document_preprocessor: `TextPreprocessor` for documents, packed as (title or sentence,
        passage) pairs (the paper's length 288).
      query_tower: a tower layer mapping packed inputs to [batch, dim].
      document_tower: the document tower; None shares the query tower's weights.
      loss: the `CorrectedSampledSoftmaxLoss`; a default one (all corrections on) if None.
      normalize_embeddings: L2-normalise both towers' outputs, so scores are cosines (pair it
        with the loss's `temperature`). Off in the paper (raw inner products, Sec. 2).
      **kwargs: passed to `tfrs.Model`.

    What it shares with the late-interaction model (tokenizing pairs, the loss and training
    step, building, the artifact config) is `tt_zoo.modeling.pair_model.PairModel`'s; what is
    its own is one embedding per text: the towers' outputs cast to float32 (and normalised),
    and the numpy encoders `encode_queries`, `encode_documents`, `encode_document_inputs`.

    Example:
      >>> model = build_two_tower_model(vocab, encoder="bert", size="tiny", embedding_dim=128)
      >>> model.compile(tf.keras.optimizers.Adam(1e-4))
      >>> model.fit(pairs.batch(128), steps_per_epoch=100)
      >>> model.encode_queries(["who discovered penicillin?"]).shape
      (1, 128)

    References:
      Chang et al. 2020, Sec. 2 (two-tower model, sampled softmax), Sec. 4.1 (towers).
    """

    def __init__(self, query_preprocessor: TextPreprocessor,
                 document_preprocessor: TextPreprocessor, query_tower: tf.keras.layers.Layer,
                 document_tower: Optional[tf.keras.layers.Layer] = None,
                 loss: Optional[CorrectedSampledSoftmaxLoss] = None,
                 normalize_embeddings: bool = False, **kwargs):
        super().__init__(query_preprocessor, document_preprocessor, query_tower, document_tower,
                         loss=loss, **kwargs)
        self.normalize_embeddings = bool(normalize_embeddings)

    # -- embeddings ---------------------------------------------------------------------------
    def embed_query_inputs(self, packed, training=None) -> tf.Tensor:
        """Packed query ids (`tokenize_pairs`' QUERY_INPUTS) -> float32 embeddings [batch, dim]."""
        return self._finish(super().embed_query_inputs(packed, training=training))

    def embed_document_inputs(self, packed, training=None) -> tf.Tensor:
        """Packed document ids (DOCUMENT_INPUTS) -> float32 embeddings [batch, dim]."""
        return self._finish(super().embed_document_inputs(packed, training=training))

    def _finish(self, embeddings: tf.Tensor) -> tf.Tensor:
        return finished_embeddings(embeddings, self.normalize_embeddings)

    # -- numpy conveniences ---------------------------------------------------------------------
    def encode_queries(self, texts: Union[str, Sequence[str]], batch_size: int = 256, *,
                       show_progress_bar: Optional[bool] = None, bucketing: bool = True,
                       precision: str = "auto", jit_compile: Union[bool, str] = False,
                       plain_inference: bool = True) -> np.ndarray:
        """Embeds query strings; returns float32 [len(texts), dim] in the order given, or [dim]
        for a single string (as sentence-transformers does).

        `batch_size` texts go through the tower at a time. `show_progress_bar`: a tqdm bar on
        stderr; None shows one for more than a few batches at a terminal or in a notebook
        (`tt_zoo.modeling.inference.progress_bar`). `bucketing`, `precision` ("auto": bfloat16 on a
        CPU with AMX for calls of many texts, else float32; "float32" or "bfloat16") and `jit_compile` (True, False or "auto") choose how the tower runs
        (`tt_zoo.modeling.inference.EncodeOptions`); bucketing gives the same embeddings as
        padding every text to the full length, for fewer FLOPs.
        """
        texts, single = as_texts(texts, "texts")
        options = EncodeOptions(bucketing, precision, jit_compile, plain_inference)
        out = self._encode("query", lambda s, e: self._encode_cache.pack_queries(
            tf.constant(texts[s:e], tf.string)), len(texts), batch_size, options,
            show_progress_bar, "encode queries")
        return out[0] if single else out

    def encode_documents(self, texts: Union[str, Sequence[str]],
                         titles: Union[None, str, Sequence[str]] = None,
                         batch_size: int = 256, *, show_progress_bar: Optional[bool] = None,
                         bucketing: bool = True, precision: str = "auto",
                         jit_compile: Union[bool, str] = "auto",
                         plain_inference: bool = True) -> np.ndarray:
        """Embeds (title or sentence, passage) documents; returns float32 [len(texts), dim] in
        the order given, or [dim] for a single string (with a single string or None as its
        title). Options as `encode_queries`; `jit_compile="auto"` runs a BERT tower's layers
        (``plain_inference=False``) under XLA when there are at least
        `tt_zoo.modeling.inference.XLA_AUTO_MIN_DOCUMENTS` documents (a corpus, where the
        compile time pays); the plain inference graph runs without it, as fast."""
        texts, titles, single = as_documents(texts, titles)
        options = EncodeOptions(bucketing, precision, jit_compile, plain_inference)
        out = self._encode("document", lambda s, e: self._encode_cache.pack_documents(
            tf.constant(titles[s:e], tf.string), tf.constant(texts[s:e], tf.string)),
            len(texts), batch_size, options, show_progress_bar, "encode documents")
        return out[0] if single else out

    def encode_document_inputs(self, packed: dict, batch_size: int = 256, *,
                               show_progress_bar: Optional[bool] = None, bucketing: bool = True,
                               precision: str = "auto",
                               jit_compile: Union[bool, str] = "auto",
                               plain_inference: bool = True) -> np.ndarray:
        """Embeds documents already tokenized: `packed` holds int arrays [n, length] of
        input_word_ids, input_mask and input_type_ids (e.g. rows of the tokenized pair set);
        returns float32 [n, dim] in their order. Options as `encode_documents`."""
        n = len(packed["input_word_ids"])
        options = EncodeOptions(bucketing, precision, jit_compile, plain_inference)
        return self._encode("document", lambda s, e: {
            k: tf.constant(packed[k][s:e], tf.int32) for k in PACKED_KEYS}, n, batch_size,
            options, show_progress_bar, "encode documents")

    def _encode(self, role: str, pack, n: int, batch_size: int, options: EncodeOptions,
                show_progress_bar: Optional[bool], desc: str) -> np.ndarray:
        preprocessor = self.query_preprocessor if role == "query" else self.document_preprocessor
        options = options.resolve(n, self.query_tower if role == "query" else self.document_tower)
        with progress_bar(show_progress_bar, n, batch_size, desc) as bar:
            tower_fn = self._encode_cache.tower_fn(role, options) if n else None
            return encode_in_buckets(pack, tower_fn, n, self.embedding_dim,
                                     preprocessor.seq_length, options.rows_per_call(batch_size),
                                     options, bar)

    # -- config ---------------------------------------------------------------------------------
    def get_config(self):
        serialize = tf.keras.layers.serialize
        return {"name": self.name,
                "query_preprocessor": serialize(self.query_preprocessor),
                "document_preprocessor": serialize(self.document_preprocessor),
                "query_tower": serialize(self.query_tower),
                "document_tower": None if self.share_towers else serialize(self.document_tower),
                "loss": serialize(self.retrieval_loss),
                "normalize_embeddings": self.normalize_embeddings}


def finished_embeddings(embeddings: tf.Tensor, normalize: bool) -> tf.Tensor:
    """A tower's output as the model scores it: float32 (scores and the loss stay float32 under
    a mixed bfloat16 policy), L2-normalised when the model's scores are cosines."""
    embeddings = tf.cast(embeddings, tf.float32)
    return tf.math.l2_normalize(embeddings, axis=-1) if normalize else embeddings


def build_two_tower_model(vocabulary, *, encoder: str = "bert", size: Optional[str] = "tiny",
                          embedding_dim: int = 512, query_length: int = 64,
                          document_length: int = 288, share_towers: bool = False,
                          bow_token_embedding_dim: int = 256, bow_hidden_dim: int = 1024,
                          dropout_rate: float = 0.1, init_checkpoint: Optional[str] = None,
                          loss: Optional[CorrectedSampledSoftmaxLoss] = None,
                          pooling: str = "cls", bow_output_activation: Optional[str] = "tanh",
                          bow_mlp: bool = True,
                          normalize_embeddings: bool = False, lower_case: bool = True,
                          case_folding: str = DEFAULT_CASE_FOLDING,
                          max_sequence_length: Optional[int] = None,
                          **bert_shape) -> TwoTowerModel:
    """Builds a two-tower model from a vocabulary (path or token list) and tower settings.

    Args:
      vocabulary: a vocab.txt path or a list of WordPiece tokens.
      encoder: a registered architecture (`tt_zoo.modeling.architectures`): "bert"
        (Transformer tower), "bow_mlp" or "mpnet"; it also chooses the tokenizer mapping.
      size: BERT tower size name ("tiny", "mini", "small", "base"); see `BertTower`.
      embedding_dim: output dimension of both towers (paper: 512; ablations 128, 256).
      query_length, document_length: token budgets (paper: 64 and 288).
      share_towers: one set of tower weights for queries and documents.
      pooling: the BERT tower's aggregator, "cls" (the paper) or "mean"; see `BertTower`.
      bow_output_activation: the BoW-MLP output layer's activation, "tanh" or None.
      bow_mlp: False: a static BoW tower, the mean of its token vectors (see `BowMlpTower`).
      normalize_embeddings: cosine scores; see `TwoTowerModel`.
      loss: the training loss (e.g. with a `temperature`); the default one if None.
      lower_case: the tokenizer lower-cases and strips accents (BERT uncased).
      case_folding: how it lower-cases; see `TextPreprocessor`.
      max_sequence_length: positions a BERT tower covers (default: the longer token budget).
      **bert_shape: explicit num_layers / hidden_size / num_attention_heads / inner_dim, and
        the Transformer tower's own options (`BertTower`'s type_vocab_size / inner_activation /
        projection; `MPNetTower`'s).
    """
    architecture = architectures.get(encoder)  # the one lookup of the encoder string
    special = architecture.special_tokens
    query_pre = TextPreprocessor(vocabulary, seq_length=query_length, lower_case=lower_case,
                                 case_folding=case_folding, special_tokens=special,
                                 name="query_preprocessor")
    doc_pre = TextPreprocessor(query_pre.vocabulary, seq_length=document_length,
                               lower_case=lower_case, case_folding=case_folding,
                               special_tokens=special, name="document_preprocessor")
    settings = architectures.TowerSettings(
        vocab_size=query_pre.vocab_size, embedding_dim=embedding_dim, size=size,
        max_sequence_length=max_sequence_length or max(query_length, document_length),
        dropout_rate=dropout_rate, pooling=pooling, init_checkpoint=init_checkpoint,
        shape=bert_shape, bow_token_embedding_dim=bow_token_embedding_dim,
        bow_hidden_dim=bow_hidden_dim, bow_output_activation=bow_output_activation,
        bow_mlp=bow_mlp)

    def make_tower(name):
        return architecture.build_tower(settings, name)

    query_tower = make_tower("query_tower")
    document_tower = None if share_towers else make_tower("document_tower")
    return TwoTowerModel(query_pre, doc_pre, query_tower, document_tower, loss=loss,
                         normalize_embeddings=normalize_embeddings)
