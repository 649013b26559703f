"""Query-side adaptation against a fixed passage index (ADORE, Zhan et al., SIGIR 2021, Sec. 4).

A trained two-tower model has embedded a collection once with its document tower psi (for a
MiniLM, hours of CPU for 130K passages here). Its query tower phi is then trained alone against
those fixed embeddings: each training question is scored against *every* passage, and the loss is
the softmax over the whole index with each passage that holds one of the question's answers a
positive (DPR's distant supervision, Karpukhin et al. 2020, Sec. 5.1):

    s_j = <phi(q), psi(d_j)> / tau
    loss(q) = logsumexp_j s_j - logsumexp_{j in P(q)} s_j

Nothing is sampled: the negatives are the index itself, so the passages the current phi ranks
highest are always in the denominator (ADORE's dynamic hard negatives, exact here rather than
its top-k). Only phi changes, so the index stays valid: no passage is encoded again, and the
adapted model's document side is the base model's, recorded on its card
(`tt_zoo.artifacts.model_card.Lineage.document_encoder`) so cached passage embeddings are reused
(`tt_zoo.evaluation.document_embeddings.model_tag`).

A stronger teacher's ranking can be distilled the same way (listwise, as RocketQAv2, Ren et
al. 2021, Sec. 3, and TCT-ColBERT, Lin et al. 2021): for each question the teacher's scores t_k
over its candidate passages C(q) (its own top-k of the collection) give p = softmax(t / T), and the
student's full-index log-softmax is pulled towards it:

    kl(q) = sum_{k in C(q)} p_k (log p_k - log softmax_j(s_j)[k])
    loss(q) = (1 - w) * loss_answers(q) + w * kl(q)

The teacher is not run while training (its scores are read from a file made once,
`tt_zoo.training.teacher_targets`), so a teacher five times the student's size costs nothing per
step, and questions without an answer in the collection (generated ones, other sets) train on
the teacher's ranking alone.

Chang et al. 2020 train both towers on every task (Sec. 2); this is the step after them, for a
user with questions and a collection already indexed: the model's own index, its own failures
as negatives. A shared tower is untied first (`tt_zoo.training.multi_task.untie_towers`); the
token embeddings stay frozen by default, so the two towers keep one vocabulary table (and a
float16 artifact can store it once).
"""

from __future__ import annotations

from typing import List, Sequence

import numpy as np
import tensorflow as tf

from tt_zoo.modeling.distillation import listwise_kl_over_index
from tt_zoo.modeling.models import finished_embeddings

QUESTION_ROW = "question_row"  # a batch's rows into the training questions (their positives)
QUERY_INPUTS = "query_inputs"


def multi_positive_softmax_loss(scores: tf.Tensor, positive_mask: tf.Tensor) -> tf.Tensor:
    """Per-question loss [batch]: logsumexp of all `scores` [batch, n] minus logsumexp of those
    where `positive_mask` [batch, n] (bool) holds. A question's loss is -log of the softmax mass
    on its positives; it is 0 when every passage is a positive. Each row needs a positive."""
    lowest = tf.fill(tf.shape(scores), tf.constant(scores.dtype.min, scores.dtype))
    return (tf.reduce_logsumexp(scores, axis=1)
            - tf.reduce_logsumexp(tf.where(positive_mask, scores, lowest), axis=1))


def token_embedding_layer(tower) -> tf.keras.layers.Layer:
    """The tower's token (WordPiece) embedding table, as its family names it
    (``token_embedding_table``: a BERT or MPNet tower's word embeddings, a bag-of-words tower's
    token vectors)."""
    table = getattr(tower, "token_embedding_table", None)
    if table is None:
        raise ValueError(f"token_embedding_layer: a {type(tower).__name__} names no token "
                         "embedding table (a tower family defines `token_embedding_table`).")
    return table


class QueryAdapter(tf.keras.Model):
    """A query tower trained against fixed passage embeddings with the full-index softmax.

    Args:
      model: the two-tower model (`TwoTowerModel`) whose query tower trains; its preprocessor
        packs the questions and its `normalize_embeddings` applies to phi(q).
      passage_embeddings: float32 [n, dim], the model's document embeddings of the collection
        (row j is psi of passage j).
      positives: for each training question, the rows of the passages holding an answer
        (at least one each).
      temperature: tau (the model's own loss temperature for a cosine model).
      train_token_embeddings: also train the query tower's token embedding table (frozen by
        default: the vocabulary's vectors stay the document tower's).
      teacher: a teacher's ranking of each training question's candidates
        (`tt_zoo.training.teacher_targets.TeacherTargets`, rows into `passage_embeddings`), or
        None; with it a question may have no positive (it trains on the teacher alone).
      distill_weight: w, the teacher's share of the loss (module docstring); 0 without a
        teacher.

    `fit` takes batches of {QUERY_INPUTS: packed ids, QUESTION_ROW: rows into `positives`}
    (`question_arrays`, through `tt_zoo.training.step_data.step_batches`); only the query
    tower's variables get gradients.

    Example:
      >>> adapter = QueryAdapter(untied, embeddings, positives, temperature=0.05)
      >>> adapter.compile(tf.keras.optimizers.Adam(1e-5))
      >>> adapter.fit(batches, steps_per_epoch=65, epochs=3)
    """

    def __init__(self, model, passage_embeddings: np.ndarray, positives: Sequence[np.ndarray], *,
                 temperature: float, train_token_embeddings: bool = False, teacher=None,
                 distill_weight: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        passage_embeddings = np.asarray(passage_embeddings, np.float32)
        if passage_embeddings.ndim != 2 or passage_embeddings.shape[1] != model.embedding_dim:
            raise ValueError(f"QueryAdapter: passage embeddings of shape "
                             f"{passage_embeddings.shape}; expected [passages, "
                             f"{model.embedding_dim}] (the model's embedding size).")
        lengths = np.array([len(p) for p in positives], np.int64)
        if (teacher is None) != (distill_weight == 0) or not 0 <= distill_weight <= 1:
            raise ValueError(f"QueryAdapter: distill_weight {distill_weight} with "
                             f"{'a' if teacher is not None else 'no'} teacher; expected a weight "
                             "in (0, 1] with a teacher, 0 without.")
        if len(lengths) == 0 or (teacher is None and lengths.min() == 0):
            raise ValueError("QueryAdapter: every training question needs at least one positive "
                             "passage (keep the answerable questions only).")
        values = np.concatenate([np.zeros(0, np.int64),
                                 *(np.asarray(p, np.int64) for p in positives)])
        if len(values) and (values.min() < 0 or values.max() >= len(passage_embeddings)):
            raise ValueError(f"QueryAdapter: positive rows outside [0, {len(passage_embeddings)}).")
        if teacher is not None:
            teacher.check(len(lengths), len(passage_embeddings))
        if not temperature > 0:
            raise ValueError(f"QueryAdapter: the temperature must be positive (got {temperature}).")
        self.query_preprocessor = model.query_preprocessor
        self.query_tower = model.query_tower
        self.normalize = bool(model.normalize_embeddings)
        self.temperature = float(temperature)
        self.passages = tf.constant(passage_embeddings)
        self.positives = tf.RaggedTensor.from_row_lengths(values, lengths)
        self.distill_weight = float(distill_weight)
        if teacher is not None:
            self.teacher_rows = tf.constant(teacher.rows)
            self.teacher_scores = tf.constant(teacher.scores / teacher.temperature)
        self.frozen = [] if train_token_embeddings else [token_embedding_layer(self.query_tower)]
        for layer in self.frozen:
            layer.trainable = False

    def release(self) -> None:
        """Makes the frozen token embeddings trainable again (before the model is exported, so a
        later fine-tuning of the export trains them as any other)."""
        for layer in self.frozen:
            layer.trainable = True

    def call(self, packed, training=None) -> tf.Tensor:
        """Packed query ids -> scores against every passage / tau, [batch, passages]."""
        queries = finished_embeddings(self.query_tower(packed, training=training), self.normalize)
        return tf.matmul(queries, self.passages, transpose_b=True) / self.temperature

    def positive_mask(self, rows: tf.Tensor) -> tf.Tensor:
        """[batch, passages] bool: the positives of the training questions `rows`."""
        positives = tf.gather(self.positives, rows)
        indices = tf.stack([positives.value_rowids(), positives.values], axis=1)
        shape = tf.stack([tf.shape(rows, out_type=tf.int64)[0],
                          tf.shape(self.passages, out_type=tf.int64)[0]])
        counts = tf.scatter_nd(indices, tf.ones_like(positives.values, tf.int32), shape)
        return counts > 0

    def losses_of(self, scores: tf.Tensor, rows: tf.Tensor) -> dict:
        """{"answers": the multi-positive loss (0 for a question without positives), "kl": the
        teacher's listwise KL (with a teacher)} [batch] each, for `scores` of the training
        questions `rows`."""
        mask = self.positive_mask(rows)
        answers = tf.where(tf.reduce_any(mask, axis=1),
                           multi_positive_softmax_loss(scores, mask), tf.zeros_like(scores[:, 0]))
        if not self.distill_weight:
            return {"answers": answers}
        return {"answers": answers, "kl": listwise_kl_over_index(
            scores, tf.gather(self.teacher_rows, rows), tf.gather(self.teacher_scores, rows))}

    def train_step(self, batch):
        variables = self.query_tower.trainable_variables
        with tf.GradientTape() as tape:
            parts = self.losses_of(self(batch[QUERY_INPUTS], training=True), batch[QUESTION_ROW])
            w = self.distill_weight
            loss = tf.reduce_mean((1.0 - w) * parts["answers"] + w * parts.get("kl", 0.0))
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        metrics = {"loss": loss}
        if w:
            metrics.update({k: tf.reduce_mean(v) for k, v in parts.items()})
        return metrics


def question_arrays(model, questions: Sequence[str]) -> dict:
    """{QUERY_INPUTS: the questions packed by the model's query preprocessor (cut to the
    longest), QUESTION_ROW: 0..n-1}: the arrays `step_batches` serves to `QueryAdapter.fit`."""
    from tt_zoo.modeling.inference import cut_to_longest  # noqa: PLC0415

    packed = cut_to_longest(model.query_preprocessor(tf.constant(list(questions))))
    return {QUERY_INPUTS: {k: v.numpy() for k, v in packed.items()},
            QUESTION_ROW: np.arange(len(questions), dtype=np.int64)}


def check_passage_embeddings(model, embeddings: np.ndarray, titles: Sequence[str],
                             texts: Sequence[str], where: str, sample: int = 64,
                             min_cosine: float = 0.999) -> List[float]:
    """Checks that `embeddings` (from `where`) are the model's document embeddings of the
    passages (titles, texts), row for row: a floating array of their shape; every row finite
    and not zero (`_check_every_row`); and `sample` rows (`_sample_rows`: spread evenly over
    the file, and as many at seeded random places) encoded again, each within `min_cosine` of
    the stored row. Returns the cosines.

    Raises:
      ValueError: naming `where`, the row and what was expected.
    """
    n, dim = len(texts), model.embedding_dim
    if getattr(embeddings, "dtype", np.dtype(object)).kind != "f":
        raise ValueError(f"{where}: an array of {getattr(embeddings, 'dtype', type(embeddings))} "
                         f"values; expected float embeddings, one row per passage.")
    if tuple(embeddings.shape) != (n, dim):
        raise ValueError(f"{where}: embeddings of shape {tuple(embeddings.shape)}; expected "
                         f"({n:,}, {dim}): one row of the model's embedding size per passage.")
    _check_every_row(embeddings, where)
    rows = _sample_rows(n, sample)
    fresh = model.encode_documents([texts[r] for r in rows], titles=[titles[r] for r in rows])
    stored = np.asarray(embeddings[rows], np.float32)
    cosines = []
    for row, a, b in zip(rows, stored, fresh):
        cosine = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))
        if cosine < min_cosine:
            raise ValueError(f"{where}: row {row} has cosine {cosine:.4f} with the model's own "
                             f"embedding of passage {row} (expected >= {min_cosine}): these are "
                             "not this model's document embeddings of these passages, in this "
                             "order.")
        cosines.append(cosine)
    return cosines


def _check_every_row(embeddings: np.ndarray, where: str, chunk: int = 65536) -> None:
    """Raises ValueError naming the first row of `embeddings` (read `chunk` rows at a time, a
    memory map included) that holds a NaN or an infinity, or is all zeros: no model embeds a
    passage so."""
    for start in range(0, len(embeddings), chunk):
        block = np.asarray(embeddings[start:start + chunk], np.float32)
        bad = ~np.isfinite(block).all(axis=1)
        if bad.any():
            raise ValueError(f"{where}: row {start + int(np.argmax(bad))} is not finite (NaN or "
                             "infinite): not a model's embedding.")
        zero = ~block.any(axis=1)
        if zero.any():
            raise ValueError(f"{where}: row {start + int(np.argmax(zero))} is all zero: not a "
                             "model's embedding.")


def _sample_rows(n: int, sample: int, seed: int = 0) -> np.ndarray:
    """Up to `sample` distinct rows of `n`: half spread evenly (first and last included), half
    at seeded random places, so neither a regular pattern nor a block of bad rows hides."""
    even = np.linspace(0, n - 1, min(sample // 2 or 1, n)).astype(np.int64)
    rest = np.setdiff1d(np.arange(n), even)
    extra = np.random.default_rng(seed).choice(rest, min(sample - len(even), len(rest)),
                                               replace=False)
    return np.unique(np.concatenate([even, extra]).astype(np.int64))


__all__ = ["multi_positive_softmax_loss", "token_embedding_layer", "QueryAdapter",
           "question_arrays", "check_passage_embeddings", "QUERY_INPUTS", "QUESTION_ROW"]
