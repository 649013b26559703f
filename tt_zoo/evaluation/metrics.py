"""Retrieval metrics for ReQA: recall@k and MRR, and the evaluation of any searcher.

ReQA (Ahmad et al. 2019) scores a question by the rank of its single gold (sentence, passage)
candidate; Chang et al. 2020 (Sec. 4, Tables 3-5) report recall@1/5/10/50/100. A hit is the gold
candidate index only, never another sentence of the same passage. Metric values are fractions in
[0, 1]; tables multiply by 100. `evaluate` scores any `tt_zoo.retrieval.search.Searcher` (exact search,
ScaNN, BM25) by the rows of its results; `evaluate_encoder` and `evaluate_bm25` (BM25,
`tt_zoo.retrieval.bm25`, on ReQA) return its dict; `table3_rows` puts models and BM25 on the
same questions in the shape of Table 3 (`tt-zoo evaluate`).
"""

from __future__ import annotations

import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from tqdm.auto import tqdm

from tt_zoo.evaluation.tables import COLUMNS
from tt_zoo.modeling.inference import bar_where_read
from tt_zoo.retrieval.search import ExactSearcher, SearchResult, check_built_searcher, default_ids

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


def _encode_in_batches(fn, n, batch_size, desc, **columns):
    parts = []
    for start in tqdm(range(0, n, batch_size), desc=desc, unit="batch", leave=False,
                      **bar_where_read()):
        batch = {name: (None if col is None else col[start:start + batch_size])
                 for name, col in columns.items()}
        out = np.asarray(fn(**batch), dtype=np.float32)
        expected = min(batch_size, n - start)
        if out.ndim != 2 or out.shape[0] != expected:
            raise ValueError(f"{desc}: the encoder returned shape {out.shape} for a batch of "
                             f"{expected} texts; expected [{expected}, dim].")
        parts.append(out)
    return np.concatenate(parts, axis=0)


def encode_candidates(encoder, reqa, *, batch_size: int = 256) -> np.ndarray:
    """``[num_candidates, dim]``: every ReQA (sentence, passage) candidate through the document
    tower, ``encoder.encode_documents(texts=passages, titles=sentences)``, in candidate order."""
    passages = reqa.candidate_passages()
    return _encode_in_batches(
        lambda texts, titles: encoder.encode_documents(texts, titles),
        len(passages), batch_size, "encode candidates",
        texts=passages.texts, titles=passages.titles)


def evaluate(searcher, queries, gold_rows, ks: Sequence[int] = DEFAULT_KS, *,
             index=None) -> dict:
    """Recall@k and MRR of any searcher, and of an approximate index beside it.

    Args:
      searcher: a `tt_zoo.retrieval.search.Searcher` that scores every candidate: `ExactSearcher` (brute
        force over embeddings), `EmbeddingIndex(backend="brute_force")` or `BM25Retriever`.
      queries: what `searcher.search` takes (query embeddings, or strings for BM25).
      gold_rows: ``[num_queries]`` the row of each query's gold candidate in the searcher's
        candidates.
      ks: recall cut-offs.
      index: optional approximate `Searcher` (e.g. a ScaNN `EmbeddingIndex`) over the same
        candidates in the same order, searched with the same queries.

    Returns:
      ``{"num_queries", "num_candidates", "exact": {"R@k"..., "MRR"}, "index": same or None,
      "queries_without_results": queries the searcher found nothing for,
      "seconds": {"exact_search", "index_search"}}``.
    """
    gold = np.asarray(gold_rows)
    if gold.size == 0:
        raise ValueError("evaluate: no queries to evaluate.")
    max_k = max(ks)
    seconds = {}
    results = {}
    for name, s in (("exact", searcher), ("index", index)):
        if s is None:
            continue
        check_built_searcher(s, f"evaluate: the {name} searcher",
                             " (a builder goes to evaluate_encoder(build_index=...))")
        if len(s) != len(searcher):
            raise ValueError(f"evaluate: the index holds {len(s)} candidates and the searcher "
                             f"{len(searcher)}; both must search the same candidates.")
        t = time.perf_counter()
        results[name] = s.search(queries, max_k)
        seconds[f"{name}_search"] = time.perf_counter() - t
        if not isinstance(results[name], SearchResult):
            raise TypeError(f"evaluate: {type(s).__name__}.search returned "
                            f"{type(results[name]).__name__}, not a tt_zoo.retrieval.search.SearchResult.")
    return {"num_queries": int(gold.size), "num_candidates": len(searcher),
            "exact": ranking_metrics(results["exact"].rows, gold, ks),
            "index": ranking_metrics(results["index"].rows, gold, ks) if index is not None
            else None,
            "queries_without_results": int(results["exact"].empty.sum()),
            "seconds": seconds}


def evaluate_encoder(encoder, reqa, question_ids=None, ks: Sequence[int] = DEFAULT_KS,
                     index=None, *, build_index=None, batch_size: int = 256,
                     candidate_embeddings=None) -> dict:
    """Scores a two-tower encoder on ReQA by exact dot-product search (and an index, if given).

    The document is the (sentence, passage) pair: ``encoder.encode_documents(texts=passages,
    titles=sentences)``; queries go through ``encoder.encode_queries``. The exact search is a
    `tt_zoo.retrieval.search.ExactSearcher` over the candidate embeddings (Chang et al. 2020, Sec. 4).

    Args:
      encoder: has ``encode_queries(list[str]) -> [n, dim]`` and
        ``encode_documents(texts, titles) -> [n, dim]``.
      reqa: a ``tt_zoo.evaluation.reqa.ReQA``.
      question_ids: the questions to score (e.g. a split's test ids); all when None.
      ks: recall cut-offs.
      index: optional approximate `tt_zoo.retrieval.search.Searcher` already built over this encoder's
        candidate embeddings in candidate order.
      build_index: instead of `index`, ``build_index(candidate_embeddings) -> Searcher``,
        called on the embeddings encoded here (its time goes to ``seconds["index_build"]``).
      candidate_embeddings: `encode_candidates` of this encoder, when scoring several question
        sets with the same weights (encoded here when None).

    Returns:
      `evaluate`'s dict; ``"seconds"`` also holds ``"encode_candidates"``, ``"encode_queries"``
      (and ``"index_build"``).
    """
    questions = reqa.questions_for(question_ids)
    if not questions:
        raise ValueError("evaluate_encoder: no questions to evaluate.")
    if index is not None and build_index is not None:
        raise ValueError("evaluate_encoder: pass index or build_index, not both.")
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
    if build_index is not None:
        t = time.perf_counter()
        index = build_index(cand_emb)
        seconds["index_build"] = time.perf_counter() - t
    result = evaluate(ExactSearcher(cand_emb), query_emb, [q.gold_index for q in questions], ks,
                      index=index)
    result["seconds"] = {**seconds, **result["seconds"]}
    return result


def evaluate_bm25(reqa, question_ids=None, ks: Sequence[int] = DEFAULT_KS,
                  stemmer="english", stopwords="en", *, field: str = "sentence+passage",
                  show_progress: bool = False) -> dict:
    """Recall@k and MRR of BM25 on ReQA (the gold candidate only counts as a hit).

    Returns:
      `evaluate`'s dict, BM25 (`tt_zoo.retrieval.bm25.BM25Retriever`) being the searcher that
      scores every candidate (``"exact"``; ``"index"`` is None), with ``"settings"`` and the index
      build time in ``"seconds"["build"]``; ``"queries_without_results"`` counts the questions
      without an indexed term.
    """
    from tt_zoo.retrieval.bm25 import BM25Retriever, candidate_texts  # noqa: PLC0415 (bm25s)

    questions = reqa.questions_for(question_ids)
    if not questions:
        raise ValueError("evaluate_bm25: no questions to evaluate.")
    t = time.perf_counter()
    retriever = BM25Retriever(candidate_texts(reqa, field), stemmer=stemmer,
                              stopwords=stopwords, show_progress=show_progress)
    build_s = time.perf_counter() - t
    out = evaluate(retriever, [q.text for q in questions], [q.gold_index for q in questions], ks)
    out["seconds"]["build"] = build_s
    out["settings"] = {"field": field, "stemmer": stemmer if isinstance(stemmer, str)
                       or stemmer is None else repr(stemmer),
                       "stopwords": stopwords if isinstance(stopwords, str)
                       or stopwords is None else f"{len(stopwords)} words"}
    return out


def table3_rows(reqa, question_ids, models: Iterable[Tuple[str, object]] = (), *,
                bm25_field: Optional[str] = None, scann: bool = False) -> List[dict]:
    """Chang et al. 2020, Table 3's rows for these questions of ReQA: BM25 over the candidates'
    `bm25_field` (None: no BM25 row), then each (name, encoder) of `models` (loaded one at a
    time when an iterator loads them) by exact search and, with `scann`, through a ScaNN index
    over the same embeddings. A row holds encoder, pretraining, search and the `COLUMNS`
    (fractions); an exact row also the evaluation's dict ("details"), a model's row the name it
    was given ("model")."""
    rows = []
    if bm25_field is not None:
        m = evaluate_bm25(reqa, question_ids, field=bm25_field)
        rows.append({"encoder": "BM25", "pretraining": "-", "search": "exact",
                     **{c: m["exact"][c] for c in COLUMNS}, "details": m})
    for name, model in models:
        m = evaluate_encoder(model, reqa, question_ids,
                             build_index=_scann_index if scann else None)
        base = {"encoder": str(getattr(model, "encoder_name", name)),
                "pretraining": str(getattr(model, "pretraining", "?")), "model": name}
        rows.append({**base, "search": "exact", **{c: m["exact"][c] for c in COLUMNS},
                     "details": m})
        if m["index"] is not None:
            rows.append({**base, "search": "ScaNN", **{c: m["index"][c] for c in COLUMNS}})
    return rows


def _scann_index(embeddings):
    from tt_zoo.retrieval.index import EmbeddingIndex  # noqa: PLC0415 (TensorFlow and ScaNN)

    return EmbeddingIndex(embeddings, default_ids(len(embeddings)), backend="scann")
