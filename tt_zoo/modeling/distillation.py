"""Distillation losses: a student retriever learns a teacher's scores over each query's
candidates.

Both losses take, for a batch of B queries, the student's and the teacher's scores of the same
K candidates of each query, ``[B, K]``, candidate 0 being the teacher's best (the sampling of
`tt_zoo.training.distill_data` keeps it first):

* ``"kl"``, listwise KL divergence: the teacher's softmax over the candidates at temperature T,
  p_t = softmax(t / T), against the student's log-softmax at its own temperature tau,
  KL(p_t || p_s) = sum_k p_t,k (log p_t,k - log p_s,k), averaged over the queries. RocketQAv2
  (Ren et al. 2021, Sec. 3.2, "dynamic listwise distillation") and Tevatron's distillation
  train a bi-encoder this way; TCT-ColBERT (Lin et al. 2021, Sec. 3) distils a ColBERT teacher
  into a bi-encoder by the same KL over in-batch candidates; the temperature is Hinton et al.'s
  (2015). A cosine-scored student keeps its loss temperature (the zoo's 0.05) as tau, and the
  teacher's T defaults to it, so both softmaxes see cosines on one scale.
* ``"margin_mse"``, Margin-MSE (Hofstätter et al. 2020, *Improving Efficient Neural Ranking
  Models with Cross-Architecture Knowledge Distillation*, Sec. 3): the mean squared error
  between the student's and the teacher's score margins of (positive, negative) pairs,
  ((s_0 - s_k) - (t_0 - t_k))^2, here the positive being candidate 0 and every other candidate
  a negative, averaged over the K - 1 pairs and the queries. Raw scores, no temperature: only
  margins are matched, so the student keeps its own score scale up to a shift.

`DistillationLoss` is the training setting (which loss, T, tau): not part of any model's
config or export (`tt_zoo.modeling.pair_model.PairModel.set_distillation`).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tt_zoo.data.distill_task import DISTILL_LOSSES


def _scores(student_scores, teacher_scores):
    student = tf.cast(student_scores, tf.float32)
    teacher = tf.cast(teacher_scores, tf.float32)
    if student.shape.rank != 2 or teacher.shape.rank != 2:
        raise ValueError(f"Student and teacher scores must be 2D [queries, candidates] (got "
                         f"{student.shape} and {teacher.shape}).")
    return student, teacher


def listwise_kl(student_scores, teacher_scores, *, temperature: float = 1.0,
                student_temperature: float = 1.0) -> tf.Tensor:
    """KL(softmax(teacher / T) || softmax(student / tau)) of each query (RocketQAv2; TCT).

    Args:
      student_scores: `[B, K]` the student's scores of each query's K candidates.
      teacher_scores: `[B, K]` the teacher's scores of the same candidates.
      temperature: T, dividing the teacher's scores.
      student_temperature: tau, dividing the student's scores.

    Returns:
      `[B]` float32, each query's divergence (0 when the two distributions agree).
    """
    student, teacher = _scores(student_scores, teacher_scores)
    return kl_divergence(tf.nn.log_softmax(teacher / temperature, axis=-1),
                         tf.nn.log_softmax(student / student_temperature, axis=-1))


def kl_divergence(log_p: tf.Tensor, log_q: tf.Tensor) -> tf.Tensor:
    """sum_k p_k (log p_k - log q_k) over the last axis, from log-probabilities (a k where p_k
    underflows to 0 adds 0)."""
    return tf.reduce_sum(tf.exp(log_p) * (log_p - log_q), axis=-1)


def listwise_kl_over_index(student_scores: tf.Tensor, teacher_rows: tf.Tensor,
                           teacher_scores: tf.Tensor) -> tf.Tensor:
    """KL(p || q) [B] of the teacher's softmax p over each query's candidates against the
    student's softmax q over a whole index, at the candidates: query adaptation's distillation
    (`tt_zoo.training.query_adaptation`), where the student scores every passage anyway.

    Args:
      student_scores: [B, n] the student's scores of all n passages (already / its tau).
      teacher_rows: [B, k] int, each query's candidate rows into the n passages; -1 pads a
        query with fewer than k.
      teacher_scores: [B, k] the teacher's scores of those candidates (already / its T).
    """
    teacher = tf.cast(teacher_scores, tf.float32)
    valid = teacher_rows >= 0
    log_p = tf.nn.log_softmax(tf.where(valid, teacher, tf.fill(tf.shape(teacher), -1e9)), axis=1)
    log_q = tf.gather(tf.nn.log_softmax(tf.cast(student_scores, tf.float32), axis=1),
                      tf.maximum(teacher_rows, 0), batch_dims=1)
    return kl_divergence(log_p, log_q)


def margin_mse(student_scores, teacher_scores) -> tf.Tensor:
    """Margin-MSE (Hofstätter et al. 2020) of each query: candidate 0 is the positive, each
    other candidate a negative; the mean over those K - 1 pairs of
    ((s_0 - s_k) - (t_0 - t_k))^2.

    Args:
      student_scores: `[B, K]`, K >= 2.
      teacher_scores: `[B, K]`.

    Returns:
      `[B]` float32.
    """
    student, teacher = _scores(student_scores, teacher_scores)
    student_margins = student[:, :1] - student[:, 1:]
    teacher_margins = teacher[:, :1] - teacher[:, 1:]
    return tf.reduce_mean(tf.square(student_margins - teacher_margins), axis=-1)


@dataclasses.dataclass(frozen=True)
class DistillationLoss:
    """A distillation setting: which loss (`DISTILL_LOSSES`), the teacher's temperature T and
    the student's tau (``"kl"`` only; Margin-MSE takes raw scores). Called on
    ``(student_scores, teacher_scores)`` `[B, K]`, it gives the batch's mean loss.

    Example:
      >>> loss = DistillationLoss("kl", temperature=0.05, student_temperature=0.05)
      >>> float(loss([[0.9, 0.1]], [[0.8, 0.2]]))  # doctest: +SKIP
    """

    loss: str = "kl"
    temperature: float = 1.0
    student_temperature: float = 1.0

    def __post_init__(self):
        if self.loss not in DISTILL_LOSSES:
            raise ValueError(f"Unknown distillation loss {self.loss!r}; expected one of "
                             f"{DISTILL_LOSSES}.")
        for name in ("temperature", "student_temperature"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"DistillationLoss: {name} must be a positive number "
                                 f"(got {value!r}).")

    def per_query(self, student_scores, teacher_scores) -> tf.Tensor:
        """`[B]` each query's loss."""
        if self.loss == "kl":
            return listwise_kl(student_scores, teacher_scores, temperature=self.temperature,
                               student_temperature=self.student_temperature)
        return margin_mse(student_scores, teacher_scores)

    def __call__(self, student_scores, teacher_scores) -> tf.Tensor:
        return tf.reduce_mean(self.per_query(student_scores, teacher_scores))

    def describe(self) -> dict:
        """The setting as a record (a card's, a run's settings)."""
        if self.loss == "kl":
            return {"loss": "kl", "temperature": self.temperature,
                    "student_temperature": self.student_temperature}
        return {"loss": "margin_mse"}


def candidate_scores(query_embeddings, candidate_embeddings) -> tf.Tensor:
    """The dot products of each query with its own K candidates.

    Args:
      query_embeddings: `[B, dim]`.
      candidate_embeddings: `[B * K, dim]`, query b's candidates at rows b * K ... b * K + K - 1.

    Returns:
      `[B, K]` float32 scores f(q, d) = <phi(q), psi(d)> (Chang et al. 2020, Sec. 2).
    """
    queries = tf.cast(query_embeddings, tf.float32)
    candidates = tf.cast(candidate_embeddings, tf.float32)
    if queries.shape.rank != 2 or candidates.shape.rank != 2:
        raise ValueError("Distillation scores single-vector embeddings: queries [B, dim] and "
                         f"candidates [B * K, dim] (got {queries.shape} and {candidates.shape}).")
    batch = tf.shape(queries)[0]
    grouped = tf.reshape(candidates, [batch, -1, tf.shape(candidates)[-1]])
    return tf.einsum("bd,bkd->bk", queries, grouped)
