"""sentence-transformers' ``util`` functions over arrays of embeddings: `semantic_search`,
`cos_sim`, `dot_score`. NumPy only (no TensorFlow): the embeddings of any encoder, a zoo
model's ``encode`` / ``encode_queries`` / ``encode_documents`` included.

Example:
>>> import numpy as np
>>> corpus = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.75]], "float32")
>>> semantic_search(np.array([[0.0, 2.0]], "float32"), corpus, top_k=2, score_function=dot_score)
[[{'corpus_id': 1, 'score': 2.0}, {'corpus_id': 2, 'score': 1.5}]]

For an index that persists (ScaNN, BM25, a hybrid), use a model's ``index`` and
`tt_zoo.load_index`.
"""

from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np


def embedding_rows(x, name: str) -> np.ndarray:
    """`x` (an array, a tensor or a list of vectors) as float32 rows [n, dim]; one vector is one
    row; anything else raises ValueError naming `name`."""
    array = np.asarray(x.numpy() if hasattr(x, "numpy") else x, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(f"{name} must be embeddings [n, dim] or one [dim] vector (got shape "
                         f"{array.shape}).")
    return array


def cos_sim(a, b) -> np.ndarray:
    """Cosine similarity of every row of `a` with every row of `b`: float32 [len(a), len(b)]."""
    a, b = embedding_rows(a, "a"), embedding_rows(b, "b")
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a @ b.T).astype(np.float32)


def dot_score(a, b) -> np.ndarray:
    """Inner product of every row of `a` with every row of `b` (Chang et al. 2020's score)."""
    return (embedding_rows(a, "a") @ embedding_rows(b, "b").T).astype(np.float32)


def semantic_search(query_embeddings, corpus_embeddings, query_chunk_size: int = 100,
                    corpus_chunk_size: int = 500_000, top_k: int = 10,
                    score_function: Callable = cos_sim) -> List[List[Dict]]:
    """The `top_k` corpus entries of each query by `score_function` (default `cos_sim`;
    `dot_score` for a model that scores by inner product), as sentence-transformers'
    ``util.semantic_search``: per query, a list of ``{"corpus_id": row, "score": float}``,
    best first (ties: the lower row first). Exact (brute force), in chunks of queries and
    corpus rows.
    """
    queries = embedding_rows(query_embeddings, "query_embeddings")
    corpus = embedding_rows(corpus_embeddings, "corpus_embeddings")
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"query and corpus embeddings differ in size ({queries.shape[1]} and "
                         f"{corpus.shape[1]}).")
    for name, value in (("top_k", top_k), ("query_chunk_size", query_chunk_size),
                        ("corpus_chunk_size", corpus_chunk_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int (got {value!r}).")
    k = min(int(top_k), corpus.shape[0])
    results: List[List[Dict]] = []
    for q0 in range(0, queries.shape[0], query_chunk_size):
        block = queries[q0:q0 + query_chunk_size]
        scores = np.concatenate([np.asarray(score_function(block, corpus[c0:c0 + corpus_chunk_size]),
                                            dtype=np.float32)
                                 for c0 in range(0, corpus.shape[0], corpus_chunk_size)], axis=1)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        for row, top in zip(scores, order):
            results.append([{"corpus_id": int(i), "score": float(row[i])} for i in top])
    return results
