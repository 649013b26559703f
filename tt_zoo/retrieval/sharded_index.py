"""`ShardedIndex`: one searcher over a corpus kept in shards, each with its own index.

Chang et al., ICLR 2020, Section 2 ("Inference"): retrieval is maximum inner product search over
candidate embeddings psi(d) computed once, offline; `tt_zoo.serving.corpus_index` computes them
for a large corpus in parallel and writes them in shards, each with an `EmbeddingIndex`
(`tt_zoo.retrieval.embedding_shards`). The inner-product top-k of the whole corpus is the top-k
of the union of every shard's top-k, so `ShardedIndex.search` asks each shard for its k best
and merges them by score (`merge_top_k`): exact when every shard's index is exact, as good as
the shards' ScaNN otherwise. ``ShardedIndex.load(path, merge=True)`` instead builds one index
from all shards' stored embeddings (ScaNN sized for the whole corpus, `ScannConfig.for_size`).

Rows are positions in `ids`, the shards' ids in shard order; a `SearchResult` as every
`tt_zoo.retrieval.search.Searcher` returns.
"""

from __future__ import annotations

import pathlib
from typing import Sequence, Tuple

import numpy as np

from tt_zoo.atomic_io import is_remote
from tt_zoo.errors import ArtifactError
from tt_zoo.retrieval import embedding_shards
from tt_zoo.retrieval.search import (SearchResult, check_built_searcher, check_ids, check_k,
                                     check_queries)


def merge_top_k(results: Sequence[SearchResult], offsets: Sequence[int],
                k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The top-k of several shards' results: ``(rows, scores)`` `[num_queries, k']`, best
    first, with k' = min(k, the results' widths together).

    Args:
      results: each shard's `SearchResult` for the same queries (rows within the shard).
      offsets: each shard's first row in the merged list.
      k: how many to keep.

    A shard row becomes ``offset + row``; equal scores go to the lower merged row (as
    `exact_top_k` keeps the lower index first); a shard's -1 padding ranks after every real
    result and stays -1.

    >>> a = SearchResult.from_rows([[0, 2]], [[3.0, 2.0]], ["a0", "a1", "a2"])
    >>> b = SearchResult.from_rows([[1, 0]], [[4.0, 2.0]], ["b0", "b1"])
    >>> merge_top_k([a, b], [0, 3], k=3)
    (array([[4, 0, 2]]), array([[4., 3., 2.]], dtype=float32))
    """
    k = check_k(k)
    if len(results) != len(offsets) or not results:
        raise ValueError(f"merge_top_k: {len(results)} results for {len(offsets)} offsets; "
                         "give one offset a result, at least one.")
    rows = np.concatenate([np.where(r.rows >= 0, r.rows + offset, -1)
                           for r, offset in zip(results, offsets)], axis=1)
    scores = np.concatenate([r.scores for r in results], axis=1)
    missing = rows < 0
    keys = np.where(missing, -np.inf, scores)
    tie = np.where(missing, np.iinfo(np.int64).max, rows)
    order = np.lexsort((tie, -keys), axis=1)[:, :min(k, rows.shape[1])]
    merged_rows = np.take_along_axis(rows, order, axis=1)
    merged_scores = np.take_along_axis(scores, order, axis=1)
    return merged_rows, np.where(merged_rows < 0, np.nan, merged_scores).astype(np.float32)


class ShardedIndex:
    """The top-k by inner product over several shard indexes, merged (Chang et al. 2020, Sec. 2).

    Args:
      shards: searchers over embeddings with `ids` and `dim` (`EmbeddingIndex`,
        `ExactSearcher`), one a shard, in order; ids unique across all of them.

    Example:
    >>> from tt_zoo.retrieval.search import ExactSearcher
    >>> index = ShardedIndex([ExactSearcher(np.eye(2, dtype="float32"), ["a", "b"]),
    ...                       ExactSearcher(np.array([[0.0, 3.0]], "float32"), ["c"])])
    >>> index.search(np.array([[1.0, 2.0]], "float32"), k=2).ids
    (('c', 'b'),)
    """

    def __init__(self, shards: Sequence):
        shards = list(shards)
        if not shards:
            raise ValueError("ShardedIndex needs at least one shard.")
        for i, shard in enumerate(shards):
            check_built_searcher(shard, f"ShardedIndex: shard {i}")
        dims = {int(shard.dim) for shard in shards}
        if len(dims) != 1:
            raise ValueError(f"ShardedIndex: the shards' embedding dims differ ({sorted(dims)}).")
        ids = [candidate_id for shard in shards for candidate_id in shard.ids]
        self.ids = tuple(check_ids(ids, len(ids)))
        self.dim = dims.pop()
        self.shards = tuple(shards)
        self.offsets = tuple(int(x) for x in np.cumsum([0] + [len(s) for s in shards])[:-1])

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"ShardedIndex(num_shards={len(self.shards)}, num_candidates={len(self)}, " \
               f"dim={self.dim})"

    @property
    def is_exact(self) -> bool:
        """True when `search` returns the exact top-k (every shard's search is exact)."""
        return all(getattr(shard, "is_exact", True) for shard in self.shards)

    def search(self, query_embeddings, k: int = 10) -> SearchResult:
        """The top-k of each query over all shards: float `[num_queries, dim]` query embeddings
        phi(q) -> a `SearchResult` whose rows are positions in `ids`."""
        queries = check_queries(query_embeddings, self.dim)
        k = check_k(k)
        results = [shard.search(queries, min(k, len(shard))) for shard in self.shards]
        rows, scores = merge_top_k(results, self.offsets, k)
        return SearchResult.from_rows(rows, scores, self.ids)

    @classmethod
    def load(cls, path, *, merge: bool = False, backend: str = "scann",
             verify: str = "sha256") -> "ShardedIndex":
        """The shards an `index-corpus` run wrote to `path`, its manifest verified.

        Args:
          path: the run's output folder (local: copy a gs:// output down first).
          merge: build one `EmbeddingIndex` (of `backend`, ScaNN sized for the whole corpus)
            from every shard's stored embeddings instead of loading the shard indexes.
          verify: how files are checked against the manifest: "sha256", "size" or "none"
            (each shard index checks its own files against its index.json when loaded).

        Raises:
          ArtifactError: no manifest (the run did not finish), or a file missing or changed.
        """
        from tt_zoo.retrieval.index import EmbeddingIndex  # noqa: PLC0415 (ScaNN, TensorFlow)

        if is_remote(path):
            raise ArtifactError(f"ShardedIndex.load reads a local folder; copy {path} down "
                                "first (e.g. gsutil -m cp -r).")
        root = pathlib.Path(path)
        manifest = embedding_shards.read_manifest(root, verify=verify)
        settings = embedding_shards.ShardSettings.from_json(manifest["settings"])
        names = [s["name"] for s in manifest["shards"] if s["num_passages"]]
        if not names:
            raise ArtifactError(f"{root} holds no passages.")
        if merge:
            parts = [embedding_shards.read_shard(root, n, settings.storage) for n in names]
            ids = [i for part_ids, _ in parts for i in part_ids]
            embeddings = np.concatenate([emb for _, emb in parts])
            return cls([EmbeddingIndex(embeddings, ids, backend=backend)])
        shards = []
        for name in names:
            index = EmbeddingIndex.load(root / name / embedding_shards.INDEX_DIR)
            stored = (root / name / embedding_shards.IDS_FILE).read_text(encoding="utf-8")
            if embedding_shards.ids_text(index.ids) != stored:
                raise ArtifactError(f"{root / name}: the ids of its index differ from its "
                                    f"{embedding_shards.IDS_FILE}.")
            shards.append(index)
        return cls(shards)
