"""What the default index costs in recall, by corpus size (issue 25): R@k of ReQA-SQuAD(dev)
through `EmbeddingIndex` (ScaNN) against exact search over the same embeddings, on its 10,255
candidates and on open-domain ReQA's 578K (Chang et al. 2020, Sec. 2 "Inference" and Sec. 5.3).

For each model and candidate set: the candidates' embeddings are encoded once (cached under
runs/index_recall/, resumable: `document_embeddings.encode_documents_to_file`), the questions'
too; exact search (`ExactSearcher`) gives the reference R@1/R@100; then each ScaNN setting is
built (tree and codebooks, timed) and searched with every question (timed: queries/s on this
machine, all questions in one batched call), reporting R@1/R@100, the R@100 lost against exact
search, and the neighbour recall@100 (the fraction of the exact top 100 the index returns).
Settings:

- ``default``: `ScannConfig.for_size(n)`, what `EmbeddingIndex` builds when given no settings;
- ``tree``: `ScannConfig.tree_for_size(n)`, the default before issue 25 (a fifth of about
  sqrt(n) leaves searched, 100 re-ordered; the token index's tree);
- ``LEAVES/SEARCHED/REORDER[/avq=T]``: a tree of LEAVES partitions, SEARCHED searched per query,
  REORDER candidates re-scored exactly, anisotropic quantization threshold T (isotropic when
  absent); ``sqrt`` for LEAVES means round(sqrt(n)). Settings that share a tree are searched
  without a rebuild (`EmbeddingIndex.with_search_settings`).

With ``--single-queries N``, also queries/s searching the first N questions one at a time
(median of 3 runs), as a server answers them: the exact search and each setting
(`one_at_a_time_qps`). `against_exact` is the same comparison for one index at one size: ScaNN
against brute force, build time, recall@k, queries/s in one batch and one at a time
(benchmarks/open_domain.py's table).

With ``--first N``, the set's first N candidates only (ReQA's own come first, so every gold
stays): corpus sizes between the two sets. With ``--storage``, also what keeping the
embeddings in float16 or int8 costs (`tt_zoo.retrieval.embedding_storage`, as
`tt-zoo index-corpus --dtype` stores them): exact search over the stored-then-decoded
embeddings, R@k against float32's.

  python -m benchmarks.index_recall --model bow_mlp_ict_bfs_wlp_crop_span_qgen_512 \
      --sets reqa,open_domain_reqa --storage
Writes results/index_recall.{json,md}.
"""

from __future__ import annotations

import math
import pathlib
import statistics
import sys
from typing import Optional

import numpy as np

from benchmarks import arguments
from benchmarks.measure import recall_at_k, stopwatch, timed

REPO = arguments.REPO

SETS = ("reqa", "open_domain_reqa")
DEFAULT_SETTINGS = {
    "reqa": ["default", "tree", "sqrt/half/1000", "sqrt/threefifths/1000",
             "sqrt/fourfifths/1000"],
    "open_domain_reqa": ["default", "tree", "sqrt/fifth/1000", "sqrt/half/1000",
                         "sqrt/threefifths/1000", "sqrt/fourfifths/1000/avq=0.2"],
}
KS = (1, 5, 20, 100)


def parse_setting(text: str, n: int):
    """A `ScannConfig` from ``default`` or ``LEAVES/SEARCHED/REORDER[/avq=T]`` for n candidates."""
    from tt_zoo.retrieval.index import ScannConfig
    if text == "default":
        return ScannConfig.for_size(n)
    if text == "tree":
        return ScannConfig.tree_for_size(n)
    parts = text.split("/")
    try:
        leaves, searched, reorder = parts[:3]
        leaves = int(round(math.sqrt(n))) if leaves == "sqrt" else int(leaves)
        fractions = {"fifth": 0.2, "twofifths": 0.4, "half": 0.5, "threefifths": 0.6,
                     "fourfifths": 0.8, "all": 1.0}
        searched = (max(1, math.ceil(leaves * fractions[searched])) if searched in fractions
                    else int(searched))
        avq = None
        for extra in parts[3:]:
            key, value = extra.split("=")
            if key != "avq":
                raise ValueError(extra)
            avq = float(value)
        return ScannConfig(num_leaves=leaves, num_leaves_to_search=min(searched, leaves),
                           num_reordering_candidates=int(reorder),
                           anisotropic_quantization_threshold=avq)
    except (ValueError, KeyError):
        raise SystemExit(f"setting {text!r}: expected 'default', 'tree' or LEAVES/SEARCHED/REORDER"
                         "[/avq=T] (LEAVES an int or 'sqrt'; SEARCHED an int, 'fifth', "
                         "'twofifths', 'half', 'threefifths', 'fourfifths' or 'all')")


def candidate_set(name: str, data_dir: pathlib.Path):
    from tt_zoo.evaluation.open_domain import open_domain_reqa
    from tt_zoo.evaluation.reqa import build_reqa
    reqa = build_reqa(data_dir / "squad" / "dev-v1.1.json")
    if name == "open_domain_reqa":
        reqa, _ = open_domain_reqa(reqa, data_dir / "wikispeedia", progress=False)
    return reqa


def storage_rows(embeddings, queries, gold, exact_rows) -> list:
    """R@k of exact search over the embeddings stored in each of the `SMALLER` storages
    (`tt_zoo.retrieval.embedding_storage`) and decoded."""
    from tt_zoo.retrieval.embedding_storage import SMALLER
    from tt_zoo.evaluation.metrics import ranking_metrics
    from tt_zoo.retrieval.search import ExactSearcher
    rows = []
    for storage in SMALLER:
        decoded = storage.decode(*storage.encode(embeddings))
        found = ExactSearcher(decoded).search(queries, max(KS))
        overlap = np.mean([len(set(a) & set(b)) / max(KS)
                           for a, b in zip(found.rows.tolist(), exact_rows.tolist())])
        rows.append({"storage": str(storage), "bytes_per_candidate":
                     int(storage.bytes_per_row(*decoded.shape[::-1])),
                     **ranking_metrics(found.rows, gold, KS),
                     "neighbour_recall@100": float(overlap)})
        print(f"  stored as {storage}: R@100 {100 * rows[-1]['R@100']:.2f}, neighbours "
              f"{overlap:.4f}", flush=True)
    return rows


def encoded(model_name: str, set_name: str, reqa, cache: pathlib.Path):
    """``(candidate embeddings, question embeddings, gold rows)`` of a model on a set, the
    candidates encoded once into `cache` (resumable)."""
    import tt_zoo
    from tt_zoo.evaluation.open_domain import encode_candidates_to_file

    model = tt_zoo.load(model_name)
    n = len(reqa.candidates)
    embeddings = np.asarray(encode_candidates_to_file(
        model, reqa, cache / f"{model_name}-{set_name}-{n}.npy"))
    queries = model.encode_queries([q.text for q in reqa.questions], show_progress_bar=False)
    return embeddings, queries, np.array([q.gold_index for q in reqa.questions])


def one_at_a_time_qps(index, queries, k: int, runs: int = 3) -> float:
    """Queries/s searching `index` with each of `queries` alone (median of `runs` runs)."""
    run = stopwatch(lambda: [index.search(queries[i:i + 1], k) for i in range(len(queries))])
    return len(queries) / statistics.median(run() for _ in range(runs))


def against_exact(candidates: np.ndarray, queries: np.ndarray, k: int = 10, runs: int = 3,
                  single_queries: int = 1000, scann_config=None) -> dict:
    """Brute force and ScaNN `EmbeddingIndex`es over `candidates` (`scann_config`, default
    `ScannConfig.for_size`): their build seconds, ScaNN's recall@k of the exact top-k, and
    each one's queries/s on `queries` in one batch and one at a time over the first
    `single_queries` (medians of `runs` runs)."""
    from tt_zoo.retrieval.index import EmbeddingIndex

    ids = [str(i) for i in range(len(candidates))]
    results = {"num_candidates": int(candidates.shape[0]), "dim": int(candidates.shape[1]),
               "num_queries": int(queries.shape[0]), "k": k, "runs": runs}
    indexes = {}
    for backend in ("brute_force", "scann"):
        indexes[backend], results[f"{backend}_build_s"] = timed(lambda: EmbeddingIndex(
            candidates, ids, backend=backend,
            scann_config=scann_config if backend == "scann" else None))
    results["scann_config"] = indexes["scann"].scann_config.to_json()
    results[f"scann_recall_at_{k}"] = recall_at_k(indexes["scann"].search(queries, k).rows,
                                                  indexes["brute_force"].search(queries, k).rows,
                                                  k)
    singles = queries[:single_queries]
    results["single_queries_timed"] = int(len(singles))
    for backend, index in indexes.items():
        index.search(queries[:2], k)  # warm-up
        batch = stopwatch(lambda index=index: index.search(queries, k))
        results[f"{backend}_batch_qps"] = len(queries) / statistics.median(
            batch() for _ in range(runs))
        results[f"{backend}_single_qps"] = one_at_a_time_qps(index, singles, k, runs)
    return results


def measure(model_name: str, set_name: str, embeddings, queries, gold, settings,
            storage: bool = False, first: Optional[int] = None,
            single_queries: int = 0) -> dict:
    from tt_zoo.retrieval.index import EmbeddingIndex
    from tt_zoo.evaluation.metrics import ranking_metrics
    from tt_zoo.retrieval.search import ExactSearcher

    n = len(embeddings)
    if first is not None:  # a smaller corpus: the set's first candidates (every gold among them)
        if not gold.max() < first <= n:
            raise SystemExit(f"--first {first}: must hold every gold candidate and at most {n:,}")
        embeddings, n = embeddings[:first], first
        set_name = f"{set_name}, first {first:,}"
    exact_searcher = ExactSearcher(embeddings)
    exact, exact_seconds = timed(lambda: exact_searcher.search(queries, max(KS)))
    singles = queries[:single_queries]
    row = {"model": model_name, "set": set_name, "num_candidates": n,
           "num_queries": len(gold), "dim": int(embeddings.shape[1]),
           "exact": {**ranking_metrics(exact.rows, gold, KS),
                     "queries_per_s": len(gold) / exact_seconds},
           "settings": []}
    if single_queries:
        row["single_queries"] = len(singles)
        row["exact"]["single_queries_per_s"] = one_at_a_time_qps(exact_searcher, singles,
                                                                 max(KS))
    print(f"{model_name} {set_name}: exact R@100 {100 * row['exact']['R@100']:.2f} "
          f"({len(gold) / exact_seconds:.0f} q/s)", flush=True)
    if storage:
        row["storage"] = storage_rows(embeddings, queries, gold, exact.rows)
    built = {}
    for text in settings:
        config = parse_setting(text, n)
        # Settings that differ only in what a search visits share one tree.
        tree = tuple(sorted((k, v) for k, v in config.to_json().items()
                            if k not in ("num_leaves_to_search", "num_reordering_candidates")))
        build_seconds = None
        if tree not in built:
            built[tree], build_seconds = timed(lambda: EmbeddingIndex(
                embeddings, [str(i) for i in range(n)], scann_config=config))
        index = built[tree]
        if not config.is_exact:
            index = index.with_search_settings(config.num_leaves_to_search,
                                               config.num_reordering_candidates)
        found, seconds = timed(lambda: index.search(queries, max(KS)))
        metrics = ranking_metrics(found.rows, gold, KS)
        overlap = np.mean([len(set(a) & set(b)) / max(KS)
                           for a, b in zip(found.rows.tolist(), exact.rows.tolist())])
        entry = {"setting": text, "config": config.to_json(), **metrics,
                 "R@100 lost": row["exact"]["R@100"] - metrics["R@100"],
                 "neighbour_recall@100": float(overlap), "queries_per_s": len(gold) / seconds,
                 "build_seconds": build_seconds}
        if single_queries:
            entry["single_queries_per_s"] = one_at_a_time_qps(index, singles, max(KS))
        row["settings"].append(entry)
        print(f"  {text:28s} leaves {config.num_leaves}/{config.num_leaves_to_search} reorder "
              f"{config.num_reordering_candidates}: R@100 {100 * metrics['R@100']:.2f} (lost "
              f"{100 * entry['R@100 lost']:.2f}), neighbours {overlap:.3f}, "
              f"{entry['queries_per_s']:.0f} q/s", flush=True)
    return row


def markdown(rows) -> str:
    lines = ["# Recall through the index, by corpus size (issue 25)", "",
             "R@k of ReQA-SQuAD(dev)'s questions through `EmbeddingIndex` (ScaNN) against exact "
             "search over the same embeddings; `lost` = exact R@100 minus the index's; "
             "`neighbours` = the fraction of the exact top 100 the index returns; queries/s on "
             "this machine (2 cores), every question in one batched call; build = tree and "
             "codebooks (– = searched without a rebuild). Written by "
             "`benchmarks/index_recall.py`.", ""]
    for row in rows:
        single = "single_queries" in row  # --single-queries: one more column

        def single_cell(entry):
            return f" {entry['single_queries_per_s']:,.0f} |" if single else ""

        lines += [f"## {row['model']} on {row['set']} ({row['num_candidates']:,} candidates, "
                  f"{row['num_queries']:,} questions)", "",
                  "| search | leaves (searched) | reorder | avq | R@1 | R@100 | lost | "
                  "neighbours | queries/s | build (s) |"
                  + (f" queries/s one at a time ({row['single_queries']:,}) |" if single else ""),
                  "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if single else ""),
                  f"| exact | – | – | – | {100 * row['exact']['R@1']:.2f} | "
                  f"{100 * row['exact']['R@100']:.2f} | – | 1.000 | "
                  f"{row['exact']['queries_per_s']:,.0f} | – |" + single_cell(row["exact"])]
        for s in row["settings"]:
            c = s["config"]
            leaves = ("exact scoring" if c["num_leaves"] == 0
                      else f"{c['num_leaves']} ({c['num_leaves_to_search']})")
            build = "–" if s["build_seconds"] is None else f"{s['build_seconds']:.1f}"
            lines.append(
                f"| {s['setting']} | {leaves} | {c['num_reordering_candidates']} | "
                f"{c['anisotropic_quantization_threshold'] or '–'} | {100 * s['R@1']:.2f} | "
                f"{100 * s['R@100']:.2f} | {100 * s['R@100 lost']:.2f} | "
                f"{s['neighbour_recall@100']:.3f} | {s['queries_per_s']:,.0f} | {build} |"
                + single_cell(s))
        lines.append("")
        if row.get("storage"):
            lines += ["Stored embeddings, searched exactly (float32: the exact row above):", "",
                      "| storage | bytes a candidate | R@1 | R@100 | neighbours |",
                      "|---|---|---|---|---|",
                      f"| float32 | {4 * row['dim']} | {100 * row['exact']['R@1']:.2f} | "
                      f"{100 * row['exact']['R@100']:.2f} | 1.000 |"]
            lines += [f"| {r['storage']} | {r['bytes_per_candidate']} | {100 * r['R@1']:.2f} | "
                      f"{100 * r['R@100']:.2f} | {r['neighbour_recall@100']:.4f} |"
                      for r in row["storage"]]
            lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = arguments.parser(__doc__, summary="paragraph")
    arguments.add_model(p, repeat=True, required=True, help="a zoo name (repeatable)")
    p.add_argument("--sets", default="reqa", help=f"comma list of {SETS}")
    p.add_argument("--setting", action="append", default=None,
                   help="a ScaNN setting (repeatable); default: a sweep per set")
    p.add_argument("--first", type=int, action="append", default=None, metavar="N",
                   help="measure the set's first N candidates (repeatable): a smaller corpus")
    p.add_argument("--storage", action="store_true",
                   help="also R@k over float16 / int8 stored embeddings (exact search)")
    p.add_argument("--single-queries", type=int, default=0, metavar="N",
                   help="also queries/s searching the first N questions one at a time")
    arguments.add_data_dir(
        p, help="holds squad/ and wikispeedia/ (default: $TT_ZOO_DATA, ../shared/data)")
    p.add_argument("--cache", type=pathlib.Path, default=REPO / "runs" / "index_recall")
    arguments.add_output(p, REPO / "results" / "index_recall")
    args = p.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    unknown = sorted(set(sets) - set(SETS))
    if unknown:
        p.error(f"--sets: unknown {unknown}; expected a comma list of {SETS}")
    if args.single_queries < 0:
        p.error(f"--single-queries must be at least 0 (got {args.single_queries})")
    data_dir = args.data_dir
    rows = []
    for set_name in sets:
        reqa = candidate_set(set_name, data_dir)
        for model_name in args.model:
            embeddings, queries, gold = encoded(model_name, set_name, reqa, args.cache)
            for first in args.first or [None]:
                rows.append(measure(model_name, set_name, embeddings, queries, gold,
                                    args.setting or DEFAULT_SETTINGS[set_name], args.storage,
                                    first, args.single_queries))
    from tt_zoo.atomic_io import write_json, write_text
    write_json(args.output.with_suffix(".json"), rows)
    write_text(args.output.with_suffix(".md"), markdown(rows))
    print(f"wrote {args.output.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
