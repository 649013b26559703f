"""A static bag-of-words model distilled from a Transformer tower (model2vec: Tulkens and van
Dongen 2024).

Each vocabulary token's vector is the Transformer's sentence embedding of that token alone
(``[CLS] t [SEP]``, the tower's own pooling), the table is reduced by PCA (e.g. 384 -> 256
dimensions), and each row is weighted by a SIF prior (Arora et al. 2017: a / (a + p(t)), p the
token's frequency in a corpus), so that frequent tokens count less. A text is then the mean of
its tokens' rows: the BoW tower of Chang et al. 2020 (Sec. 4.1) without its MLP, which encodes
hundreds of times faster than the Transformer it came from. The paper's pretraining tasks and
the multi-task recipe train it further like any tower (static-retrieval-mrl trains static
embeddings contrastively the same way).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

SIF_A = 1e-3  # SIF's a (Arora et al. 2017, Sec. 4), model2vec's default
DISTILL_BATCH = 1024  # single-token texts encoded at once


def token_vectors(model, batch_size: int = DISTILL_BATCH) -> np.ndarray:
    """[vocab_size, dim] float32: `model`'s query-tower embedding of every vocabulary token
    alone, ``[CLS] t [SEP]`` (before any normalisation of the model)."""
    import tensorflow as tf

    pre = model.query_preprocessor
    vocab = pre.vocab_size
    rows = []
    for start in range(0, vocab, batch_size):
        ids = np.arange(start, min(start + batch_size, vocab), dtype=np.int32)
        packed = {"input_word_ids": tf.constant(np.stack(
                      [np.full_like(ids, pre.cls_id), ids, np.full_like(ids, pre.sep_id)], 1)),
                  "input_mask": tf.ones([len(ids), 3], tf.int32),
                  "input_type_ids": tf.zeros([len(ids), 3], tf.int32)}
        rows.append(model.query_tower(packed, training=False).numpy())
    return np.concatenate(rows).astype(np.float32)


def pca(vectors: np.ndarray, dim: int) -> np.ndarray:
    """`vectors` [n, d] centred and projected on their first `dim` principal axes (SVD)."""
    if not 0 < dim <= vectors.shape[1]:
        raise ValueError(f"PCA dimension must be in 1..{vectors.shape[1]} (got {dim}).")
    centred = vectors - vectors.mean(0, keepdims=True)
    _, _, axes = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
    return (centred @ axes[:dim].T).astype(np.float32)


def sif_weights(counts: np.ndarray, a: float = SIF_A) -> np.ndarray:
    """a / (a + p(t)) for token counts [vocab] (p = count / total): 1 for an unseen token,
    near 0 for one in every text ([CLS], [SEP])."""
    counts = np.asarray(counts, np.float64)
    total = counts.sum()
    if total <= 0:
        raise ValueError("SIF weights need token counts with a positive total.")
    return (a / (a + counts / total)).astype(np.float32)


def distill_static_model(model, counts: np.ndarray, *, dim: int = 256,
                         sif_a: float = SIF_A, document_length: Optional[int] = None):
    """A static `TwoTowerModel` (one shared `BowMlpTower` without MLP, cosine scores) of
    `model`'s vocabulary and tokenizer, its table distilled from `model`.

    Args:
      model: a `TwoTowerModel` with a BERT query tower (e.g. an imported checkpoint).
      counts: [vocab_size] token frequencies in the corpus to be searched (e.g.
        `tt_zoo.modeling.query_token_weights.document_frequencies`), for the SIF weights.
      dim: the table's PCA dimension (and the embedding's).
      document_length: the document token budget (default: `model`'s).

    Returns:
      (static model, stats): stats hold the PCA's kept variance and the seconds taken.
    """
    import time

    from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
    from tt_zoo.modeling.models import build_two_tower_model

    counts = np.asarray(counts)
    if counts.shape != (model.query_preprocessor.vocab_size,):
        raise ValueError(f"counts must have one entry per vocabulary token "
                         f"({model.query_preprocessor.vocab_size}), got shape {counts.shape}.")
    start = time.perf_counter()
    vectors = token_vectors(model)
    reduced = pca(vectors, dim)
    kept = float(reduced.var(0).sum() / (vectors - vectors.mean(0)).var(0).sum())
    table = reduced * sif_weights(counts, sif_a)[:, None]
    static = build_two_tower_model(
        model.query_preprocessor.vocabulary, encoder="bow_mlp", embedding_dim=dim,
        query_length=model.query_preprocessor.seq_length,
        document_length=document_length or model.document_preprocessor.seq_length,
        share_towers=True, bow_token_embedding_dim=dim, bow_mlp=False,
        normalize_embeddings=True, lower_case=model.query_preprocessor.lower_case,
        case_folding=model.query_preprocessor.case_folding,
        loss=CorrectedSampledSoftmaxLoss(temperature=model.retrieval_loss.temperature))
    static.build_by_calling()
    static.query_tower.token_embeddings.set_weights([table])
    return static, {"pca_dim": dim, "pca_variance_kept": round(kept, 4), "sif_a": sif_a,
                    "seconds": round(time.perf_counter() - start, 1)}


def corpus_token_counts(model, titles: Sequence[str], texts: Sequence[str]) -> Tuple[np.ndarray, int]:
    """(document frequency of every token, number of documents) over (title, text) documents
    as `model`'s document preprocessor packs them: the counts `distill_static_model` weighs by."""
    from tt_zoo.modeling.query_token_weights import document_frequencies
    return document_frequencies(model.document_preprocessor, titles, texts)
