"""`PairModel`: what every model trained on (query, document) pairs shares, whatever it embeds.

A query side and a document side, each with its own in-graph tokenizer and a tower (one tower
for both when shared), trained with the corrected in-batch softmax
(`CorrectedSampledSoftmaxLoss`; Chang et al. 2020, Sec. 2) by `model.fit` on a `tf.data` of pair
dicts (`tt_zoo.data.features`): tokenizing pairs, the loss step, GradCache's hook, the
`tf.distribute` logging, the packing functions of the numpy encoders, building and the
artifact config. What the towers' outputs are is the subclass's:

- `tt_zoo.modeling.models.TwoTowerModel`: one embedding per text [batch, dim] (Sec. 2);
- `tt_zoo.modeling.late_interaction_model.LateInteractionModel`: one vector per token, scored
  by MaxSim (ColBERT, Khattab and Zaharia, SIGIR 2020, Sec. 3).

Both are this class with the same attributes (`query_preprocessor`, `document_preprocessor`,
`query_tower`, `document_tower`, `retrieval_loss`), so their checkpoints and SavedModels keep
the object paths they always had (``model/query_tower/...``); a helper object held by both
would have added a level to every path and orphaned the checkpoints already written.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import tensorflow as tf
import tensorflow_recommenders as tfrs

from tt_zoo.data import features as F
from tt_zoo.data.text import TextPreprocessor
from tt_zoo.modeling.inference import (EncodeCache, cut_to_longest, deserialize_under_policy,
                                       dummy_packed)
from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss


def build_optimizer(model: tf.keras.Model) -> None:
    """Creates the compiled optimizer's slot variables for `model`'s trainable variables, in
    the strategy the model was built under, before `fit`. Left to the first step, their
    creation makes tf.function trace the training step twice (once creating variables, once
    not): a tiny BERT's run starts ~4 s sooner. Numbers are unchanged (the slots start at zero
    either way); a checkpoint restored before this fills them as they are created. Called by
    `PairModel.fit` and by `tt_zoo.training.loop.train_resumable` (any Keras model)."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not hasattr(optimizer, "build") or not model.built:
        return  # not compiled, a legacy optimizer (no `build`), or no variables yet
    if model.trainable_variables:
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)


class PairModel(tfrs.Model):
    """Query and document preprocessors and towers, trained on pairs with the corrected softmax.

    Args:
      query_preprocessor: the query side's `TextPreprocessor` (or a subclass).
      document_preprocessor: the document side's, packing (title or sentence, passage) pairs.
      query_tower: a layer mapping packed ids to what the loss scores.
      document_tower: the document side's tower; None shares the query tower's weights.
      loss: the `CorrectedSampledSoftmaxLoss`; a default one (all corrections on) if None.
      **kwargs: passed to `tfrs.Model`.

    A subclass says what the towers give by overriding `embed_query_inputs` and
    `embed_document_inputs` (here: the tower's output as it is), and adds its encoders and its
    `get_config`, listing the constructor arguments that are serialized layers in
    `SERIALIZED_LAYERS` (`from_config` deserializes those).

    References:
      Chang et al. 2020, Sec. 2 (the sampled softmax over pairs).
    """

    SERIALIZED_LAYERS: Tuple[str, ...] = ("query_preprocessor", "document_preprocessor",
                                          "query_tower", "document_tower", "loss")

    def __init__(self, query_preprocessor: TextPreprocessor,
                 document_preprocessor: TextPreprocessor, query_tower: tf.keras.layers.Layer,
                 document_tower: Optional[tf.keras.layers.Layer] = None,
                 loss: Optional[CorrectedSampledSoftmaxLoss] = None, **kwargs):
        super().__init__(**kwargs)
        self.query_preprocessor = query_preprocessor
        self.document_preprocessor = document_preprocessor
        self.query_tower = query_tower
        self.share_towers = document_tower is None
        self.document_tower = query_tower if document_tower is None else document_tower
        self.retrieval_loss = loss if loss is not None else CorrectedSampledSoftmaxLoss()
        self._gradient_step: Optional[Callable] = None  # training's (`set_gradient_step`)
        self._distillation = None  # training's (`set_distillation`)

    @property
    def embedding_dim(self) -> int:
        """The query tower's output size (a late-interaction model's: each token vector's)."""
        return int(self.query_tower.embedding_dim)

    # -- embeddings ---------------------------------------------------------------------------
    def embed_queries(self, queries: tf.Tensor, training=None, cut_padding: bool = False):
        """queries: tf.string [batch] -> `embed_query_inputs` of their packed ids. `cut_padding`
        runs the tower on the batch's longest member only (the same outputs; serving uses it,
        training keeps the fixed length)."""
        packed = self.query_preprocessor(queries)
        if cut_padding:
            packed = cut_to_longest(packed)
        return self.embed_query_inputs(packed, training=training)

    def embed_documents(self, titles: tf.Tensor, texts: tf.Tensor, training=None,
                        cut_padding: bool = False):
        """titles (or sentences), texts (passages): tf.string [batch] -> `embed_document_inputs`
        of their packed ids; `cut_padding` as `embed_queries`."""
        packed = self.document_preprocessor((titles, texts))
        if cut_padding:
            packed = cut_to_longest(packed)
        return self.embed_document_inputs(packed, training=training)

    def embed_query_inputs(self, packed, training=None):
        """Packed query ids (`tokenize_pairs`' QUERY_INPUTS) -> the query tower's output."""
        return self.query_tower(packed, training=training)

    def embed_document_inputs(self, packed, training=None):
        """Packed document ids (DOCUMENT_INPUTS) -> the document tower's output."""
        return self.document_tower(packed, training=training)

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
        (QUERY_INPUTS, DOCUMENT_INPUTS) -> {"query_embeddings", "document_embeddings"}: what
        `embed_query_inputs` and `embed_document_inputs` give."""
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

    # -- the loss and the training step -------------------------------------------------------
    def embed_for_loss(self, inputs, training=None) -> dict:
        """What the loss scores: {"query", "document"} (one row per pair), and
        "hard_negative" (batch * H rows) when the batch carries hard negatives (tokenized as
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
        """The corrected sampled-softmax loss on a batch of pair dicts (see `tt_zoo.data.features`);
        for a batch that carries TEACHER_SCORES, `distillation_loss` when it has columns."""
        embeddings = self.embed_for_loss(inputs, training)
        if F.TEACHER_SCORES not in inputs:
            return self.loss_from_embeddings(inputs, embeddings)
        if self._distillation is None:
            raise ValueError(f"A batch with {F.TEACHER_SCORES} needs a distillation setting: "
                             "call model.set_distillation(DistillationLoss(...)) first.")
        # One training step serves both kinds of batch (`tt_zoo.training.distill_data`): a
        # distillation batch has K teacher scores a row, any other batch none.
        teacher = inputs[F.TEACHER_SCORES]
        return tf.cond(tf.shape(teacher)[1] > 0,
                       lambda: self.distillation_loss(teacher, embeddings),
                       lambda: self.loss_from_embeddings(inputs, embeddings))

    def distillation_loss(self, teacher_scores, embeddings: dict) -> tf.Tensor:
        """The `set_distillation` loss of `embed_for_loss`'s embeddings of a distillation batch:
        row b's candidates are its document (the teacher's best) then its K - 1 hard negatives
        (rows b * (K - 1) ...), scored by `candidate_scores` against `teacher_scores` `[B, K]`
        (`tt_zoo.modeling.distillation`)."""
        queries = embeddings["query"]
        scores = [self.candidate_scores(queries, embeddings[key])
                  for key in ("document", "hard_negative")]
        return self._distillation(tf.concat(scores, axis=1), teacher_scores)

    def candidate_scores(self, queries, candidates) -> tf.Tensor:
        """[B, K] float32: each query's score with its own K candidates (query b's at rows
        b * K ...), as the model scores them: the dot product of single vectors
        (`tt_zoo.modeling.distillation.candidate_scores`)."""
        from tt_zoo.modeling.distillation import candidate_scores  # noqa: PLC0415

        return candidate_scores(queries, candidates)

    @property
    def distillation(self):
        """The `tt_zoo.modeling.distillation.DistillationLoss` of batches with teacher scores,
        or None."""
        return self._distillation

    def set_distillation(self, loss) -> None:
        """Lets training score batches that carry TEACHER_SCORES with `loss` (a
        `tt_zoo.modeling.distillation.DistillationLoss`; None: none). A training setting only,
        as `set_gradient_step`: not part of `get_config`, checkpoints or exports."""
        if loss != self._distillation:
            self._distillation = loss
            self.train_function = None

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

    def compile(self, optimizer="rmsprop", *args, **kwargs):
        """Keras' ``compile``; a Keras 3 optimizer (``keras.optimizers.Adam(...)``) is taken as
        the tf-keras optimizer of the same class and settings
        (`tt_zoo._keras_env.tf_keras_optimizer`)."""
        from tt_zoo._keras_env import tf_keras_optimizer  # noqa: PLC0415

        return super().compile(tf_keras_optimizer(optimizer), *args, **kwargs)

    def fit(self, *args, **kwargs):
        """Keras' `fit`, with the optimizer's slots built first (`build_optimizer`)."""
        build_optimizer(self)
        return super().fit(*args, **kwargs)

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

    # -- what the numpy encoders share ----------------------------------------------------------
    @property
    def _encode_cache(self) -> EncodeCache:
        """The tokenizing tf.functions (`pack_queries`, `pack_documents`) every numpy encoder
        packs its texts with, and the single-vector towers' functions (`tower_fn`)."""
        # A plain attribute of a non-trackable object: Keras and SavedModel do not see it.
        cache = self.__dict__.get("_tt_zoo_encode_cache")
        if cache is None:
            cache = EncodeCache(self)
            object.__setattr__(self, "_tt_zoo_encode_cache", cache)
        return cache

    # -- config ---------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in cls.SERIALIZED_LAYERS:  # (a layer already made is taken as it is)
            if isinstance(config.get(key), dict):
                config[key] = tf.keras.layers.deserialize(config[key])
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


# What a PairModel holds beside its towers: no floating-point work of the towers' (the
# preprocessors tokenize; the loss scores in float32 whatever the towers compute in).
_NOT_TOWERS = ("query_preprocessor", "document_preprocessor", "loss")


def tower_dtype_policy(model: PairModel) -> str:
    """The Keras dtype policy the model's towers compute in: "float32" or "mixed_bfloat16"."""
    return model.query_tower.dtype_policy.name


def with_dtype_policy(model: PairModel, policy: str) -> PairModel:
    """The same model (same class, config and weights, copied) with its towers computing under
    the Keras dtype `policy`: "mixed_bfloat16" (float32 variables, bfloat16 matmuls: what
    training on a CPU with AMX uses, `tt_zoo.training.precision`) or "float32" (what an export
    holds). The preprocessors and the loss stay float32, so scores and the loss do too.
    Returns `model` itself when its towers already compute under `policy`.
    """
    if policy not in ("float32", "mixed_bfloat16"):
        raise ValueError(f"policy must be 'float32' or 'mixed_bfloat16' (got {policy!r}).")
    if not model.built:
        model.build_by_calling()
    if tower_dtype_policy(model) == policy:
        return model
    config = dict(model.get_config())
    for key in type(model).SERIALIZED_LAYERS:
        if key not in _NOT_TOWERS and config.get(key) is not None:
            # Built here, under `policy`: the towers' sublayers take it when they are made.
            config[key] = deserialize_under_policy(config[key], dummy_packed(), policy)
    copy = type(model).from_config(config)
    copy.build_by_calling()
    copy.set_weights(model.get_weights())
    return copy


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


def with_sequence_lengths(model: PairModel, query_length: Optional[int] = None,
                          document_length: Optional[int] = None) -> PairModel:
    """The same model (weights copied; a two-tower or a late-interaction one) with other
    query/document token budgets.

    Only the preprocessors change; a BERT tower's position embeddings must cover the new
    lengths (its ``max_sequence_length``; checked for the ``query_tower`` and
    ``document_tower`` of a two-tower config). Returns ``model`` itself when nothing changes.
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
