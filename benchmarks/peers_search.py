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

For each approximate method the main knob is swept upwards for each value of the second one
and stops at the first setting whose recall@10 reaches the target (`peers_measure.walk_knob`);
those settings are then timed in interleaved rounds with the exact searches, and the report
gives each method's fastest setting reaching the target (`peers_measure.fastest_reaching`),
its queries/s (median over rounds, one batch of all queries), its build time (one build) and
the memory it added (resident-set growth over the build and a first search).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import pathlib
import time

import numpy as np

PEER_MODULES = ("faiss",)
K = 10
KNOB_VALUES = (8, 16, 32, 64, 128, 256, 512)   # leaves_to_search, nprobe
REORDER_VALUES = (100, 250)                    # candidates re-scored exactly
COARSE_REORDER_VALUES = (250, 500)             # the same, for AH with 4 dimensions a block
EF_SEARCH_VALUES = (16, 32, 64, 128, 256, 512)


def settings(args) -> dict:
    s = {"num_queries": args.num_queries, "max_candidates": args.max_candidates,
         "rounds": args.rounds, "target_recall": args.target_recall, "k": K,
         "hnsw_m": args.hnsw_m, "hnsw_ef_construction": args.hnsw_ef_construction}
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


def load_candidates(path: pathlib.Path, limit):
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    return np.ascontiguousarray(array[:limit] if limit else array, dtype=np.float32)


def encode_questions(model_name: str, squad: str, num_queries: int):
    """The first `num_queries` SQuAD dev questions by the model that encoded the candidates."""
    import tt_zoo
    from tt_zoo.retrieval.reqa import build_reqa

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


def build(family: str, make, searcher_of, warm_queries, description: str, log) -> Built:
    """Builds with `make()`, then one search (warm-up); times the build, measures the memory."""
    from peers_measure import rss_bytes

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


def tt_zoo_indexes(candidates, warm, log):
    from tt_zoo.retrieval.index import EmbeddingIndex, ScannConfig

    ids = [str(i) for i in range(len(candidates))]
    exact = build("tt_zoo brute force",
                  lambda: EmbeddingIndex(candidates, ids, backend="brute_force"),
                  lambda index: lambda _: lambda q: index.search(q, K).rows, warm,
                  "EmbeddingIndex(backend='brute_force')", log)
    config = ScannConfig.for_size(len(candidates))

    def scann_searcher(index):
        def with_setting(setting):
            view = index if setting is None else index.with_search_settings(
                num_leaves_to_search=setting["leaves_to_search"],
                num_reordering_candidates=setting["reorder"])
            return lambda q: view.search(q, K).rows
        return with_setting

    scann = build("ScaNN (tt_zoo)", lambda: EmbeddingIndex(candidates, ids, backend="scann"),
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
    from peers_measure import recall_at_k, walk_knob

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
    from peers_measure import missing_modules
    from tt_zoo.retrieval.search import exact_top_k

    toy = np.eye(2, dim, dtype=np.float32)
    exact_top_k(toy, toy, 1)
    import scann  # noqa: F401  pylint: disable=unused-import
    if not missing_modules(PEER_MODULES):
        import faiss
        faiss.IndexFlatIP(dim).search(toy, 1)


def measure(candidates, queries, s: dict, log) -> dict:
    """Every contender on one set of candidates and queries."""
    from peers_measure import (fastest_reaching, interleaved_rounds, rates, recall_at_k,
                               stopwatch, unavailable_reason)

    target = s["target_recall"]
    warm = queries[:2]
    _load_libraries(candidates.shape[1])
    exact, scann, scann_coarse = tt_zoo_indexes(candidates, warm, log)
    exact_rows = exact.searcher(None)(queries)
    faiss_reason = unavailable_reason(PEER_MODULES)
    leaves = [v for v in KNOB_VALUES if v <= scann.num_leaves] or [scann.num_leaves]
    approximate = [(scann, ("leaves_to_search", leaves, "reorder", REORDER_VALUES)),
                   (scann_coarse, ("leaves_to_search", leaves, "reorder", COARSE_REORDER_VALUES))]
    exacts = [exact]
    if not faiss_reason:
        faiss_exact, ivf, hnsw = faiss_indexes(candidates, scann.num_leaves, s, warm, log)
        exacts.append(faiss_exact)
        approximate += [(ivf, ("nprobe", [v for v in KNOB_VALUES if v <= scann.num_leaves]
                               or [scann.num_leaves], "reorder", REORDER_VALUES)),
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
                     "build_s": built.build_s, "memory_mib": built.memory_bytes / 2**20})
    seconds = interleaved_rounds(runners, s["rounds"], log=lambda m: log(f"search: {m}"))
    for i, row in enumerate(rows):
        r = rates(seconds[str(i)], len(queries))
        row.update(median_qps=r["median_per_s"], min_qps=r["min_per_s"], max_qps=r["max_per_s"],
                   rounds=r["rounds"], round_seconds=seconds[str(i)])
    for family in {row["method"] for row in rows}:
        family_rows = [r for r in rows if r["method"] == family
                       and not (r["settings"] or {}).get("default")]
        chosen = fastest_reaching(family_rows, target)
        if chosen is not None:
            chosen["fastest_reaching_target"] = True
    out = {"num_candidates": int(candidates.shape[0]), "dim": int(candidates.shape[1]),
           "num_queries": int(queries.shape[0]), "rows": rows, "sweeps": sweeps}
    if faiss_reason:
        out["skipped"] = {"FAISS Flat, IVF-PQ, HNSW": faiss_reason}
    return out


def run(args, log) -> dict:
    s = settings(args)
    results = {}
    if args.synthetic:
        from scann_vs_brute_force import gaussian_mixture  # beside this file
        n = s["max_candidates"] or 100_000
        candidates, queries = gaussian_mixture(n, s["num_queries"], 64, seed=0)
        results["synthetic"] = {
            "source": f"seeded Gaussian mixture (50 components), {n:,} x 64",
            **measure(candidates, queries, s, log)}
    else:
        sources = cached_sources(pathlib.Path(args.embeddings_dir), args.search_embeddings)
        if args.quick and not args.search_embeddings:
            sources = sources[:1]  # a smoke run needs one
        for name, path, model in sources:
            log(f"search: {name}: loading {path} and encoding {s['num_queries']:,} questions")
            candidates = load_candidates(path, s["max_candidates"])
            queries = encode_questions(model, args.squad, s["num_queries"])
            results[name] = {"source": f"{path} (model {model}); queries: the first "
                                       f"{len(queries):,} ReQA-SQuAD(dev) questions",
                             **measure(candidates, queries, s, log)}
            del candidates
            gc.collect()
    from peers_train import _threads
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


def render(part: dict) -> list:
    s = part["settings"]
    lines = [f"k = {s['k']}; target recall@10 {s['target_recall']} of the exact top-10 (tt_zoo "
             f"brute force); queries/s: one batch of all queries, median over {s['rounds']} "
             "interleaved rounds; build: one build; memory: resident-set growth over the build "
             "and a first search. Per method, the fastest swept setting reaching the target "
             "(all swept settings are in performance.json)."]
    for name, result in part["embeddings"].items():
        lines += ["", f"**{name}**: {result['num_candidates']:,} x {result['dim']} candidates, "
                      f"{result['num_queries']:,} queries; {result['source']}.", "",
                  "| method | index | setting | recall@10 | median q/s | range | build s "
                  "| memory MiB |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
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
            lines.append(f"| {r['method']} | {r['description']} | {_setting_text(r)}{note} | "
                         f"{r['recall_at_10']:.3f} | {r['median_qps']:,.0f} | "
                         f"{r['min_qps']:,.0f}–{r['max_qps']:,.0f} | {r['build_s']:,.1f} | "
                         f"{r['memory_mib']:,.0f} |")
        for what, reason in result.get("skipped", {}).items():
            lines.append(f"| {what} | {reason} | | | | | | |")
    return lines
