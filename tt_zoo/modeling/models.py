"""The two-tower model: f(q, d) = <phi(q), psi(d)>, trained with the corrected sampled softmax.

Chang et al. 2020, Sec. 2 and 4.1: two separate towers by default (no weight sharing), raw text
in, embeddings out; scores are inner products. The model is a `tfrs.Model`, so `model.fit` on a
`tf.data` of pair dicts (see `tt_zoo.data.features`) trains it with no custom loop.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf
import tensorflow_recommenders as tfrs

from tt_zoo.data import features as F
from tt_zoo.modeling.inference import (PACKED_KEYS, EncodeCache, EncodeOptions,
                                       cut_to_longest, encode_in_buckets, progress_bar)
from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
from tt_zoo.data.text import DEFAULT_CASE_FOLDING, TextPreprocessor
from tt_zoo.modeling.towers import BertTower, BowMlpTower
# Registered for deserialization: a model's query tower may route per task class.
from tt_zoo.modeling.routed_tower import TaskRoutedTower  # noqa: F401


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class TwoTowerModel(tfrs.Model):
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
        super().__init__(**kwargs)
        self.query_preprocessor = query_preprocessor
        self.document_preprocessor = document_preprocessor
        self.query_tower = query_tower
        self.share_towers = document_tower is None
        self.document_tower = query_tower if document_tower is None else document_tower
        self.retrieval_loss = loss if loss is not None else CorrectedSampledSoftmaxLoss()
        self.normalize_embeddings = bool(normalize_embeddings)
        self._gradient_step: Optional[Callable] = None  # training's (`set_gradient_step`)

    @property
    def embedding_dim(self) -> int:
        return int(self.query_tower.embedding_dim)

    # -- embeddings ---------------------------------------------------------------------------
    def embed_queries(self, queries: tf.Tensor, training=None,
                      cut_padding: bool = False) -> tf.Tensor:
        """queries: tf.string [batch] -> embeddings [batch, dim]. `cut_padding` runs the tower
        on the batch's longest member only (same embeddings; serving uses it, training keeps
        the fixed length)."""
        packed = self.query_preprocessor(queries)
        if cut_padding:
            packed = cut_to_longest(packed)
        return self.embed_query_inputs(packed, training=training)

    def embed_documents(self, titles: tf.Tensor, texts: tf.Tensor, training=None,
                        cut_padding: bool = False) -> tf.Tensor:
        """titles (or sentences), texts (passages): tf.string [batch] -> embeddings [batch, dim];
        `cut_padding` as `embed_queries`."""
        packed = self.document_preprocessor((titles, texts))
        if cut_padding:
            packed = cut_to_longest(packed)
        return self.embed_document_inputs(packed, training=training)

    def embed_query_inputs(self, packed, training=None) -> tf.Tensor:
        """Packed query ids (`tokenize_pairs`' QUERY_INPUTS) -> float32 embeddings [batch, dim]."""
        return self._finish(self.query_tower(packed, training=training))

    def embed_document_inputs(self, packed, training=None) -> tf.Tensor:
        """Packed document ids (DOCUMENT_INPUTS) -> float32 embeddings [batch, dim]."""
        return self._finish(self.document_tower(packed, training=training))

    def _finish(self, embeddings: tf.Tensor) -> tf.Tensor:
        # Scores and the loss stay float32 under a mixed bfloat16 policy.
        embeddings = tf.cast(embeddings, tf.float32)
        if self.normalize_embeddings:
            embeddings = tf.math.l2_normalize(embeddings, axis=-1)
        return embeddings

    def tokenize_pairs(self, pairs: dict) -> dict:
        """Replaces a pair batch's strings by the towers' packed inputs (for `tf.data.map`).

        QUERY becomes QUERY_INPUTS and DOC_TITLE/DOC_TEXT become DOCUMENT_INPUTS, each a dict
        of `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq_length], tokenized by the
        model's own preprocessors, so training on them and serving raw strings see the same ids.
        Other features pass through.
        """
        out = {k: v for k, v in pairs.items() if k not in (F.QUERY, F.DOC_TITLE, F.DOC_TEXT)}
        out[F.QUERY_INPUTS] = self.query_preprocessor(pairs[F.QUERY])
        out[F.DOCUMENT_INPUTS] = self.document_preprocessor((pairs[F.DOC_TITLE],
                                                             pairs[F.DOC_TEXT]))
        return out

    def call(self, inputs, training=None):
        """inputs: a pair batch, raw (QUERY, DOC_TITLE, DOC_TEXT [batch]) or tokenized
        (QUERY_INPUTS, DOCUMENT_INPUTS) -> dict of both embeddings [batch, dim]."""
        query_embeddings, document_embeddings = self._embed_pairs(inputs, training)
        return {"query_embeddings": query_embeddings,
                "document_embeddings": document_embeddings}

    def _embed_pairs(self, inputs, training):
        """(query embeddings, document embeddings) of a raw or tokenized pair batch."""
        if F.QUERY_INPUTS in inputs and F.DOCUMENT_INPUTS in inputs:  # from `tokenize_pairs`
            return (self.embed_query_inputs(inputs[F.QUERY_INPUTS], training=training),
                    self.embed_document_inputs(inputs[F.DOCUMENT_INPUTS], training=training))
        missing = [k for k in (F.QUERY, F.DOC_TITLE, F.DOC_TEXT) if k not in inputs]
        if missing:
            raise ValueError(f"A pair batch needs features {missing}, or {F.QUERY_INPUTS} and "
                             f"{F.DOCUMENT_INPUTS} (got {sorted(inputs)}).")
        return (self.embed_queries(inputs[F.QUERY], training=training),
                self.embed_documents(inputs[F.DOC_TITLE], inputs[F.DOC_TEXT],
                                     training=training))

    def embed_for_loss(self, inputs, training=None) -> dict:
        """The embeddings the loss scores: {"query", "document"} [batch, dim], and
        "hard_negative" [batch * H, dim] when the batch carries hard negatives (tokenized as
        HARD_NEGATIVE_INPUTS, or as HARD_NEGATIVE_TITLES/TEXTS strings)."""
        query_embeddings, document_embeddings = self._embed_pairs(inputs, training)
        out = {"query": query_embeddings, "document": document_embeddings}
        if F.HARD_NEGATIVE_INPUTS in inputs:
            out["hard_negative"] = self.embed_document_inputs(inputs[F.HARD_NEGATIVE_INPUTS],
                                                              training=training)
        elif F.HARD_NEGATIVE_TEXTS in inputs:
            titles, texts = hard_negative_strings(inputs)
            out["hard_negative"] = self.embed_documents(titles, texts, training=training)
        return out

    def loss_from_embeddings(self, inputs, embeddings: dict) -> tf.Tensor:
        """The corrected sampled-softmax loss of `embed_for_loss`'s embeddings of `inputs`."""
        document_ids = inputs.get(F.DOC_ID)
        if document_ids is None and F.DOC_TEXT in inputs:
            # Without ids, a document is identified by its text: duplicates are still masked.
            document_ids = text_document_ids(inputs[F.DOC_TITLE], inputs[F.DOC_TEXT])
        if document_ids is None and self.retrieval_loss.remove_accidental_hits:
            raise ValueError("A tokenized training batch needs DOC_ID for accidental-hit "
                             f"removal (got {sorted(inputs)}).")
        hard = {}
        if "hard_negative" in embeddings:
            hard["hard_negative_embeddings"] = embeddings["hard_negative"]
            if F.HARD_NEGATIVE_IDS in inputs or F.HARD_NEGATIVE_TEXTS in inputs:
                hard["hard_negative_ids"] = hard_negative_ids(inputs)
            if F.HARD_NEGATIVE_SAMPLING_PROBS in inputs:
                hard["hard_negative_sampling_probabilities"] = tf.reshape(
                    inputs[F.HARD_NEGATIVE_SAMPLING_PROBS], [-1])
        return self.retrieval_loss(embeddings["query"], embeddings["document"],
                                   document_ids=document_ids,
                                   sampling_probabilities=inputs.get(F.DOC_SAMPLING_PROB),
                                   **hard)

    def compute_loss(self, inputs, training: bool = False) -> tf.Tensor:
        """The corrected sampled-softmax loss on a batch of pair dicts (see `tt_zoo.data.features`)."""
        return self.loss_from_embeddings(inputs, self.embed_for_loss(inputs, training))

    @property
    def gradient_step(self) -> Optional[Callable]:
        """What computes and applies a batch's gradients in `train_step`, or None (the ordinary
        step of `tfrs.Model`)."""
        return self._gradient_step

    def set_gradient_step(self, step: Optional[Callable]) -> None:
        """Lets training choose how `train_step` computes and applies a batch's gradients:
        ``step(model, inputs)`` returns the logs `tfrs.Model.train_step` returns (GradCache:
        `tt_zoo.training.grad_cache.use_grad_cache`); None restores the ordinary step.

        A training setting only: it is not part of `get_config`, checkpoints or exports.
        """
        if step != self._gradient_step:
            self._gradient_step = step
            self.train_function = None  # the next `fit` traces the step again

    def train_step(self, inputs):
        """`tfrs.Model`'s step, logging the global batch's numbers under `tf.distribute`.

        Each replica's loss is its queries' share of the global-batch mean (the loss divides by
        the global batch), so the logged loss is the sum over replicas, and each metric is the
        mean over replicas (equal per-replica batches): what one device reports on the same
        global batch. Every replica then holds the same values and Keras takes the first
        replica's (`distribute_reduction_method`), under MirroredStrategy as under TPUStrategy.
        With a `gradient_step` set by training (e.g. GradCache), the gradients are its (the
        same logs).
        """
        if self._gradient_step is None:
            metrics = super().train_step(inputs)
        else:
            metrics = self._gradient_step(self, inputs)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return metrics
        self.distribute_reduction_method = "first"
        reduced = dict(metrics)  # (tf.identity: a value on this replica's device, to reduce)
        for metric in self.metrics:
            reduced[metric.name] = context.all_reduce("mean", tf.identity(metrics[metric.name]))
        reduced["loss"] = context.all_reduce("sum", tf.identity(metrics["loss"]))
        reduced["total_loss"] = reduced["loss"] + metrics["regularization_loss"]
        return reduced

    # -- numpy conveniences ---------------------------------------------------------------------
    def encode_queries(self, texts: Union[str, Sequence[str]], batch_size: int = 256, *,
                       show_progress_bar: Optional[bool] = None, bucketing: bool = True,
                       precision: str = "float32", jit_compile: Union[bool, str] = False,
                       plain_inference: bool = True) -> np.ndarray:
        """Embeds query strings; returns float32 [len(texts), dim] in the order given, or [dim]
        for a single string (as sentence-transformers does).

        `batch_size` texts go through the tower at a time. `show_progress_bar`: a tqdm bar on
        stderr; None shows one for more than a few batches at a terminal or in a notebook
        (`tt_zoo.modeling.inference.progress_bar`). `bucketing`, `precision` ("float32" or
        "bfloat16") and `jit_compile` (True, False or "auto") choose how the tower runs
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
                         bucketing: bool = True, precision: str = "float32",
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
                               precision: str = "float32",
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
        options = options.resolve_jit_compile(
            n, self.query_tower if role == "query" else self.document_tower)
        with progress_bar(show_progress_bar, n, batch_size, desc) as bar:
            tower_fn = self._encode_cache.tower_fn(role, options) if n else None
            return encode_in_buckets(pack, tower_fn, n, self.embedding_dim,
                                     preprocessor.seq_length, batch_size, options, bar)

    @property
    def _encode_cache(self) -> EncodeCache:
        # A plain attribute of a non-trackable object: Keras and SavedModel do not see it.
        cache = self.__dict__.get("_tt_zoo_encode_cache")
        if cache is None:
            cache = EncodeCache(self)
            object.__setattr__(self, "_tt_zoo_encode_cache", cache)
        return cache

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

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        deserialize = tf.keras.layers.deserialize
        for key in ("query_preprocessor", "document_preprocessor", "query_tower", "loss"):
            config[key] = deserialize(config[key])
        if config.get("document_tower") is not None:
            config["document_tower"] = deserialize(config["document_tower"])
        return cls(**config)

    def artifact_config(self) -> dict:
        """The serialized model for saved artifacts: architecture and vocabulary, without the
        compile state (the optimizer and its LR schedule are training state, and the Model
        Garden warm-up schedule cannot be deserialized)."""
        config = tf.keras.layers.serialize(self)
        config.pop("compile_config", None)
        return config

    def build_from_config(self, config):
        # Keras would build with float placeholders; our inputs are strings.
        self.build_by_calling()

    def build_by_calling(self) -> None:
        """Creates all variables with one tiny forward pass (needed before loading weights)."""
        self({F.QUERY: tf.constant(["a"]), F.DOC_TITLE: tf.constant(["a"]),
              F.DOC_TEXT: tf.constant(["a"])}, training=False)


def text_document_ids(titles: tf.Tensor, texts: tf.Tensor) -> tf.Tensor:
    """The id of documents given without one: their (title, text), joined by a unit separator,
    so the same document twice is an accidental hit, not a negative."""
    return tf.strings.join([titles, texts], "\x1f")


def hard_negative_strings(inputs) -> tuple:
    """(titles, texts) [batch * H] of a batch's string hard negatives (titles default to "")."""
    texts = tf.reshape(inputs[F.HARD_NEGATIVE_TEXTS], [-1])
    titles = tf.reshape(inputs.get(F.HARD_NEGATIVE_TITLES,
                                   tf.zeros_like(inputs[F.HARD_NEGATIVE_TEXTS])), [-1])
    return titles, texts


def hard_negative_ids(inputs) -> tf.Tensor:
    """[batch * H] ids of a batch's hard negatives: HARD_NEGATIVE_IDS, or else the ids of their
    strings (`text_document_ids`)."""
    if F.HARD_NEGATIVE_IDS in inputs:
        return tf.reshape(inputs[F.HARD_NEGATIVE_IDS], [-1])
    return text_document_ids(*hard_negative_strings(inputs))


def as_string_list(values, name: str) -> list:
    """`values` as a list of strings; a bare string (a sequence of characters) or a non-string
    item raises TypeError naming `name`. Every API that takes texts checks them here."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of strings, not a single string ({values!r}).")
    if values is None or isinstance(values, (dict, set)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a string or a sequence of strings (got "
                        f"{type(values).__name__}: {values!r:.80}).")
    values = list(values)
    for i, v in enumerate(values):
        if not isinstance(v, (str, bytes)):
            raise TypeError(f"{name}[{i}] must be a string (got {type(v).__name__}: {v!r}).")
    return values


def as_texts(values, name: str) -> Tuple[list, bool]:
    """``(texts, single)``: a single string as one text (single True), else `as_string_list`."""
    if isinstance(values, (str, bytes)):
        return [values], True
    return as_string_list(values, name), False


def as_documents(texts, titles) -> Tuple[list, list, bool]:
    """``(texts, titles, single)`` of the `encode_documents` arguments: `texts` one string or
    a sequence of them; `titles` None (all ""), or one string for one text, or a sequence as
    long as `texts`. Raises TypeError or ValueError naming the bad argument."""
    texts, single = as_texts(texts, "texts")
    if titles is None:
        return texts, [""] * len(texts), single
    if single:
        if not isinstance(titles, (str, bytes)):
            raise TypeError("titles must be one string when texts is one string (got "
                            f"{type(titles).__name__}: {titles!r}).")
        return texts, [titles], True
    titles = as_string_list(titles, "titles")
    if len(titles) != len(texts):
        raise ValueError(f"titles and texts differ in length ({len(titles)} vs {len(texts)}).")
    return texts, titles, False


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
      encoder: "bert" (Transformer tower) or "bow_mlp".
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
        `BertTower`'s type_vocab_size / inner_activation / projection.
    """
    query_pre = TextPreprocessor(vocabulary, seq_length=query_length, lower_case=lower_case,
                                 case_folding=case_folding, name="query_preprocessor")
    doc_pre = TextPreprocessor(query_pre.vocabulary, seq_length=document_length,
                               lower_case=lower_case, case_folding=case_folding,
                               name="document_preprocessor")
    vocab_size = query_pre.vocab_size

    def make_tower(name):
        if encoder == "bert":
            return BertTower(vocab_size, embedding_dim, size=size,
                             max_sequence_length=(max_sequence_length
                                                  or max(query_length, document_length)),
                             dropout_rate=dropout_rate, pooling=pooling,
                             init_checkpoint=init_checkpoint, name=name, **bert_shape)
        if encoder == "bow_mlp":
            return BowMlpTower(vocab_size, embedding_dim, token_embedding_dim=bow_token_embedding_dim,
                               hidden_dim=bow_hidden_dim, output_activation=bow_output_activation,
                               mlp=bow_mlp, name=name)
        raise ValueError(f"Unknown encoder {encoder!r}; expected 'bert' or 'bow_mlp'.")

    query_tower = make_tower("query_tower")
    document_tower = None if share_towers else make_tower("document_tower")
    return TwoTowerModel(query_pre, doc_pre, query_tower, document_tower, loss=loss,
                         normalize_embeddings=normalize_embeddings)


def with_sequence_lengths(model: TwoTowerModel, query_length: Optional[int] = None,
                          document_length: Optional[int] = None) -> TwoTowerModel:
    """The same model (weights copied) with other query/document token budgets.

    Only the preprocessors change; a BERT tower's position embeddings must cover the new
    lengths (its ``max_sequence_length``). Returns ``model`` itself when nothing changes.
    """
    query_length = query_length or model.query_preprocessor.seq_length
    document_length = document_length or model.document_preprocessor.seq_length
    if (query_length, document_length) == (model.query_preprocessor.seq_length,
                                           model.document_preprocessor.seq_length):
        return model
    config = tf.keras.layers.serialize(model)
    inner = config["config"]
    for key, length in (("query_preprocessor", query_length),
                        ("document_preprocessor", document_length)):
        inner[key]["config"]["seq_length"] = int(length)
    for key in ("query_tower", "document_tower"):
        tower = (inner.get(key) or {}).get("config", {})
        # (A TaskRoutedTower's limit is its sub-towers'.)
        limits = [t.get("config", {}).get("max_sequence_length")
                  for t in tower.get("towers", [])] + [tower.get("max_sequence_length")]
        limit = min((x for x in limits if x is not None), default=None)
        if limit is not None and max(query_length, document_length) > limit:
            raise ValueError(f"The {key.replace('_', ' ')} covers at most {limit} positions; "
                             f"cannot use query length {query_length} / document length "
                             f"{document_length}.")
    resized = tf.keras.layers.deserialize(config)
    resized.build_by_calling()
    if not model.built:
        model.build_by_calling()
    resized.set_weights(model.get_weights())
    return resized
