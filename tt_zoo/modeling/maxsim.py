"""MaxSim: the late-interaction score of ColBERT (Khattab & Zaharia, SIGIR 2020, Sec. 3.3).

    S(q, d) = sum over query tokens i of  max over document tokens j of  <E_q[i], E_d[j]>

with E_q, E_d the L2-normalised token vectors of `tt_zoo.modeling.late_interaction`. Padding
(and, on the document side, punctuation) is masked: a masked query token adds nothing to the
sum, a masked document token is never the maximum, and a document with no unmasked token
scores 0.
"""

from __future__ import annotations

import tensorflow as tf

TOKEN_VECTORS = "token_vectors"  # float32 [batch, length, dim]
MASK = "mask"                    # int32 [batch, length], 1 on the tokens that are scored


def maxsim_scores(query_vectors: tf.Tensor, query_mask: tf.Tensor, document_vectors: tf.Tensor,
                  document_mask: tf.Tensor) -> tf.Tensor:
    """All-pairs MaxSim of a batch of queries and a batch of documents.

    Args:
      query_vectors: [num_queries, query_length, dim].
      query_mask: [num_queries, query_length], 1 on the query tokens that count.
      document_vectors: [num_documents, document_length, dim].
      document_mask: [num_documents, document_length], 1 on the document tokens that count.

    Returns:
      scores: [num_queries, num_documents] float32, S(q, d) as the module docstring says.

    Memory: one [num_queries, query_length, num_documents, document_length] similarity tensor
    (batch 128 with 32 query and 128 document tokens: 67M floats, 268 MB).
    """
    query_vectors = tf.convert_to_tensor(query_vectors)
    document_vectors = tf.convert_to_tensor(document_vectors, dtype=query_vectors.dtype)
    for name, vectors in (("query_vectors", query_vectors),
                          ("document_vectors", document_vectors)):
        if vectors.shape.rank != 3:
            raise ValueError(f"{name} must be 3D [batch, length, dim] (got {vectors.shape}).")
    dims = (query_vectors.shape[-1], document_vectors.shape[-1])
    if None not in dims and dims[0] != dims[1]:
        raise ValueError("Query and document token vectors differ in size "
                         f"({query_vectors.shape[-1]} vs {document_vectors.shape[-1]}).")
    q_shape, d_shape = tf.shape(query_vectors), tf.shape(document_vectors)
    num_queries, query_length = q_shape[0], q_shape[1]
    num_documents, document_length = d_shape[0], d_shape[1]
    dim = q_shape[2]
    # One matmul: [num_queries * query_length, dim] x [dim, num_documents * document_length].
    similarity = tf.matmul(tf.reshape(query_vectors, [-1, dim]),
                           tf.reshape(document_vectors, [-1, dim]), transpose_b=True)
    similarity = tf.reshape(similarity, [num_queries, query_length, num_documents,
                                         document_length])
    document_mask = tf.cast(document_mask, tf.bool)
    lowest = tf.constant(similarity.dtype.min, similarity.dtype)
    best = tf.reduce_max(tf.where(document_mask[tf.newaxis, tf.newaxis], similarity, lowest),
                         axis=-1)  # [num_queries, query_length, num_documents]
    has_tokens = tf.reduce_any(document_mask, axis=-1)[tf.newaxis, tf.newaxis]
    best = tf.where(has_tokens, best, tf.zeros_like(best))
    weights = tf.cast(query_mask, best.dtype)[:, :, tf.newaxis]
    return tf.reduce_sum(best * weights, axis=1)


def maxsim_candidate_scores(queries: dict, candidates: dict) -> tf.Tensor:
    """MaxSim of each query with its own K candidates (a distillation batch's scores,
    `tt_zoo.modeling.distillation`), not all pairs as `maxsim_scores`.

    Args:
      queries: {TOKEN_VECTORS: [B, query_length, dim], MASK: [B, query_length]}.
      candidates: the same of B * K documents, query b's at rows b * K ... b * K + K - 1.

    Returns:
      [B, K] float32, S(q_b, d_bk) as the module docstring says (masked tokens as there).
    """
    query_vectors = tf.cast(queries[TOKEN_VECTORS], tf.float32)
    document_vectors = tf.cast(candidates[TOKEN_VECTORS], tf.float32)
    if query_vectors.shape.rank != 3 or document_vectors.shape.rank != 3:
        raise ValueError("MaxSim candidates need token vectors [batch, length, dim] (got "
                         f"{query_vectors.shape} and {document_vectors.shape}).")
    batch = tf.shape(query_vectors)[0]
    d_shape = tf.shape(document_vectors)
    grouped = tf.reshape(document_vectors, [batch, -1, d_shape[1], d_shape[2]])
    similarity = tf.einsum("bqm,bkdm->bkqd", query_vectors, grouped)
    document_mask = tf.reshape(tf.cast(candidates[MASK], tf.bool), [batch, -1, 1, d_shape[1]])
    lowest = tf.constant(similarity.dtype.min, similarity.dtype)
    best = tf.reduce_max(tf.where(document_mask, similarity, lowest), axis=-1)  # [B, K, Lq]
    best = tf.where(tf.reduce_any(document_mask, axis=-1), best, tf.zeros_like(best))
    weights = tf.cast(queries[MASK], tf.float32)[:, tf.newaxis, :]
    return tf.reduce_sum(best * weights, axis=-1)
