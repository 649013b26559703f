"""Retrieval metrics for ReQA: recall@k and MRR, exact top-k by dot product, encoder evaluation.

ReQA (Ahmad et al. 2019) scores a question by the rank of its single gold (sentence, passage)
candidate; Chang et al. 2020 (Sec. 4, Tables 3-5) report recall@1/5/10/50/100. A hit is the gold
candidate index only, never another sentence of the same passage. Metric values are fractions in
[0, 1]; tables multiply by 100.
"""

from __future__ import annotations

import time
from typing import Dict, Sequence

import numpy as np
from tqdm.auto import tqdm

DEFAULT_KS = (1, 5, 10, 50, 100)


def _gold_ranks(ranked_ids, gold_ids) -> np.ndarray:
    """1-based rank of each query's gold id in its ranked list; 0 where it is absent."""
    if len(ranked_ids) != len(gold_ids):
        raise ValueError(f"ranked_ids has {len(ranked_ids)} rows but gold_ids has "
                         f"{len(gold_ids)} entries; need one ranked list per gold id.")
    ranks = np.zeros(len(gold_ids), dtype=np.int64)
    for i, (ranked, gold) in enumerate(zip(ranked_ids, gold_ids)):
        hits = np.flatnonzero(np.asarray(ranked) == gold)
        if hits.size:
            ranks[i] = hits[0] + 1
    return ranks


def recall_at_k(ranked_ids, gold_ids, ks: Sequence[int] = DEFAULT_KS) -> Dict[int, float]:
    """Fraction of queries whose gold id is among the first k of its ranked list.

    Args:
      ranked_ids: one ranked list of candidate ids per query (a list of lists or an array
        ``[num_queries, max_k]``; ``-1`` pads a short list).
      gold_ids: ``[num_queries]`` the gold candidate id of each query.
      ks: cut-offs.

    Returns:
      ``{k: recall}`` for each k.
    """
    ks = tuple(int(k) for k in ks)
    if any(k < 1 for k in ks):
        raise ValueError(f"Every k must be a positive integer (got {ks}).")
    ranks = _gold_ranks(ranked_ids, gold_ids)
    if ranks.size == 0:
        raise ValueError("recall_at_k needs at least one query (got none).")
    found = ranks > 0
    return {k: float(np.mean(found & (ranks <= k))) for k in ks}


def mrr(ranked_ids, gold_ids) -> float:
    """Mean reciprocal rank of the gold id; 0 for a query whose list does not hold it.

    So with lists cut at 100, this is MRR@100.
    """
    ranks = _gold_ranks(ranked_ids, gold_ids)
    if ranks.size == 0:
        raise ValueError("mrr needs at least one query (got none).")
    rr = np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)
    return float(np.mean(rr))


def ranking_metrics(ranked_ids, gold_ids, ks: Sequence[int] = DEFAULT_KS) -> Dict[str, float]:
    """``{"R@1": ..., "R@5": ..., "MRR": ...}`` for these rankings."""
    out = {f"R@{k}": v for k, v in recall_at_k(ranked_ids, gold_ids, ks).items()}
    out["MRR"] = mrr(ranked_ids, gold_ids)
    return out


def exact_top_k(query_emb, cand_emb, k: int, *, block_size: int = 1024):
    """Brute-force top-k by dot product, in blocks of queries.

    Args:
      query_emb: ``[num_queries, dim]``.
      cand_emb: ``[num_candidates, dim]``.
      k: how many to return; capped at ``num_candidates``.

    Returns:
      ``(ids, scores)``, both ``[num_queries, k]``, best first; ties go to the lower id.
    """
    query_emb = np.asarray(query_emb, dtype=np.float32)
    cand_emb = np.asarray(cand_emb, dtype=np.float32)
    if query_emb.ndim != 2 or cand_emb.ndim != 2:
        raise ValueError(f"Embeddings must be 2D (got query {query_emb.shape}, "
                         f"candidates {cand_emb.shape}).")
    if query_emb.shape[1] != cand_emb.shape[1]:
        raise ValueError(f"Query and candidate dims differ (got {query_emb.shape[1]} and "
                         f"{cand_emb.shape[1]}).")
    n_cand = cand_emb.shape[0]
    if n_cand == 0:
        raise ValueError("exact_top_k: no candidates.")
    k = min(int(k), n_cand)
    ids = np.empty((query_emb.shape[0], k), dtype=np.int64)
    scores = np.empty((query_emb.shape[0], k), dtype=np.float32)
    for start in range(0, query_emb.shape[0], block_size):
        block = query_emb[start:start + block_size] @ cand_emb.T  # [b, n_cand]
        if k < n_cand:
            top = np.argpartition(-block, k - 1, axis=1)[:, :k]
        else:
            top = np.broadcast_to(np.arange(n_cand), block.shape)
        top_scores = np.take_along_axis(block, top, axis=1)
        # Sort by score descending, then id ascending (lexsort: last key is primary).
        order = np.lexsort((top, -top_scores), axis=1)
        ids[start:start + block_size] = np.take_along_axis(top, order, axis=1)
        scores[start:start + block_size] = np.take_along_axis(top_scores, order, axis=1)
    return ids, scores


def _encode_in_batches(fn, n, batch_size, desc, **columns):
    parts = []
    for start in tqdm(range(0, n, batch_size), desc=desc, unit="batch", leave=False):
        batch = {name: (None if col is None else col[start:start + batch_size])
                 for name, col in columns.items()}
        out = np.asarray(fn(**batch), dtype=np.float32)
        expected = min(batch_size, n - start)
        if out.ndim != 2 or out.shape[0] != expected:
            raise ValueError(f"{desc}: the encoder returned shape {out.shape} for a batch of "
                             f"{expected} texts; expected [{expected}, dim].")
        parts.append(out)
    return np.concatenate(parts, axis=0)


def _as_int_ids(ids) -> np.ndarray:
    """Index results as an int array ``[num_queries, k]``: ids may be ints or their strings
    (``EmbeddingIndex`` returns str ids); short rows are padded with -1."""
    rows = [[int(x.decode() if isinstance(x, bytes) else x) for x in row] for row in ids]
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def encode_candidates(encoder, reqa, *, batch_size: int = 256) -> np.ndarray:
    """``[num_candidates, dim]``: every ReQA (sentence, passage) candidate through the document
    tower, ``encoder.encode_documents(texts=passages, titles=sentences)``, in candidate order."""
    return _encode_in_batches(
        lambda texts, titles: encoder.encode_documents(texts, titles),
        len(reqa.candidates), batch_size, "encode candidates",
        texts=[c.passage for c in reqa.candidates], titles=[c.sentence for c in reqa.candidates])


def evaluate_encoder(encoder, reqa, question_ids=None, ks: Sequence[int] = DEFAULT_KS,
                     index=None, *, batch_size: int = 256, candidate_embeddings=None) -> dict:
    """Scores a two-tower encoder on ReQA by exact dot-product search (and an index, if given).

    The document is the (sentence, passage) pair: ``encoder.encode_documents(texts=passages,
    titles=sentences)``; queries go through ``encoder.encode_queries``.

    Args:
      encoder: has ``encode_queries(list[str]) -> [n, dim]`` and
        ``encode_documents(texts, titles) -> [n, dim]``.
      reqa: a ``tt_zoo.reqa.ReQA``.
      question_ids: the questions to score (e.g. a split's test ids); all when None.
      ks: recall cut-offs.
      index: optional approximate index, either an object with ``search(query_embeddings, k)
        -> (ids, scores)`` already built over the candidate embeddings in candidate order, or a
        callable ``index(candidate_embeddings) -> such an object``.
      candidate_embeddings: `encode_candidates` of this encoder, when scoring several question
        sets with the same weights (encoded here when None).

    Returns:
      ``{"num_queries", "num_candidates", "exact": {"R@k"..., "MRR"}, "index": same or None,
      "seconds": {...}}``.
    """
    questions = reqa.questions_for(question_ids)
    if not questions:
        raise ValueError("evaluate_encoder: no questions to evaluate.")
    max_k = max(ks)
    seconds = {}
    t = time.perf_counter()
    if candidate_embeddings is None:
        cand_emb = encode_candidates(encoder, reqa, batch_size=batch_size)
    else:
        cand_emb = np.asarray(candidate_embeddings, dtype=np.float32)
        if cand_emb.shape[0] != len(reqa.candidates):
            raise ValueError(f"candidate_embeddings has {cand_emb.shape[0]} rows; this ReQA has "
                             f"{len(reqa.candidates)} candidates.")
    seconds["encode_candidates"] = time.perf_counter() - t
    t = time.perf_counter()
    query_emb = _encode_in_batches(lambda texts: encoder.encode_queries(texts), len(questions),
                                   batch_size, "encode queries", texts=[q.text for q in questions])
    seconds["encode_queries"] = time.perf_counter() - t
    gold = np.array([q.gold_index for q in questions])
    t = time.perf_counter()
    ids, _ = exact_top_k(query_emb, cand_emb, max_k)
    seconds["exact_search"] = time.perf_counter() - t
    result = {"num_queries": len(questions), "num_candidates": len(reqa.candidates),
              "exact": ranking_metrics(ids, gold, ks), "index": None, "seconds": seconds}
    if index is not None:
        if isinstance(index, type) or not hasattr(index, "search"):  # a builder
            t = time.perf_counter()
            index = index(cand_emb)
            seconds["index_build"] = time.perf_counter() - t
        t = time.perf_counter()
        index_ids, _ = index.search(query_emb, max_k)
        seconds["index_search"] = time.perf_counter() - t
        result["index"] = ranking_metrics(_as_int_ids(index_ids), gold, ks)
    return result
