"""End-to-end late-interaction search: a ScaNN index over every document token (ColBERT v1).

Khattab & Zaharia, SIGIR 2020, Sec. 3.6: each of a query's N_q token vectors is an ANN query
over all document token vectors; its top k' neighbours name candidate documents; the union of
those is scored by exact MaxSim (Sec. 3.1) and the best k kept. `TokenIndex` does exactly that
over a `tt_zoo.retrieval.token_store.TokenStore`, with ScaNN built by the settings of
`tt_zoo.retrieval.index.ScannConfig` (`ScannConfig.tree_for_size(num_tokens)` by default).

ScaNN here only gathers candidates: the exact MaxSim of the candidates reads the float16 store,
so by default the index keeps no float32 copy of the tokens for ScaNN's own re-ordering
(`num_reordering_candidates=0`: tree + anisotropic hashing codes only). A config with
`num_reordering_candidates > 0` adds that copy (4 m bytes a token) for better neighbours.

Memory per passage (n_t tokens a passage, m dims; a 100-word passage is about n_t = 130
WordPieces with [CLS] and [D], punctuation dropped; `TokenIndex.memory()` measures a real one):

    store, float16 vectors        2 m n_t          m = 128: 33 KB   m = 64: 17 KB
    ScaNN tree + AH codes         (m/2 + 4) n_t    m = 128: 8.8 KB  m = 64: 4.7 KB
      (one byte per 2-dim block, a 4-byte token id; measured 36.4 bytes a token at m = 64)
    ScaNN float32 re-ordering     4 m n_t          m = 128: 67 KB   (only if num_reordering > 0)
    building: the tokens once in float32 (ScaNN takes nothing else), 4 m n_t = 67 KB (m = 128)

Measured on a synthetic 20K passages x 100 tokens x m = 64 (2M tokens, 32-token queries, 2 busy
CPU cores, query encoding not counted): store 12,808 + index 3,638 = 16,446 bytes a passage;
built in 15-28 s (1,414 leaves); 37 queries/s at k' = 16 and at k' = 64 (219 and 720 candidate
passages a query; the top-1 is the exact MaxSim top-1 for 17 and 20 of 20 queries), against
544 ms a query for brute-force MaxSim over all 2M tokens.

- Wikispeedia's 130,638 100-word passages (ODQA): 17M tokens; at m = 128 store 4.3 GB
  (memory-mapped) + index 1.2 GB, 8.7 GB of float32 to build: fits this 23 GB machine.
- Where it stops fitting (m = 128, 23 GB of RAM): building from about 300K passages (the float32
  copy), the store in RAM from about 550K (past that it is read from disk at random, one
  gather per candidate), the index itself from about 2.5M. m = 64 doubles each.
- DPR's 21M Wikipedia passages: 2.7 billion tokens: store 700 GB in float16, index 190 GB,
  1.4 TB of float32 to build: no single machine of this kind; ScaNN would have to be built in
  shards and the store kept on SSD.
- Residual compression (ColBERTv2, Santhanam et al. 2022) stores each token as a centroid id
  (4 bytes) plus its residual at 1 or 2 bits a dimension: 20 or 36 bytes a token at m = 128
  instead of 256 (13x or 7x smaller): 21M passages in 55 or 98 GB, and candidates come from the
  centroids (PLAID) instead of a token ANN index. Not implemented here.
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
import time
from typing import Callable, Optional, Sequence

import numpy as np

from tt_zoo.atomic_io import write_directory, write_json
from tt_zoo.manifest import describe_files, verify_files
from tt_zoo.retrieval.index import (IndexFileError, ScannConfig, load_scann_searcher,
                                    read_json)
from tt_zoo.retrieval.late_interaction import (check_query_texts, encode_queries_checked,
                                               top_by_maxsim)
from tt_zoo.retrieval.search import SearchResult, check_k

TOKEN_INDEX_FORMAT = "tt_zoo.TokenIndex"
TOKEN_INDEX_FORMAT_VERSION = 1
CONFIG_FILE = "token_index.json"
SCANN_DIR = "scann"
DEFAULT_TOKEN_K = 64


def default_config(num_tokens: int) -> ScannConfig:
    """`ScannConfig.tree_for_size(num_tokens)` without ScaNN's float32 re-ordering (exact
    MaxSim on the store re-orders instead); exact scoring for tiny stores."""
    config = ScannConfig.tree_for_size(num_tokens)
    return config if config.is_exact else dataclasses.replace(config,
                                                              num_reordering_candidates=0)


def _build_searcher(vectors: np.ndarray, config: ScannConfig, token_k: int):
    from tt_zoo._native_logs import import_scann  # noqa: PLC0415
    scann = import_scann()

    builder = scann.scann_ops_pybind.builder(vectors, min(token_k, vectors.shape[0]),
                                             "dot_product")
    builder = config.configure(builder, vectors.shape[0])
    if not config.is_exact and config.num_reordering_candidates == 0:
        builder.params.pop("reorder", None)  # ScannConfig always adds it; 0 means none here
    return builder.build()


class TokenIndex:
    """ColBERT v1 end-to-end search (Sec. 3.6) over a `TokenStore`; a `Searcher` of strings.

    Args:
      store: the documents' token vectors (`tt_zoo.retrieval.token_store.TokenStore`).
      encode_query_tokens: `texts -> [float32 [n_i, m]]`, L2-normalised query token vectors.
      scann_config: ScaNN settings over the store's tokens; default `default_config`.
      token_k: k', the neighbours each query token asks ScaNN for.

    `search(queries, k)` returns a `SearchResult` over the store's documents (rows, MaxSim
    scores, the store's ids); a query whose neighbours name fewer than k documents gets a short
    result padded with -1. Empty query strings are an error, as for `MaxSimReranker`.

    Example:
    >>> index = TokenIndex(TokenStore.load("runs/tokens"), model.encode_query_tokens)
    >>> index.search(["who discovered penicillin?"], k=10).ids
    >>> index.save("runs/token_index"); TokenIndex.load("runs/token_index", store, encode)

    References:
      Khattab & Zaharia, ColBERT, SIGIR 2020, Sec. 3.6; Guo et al., ScaNN, ICML 2020.
    """

    def __init__(self, store, encode_query_tokens: Callable, *,
                 scann_config: Optional[ScannConfig] = None, token_k: int = DEFAULT_TOKEN_K):
        if store.num_tokens == 0:
            raise ValueError("TokenIndex: the token store holds no token vectors.")
        config = scann_config or default_config(store.num_tokens)
        vectors = np.asarray(store.vectors, dtype=np.float32)  # ScaNN builds from float32
        self._init(store, encode_query_tokens, config, check_k(token_k),
                   _build_searcher(vectors, config, token_k))

    def _init(self, store, encode_query_tokens, config, token_k, searcher):
        self.store = store
        self.encode_query_tokens = encode_query_tokens
        self.scann_config = config
        self.token_k = token_k
        self.ids = store.ids
        self._searcher = searcher
        self._index_bytes = None
        self.timings = {"queries": 0, "encode": 0.0, "neighbours": 0.0, "maxsim": 0.0,
                        "candidates": 0}

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        return (f"TokenIndex(num_docs={len(self)}, num_tokens={self.store.num_tokens}, "
                f"dim={self.store.dim}, token_k={self.token_k})")

    def with_search_settings(self, token_k: Optional[int] = None,
                             num_leaves_to_search: Optional[int] = None) -> "TokenIndex":
        """The same index searched with another k' or number of leaves (no rebuild)."""
        config = self.scann_config
        if num_leaves_to_search is not None:
            if config.is_exact:
                raise ValueError("num_leaves_to_search needs a partitioned ScaNN index (this "
                                 "one scores every token exactly).")
            config = dataclasses.replace(config, num_leaves_to_search=num_leaves_to_search)
        other = TokenIndex.__new__(TokenIndex)
        other._init(self.store, self.encode_query_tokens, config,
                    self.token_k if token_k is None else check_k(token_k), self._searcher)
        return other

    @property
    def queries_per_second(self) -> float:
        seconds = self.timings["encode"] + self.timings["neighbours"] + self.timings["maxsim"]
        return self.timings["queries"] / seconds if seconds > 0 else float("nan")

    def search(self, queries: Sequence[str], k: int = 10) -> SearchResult:
        """The top-k documents of each query: candidates from its tokens' k' nearest document
        tokens, ranked by exact MaxSim."""
        queries = check_query_texts(queries)
        width = min(check_k(k), len(self))
        t = time.perf_counter()
        query_vectors = encode_queries_checked(self.encode_query_tokens, queries,
                                               self.store.dim)
        t_encode = time.perf_counter()
        documents = self.candidate_documents(query_vectors)
        t_neighbours = time.perf_counter()
        rows = np.full((len(queries), width), -1, np.int64)
        scores = np.full((len(queries), width), np.nan, np.float32)
        for i, (vectors, candidates) in enumerate(zip(query_vectors, documents)):
            order, best = top_by_maxsim(vectors, *self.store.gather(candidates), width)
            rows[i, :order.size] = candidates[order]
            scores[i, :order.size] = best
        self.timings["queries"] += len(queries)
        self.timings["encode"] += t_encode - t
        self.timings["neighbours"] += t_neighbours - t_encode
        self.timings["maxsim"] += time.perf_counter() - t_neighbours
        self.timings["candidates"] += sum(c.size for c in documents)
        return SearchResult.from_rows(rows, scores, self.ids)

    def candidate_documents(self, query_vectors):
        """Per query, the sorted distinct documents of its tokens' k' nearest document tokens."""
        tokens = np.concatenate(query_vectors)
        config = self.scann_config
        k = min(self.token_k, self.store.num_tokens)
        if config.is_exact:
            pre_reorder, leaves = -1, -1
        else:
            pre_reorder = max(config.num_reordering_candidates, k)
            leaves = config.num_leaves_to_search
        found, distances = self._searcher.search_batched_parallel(
            tokens, final_num_neighbors=k, pre_reorder_num_neighbors=pre_reorder,
            leaves_to_search=leaves)
        found, distances = np.asarray(found, np.int64), np.asarray(distances)
        # ScaNN pads with NaN when the searched leaves hold fewer than k' tokens.
        docs = np.searchsorted(self.store.offsets, found, side="right") - 1
        docs[~np.isfinite(distances)] = -1
        out, start = [], 0
        for vectors in query_vectors:
            block = docs[start:start + vectors.shape[0]]
            out.append(np.unique(block[block >= 0]))
            start += vectors.shape[0]
        return out

    # -- memory ---------------------------------------------------------------------------------
    def memory(self) -> dict:
        """Bytes of the store (vectors + offsets) and of the ScaNN index (its serialized size,
        about what it holds in memory; measured once by serializing it to a temp folder), in
        total and per passage."""
        if self._index_bytes is None:
            with tempfile.TemporaryDirectory(prefix="tt_zoo-token-index-") as tmp:
                self._searcher.serialize(tmp, relative_path=True)
                self._index_bytes = sum(p.stat().st_size for p in pathlib.Path(tmp).rglob("*")
                                        if p.is_file())
        store, index = self.store.nbytes, self._index_bytes
        n = len(self)
        return {"store_bytes": store, "index_bytes": index,
                "store_bytes_per_passage": store / n, "index_bytes_per_passage": index / n,
                "bytes_per_passage": (store + index) / n,
                "tokens_per_passage": self.store.num_tokens / n}

    # -- serialization --------------------------------------------------------------------------
    def save(self, path, overwrite: bool = False) -> pathlib.Path:
        """Writes the ScaNN index and `token_index.json` (settings, the store's digest, the
        sha256 manifest) to directory `path` atomically. The store is saved on its own
        (`TokenStore.save`/`build`); `load` checks that it is the same store."""
        store_digest = self.store.digest  # raises for a store that was never saved

        def build(tmp: pathlib.Path) -> None:
            (tmp / SCANN_DIR).mkdir()
            self._searcher.serialize(str(tmp / SCANN_DIR), relative_path=True)
            write_json(tmp / CONFIG_FILE, {
                "format": TOKEN_INDEX_FORMAT, "format_version": TOKEN_INDEX_FORMAT_VERSION,
                "store_digest": store_digest, "num_docs": len(self),
                "num_tokens": self.store.num_tokens, "dim": self.store.dim,
                "token_k": self.token_k, "scann": self.scann_config.to_json(),
                "files": describe_files(tmp)}, indent=2, sort_keys=True)

        return write_directory(path, build, overwrite=overwrite, what="saved tt_zoo TokenIndex",
                               is_replaceable=lambda p: (p / CONFIG_FILE).is_file())

    @classmethod
    def load(cls, path, store, encode_query_tokens: Callable) -> "TokenIndex":
        """Loads a directory written by `save`, checking every file against its sha256 and
        `store` (a loaded `TokenStore`) against the digest of the store it was built on."""
        root = pathlib.Path(path)
        config_file = root / CONFIG_FILE
        config = read_json(config_file)
        if config.get("format") != TOKEN_INDEX_FORMAT or (
                config.get("format_version") != TOKEN_INDEX_FORMAT_VERSION):
            raise IndexFileError(f"{config_file}: format {config.get('format')!r} version "
                                 f"{config.get('format_version')!r}; expected "
                                 f"{TOKEN_INDEX_FORMAT!r} {TOKEN_INDEX_FORMAT_VERSION}.")
        try:
            files, token_k = dict(config["files"]), check_k(config["token_k"])
            scann_config = ScannConfig.from_json(config["scann"])
            num_tokens, store_digest = int(config["num_tokens"]), config["store_digest"]
        except (KeyError, TypeError, ValueError) as e:
            raise IndexFileError(f"{config_file} is malformed: {e!r}.") from e
        verify_files(root, files, listed_in=config_file, error=IndexFileError)
        if store.digest != store_digest:
            raise IndexFileError(f"{root} was built on another token store (digest "
                                 f"{store_digest[:16]}…, this store's {store.digest[:16]}…).")
        searcher = load_scann_searcher(root / SCANN_DIR, num_tokens, config_file, "tokens")
        index = cls.__new__(cls)
        index._init(store, encode_query_tokens, scann_config, token_k, searcher)
        return index
