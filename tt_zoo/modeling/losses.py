"""The retrieval loss: sampled softmax over the batch's documents with the logQ correction.

Chang et al. 2020, Sec. 2: the model maximises p(d|q) = exp f(q,d) / sum_{d' in D} exp f(q,d');
the sum over all documents is approximated by the documents of the training batch, and each
candidate's logit is corrected by subtracting the log of its sampling probability (Yi et al. 2019;
Bengio & Senecal 2008) so that frequent documents are not over-penalised as negatives.

On top of `tfrs.tasks.Retrieval` this module adds what neither TFRS nor the Model Garden has:
negatives gathered across replicas under `tf.distribute`, so that each query is scored against
the *global* batch (the paper's 8,192 pairs over 32 TPU chips), and a loss normalised by the
global batch size so that the summed per-replica gradients equal the single-device gradient.

The score of a (query, candidate) pair is the inner product of their embeddings
(``similarity="dot"``, the paper's f(q, d) = <phi(q), psi(d)>), or ColBERT's MaxSim over token
vectors (``similarity="maxsim"``, `tt_zoo.modeling.maxsim`; Khattab & Zaharia 2020, Sec. 3.3):
the same candidates, corrections and loss either way.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import tensorflow as tf
import tensorflow_recommenders as tfrs

from tt_zoo.modeling.maxsim import MASK, TOKEN_VECTORS, maxsim_scores

_ID_HASH_BUCKETS = 2**62
SIMILARITIES = ("dot", "maxsim")


def hash_ids(ids: tf.Tensor) -> tf.Tensor:
    """Maps string document ids to int64 so they can cross replicas (collectives carry no strings)."""
    if ids.dtype == tf.string:
        return tf.strings.to_hash_bucket_fast(ids, _ID_HASH_BUCKETS)
    return tf.cast(ids, tf.int64)


class GatheredCandidates(NamedTuple):
    embeddings: object           # [global_candidates, dim] (or a dict of token vectors and
                                 # mask [global_candidates, length, ...]), this replica's first
    ids: Optional[tf.Tensor]     # [global_candidates] int64
    probabilities: Optional[tf.Tensor]  # [global_candidates] float32
    global_batch_size: tf.Tensor  # scalar float32: number of queries over all replicas


def gather_across_replicas(values: tf.Tensor, local_sizes: Optional[tf.Tensor] = None):
    """All-gathers `values` along axis 0 and rotates the result so this replica's rows come first.

    Rows keep their order; only the starting point moves (as TFRS' private
    `_cross_replica_concat` does for TPUs), so the positives of this replica's queries sit on the
    diagonal of the [local_queries, global_candidates] score matrix, as `tfrs.tasks.Retrieval`'s
    `tf.eye` labels expect. Replicas may hold batches of different sizes.

    Args:
      values: [local_rows, ...] this replica's rows.
      local_sizes: optional [num_replicas] int32 rows per replica (gathered if not given).

    Returns:
      (gathered [global_rows, ...], local_sizes [num_replicas]). Outside a multi-replica context,
      `values` unchanged.
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values, tf.shape(values)[:1]
    if local_sizes is None:
        local_sizes = context.all_gather(tf.shape(values)[:1], axis=0)
    gathered = context.all_gather(values, axis=0)
    replica_id = tf.cast(context.replica_id_in_sync_group, tf.int32)
    offset = tf.reduce_sum(local_sizes[:replica_id])
    return tf.roll(gathered, shift=-offset, axis=0), local_sizes


class ScoredRetrieval(tfrs.tasks.Retrieval):
    """`tfrs.tasks.Retrieval` that also takes a precomputed score matrix.

    `call` is TFRS's own (scores = query_embeddings x candidate_embeddings^T); `call_on_scores`
    runs the same steps from a [num_queries, num_candidates] score matrix that another scoring
    function made (MaxSim), so every score function shares one temperature, logQ correction,
    accidental-hit removal, loss and in-batch metric.
    """

    def call_on_scores(self, scores: tf.Tensor, sample_weight=None,
                       candidate_sampling_probability=None, candidate_ids=None,
                       compute_batch_metrics: bool = True) -> tf.Tensor:
        """The task loss of `scores` [num_queries, num_candidates], column i the positive of
        query i (`tfrs.tasks.Retrieval.call` from its score matrix on, without the factorized
        metrics, which need embeddings)."""
        num_queries, num_candidates = tf.shape(scores)[0], tf.shape(scores)[1]
        labels = tf.eye(num_queries, num_candidates)
        if self._temperature is not None:
            scores = scores / self._temperature
        if candidate_sampling_probability is not None:
            scores = tfrs.layers.loss.SamplingProbablityCorrection()(
                scores, candidate_sampling_probability)
        if self._remove_accidental_hits:
            if candidate_ids is None:
                raise ValueError("When accidental hit removal is enabled, candidate ids must be "
                                 "supplied.")
            scores = tfrs.layers.loss.RemoveAccidentalHits()(labels, scores, candidate_ids)
        if self._num_hard_negatives is not None:
            scores, labels = tfrs.layers.loss.HardNegativeMining(self._num_hard_negatives)(
                scores, labels)
        loss = self._loss(y_true=labels, y_pred=scores, sample_weight=sample_weight)
        update_ops = [metric.update_state(loss) for metric in self._loss_metrics]
        if compute_batch_metrics:
            update_ops += [metric.update_state(labels, scores, sample_weight=sample_weight)
                           for metric in self._batch_metrics]
        with tf.control_dependencies(update_ops):
            return tf.identity(loss)


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class CorrectedSampledSoftmaxLoss(tf.keras.layers.Layer):
    """In-batch sampled softmax with logQ correction, accidental-hit removal and global negatives.

    Each query is scored against the documents of the whole (global) batch plus any hard
    negatives; the loss is the mean over the global batch of the softmax cross-entropy of the
    query's own document.

    Args:
      remove_accidental_hits: mask a candidate that has the positive's document id (the same
        passage twice in a batch is not a negative).
      sampling_correction: subtract log q(d) from each candidate's logit when sampling
        probabilities are given.
      cross_replica_negatives: under `tf.distribute`, score against all replicas' documents.
      temperature: optional divisor of the logits.
      similarity: how a query and a candidate are scored: "dot" (embeddings [batch, dim], the
        inner product) or "maxsim" (dicts of "token_vectors" [batch, length, dim] and "mask"
        [batch, length]: ColBERT's MaxSim, `tt_zoo.modeling.maxsim`).
      **kwargs: passed to `tf.keras.layers.Layer`.

    Example:
      >>> loss_layer = CorrectedSampledSoftmaxLoss()
      >>> loss = loss_layer(query_embeddings, document_embeddings, document_ids=ids,
      ...                   sampling_probabilities=q)

    References:
      Chang et al. 2020, Sec. 2 (sampled softmax); Yi et al. 2019, "Sampling-bias-corrected
      neural modeling for large corpus item recommendations" (logQ correction); Khattab &
      Zaharia 2020, Sec. 3.3 (MaxSim).
    """

    def __init__(self, remove_accidental_hits: bool = True, sampling_correction: bool = True,
                 cross_replica_negatives: bool = True, temperature: Optional[float] = None,
                 similarity: str = "dot", **kwargs):
        # Scores and the softmax stay float32 under a mixed bfloat16 policy.
        kwargs.setdefault("dtype", "float32")
        # A fixed name, not Keras's per-process counter ("..._1" for a process's second loss):
        # the name is in a pretraining run's recorded settings, which a resume must match.
        kwargs.setdefault("name", "corrected_sampled_softmax_loss")
        super().__init__(**kwargs)
        self.remove_accidental_hits = remove_accidental_hits
        self.sampling_correction = sampling_correction
        self.cross_replica_negatives = cross_replica_negatives
        self.temperature = temperature
        if similarity not in SIMILARITIES:
            raise ValueError(f"Unknown similarity {similarity!r}; expected one of {SIMILARITIES}.")
        self.similarity = similarity
        self.task = ScoredRetrieval(
            loss=tf.keras.losses.CategoricalCrossentropy(
                from_logits=True, reduction=tf.keras.losses.Reduction.SUM),
            batch_metrics=[tf.keras.metrics.CategoricalAccuracy(name="in_batch_top1")],
            remove_accidental_hits=remove_accidental_hits,
            temperature=temperature)

    def gather_candidates(self, document_embeddings, document_ids=None,
                          sampling_probabilities=None) -> GatheredCandidates:
        """Collects the candidates every query of this replica is scored against.

        `document_embeddings` is a tensor [batch, ...] or a dict of them (token vectors and
        their mask), gathered row by row alike."""
        leaves = tf.nest.flatten(document_embeddings)
        local_size = tf.shape(leaves[0])[:1]
        if self.cross_replica_negatives:
            first, sizes = gather_across_replicas(leaves[0])
            embeddings = tf.nest.pack_sequence_as(
                document_embeddings,
                [first] + [gather_across_replicas(t, sizes)[0] for t in leaves[1:]])
            ids = (gather_across_replicas(hash_ids(document_ids), sizes)[0]
                   if document_ids is not None else None)
            probs = (gather_across_replicas(tf.cast(sampling_probabilities, tf.float32), sizes)[0]
                     if sampling_probabilities is not None else None)
        else:
            embeddings, sizes = document_embeddings, local_size
            ids = hash_ids(document_ids) if document_ids is not None else None
            probs = (tf.cast(sampling_probabilities, tf.float32)
                     if sampling_probabilities is not None else None)
        global_batch = tf.cast(tf.reduce_sum(sizes), tf.float32)
        return GatheredCandidates(embeddings, ids, probs, global_batch)

    def call(self, query_embeddings, document_embeddings, document_ids=None,
             sampling_probabilities=None, hard_negative_embeddings=None, hard_negative_ids=None,
             hard_negative_sampling_probabilities=None, sample_weight=None):
        """Computes the loss for this replica's queries.

        Args:
          query_embeddings: [batch, dim]; with similarity "maxsim", a dict of "token_vectors"
            [batch, query_length, dim] and "mask" [batch, query_length].
          document_embeddings: [batch, dim] (or, with "maxsim", a dict as the queries' of
            [batch, document_length, ...]), row i the positive document of query i.
          document_ids: optional [batch] string or int ids (for accidental-hit removal).
          sampling_probabilities: optional [batch] q(d) of each positive document.
          hard_negative_embeddings: optional [num_hard, dim] (or a dict like
            `document_embeddings`) extra candidates for every query.
          hard_negative_ids: optional [num_hard] ids of the hard negatives.
          hard_negative_sampling_probabilities: optional [num_hard] q(d) of the hard negatives;
            when missing but the batch has probabilities, the batch's mean log q is used.
          sample_weight: optional [batch] weight of each query.

        Returns:
          scalar loss: this replica's summed cross-entropy divided by the global batch size, so
          that summing over replicas gives the global-batch mean.
        """
        if self.similarity == "dot":
            if query_embeddings.shape.rank != 2 or document_embeddings.shape.rank != 2:
                raise ValueError("Query and document embeddings must be 2D [batch, dim] (got "
                                 f"{query_embeddings.shape} and {document_embeddings.shape}).")
        else:
            for name, value in (("query_embeddings", query_embeddings),
                                ("document_embeddings", document_embeddings),
                                ("hard_negative_embeddings", hard_negative_embeddings)):
                if value is not None:
                    _check_token_vectors(value, name)
        if self.remove_accidental_hits and document_ids is None:
            raise ValueError("remove_accidental_hits needs document_ids; pass them or build the "
                             "loss with remove_accidental_hits=False.")
        use_probs = self.sampling_correction and sampling_probabilities is not None
        gathered = self.gather_candidates(document_embeddings, document_ids,
                                          sampling_probabilities if use_probs else None)
        candidates, ids, probs = gathered.embeddings, gathered.ids, gathered.probabilities

        if hard_negative_embeddings is not None:
            extra = self.gather_candidates(
                hard_negative_embeddings, hard_negative_ids,
                hard_negative_sampling_probabilities if use_probs else None)
            candidates = tf.nest.map_structure(lambda a, b: tf.concat([a, b], axis=0),
                                               candidates, extra.embeddings)
            if ids is not None:
                if extra.ids is None:
                    raise ValueError("Hard negatives need ids when accidental hits are removed.")
                ids = tf.concat([ids, extra.ids], axis=0)
            if probs is not None:
                extra_probs = extra.probabilities
                if extra_probs is None:
                    mean_log_q = tf.reduce_mean(tf.math.log(tf.maximum(probs, 1e-12)))
                    extra_probs = tf.fill(tf.shape(tf.nest.flatten(extra.embeddings)[0])[:1],
                                          tf.exp(mean_log_q))
                probs = tf.concat([probs, extra_probs], axis=0)

        if self.similarity == "dot":
            summed = self.task(query_embeddings, candidates, sample_weight=sample_weight,
                               candidate_sampling_probability=probs,
                               candidate_ids=ids if self.remove_accidental_hits else None,
                               compute_metrics=False, compute_batch_metrics=True)
        else:
            scores = maxsim_scores(query_embeddings[TOKEN_VECTORS], query_embeddings[MASK],
                                   candidates[TOKEN_VECTORS], candidates[MASK])
            summed = self.task.call_on_scores(
                scores, sample_weight=sample_weight, candidate_sampling_probability=probs,
                candidate_ids=ids if self.remove_accidental_hits else None)
        return summed / gathered.global_batch_size

    def get_config(self):
        config = super().get_config()
        config.update(remove_accidental_hits=self.remove_accidental_hits,
                      sampling_correction=self.sampling_correction,
                      cross_replica_negatives=self.cross_replica_negatives,
                      temperature=self.temperature)
        if self.similarity != "dot":  # (the configs of the single-vector models stay as they were)
            config["similarity"] = self.similarity
        return config


def _check_token_vectors(value, name: str) -> None:
    """A MaxSim input must be {"token_vectors": [batch, length, dim], "mask": [batch, length]}."""
    if not isinstance(value, dict) or set(value) != {TOKEN_VECTORS, MASK}:
        raise ValueError(f"With similarity 'maxsim', {name} must be a dict of {TOKEN_VECTORS!r} "
                         f"[batch, length, dim] and {MASK!r} [batch, length] (got "
                         f"{sorted(value) if isinstance(value, dict) else type(value).__name__}).")
    vectors, mask = value[TOKEN_VECTORS], value[MASK]
    if vectors.shape.rank != 3 or mask.shape.rank != 2:
        raise ValueError(f"{name}: {TOKEN_VECTORS} must be 3D and {MASK} 2D (got "
                         f"{vectors.shape} and {mask.shape}).")
