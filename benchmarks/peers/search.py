"""Section `search` of benchmarks.peers: nearest-neighbour search, ScaNN against FAISS.

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
(`measure.walk_knob`); those settings are then timed in interleaved rounds with the exact
searches, and the report gives each method's fastest setting reaching the target
(`measure.fastest_reaching`), its queries/s (median over rounds, one batch of all
queries), its build time (one build), the memory it added (resident-set growth over the build
and a first search) and, for the partitioned indexes, the share of the leaves a query scans
and the core-nanoseconds each scanned candidate costs (2 cores / queries/s / candidates in
the searched leaves, leaves taken as equal): whether ScaNN needs to scan more candidates than
FAISS for the same recall, or scans each more slowly.

The embeddings come from NAME.npy + NAME.json in --embeddings-dir (benchmarks/open_domain.py's
cache), or from any `--search-embeddings-file PATH.npy` whose PATH.json (as
`tt_zoo.evaluation.document_embeddings.encode_documents_to_file` writes it) says it is finished
and names the model (or `--search-model`); the queries are always encoded by that same model.
"""

from __future__ import annotations

import gc
import os
import pathlib
from typing import List, Optional

from benchmarks.peers.indexes import (COARSE_REORDER_VALUES, EF_SEARCH_VALUES, K, PEER_MODULES,
                                      REORDER_VALUES, Built, faiss_indexes, knob_ladder,
                                      load_libraries, scann_variant_index, tt_zoo_indexes)


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


# -- the sweep ----------------------------------------------------------------------------------

def sweep(built: Built, grid, queries, exact_rows, target: float, log) -> list:
    """Walks `grid` = (primary knob, values, secondary knob, values): returns every evaluated
    point [{"settings", "recall_at_10", "sweep_seconds"}] and marks the frontier (the first
    point reaching `target` for each secondary value, else the best one reached)."""
    from benchmarks.measure import recall_at_k, timed, walk_knob

    primary, values, secondary, second_values = grid
    points = []
    for second in second_values:
        walked_points = []

        def recall_of(value):
            setting = {primary: value, **({secondary: second} if secondary else {})}
            rows, seconds = timed(lambda: built.searcher(setting)(queries))
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
    from benchmarks.measure import (fastest_reaching, interleaved_rounds, rate_row, recall_at_k,
                                    stopwatch, unavailable_reason)

    target = s["target_recall"]
    warm = queries[:2]
    load_libraries(candidates.shape[1])
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
        row.update(rate_row(seconds[str(i)], len(queries), "qps"))
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
    from benchmarks.measure import library_threads
    from benchmarks.peers.embeddings import (cached_sources, encode_questions, file_source,
                                             gaussian_mixture, load_candidates)

    s = settings(args)
    results = {}
    if args.synthetic:
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
    threads = library_threads()
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
    from benchmarks.measure import speed_cells

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
                         f"{r['recall_at_10']:.3f} | {speed_cells(r, 'qps', 0)} | "
                         f"{r['build_s']:,.1f} | "
                         f"{r['memory_mib']:,.0f} | {scanned}")
        for what, reason in result.get("skipped", {}).items():
            lines.append(f"| {what} | {reason} | | | | | | | | |")
        lines += _summary_lines(result.get("scann_against_faiss"), s["target_recall"])
    return lines
