"""The indexes the `search` section compares, each built and timed the same way (`build`):
tt_zoo's exact search and ScaNN `EmbeddingIndex`es (its default, a coarser tree, and the
`ScannVariant`s of --scann-variants: other `ScannConfig` knobs), FAISS Flat, IVF-PQ and HNSW;
and the knob values each is swept over (`knob_ladder`)."""

from __future__ import annotations

import dataclasses
import gc
import math
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


class Built:
    """One built index: its build seconds and added memory, and `searcher(setting)` -> a
    function of a query batch returning candidate rows [q, K]."""

    def __init__(self, family: str, build_s: float, memory_bytes: int, searcher, description):
        self.family, self.build_s, self.memory_bytes = family, build_s, memory_bytes
        self.searcher, self.description = searcher, description
        self.num_leaves = None  # partitioned indexes: their leaves (inverted lists)


def build(family: str, make, searcher_of, warm_queries, description: str, log) -> Built:
    """Builds with `make()`, then one search (warm-up); times the build, measures the memory."""
    from benchmarks.measure import rss_bytes, timed

    gc.collect()
    before = rss_bytes()
    index, build_s = timed(make)
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


def load_libraries(dim: int) -> None:
    """Initialises TensorFlow, ScaNN and FAISS on a toy problem, so that no index's memory
    counts a library's own start-up."""
    from benchmarks.measure import missing_modules
    from tt_zoo.retrieval.search import exact_top_k

    toy = np.eye(2, dim, dtype=np.float32)
    exact_top_k(toy, toy, 1)
    import scann  # noqa: F401  pylint: disable=unused-import
    if not missing_modules(PEER_MODULES):
        import faiss
        faiss.IndexFlatIP(dim).search(toy, 1)
