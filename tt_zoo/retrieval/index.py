"""Candidate indexes for two-tower retrieval: ScaNN (approximate) and brute force (exact).

Chang et al., ICLR 2020, Section 2 ("Inference"): a two-tower model scores f(q, d) =
<phi(q), psi(d)>, so the candidate embeddings psi(d) are computed once and retrieval becomes
maximum inner product search (MIPS), which runs sub-linearly with an approximate index. This
module holds that part, on embeddings only (a text-level wrapper lives elsewhere):

- `EmbeddingIndex`: build from `[n, dim]` float32 candidate embeddings and their string ids,
  with `backend="scann"` (tree partitioning + anisotropic hashing + exact re-ordering, via the
  ScaNN pybind API) or `backend="brute_force"` (`tt_zoo.retrieval.search.ExactSearcher`). Both are
  `tt_zoo.retrieval.search.Searcher`s: `search` returns a `tt_zoo.retrieval.search.SearchResult`.
  `save(path)` / `EmbeddingIndex.load(path)` use a plain directory: ScaNN's own serializer,
  the ids as UTF-8 text, the embeddings as `.npy`, and an `index.json` with the settings and
  a sha256 for each file. Nothing is pickled.

The `retrieve` SavedModel that serves the same search from query strings is
`tt_zoo.serving.retrieve`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
from typing import Optional, Sequence

import numpy as np

from tt_zoo.arguments import as_path
from tt_zoo.atomic_io import recover_replaced, write_directory, write_json
from tt_zoo.errors import ArtifactError
from tt_zoo.manifest import describe_files, read_json_object, verify_files
from tt_zoo.retrieval.search import (ExactSearcher, SearchResult, check_embeddings, check_ids,
                                     check_k, check_queries)

BACKENDS = ("scann", "brute_force")
INDEX_FORMAT = "tt_zoo.EmbeddingIndex"
INDEX_FORMAT_VERSION = 2  # 2: `files` holds size and sha256 (`tt_zoo.manifest`); 1: sha256
INDEX_CONFIG_FILE = "index.json"
IDS_FILE = "ids.txt"
EMBEDDINGS_FILE = "embeddings.npy"
SCANN_DIR = "scann"

# Below this many candidates the ScaNN backend scores every candidate exactly (ScaNN's own
# brute-force scorer), as ScaNN's guide advises below 20K points: on ReQA-SQuAD(dev)'s 10,255
# candidates a tree with the settings below lost 0.1-0.2 points of R@100 and answered fewer
# queries a second than brute force (8,958 against 9,517; results/index_recall.md).
MIN_PARTITIONED_SIZE = 20_000
# From that size on: about sqrt(n) leaves, this fraction of them searched, and this many
# candidates re-scored exactly. On open-domain ReQA's 578K candidates searching a fifth of the
# leaves (with 100 re-scored, the settings before issue 25) lost 4.9 points of R@100 against
# exact search; searching 60% lost 0.26 there but 0.75 on its first 20,000 candidates; 80% lost
# 0.10-0.16 from 20,000 to 578K (results/index_recall_open_domain.md).
LEAVES_SEARCHED_FRACTION = 0.8
REORDERED_CANDIDATES = 1000


# ScannConfig fields a saved index names only when they are set.
_OPTIONAL_TREE_FIELDS = ("soar_lambda", "overretrieve_factor", "training_sample_size")


class IndexFileError(ArtifactError):
    """A saved index or retrieval model directory is missing a file or holds a corrupt one."""


@dataclasses.dataclass(frozen=True)
class ScannConfig:
    """ScaNN settings for a dot-product index (Guo et al. 2020, "Accelerating Large-Scale
    Inference with Anisotropic Vector Quantization").

    Args:
      num_leaves: number of k-means partitions of the candidates; 0 scores every candidate
        exactly (no tree, no hashing), which is what tiny corpora get.
      num_leaves_to_search: partitions searched per query.
      dimensions_per_block: dimensions per asymmetric-hashing block (2: 16 centers per pair).
      num_reordering_candidates: candidates re-scored exactly after hashing; searches use
        `max(num_reordering_candidates, k)`.
      training_iterations: k-means iterations for the partitioning tree.
      anisotropic_quantization_threshold: ScaNN's anisotropic loss threshold, or None for
        ordinary (isotropic) quantization.
      soar_lambda: SOAR (Sun et al., NeurIPS 2023, "SOAR: Improved Indexing for Approximate
        Nearest Neighbor Search"): each candidate is also assigned to a second leaf chosen to
        have an orthogonal residual, weighted by this lambda (1.0-1.5 in the paper); a query
        then finds its neighbours in fewer leaves. None: one leaf a candidate.
      overretrieve_factor: with SOAR, how far past the closest leaf's distance the second one
        may lie (ScaNN's default when None).
      training_sample_size: candidates the tree's k-means trains on (ScaNN's default, 100,000,
        when None); worth raising with the number of leaves.

    On open-domain ReQA's 578K candidates, 2 sqrt(n) leaves with SOAR (lambda 1.5) and
    anisotropic quantization (0.2) reached recall@10 0.95 searching 6% of the leaves at 3,452
    queries/s, 1.17x FAISS IVF-PQ's best (results/performance.md).

    Example:
    >>> config = ScannConfig.for_size(100_000)
    >>> config.num_leaves, config.num_leaves_to_search, config.num_reordering_candidates
    (316, 253, 1000)
    """

    num_leaves: int
    num_leaves_to_search: int
    dimensions_per_block: int = 2
    num_reordering_candidates: int = 100
    training_iterations: int = 12
    anisotropic_quantization_threshold: Optional[float] = None
    soar_lambda: Optional[float] = None
    overretrieve_factor: Optional[float] = None
    training_sample_size: Optional[int] = None

    def __post_init__(self):
        for name in ("num_leaves", "num_leaves_to_search", "dimensions_per_block",
                     "num_reordering_candidates", "training_iterations"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"ScannConfig.{name} must be a non-negative int (got {value!r}).")
        for name, low in (("soar_lambda", 0.0), ("overretrieve_factor", 1.0)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not
                                      isinstance(value, (int, float)) or not value > low):
                raise ValueError(f"ScannConfig.{name} must be None or a number > {low} "
                                 f"(got {value!r}).")
        sample = self.training_sample_size
        if sample is not None and (not isinstance(sample, int) or isinstance(sample, bool)
                                   or sample < 1):
            raise ValueError("ScannConfig.training_sample_size must be None or a positive int "
                             f"(got {sample!r}).")
        if self.overretrieve_factor is not None and self.soar_lambda is None:
            raise ValueError("ScannConfig.overretrieve_factor is for SOAR: set soar_lambda too.")
        if self.num_leaves and not 1 <= self.num_leaves_to_search <= self.num_leaves:
            raise ValueError(
                f"ScannConfig.num_leaves_to_search must be in [1, num_leaves={self.num_leaves}] "
                f"(got {self.num_leaves_to_search}).")
        if self.dimensions_per_block < 1:
            raise ValueError(
                f"ScannConfig.dimensions_per_block must be >= 1 (got {self.dimensions_per_block}).")

    @classmethod
    def for_size(cls, num_candidates: int) -> "ScannConfig":
        """Default settings for `num_candidates` candidates: exact scoring below
        `MIN_PARTITIONED_SIZE`; from there about sqrt(n) leaves, `LEAVES_SEARCHED_FRACTION` of
        them searched, AH with 2 dimensions per block and exact re-ordering of the best
        `REORDERED_CANDIDATES`. Chosen so that R@100 through the index stays within 0.5 points
        of exact search (measured on ReQA-SQuAD(dev), open-domain ReQA and its first 20K, 50K
        and 150K candidates, `benchmarks/index_recall.py`). ScaNN's k-means starts at random,
        so two builds on the same data can differ slightly.
        """
        if num_candidates < MIN_PARTITIONED_SIZE:
            return cls(num_leaves=0, num_leaves_to_search=0)
        num_leaves = max(1, int(round(math.sqrt(num_candidates))))
        to_search = min(num_leaves, math.ceil(num_leaves * LEAVES_SEARCHED_FRACTION))
        return cls(num_leaves=num_leaves, num_leaves_to_search=to_search,
                   num_reordering_candidates=REORDERED_CANDIDATES)

    @classmethod
    def tree_for_size(cls, num_points: int) -> "ScannConfig":
        """The lighter tree of `tt_zoo.retrieval.token_index` (and of `for_size` before issue
        25): about sqrt(n) leaves, a fifth of them searched (at least 25), the best 100
        re-ordered; exact below 1,000 points. A token index gathers candidate documents from
        many query tokens' neighbours and re-scores them exactly, so it needs less recall of each
        token search. Measured recall@10: 0.984-0.999 over 8 seeded 3,000 x 64 Gaussian
        mixtures (50 components), 1.0 at 10,000 x 64."""
        if num_points < 1000:
            return cls(num_leaves=0, num_leaves_to_search=0)
        num_leaves = max(1, int(round(math.sqrt(num_points))))
        to_search = min(num_leaves, max(25, math.ceil(num_leaves / 5)))
        return cls(num_leaves=num_leaves, num_leaves_to_search=to_search)

    @property
    def is_exact(self) -> bool:
        """True when the index scores every candidate exactly (no tree)."""
        return self.num_leaves == 0

    def configure(self, builder, num_candidates: int):
        """Applies these settings to a ScaNN builder (pybind or TF ops); returns the builder."""
        if self.is_exact:
            return builder.score_brute_force()
        if self.num_leaves > num_candidates:
            raise ValueError(f"ScannConfig.num_leaves={self.num_leaves} exceeds the number of "
                             f"candidates ({num_candidates}).")
        avq = self.anisotropic_quantization_threshold
        builder = builder.tree(num_leaves=self.num_leaves,
                               num_leaves_to_search=self.num_leaves_to_search,
                               training_iterations=self.training_iterations,
                               **self._tree_options())
        builder = builder.score_ah(self.dimensions_per_block,
                                   anisotropic_quantization_threshold=(
                                       float("nan") if avq is None else float(avq)))
        return builder.reorder(self.num_reordering_candidates)

    def _tree_options(self) -> dict:
        """The tree's optional arguments that are set (SOAR, the k-means sample)."""
        return {name: value for name, value in (
            ("soar_lambda", None if self.soar_lambda is None else float(self.soar_lambda)),
            ("overretrieve_factor", None if self.overretrieve_factor is None
             else float(self.overretrieve_factor)),
            ("training_sample_size", self.training_sample_size)) if value is not None}

    def to_json(self) -> dict:
        # The optional tree fields only when set: an index without them stays readable by
        # tt_zoo releases that predate them.
        return {k: v for k, v in dataclasses.asdict(self).items()
                if v is not None or k not in _OPTIONAL_TREE_FIELDS}

    @classmethod
    def from_json(cls, config: dict) -> "ScannConfig":
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - fields)
        if unknown:
            raise ValueError(f"Unknown ScannConfig fields {unknown} (expected {sorted(fields)}).")
        return cls(**config)


# -- validation -------------------------------------------------------------------------------

def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} (got {backend!r}).")


# -- files ------------------------------------------------------------------------------------

def read_json(path: pathlib.Path) -> dict:
    return read_json_object(path, f"is {path.parent} a saved tt_zoo index?", IndexFileError)


# -- ScaNN ------------------------------------------------------------------------------------

def _build_scann_searcher(embeddings: np.ndarray, config: ScannConfig, k: int = 10):
    from tt_zoo._native_logs import import_scann  # pylint: disable=import-outside-toplevel
    scann = import_scann()

    builder = scann.scann_ops_pybind.builder(embeddings, min(k, embeddings.shape[0]),
                                             "dot_product")
    return config.configure(builder, embeddings.shape[0]).build()


# -- the index --------------------------------------------------------------------------------

def load_scann_searcher(scann_dir: pathlib.Path, expected_size: int, config_file,
                        what: str):
    """ScaNN's searcher saved in `scann_dir`, refusing a pickle (scann.load_searcher would
    unpickle scann_docids.pkl; tt_zoo never writes one) and checking it holds `expected_size`
    points (`what`: "candidates", "tokens"), as `config_file` records."""
    if (scann_dir / "scann_docids.pkl").exists():
        raise IndexFileError(f"{scann_dir / 'scann_docids.pkl'} is a pickle; tt_zoo "
                             "indexes never hold pickles and will not load one.")
    if not (scann_dir / "scann_assets.pbtxt").is_file():
        raise IndexFileError(f"{scann_dir / 'scann_assets.pbtxt'} is missing.")
    from tt_zoo._native_logs import import_scann  # pylint: disable=import-outside-toplevel
    scann = import_scann()

    try:
        searcher = scann.scann_ops_pybind.load_searcher(str(scann_dir),
                                                        assets_backcompat_shim=False)
    except (RuntimeError, ValueError) as e:
        raise IndexFileError(f"ScaNN could not load {scann_dir}: {e}") from e
    if searcher.size() != expected_size:
        raise IndexFileError(f"{scann_dir} holds {searcher.size()} {what}; {config_file} "
                             f"says {expected_size}.")
    return searcher


class EmbeddingIndex:
    """A maximum-inner-product index over candidate embeddings (Chang et al. 2020, Section 2).

    Args:
      embeddings: float `[num_candidates, dim]` candidate embeddings psi(d).
      ids: `num_candidates` unique candidate ids (non-empty str, no newline or tab).
      backend: `"scann"` (approximate; exact below `MIN_PARTITIONED_SIZE` candidates) or
        `"brute_force"` (exact matmul and top-k).
      scann_config: ScaNN settings; default `ScannConfig.for_size(num_candidates)`.

    Example:
    >>> index = EmbeddingIndex(np.eye(3, dtype="float32"), ["a", "b", "c"], backend="brute_force")
    >>> result = index.search(np.array([[0.0, 2.0, 1.0]], "float32"), k=2)
    >>> result.ids, result.rows, result.scores
    ((('b', 'c'),), array([[1, 2]]), array([[2., 1.]], dtype=float32))

    References:
      Chang et al., Pre-training Tasks for Embedding-based Large-scale Retrieval, ICLR 2020,
      Section 2; Guo et al., ScaNN, ICML 2020.
    """

    def __init__(self, embeddings, ids: Sequence[str], backend: str = "scann",
                 scann_config: Optional[ScannConfig] = None):
        check_backend(backend)
        if backend == "brute_force":
            if scann_config is not None:
                raise ValueError("scann_config is only for backend='scann'.")
            exact = ExactSearcher(embeddings, ids)
            self._init(backend, exact.ids, exact.dim, exact, None, None)
            return
        embeddings = check_embeddings(embeddings)
        ids = check_ids(ids, embeddings.shape[0])
        scann_config = scann_config or ScannConfig.for_size(embeddings.shape[0])
        self._init(backend, ids, embeddings.shape[1], None,
                   _build_scann_searcher(embeddings, scann_config), scann_config)

    def _init(self, backend, ids, dim, exact: Optional[ExactSearcher], searcher, scann_config):
        self.backend = backend
        self.ids = tuple(ids)
        self.dim = int(dim)
        self.scann_config = scann_config
        self._exact = exact  # the brute-force backend
        self._searcher = searcher  # the ScaNN backend

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return (f"EmbeddingIndex(backend={self.backend!r}, num_candidates={len(self)}, "
                f"dim={self.dim})")

    @property
    def is_exact(self) -> bool:
        """True when `search` returns the exact top-k."""
        return self.backend == "brute_force" or self.scann_config.is_exact

    def with_search_settings(self, num_leaves_to_search: Optional[int] = None,
                             num_reordering_candidates: Optional[int] = None
                             ) -> "EmbeddingIndex":
        """The same ScaNN index searched with other search-time settings, without a rebuild.

        ScaNN's tree and codebooks are fixed at build time, but how many leaves a query visits
        and how many candidates are re-scored exactly are chosen per search (Guo et al. 2020):
        the knobs that trade recall for speed. The returned index shares this one's searcher;
        a setting left as None keeps this index's value.

        Example:
        >>> wider = index.with_search_settings(num_leaves_to_search=64,
        ...                                    num_reordering_candidates=250)
        """
        if self.backend != "scann" or self.scann_config.is_exact:
            raise ValueError("with_search_settings needs a partitioned ScaNN index (this one is "
                             f"{'brute force' if self.backend == 'brute_force' else 'exact'}).")
        changes = {name: value for name, value in (
            ("num_leaves_to_search", num_leaves_to_search),
            ("num_reordering_candidates", num_reordering_candidates)) if value is not None}
        other = EmbeddingIndex.__new__(EmbeddingIndex)
        other._init(self.backend, self.ids, self.dim, None, self._searcher,
                    dataclasses.replace(self.scann_config, **changes))
        return other

    def search(self, query_embeddings, k: int = 10) -> SearchResult:
        """Returns the top-k candidates by inner product for each query.

        Args:
          query_embeddings: float `[num_queries, dim]` query embeddings phi(q).
          k: results per query; capped at the number of candidates.

        Returns:
          A `tt_zoo.retrieval.search.SearchResult`: per query, best first, the `k` candidates' `rows`
          (positions in `ids`), `scores` (float32 inner products) and `ids`.
        """
        if self._exact is not None:
            return self._exact.search(query_embeddings, k)
        queries = check_queries(query_embeddings, self.dim)
        rows, scores = self._search_scann(queries, min(check_k(k), len(self)))
        return SearchResult.from_rows(rows, scores, self.ids)

    def _search_scann(self, queries: np.ndarray, k: int):
        config = self.scann_config
        pre_reorder = -1 if config.is_exact else max(config.num_reordering_candidates, k)
        leaves = -1 if config.is_exact else config.num_leaves_to_search
        indices, scores = self._scann_padded(queries, k, pre_reorder, leaves=leaves)
        short = np.flatnonzero(~np.isfinite(scores).all(axis=1))
        if short.size:
            # The searched leaves held fewer than k candidates for these queries (ScaNN pads
            # them with NaN): search them again over every leaf.
            indices[short], scores[short] = self._scann_padded(queries[short], k, pre_reorder,
                                                               leaves=config.num_leaves)
            if not np.isfinite(scores[short]).all():
                raise RuntimeError(f"ScaNN returned fewer than k={k} results even over all "
                                   f"{config.num_leaves} leaves ({len(self)} candidates).")
        return indices, scores

    def _scann_padded(self, queries: np.ndarray, k: int, pre_reorder: int, leaves: int):
        """ScaNN results as int64 indices and float32 scores `[q, k]`, NaN where missing."""
        indices = np.zeros((queries.shape[0], k), np.int64)
        scores = np.full((queries.shape[0], k), np.nan, np.float32)
        if queries.shape[0] == 1:
            found, distances = self._searcher.search(
                queries[0], final_num_neighbors=k, pre_reorder_num_neighbors=pre_reorder,
                leaves_to_search=leaves)
            found, distances = np.asarray(found)[None], np.asarray(distances)[None]
        else:
            found, distances = self._searcher.search_batched_parallel(
                queries, final_num_neighbors=k, pre_reorder_num_neighbors=pre_reorder,
                leaves_to_search=leaves)
        width = min(k, np.asarray(found).shape[1])
        indices[:, :width] = np.asarray(found)[:, :width]
        scores[:, :width] = np.asarray(distances)[:, :width]
        return indices, scores

    # -- serialization ------------------------------------------------------------------------
    def save(self, path, overwrite: bool = False) -> pathlib.Path:
        """Writes the index to directory `path` atomically (temp dir, then rename).

        Layout: `index.json` (format, backend, num_candidates, dim, ScaNN settings, sha256 of
        every other file), `ids.txt` (UTF-8, one id per line), and `scann/` (ScaNN's own
        serializer) or `embeddings.npy` (brute force).
        """

        def build(tmp: pathlib.Path) -> None:
            with open(tmp / IDS_FILE, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(candidate_id + "\n" for candidate_id in self.ids)
            if self.backend == "scann":
                (tmp / SCANN_DIR).mkdir()
                # relative_path=True keeps the asset paths valid after the rename.
                self._searcher.serialize(str(tmp / SCANN_DIR), relative_path=True)
            else:
                np.save(tmp / EMBEDDINGS_FILE, self._exact.embeddings, allow_pickle=False)
            config = {
                "format": INDEX_FORMAT,
                "format_version": INDEX_FORMAT_VERSION,
                "backend": self.backend,
                "num_candidates": len(self),
                "dim": self.dim,
                "scann": self.scann_config.to_json() if self.scann_config else None,
                "files": describe_files(tmp),
            }
            write_json(tmp / INDEX_CONFIG_FILE, config, indent=2, sort_keys=True)

        return write_directory(
            path, build, overwrite=overwrite, what="saved tt_zoo EmbeddingIndex",
            is_replaceable=lambda p: (p / INDEX_CONFIG_FILE).is_file())

    @classmethod
    def load(cls, path) -> "EmbeddingIndex":
        """Loads a directory written by `save`, checking every file against its sha256."""
        root = as_path(path, "path")
        recover_replaced(root)  # a replace killed between its renames: the old version is back
        if not root.is_dir():
            raise IndexFileError(f"{root} is not a directory holding a saved tt_zoo index.")
        config_file = root / INDEX_CONFIG_FILE
        config = read_json(config_file)
        if config.get("format") != INDEX_FORMAT:
            raise IndexFileError(f"{config_file}: format is {config.get('format')!r}, "
                                 f"expected {INDEX_FORMAT!r}.")
        if config.get("format_version") not in (1, INDEX_FORMAT_VERSION):
            raise IndexFileError(f"{config_file}: format_version "
                                 f"{config.get('format_version')!r} is not supported "
                                 f"(this tt_zoo reads 1 and {INDEX_FORMAT_VERSION}).")
        try:
            backend, num, dim, files = (config["backend"], int(config["num_candidates"]),
                                        int(config["dim"]), dict(config["files"]))
            check_backend(backend)
        except (KeyError, TypeError, ValueError) as e:
            raise IndexFileError(f"{config_file} is malformed: {e!r}.") from e
        if IDS_FILE not in files:
            raise IndexFileError(f"{config_file} lists no {IDS_FILE}.")
        verify_files(root, files, listed_in=config_file, error=IndexFileError)

        ids_path = root / IDS_FILE
        try:
            ids = ids_path.read_text(encoding="utf-8").split("\n")
        except UnicodeDecodeError as e:
            raise IndexFileError(f"{ids_path} is not UTF-8: {e}") from e
        if ids and ids[-1] == "":
            ids.pop()
        if len(ids) != num:
            raise IndexFileError(f"{ids_path} holds {len(ids)} ids; {config_file} says {num}.")
        check_ids(ids, num)

        index = cls.__new__(cls)
        if backend == "brute_force":
            emb_path = root / EMBEDDINGS_FILE
            if EMBEDDINGS_FILE not in files:
                raise IndexFileError(f"{config_file} lists no {EMBEDDINGS_FILE}.")
            try:
                embeddings = np.load(emb_path, allow_pickle=False)
            except ValueError as e:
                raise IndexFileError(f"{emb_path} is not a plain .npy array: {e}") from e
            if embeddings.shape != (num, dim) or embeddings.dtype != np.float32:
                raise IndexFileError(f"{emb_path} holds {embeddings.dtype} {embeddings.shape}; "
                                     f"expected float32 ({num}, {dim}).")
            exact = ExactSearcher(embeddings, ids)
            index._init(backend, exact.ids, dim, exact, None, None)
            return index

        try:
            scann_config = ScannConfig.from_json(config["scann"])
        except (TypeError, ValueError) as e:
            raise IndexFileError(f"{config_file}: bad 'scann' settings: {e}") from e
        searcher = load_scann_searcher(root / SCANN_DIR, num, config_file, "candidates")
        index._init(backend, ids, dim, None, searcher, scann_config)
        return index
