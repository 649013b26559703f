"""Section `search` of benchmarks/peers.py: nearest-neighbour search, ScaNN against FAISS.

Chang et al. 2020, Sec. 2: retrieval with a two-tower model is maximum inner product search over
precomputed candidate embeddings. On the open-domain ReQA-SQuAD(dev) candidates
(`benchmarks/open_domain.py` caches their embeddings under runs/open_domain/, 578,086 x 512,
L2-normalised) and the embeddings of the first N SQuAD dev questions by the same model, this
section compares, all answering the same batch of queries with k = 10:

- exact search: tt_zoo's brute force (`EmbeddingIndex(backend="brute_force")`) and FAISS
  `IndexFlatIP`; the first gives the exact top-10 every recall is measured against;
- ScaNN through tt_zoo (`EmbeddingIndex`, `ScannConfig.for_size`: about sqrt(n) leaves,
  anisotropic hashing with 2 dimensions per 4-bit block, exact re-ordering); knobs
  leaves_to_search and reorder (`EmbeddingIndex.with_search_settings`, no rebuild); and the same
  tree with 4 dimensions a block (half the lookups per candidate) and longer re-ordering;
- FAISS IVF-PQ: `IVF{same leaves},PQ{dim/2}x4fs,RFlat` (inverted lists, 4-bit fast-scan product
  quantisation with the same code size as ScaNN's hashing, exact re-ranking as ScaNN's
  reorder); knobs nprobe and the re-ranked count (k_factor x k);
- FAISS HNSW: `HNSW{M}` (flat vectors, efConstruction 40); knob efSearch.

- ScaNN variants (`--scann-variants`): `EmbeddingIndex`es whose `ScannConfig` sets the knobs
  tt_zoo's default leaves alone: more leaves (2x and 4x sqrt(n)), anisotropic quantization
  (Guo et al., ICML 2020, threshold 0.2 as ScaNN recommends for normalised data) and SOAR (Sun et
  al., NeurIPS 2023, "SOAR: Improved Indexing for Approximate Nearest Neighbor Search": each
  candidate is also kept in a second leaf chosen to be orthogonal in residual; lambda 1.5).

For each approximate method the main knob is swept upwards (on a ladder of about x1.5 steps,
`knob_ladder`, the same for ScaNN's leaves_to_search and FAISS's nprobe) for each value of the
second one and stops at the first setting whose recall@10 reaches the target
(`peers_measure.walk_knob`); those settings are then timed in interleaved rounds with the exact
searches, and the report gives each method's fastest setting reaching the target
(`peers_measure.fastest_reaching`), its queries/s (median over rounds, one batch of all
queries), its build time (one build), the memory it added (resident-set growth over the build
and a first search) and, for the partitioned indexes, the share of the leaves a query scans
and the core-nanoseconds each scanned candidate costs (2 cores / queries/s / candidates in
the searched leaves, leaves taken as equal): whether ScaNN needs to scan more candidates than
FAISS for the same recall, or scans each more slowly.

The embeddings come from NAME.npy + NAME.json in --embeddings-dir (benchmarks/open_domain.py's
cache), or from any `--search-embeddings-file PATH.npy` whose PATH.json (as
`tt_zoo.evaluation.open_domain.encode_documents_to_file` writes it) says it is finished and
names the model (or `--search-model`); the queries are always encoded by that same model.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import pathlib
import time
from typing import List, Optional

import numpy as np

PEER_MODULES = ("faiss",)
K = 10
REORDER_VALUES = (100, 250, 1000)              # candidates re-scored exactly
COARSE_REORDER_VALUES = (250, 500, 1000)       # the same, for AH with 4 dimensions a block
EF_SEARCH_VALUES = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
# The ScaNN variants built by default (`ScannVariant`, each a `ScannConfig`): anisotropic
# quantization on the default tree, then 2x and 4x the leaves, then SOAR on 1x and 2x.
DEFAULT_SCANN_VARIANTS = ("sqrt/avq=0.2,2sqrt/avq=0.2,4sqrt/avq=0.2,sqrt/avq=0.2/soar=1.5,"
                          "2sqrt/avq=0.2/soar=1.5")


def knob_ladder(largest: int, smallest: int = 8) -> List[int]:
    """The values a partition-count knob (ScaNN leaves_to_search, FAISS nprobe) is swept over:
    8, 12, 16, 24, 32, 48, ... (powers of two and 1.5 times them, so each step costs at most
    1.5x the one before) up to `largest`, and `largest` itself (every leaf) last.

    >>> knob_ladder(100)
    [8, 12, 16, 24, 32, 48, 64, 96, 100]
    """
    if largest < 1:
        raise ValueError(f"knob_ladder needs largest >= 1 (got {largest}).")
    values, power = [], smallest
    while power < largest:
        values += [v for v in (power, power * 3 // 2) if v < largest]
        power *= 2
    return values + [largest]


@dataclasses.dataclass(frozen=True)
class ScannVariant:
    """A ScaNN tree-AH index (`ScannConfig`'s knobs), from the text
    ``LEAVES[/avq=T][/soar=L][/over=F][/dims=D][/sample=N]``:

    - LEAVES: ``sqrt`` (round(sqrt(n)), as `ScannConfig.for_size`), ``Ksqrt`` (K times that,
      e.g. ``2sqrt``) or a number of leaves;
    - ``avq=T``: anisotropic quantization threshold of the AH codes (Guo et al. 2020; absent:
      isotropic, as tt_zoo's default);
    - ``soar=L``: SOAR spilled assignments with lambda L (Sun et al. 2023); ``over=F`` its
      overretrieve factor (absent: ScaNN's default);
    - ``dims=D``: dimensions per 4-bit AH block (default 2, as tt_zoo);
    - ``sample=N``: candidates the tree's k-means trains on (absent: ScaNN's default, 100,000,
      as tt_zoo's), worth raising with the leaves.

    >>> ScannVariant.parse("2sqrt/avq=0.2/soar=1.5").num_leaves(10_000)
    200
    """

    leaves: str
    avq: Optional[float] = None
    soar: Optional[float] = None
    overretrieve: Optional[float] = None
    dims_per_block: int = 2
    training_sample_size: Optional[int] = None

    KEYS = {"avq": "avq", "soar": "soar", "over": "overretrieve", "dims": "dims_per_block",
            "sample": "training_sample_size"}

    @classmethod
    def parse(cls, text: str) -> "ScannVariant":
        expected = ("expected LEAVES[/avq=T][/soar=L][/over=F][/dims=D][/sample=N] with "
                    "LEAVES 'sqrt', "
                    "'Ksqrt' (e.g. 2sqrt) or a number, e.g. 2sqrt/avq=0.2/soar=1.5")
        leaves, *extras = text.strip().split("/")
        fields = {}
        try:
            multiple = leaves[:-len("sqrt")] if leaves.endswith("sqrt") else None
            if multiple is not None:
                if multiple and float(multiple) <= 0:
                    raise ValueError(leaves)
            elif int(leaves) < 1:
                raise ValueError(leaves)
            for extra in extras:
                key, value = extra.split("=")
                if key not in cls.KEYS or cls.KEYS[key] in fields:
                    raise ValueError(extra)
                number = int(value) if key in ("dims", "sample") else float(value)
                if number <= 0 or not math.isfinite(number):
                    raise ValueError(extra)
                fields[cls.KEYS[key]] = number
        except ValueError:
            raise ValueError(f"ScaNN variant {text!r}: {expected}.") from None
        if "overretrieve" in fields and "soar" not in fields:
            raise ValueError(f"ScaNN variant {text!r}: over=F needs soar=L ({expected}).")
        return cls(leaves=leaves, **fields)

    @property
    def name(self) -> str:
        parts = [self.leaves]
        for key, field in self.KEYS.items():
            value = getattr(self, field)
            if value is not None and not (field == "dims_per_block" and value == 2):
                parts.append(f"{key}={value:g}")
        return "/".join(parts)

    def num_leaves(self, num_candidates: int) -> int:
        if self.leaves.endswith("sqrt"):
            multiple = float(self.leaves[:-len("sqrt")] or 1)
            leaves = int(round(multiple * math.sqrt(num_candidates)))
        else:
            leaves = int(self.leaves)
        return max(1, min(leaves, num_candidates))


def parse_scann_variants(text: str) -> List[ScannVariant]:
    """`ScannVariant`s from a comma-separated list ('' or 'none': no variants)."""
    if text.strip().lower() in ("", "none"):
        return []
    variants = [ScannVariant.parse(t) for t in text.split(",") if t.strip()]
    names = [v.name for v in variants]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"ScaNN variants {repeated} are listed twice.")
    return variants


def settings(args) -> dict:
    s = {"num_queries": args.num_queries, "max_candidates": args.max_candidates,
         "rounds": args.rounds, "target_recall": args.target_recall, "k": K,
         "hnsw_m": args.hnsw_m, "hnsw_ef_construction": args.hnsw_ef_construction,
         "scann_variants": [v.name for v in args.scann_variants]}
    if args.quick:
        s.update(num_queries=min(args.num_queries, 200),
                 max_candidates=min(args.max_candidates or 10_000, 10_000),
                 rounds=min(args.rounds, 2))
    return s


# -- sources ------------------------------------------------------------------------------------

def cached_sources(directory: pathlib.Path, names):
    """(name, candidates .npy, the model that encoded them) of each cached embedding file, as
    benchmarks/open_domain.py wrote them: NAME.npy with NAME.json naming its model."""
    if not directory.is_dir():
        raise SystemExit(f"--embeddings-dir {directory} does not exist: run "
                         "benchmarks/open_domain.py first, or pass --synthetic.")
    found = sorted(p.stem for p in directory.glob("*.npy") if p.with_suffix(".json").is_file())
    wanted = names or found
    missing = sorted(set(wanted) - set(found))
    if missing or not wanted:
        raise SystemExit(f"--embeddings-dir {directory}: no finished NAME.npy + NAME.json for "
                         f"{missing or 'any model'} (found {found}).")
    out = []
    for name in wanted:
        meta = json.loads(directory.joinpath(f"{name}.json").read_text(encoding="utf-8"))
        if meta.get("done") != meta.get("shape", [None])[0]:
            raise SystemExit(f"{directory / name}.npy is not finished ({meta.get('done')} of "
                             f"{meta.get('shape')} rows encoded).")
        out.append((name, directory / f"{name}.npy", meta.get("model", name)))
    return out


def file_source(path: pathlib.Path, model: Optional[str]):
    """(name, candidates .npy, the model that encoded them) of one `--search-embeddings-file`:
    PATH.npy, finished according to its PATH.json (``shape``, ``done``, ``model``: what
    `tt_zoo.evaluation.open_domain.encode_documents_to_file` writes), the model from the JSON or
    `model` (`--search-model`; both given, they must name the same model)."""
    if path.suffix != ".npy" or not path.is_file():
        raise SystemExit(f"--search-embeddings-file {path}: expected an existing .npy file of "
                         "candidate embeddings [n, dim].")
    meta_path = path.with_suffix(".json")
    meta = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"{meta_path} is not readable JSON ({e}).")
    shape = list(np.load(path, mmap_mode="r", allow_pickle=False).shape)
    if len(shape) != 2:
        raise SystemExit(f"--search-embeddings-file {path}: expected a 2-D array [n, dim] "
                         f"(got shape {shape}).")
    if meta and (meta.get("shape") != shape or meta.get("done") != shape[0]):
        raise SystemExit(f"{path} is not finished: {meta_path} says {meta.get('done')} of "
                         f"{meta.get('shape')} rows encoded (the file holds {shape}); wait for "
                         "the encoder to finish.")
    named = meta.get("model")
    if named and model and pathlib.Path(named).name != pathlib.Path(model).name:
        raise SystemExit(f"--search-model {model} is not the model that encoded {path} "
                         f"({named}, says {meta_path}): the queries must come from the "
                         "candidates' model.")
    model = model or named
    if not model:
        raise SystemExit(f"--search-embeddings-file {path}: no {meta_path.name} names the model "
                         "that encoded it; pass --search-model NAME (the queries are encoded "
                         "by the candidates' model).")
    return path.stem, path, model


def load_candidates(path: pathlib.Path, limit):
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    return np.ascontiguousarray(array[:limit] if limit else array, dtype=np.float32)


def encode_questions(model_name: str, squad: str, num_queries: int):
    """The first `num_queries` SQuAD dev questions by the model that encoded the candidates."""
    import tt_zoo
    from tt_zoo.evaluation.reqa import build_reqa

    model = tt_zoo.load(model_name if pathlib.Path(model_name).exists()
                        else pathlib.Path(model_name).name)
    questions = build_reqa(squad).questions[:num_queries]
    return np.ascontiguousarray(model.encode_queries([q.text for q in questions]),
                                dtype=np.float32)


# -- contenders -----------------------------------------------------------------------------------

class Built:
    """One built index: its build seconds and added memory, and `searcher(setting)` -> a
    function of a query batch returning candidate rows [q, K]."""

    def __init__(self, family: str, build_s: float, memory_bytes: int, searcher, description):
        self.family, self.build_s, self.memory_bytes = family, build_s, memory_bytes
        self.searcher, self.description = searcher, description
        self.num_leaves = None  # partitioned indexes: their leaves (inverted lists)


def build(family: str, make, searcher_of, warm_queries, description: str, log) -> Built:
    """Builds with `make()`, then one search (warm-up); times the build, measures the memory."""
    from benchmarks.peers_measure import rss_bytes

    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    index = make()
    build_s = time.perf_counter() - start
    searcher = searcher_of(index)
    searcher(None)(warm_queries)
    gc.collect()
    built = Built(family, build_s, rss_bytes() - before, searcher, description)
    log(f"search: built {family} ({description}) in {build_s:.1f} s, "
        f"+{built.memory_bytes / 2**20:,.0f} MiB")
    return built


def scann_searcher(index):
    """A ScaNN `EmbeddingIndex`'s search at a swept setting (None: the settings it was built
    with), without a rebuild (`EmbeddingIndex.with_search_settings`): queries -> rows [q, K]."""
    def with_setting(setting):
        view = index if setting is None else index.with_search_settings(
            num_leaves_to_search=setting["leaves_to_search"],
            num_reordering_candidates=setting["reorder"])
        return lambda q: view.search(q, K).rows
    return with_setting


def tt_zoo_indexes(candidates, warm, log):
    from tt_zoo.retrieval.index import EmbeddingIndex, ScannConfig

    ids = [str(i) for i in range(len(candidates))]
    exact = build("tt_zoo brute force",
                  lambda: EmbeddingIndex(candidates, ids, backend="brute_force"),
                  lambda index: lambda _: lambda q: index.search(q, K).rows, warm,
                  "EmbeddingIndex(backend='brute_force')", log)
    config = ScannConfig.for_size(len(candidates))
    if config.is_exact:  # a smoke run's small set: its tree all the same, to sweep its knobs
        config = ScannConfig.tree_for_size(len(candidates))

    scann = build("ScaNN (tt_zoo)", lambda: EmbeddingIndex(candidates, ids, backend="scann",
                                                            scann_config=config),
                  scann_searcher, warm,
                  f"EmbeddingIndex, ScannConfig.for_size: {config.num_leaves} leaves, AH 2 "
                  "dims/block", log)
    scann.default = {"leaves_to_search": config.num_leaves_to_search,
                     "reorder": config.num_reordering_candidates}
    scann.num_leaves = config.num_leaves
    # Coarser quantisation: 4 dimensions a 4-bit block halves the lookups per candidate, and a
    # longer exact re-ordering wins back the recall it loses.
    coarse = dataclasses.replace(config, dimensions_per_block=4, num_reordering_candidates=250)
    scann_coarse = build(
        "ScaNN (tt_zoo), AH 4 dims/block",
        lambda: EmbeddingIndex(candidates, ids, backend="scann", scann_config=coarse),
        scann_searcher, warm, f"EmbeddingIndex, ScannConfig({coarse.num_leaves} leaves, AH 4 "
                              "dims/block)", log)
    scann_coarse.num_leaves = coarse.num_leaves
    return exact, scann, scann_coarse


def scann_variant_index(candidates, variant: ScannVariant, warm, log) -> Built:
    """One `ScannVariant`: an `EmbeddingIndex` whose `ScannConfig` takes the variant's knobs
    (leaves, anisotropic threshold, SOAR, dimensions a block, k-means sample), built with a
    fifth of its leaves searched and 100 re-ordered; swept like tt_zoo's (`scann_searcher`)."""
    from tt_zoo.retrieval.index import EmbeddingIndex, ScannConfig

    n = len(candidates)
    leaves = variant.num_leaves(n)
    config = ScannConfig(
        num_leaves=leaves, num_leaves_to_search=min(leaves, max(25, math.ceil(leaves / 5))),
        dimensions_per_block=variant.dims_per_block,
        num_reordering_candidates=REORDER_VALUES[0],
        anisotropic_quantization_threshold=variant.avq, soar_lambda=variant.soar,
        overretrieve_factor=variant.overretrieve,
        training_sample_size=variant.training_sample_size)
    ids = [str(i) for i in range(n)]

    def make():
        return EmbeddingIndex(candidates, ids, backend="scann", scann_config=config)

    description = (f"ScannConfig: {leaves} leaves, AH {variant.dims_per_block} dims/block, "
                   + ("isotropic" if variant.avq is None else f"anisotropic {variant.avq:g}")
                   + ("" if variant.soar is None else f", SOAR lambda {variant.soar:g}"
                      + ("" if variant.overretrieve is None
                         else f" overretrieve {variant.overretrieve:g}"))
                   + ("" if variant.training_sample_size is None
                      else f", k-means on {variant.training_sample_size:,}"))
    built = build(f"ScaNN {variant.name}", make, scann_searcher, warm, description, log)
    built.num_leaves = leaves
    return built


def faiss_indexes(candidates, num_leaves: int, s: dict, warm, log):
    import faiss

    dim = candidates.shape[1]
    ip = faiss.METRIC_INNER_PRODUCT

    def flat():
        index = faiss.IndexFlatIP(dim)
        index.add(candidates)
        return index

    exact = build("FAISS Flat", flat, lambda index: lambda _: lambda q: index.search(q, K)[1],
                  warm, "IndexFlatIP", log)

    ivf_factory = f"IVF{num_leaves},PQ{dim // 2}x4fs,RFlat"

    def ivf():
        index = faiss.index_factory(dim, ivf_factory, ip)
        index.train(candidates)
        index.add(candidates)
        return index

    def ivf_searcher(index):
        refine = faiss.downcast_index(index)
        base = faiss.extract_index_ivf(refine.base_index)

        def with_setting(setting):
            setting = setting or {"nprobe": 16, "reorder": 100}

            def search(q):
                base.nprobe = setting["nprobe"]
                refine.k_factor = setting["reorder"] / K
                return index.search(q, K)[1]
            return search
        return with_setting

    ivf_built = build("FAISS IVF-PQ", ivf, ivf_searcher, warm, ivf_factory, log)
    ivf_built.num_leaves = num_leaves

    hnsw_factory = f"HNSW{s['hnsw_m']}"

    def hnsw():
        index = faiss.index_factory(dim, hnsw_factory, ip)
        index.hnsw.efConstruction = s["hnsw_ef_construction"]
        index.add(candidates)
        return index

    def hnsw_searcher(index):
        def with_setting(setting):
            setting = setting or {"ef_search": 64}

            def search(q):
                index.hnsw.efSearch = setting["ef_search"]
                return index.search(q, K)[1]
            return search
        return with_setting

    hnsw_built = build("FAISS HNSW", hnsw, hnsw_searcher, warm,
                       f"{hnsw_factory}, efConstruction {s['hnsw_ef_construction']}", log)
    return exact, ivf_built, hnsw_built


# -- the sweep ----------------------------------------------------------------------------------

def sweep(built: Built, grid, queries, exact_rows, target: float, log) -> list:
    """Walks `grid` = (primary knob, values, secondary knob, values): returns every evaluated
    point [{"settings", "recall_at_10", "sweep_seconds"}] and marks the frontier (the first
    point reaching `target` for each secondary value, else the best one reached)."""
    from benchmarks.peers_measure import recall_at_k, walk_knob

    primary, values, secondary, second_values = grid
    points = []
    for second in second_values:
        walked_points = []

        def recall_of(value):
            setting = {primary: value, **({secondary: second} if secondary else {})}
            start = time.perf_counter()
            rows = built.searcher(setting)(queries)
            seconds = time.perf_counter() - start
            recall = recall_at_k(rows, exact_rows, K)
            walked_points.append({"settings": setting, "recall_at_10": recall,
                                  "sweep_seconds": seconds})
            log(f"search: {built.family} {setting}: recall@10 {recall:.4f} "
                f"({len(queries) / seconds:,.0f} q/s, one pass)")
            return recall

        walk_knob(values, recall_of, target)
        last = walked_points[-1]
        best = last if last["recall_at_10"] >= target else max(
            walked_points, key=lambda p: p["recall_at_10"])
        best["frontier"] = True
        points += walked_points
    return points


def _load_libraries(dim: int) -> None:
    """Initialises TensorFlow, ScaNN and FAISS on a toy problem, so that no index's memory
    counts a library's own start-up."""
    from benchmarks.peers_measure import missing_modules
    from tt_zoo.retrieval.search import exact_top_k

    toy = np.eye(2, dim, dtype=np.float32)
    exact_top_k(toy, toy, 1)
    import scann  # noqa: F401  pylint: disable=unused-import
    if not missing_modules(PEER_MODULES):
        import faiss
        faiss.IndexFlatIP(dim).search(toy, 1)


def scan_cost(row: dict, num_leaves: Optional[int], num_candidates: int, cores: int) -> dict:
    """For a partitioned index's timed row: the share of the leaves a query searches and the
    core-nanoseconds per candidate in them (leaves taken as equal in size; with SOAR each
    candidate sits in two leaves, so a query scans up to twice the share given):
    cores / queries per second / (share x candidates).

    >>> scan_cost({"settings": {"nprobe": 100}, "median_qps": 1000}, 1000, 1_000_000, 2)
    {'scanned_fraction': 0.1, 'core_ns_per_scanned_candidate': 20.0}
    """
    setting = row.get("settings") or {}
    probed = setting.get("leaves_to_search", setting.get("nprobe"))
    if not num_leaves or probed is None:
        return {}
    fraction = min(probed, num_leaves) / num_leaves
    return {"scanned_fraction": fraction,
            "core_ns_per_scanned_candidate": 1e9 * cores / row["median_qps"]
            / (fraction * num_candidates)}


def scann_against_faiss(rows: List[dict]) -> Optional[dict]:
    """The fastest ScaNN row reaching the target (any ScaNN index) against FAISS IVF-PQ's."""
    best = {}
    for family, prefix in (("scann", "ScaNN"), ("faiss", "FAISS IVF-PQ")):
        chosen = [r for r in rows if r["method"].startswith(prefix)
                  and r.get("fastest_reaching_target")]
        if chosen:
            best[family] = max(chosen, key=lambda r: r["median_qps"])
    if "scann" not in best:
        return None
    out = {"scann_method": best["scann"]["method"], "scann_settings": best["scann"]["settings"],
           "scann_qps": best["scann"]["median_qps"]}
    if "faiss" in best:
        out.update(faiss_settings=best["faiss"]["settings"],
                   faiss_qps=best["faiss"]["median_qps"],
                   scann_over_faiss=best["scann"]["median_qps"] / best["faiss"]["median_qps"])
    return out


def measure(candidates, queries, s: dict, log, variants=()) -> dict:
    """Every contender on one set of candidates and queries."""
    from benchmarks.peers_measure import (fastest_reaching, interleaved_rounds, rates, recall_at_k,
                               stopwatch, unavailable_reason)

    target = s["target_recall"]
    warm = queries[:2]
    _load_libraries(candidates.shape[1])
    exact, scann, scann_coarse = tt_zoo_indexes(candidates, warm, log)
    exact_rows = exact.searcher(None)(queries)
    faiss_reason = unavailable_reason(PEER_MODULES)
    leaves = knob_ladder(scann.num_leaves)
    approximate = [(scann, ("leaves_to_search", leaves, "reorder", REORDER_VALUES)),
                   (scann_coarse, ("leaves_to_search", leaves, "reorder", COARSE_REORDER_VALUES))]
    for variant in variants:
        built = scann_variant_index(candidates, variant, warm, log)
        approximate.append((built, ("leaves_to_search", knob_ladder(built.num_leaves), "reorder",
                                    REORDER_VALUES if variant.dims_per_block <= 2
                                    else COARSE_REORDER_VALUES)))
    exacts = [exact]
    if not faiss_reason:
        faiss_exact, ivf, hnsw = faiss_indexes(candidates, scann.num_leaves, s, warm, log)
        exacts.append(faiss_exact)
        approximate += [(ivf, ("nprobe", leaves, "reorder", REORDER_VALUES)),
                        (hnsw, ("ef_search", EF_SEARCH_VALUES, None, [None]))]

    sweeps = {built.family: sweep(built, grid, queries, exact_rows, target, log)
              for built, grid in approximate}
    timed = [(e, None) for e in exacts] + [(scann, {**scann.default, "default": True})]
    for built, _ in approximate:
        timed += [(built, p["settings"]) for p in sweeps[built.family] if p.get("frontier")]
    runners, rows = {}, []
    for i, (built, setting) in enumerate(timed):
        search = built.searcher({k: v for k, v in (setting or {}).items() if k != "default"}
                                if setting else None)
        runners[str(i)] = stopwatch(lambda search=search: search(queries))
        rows.append({"method": built.family, "description": built.description,
                     "settings": setting, "recall_at_10": recall_at_k(search(queries),
                                                                      exact_rows, K),
                     "build_s": built.build_s, "memory_mib": built.memory_bytes / 2**20,
                     "num_leaves": built.num_leaves})
    seconds = interleaved_rounds(runners, s["rounds"], log=lambda m: log(f"search: {m}"))
    for i, row in enumerate(rows):
        r = rates(seconds[str(i)], len(queries))
        row.update(median_qps=r["median_per_s"], min_qps=r["min_per_s"], max_qps=r["max_per_s"],
                   rounds=r["rounds"], round_seconds=seconds[str(i)])
        row.update(scan_cost(row, row["num_leaves"], len(candidates), os.cpu_count() or 1))
    for family in {row["method"] for row in rows}:
        family_rows = [r for r in rows if r["method"] == family
                       and not (r["settings"] or {}).get("default")]
        chosen = fastest_reaching(family_rows, target)
        if chosen is not None:
            chosen["fastest_reaching_target"] = True
    out = {"num_candidates": int(candidates.shape[0]), "dim": int(candidates.shape[1]),
           "num_queries": int(queries.shape[0]), "rows": rows, "sweeps": sweeps}
    summary = scann_against_faiss(rows)
    if summary is not None:
        out["scann_against_faiss"] = summary
    if faiss_reason:
        out["skipped"] = {"FAISS Flat, IVF-PQ, HNSW": faiss_reason}
    return out


def run(args, log) -> dict:
    s = settings(args)
    results = {}
    if args.synthetic:
        from benchmarks.scann_vs_brute_force import gaussian_mixture
        n = s["max_candidates"] or 100_000
        candidates, queries = gaussian_mixture(n, s["num_queries"], 64, seed=0)
        results["synthetic"] = {
            "source": f"seeded Gaussian mixture (50 components), {n:,} x 64",
            **measure(candidates, queries, s, log, args.scann_variants)}
    else:
        if args.search_embeddings_file:
            sources = [file_source(pathlib.Path(f), args.search_model)
                       for f in args.search_embeddings_file]
        else:
            sources = cached_sources(pathlib.Path(args.embeddings_dir), args.search_embeddings)
            if args.quick and not args.search_embeddings:
                sources = sources[:1]  # a smoke run needs one
        for name, path, model in sources:
            log(f"search: {name}: loading {path} and encoding {s['num_queries']:,} questions")
            candidates = load_candidates(path, s["max_candidates"])
            queries = encode_questions(model, args.squad, s["num_queries"])
            results[name] = {"source": f"{path} (model {model}); queries: the first "
                                       f"{len(queries):,} ReQA-SQuAD(dev) questions, encoded "
                                       "by the same model",
                             **measure(candidates, queries, s, log, args.scann_variants)}
            del candidates
            gc.collect()
    from benchmarks.peers_train import _threads
    threads = _threads()
    try:
        import faiss
        threads["faiss (OpenMP)"] = faiss.omp_get_max_threads()
    except ImportError:
        pass
    return {"settings": s, "embeddings": results, "threads": threads}


def _setting_text(row) -> str:
    setting = dict(row["settings"] or {})
    default = setting.pop("default", False)
    text = ", ".join(f"{k} {v}" for k, v in setting.items()) or "exact"
    return text + (" (tt_zoo default)" if default else "")


def _summary_lines(summary: Optional[dict], target: float) -> list:
    if not summary:
        return []
    setting = _setting_text({"settings": summary["scann_settings"]})
    line = (f"Fastest ScaNN reaching recall@10 {target}: {summary['scann_method']}, {setting}, "
            f"{summary['scann_qps']:,.0f} q/s")
    if "faiss_qps" in summary:
        faiss_setting = _setting_text({"settings": summary["faiss_settings"]})
        line += (f"; FAISS IVF-PQ's fastest: {faiss_setting}, {summary['faiss_qps']:,.0f} q/s: "
                 "ScaNN answers "
                 f"x{summary['scann_over_faiss']:.2f} FAISS IVF-PQ's queries/s.")
    return ["", line]


def render(part: dict) -> list:
    s = part["settings"]
    lines = [f"k = {s['k']}; target recall@10 {s['target_recall']} of the exact top-10 (tt_zoo "
             f"brute force); queries/s: one batch of all queries, median over {s['rounds']} "
             "interleaved rounds; build: one build; memory: resident-set growth over the build "
             "and a first search. Per method, the fastest swept setting reaching the target "
             "(all swept settings are in performance.json). Leaves scanned: the share of the "
             "leaves (inverted lists) a query searches; ns/candidate: core-nanoseconds per "
             "candidate in them (cores / q/s / candidates scanned, leaves taken as equal; SOAR "
             "keeps each candidate in two leaves, so it scans up to twice the share)."]
    for name, result in part["embeddings"].items():
        lines += ["", f"**{name}**: {result['num_candidates']:,} x {result['dim']} candidates, "
                      f"{result['num_queries']:,} queries; {result['source']}.", "",
                  "| method | index | setting | recall@10 | median q/s | range | build s "
                  "| memory MiB | leaves scanned | ns/candidate |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        shown = []
        for family in dict.fromkeys(r["method"] for r in result["rows"]):
            rows = [r for r in result["rows"] if r["method"] == family]
            if rows[0]["settings"] is None:  # an exact search
                shown += rows
                continue
            swept = [r for r in rows if not r["settings"].get("default")]
            chosen = [r for r in swept if r.get("fastest_reaching_target")]
            shown += chosen or [{**max(swept, key=lambda r: r["recall_at_10"]),
                                 "not_reached": True}]
            shown += [r for r in rows if r["settings"].get("default")]
        for r in shown:
            note = " (target not reached)" if r.get("not_reached") else ""
            scanned = (f"{100 * r['scanned_fraction']:.1f}% | "
                       f"{r['core_ns_per_scanned_candidate']:.1f} |"
                       if "scanned_fraction" in r else " | |")
            lines.append(f"| {r['method']} | {r['description']} | {_setting_text(r)}{note} | "
                         f"{r['recall_at_10']:.3f} | {r['median_qps']:,.0f} | "
                         f"{r['min_qps']:,.0f}–{r['max_qps']:,.0f} | {r['build_s']:,.1f} | "
                         f"{r['memory_mib']:,.0f} | {scanned}")
        for what, reason in result.get("skipped", {}).items():
            lines.append(f"| {what} | {reason} | | | | | | | | |")
        lines += _summary_lines(result.get("scann_against_faiss"), s["target_recall"])
    return lines
