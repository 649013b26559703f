"""ScaNN against exact brute-force search over the same candidate embeddings.

Chang et al., ICLR 2020, Section 2: a two-tower model turns retrieval into maximum inner
product search over precomputed candidate embeddings, which an approximate index (ScaNN)
answers sub-linearly. This benchmark measures what the approximation costs and buys:

- build time of each index (seconds);
- recall@k of ScaNN against the exact top-k (the fraction of the exact top-k it returns);
- queries/s of each backend, for one batch of all queries and for one query at a time
  (median of `--runs` runs).

Embeddings come from one of three sources:

    # synthetic: a seeded Gaussian mixture (50 components), N candidates of dimension DIM
    python -m benchmarks.scann_vs_brute_force --synthetic 10000 512
    # two .npy files: candidates [n, dim] and queries [q, dim], float
    python -m benchmarks.scann_vs_brute_force --embeddings cands.npy --queries queries.npy
    # a tt_zoo model (registered name or path) over ReQA-SQuAD(dev) (needs tt_zoo.load)
    python -m benchmarks.scann_vs_brute_force --model ict_bfs_wlp_512

`--json results.json` also writes the numbers (atomically).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np
from tqdm import tqdm

from tt_zoo.atomic_io import write_json
from tt_zoo.retrieval.index import EmbeddingIndex, ScannConfig

from benchmarks import arguments


def gaussian_mixture(num_candidates: int, num_queries: int, dim: int, components: int = 50,
                     seed: int = 0):
    """Seeded candidates and queries from one mixture of `components` Gaussians."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(components, dim))
    candidates = centers[rng.integers(0, components, num_candidates)]
    queries = centers[rng.integers(0, components, num_queries)]
    candidates = candidates + 0.5 * rng.normal(size=candidates.shape)
    queries = queries + 0.5 * rng.normal(size=queries.shape)
    return candidates.astype(np.float32), queries.astype(np.float32)


def _load_npy(path: str, what: str) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--{what} {path}: cannot read a plain .npy array ({e}).")
    if array.ndim != 2:
        raise SystemExit(f"--{what} {path}: expected a 2D [num, dim] array, got shape "
                         f"{array.shape}.")
    return array.astype(np.float32)


def _model_embeddings(model_name: str, squad_path: str, num_queries: int | None):
    """Encodes ReQA-SQuAD(dev) questions and (sentence, passage) candidates with a tt_zoo model."""
    import tt_zoo  # pylint: disable=import-outside-toplevel
    from tt_zoo.evaluation.reqa import build_reqa  # pylint: disable=import-outside-toplevel

    if not hasattr(tt_zoo, "load"):
        raise SystemExit("--model needs tt_zoo.load, which this checkout does not have yet; "
                         "use --embeddings or --synthetic.")
    model = tt_zoo.load(model_name)
    reqa = build_reqa(squad_path)
    print(reqa.summary(), file=sys.stderr)
    questions = reqa.questions[:num_queries] if num_queries else reqa.questions
    queries = model.encode_queries([q.text for q in questions])
    candidates = model.encode_documents([c.passage for c in reqa.candidates],
                                        titles=[c.sentence for c in reqa.candidates])
    return candidates, queries, f"{model_name} on ReQA-SQuAD({squad_path})"


def _median_seconds(fn, runs: int, bar) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        bar.update(1)
    return statistics.median(times)


def benchmark(candidates: np.ndarray, queries: np.ndarray, k: int = 10, runs: int = 3,
              single_queries: int = 1000, scann_config: ScannConfig | None = None) -> dict:
    """Builds both indexes over `candidates` and measures them on `queries`; returns a dict."""
    ids = [str(i) for i in range(len(candidates))]
    results = {"num_candidates": int(candidates.shape[0]), "dim": int(candidates.shape[1]),
               "num_queries": int(queries.shape[0]), "k": k, "runs": runs}
    indexes = {}
    for backend in ("brute_force", "scann"):
        start = time.perf_counter()
        indexes[backend] = EmbeddingIndex(candidates, ids, backend=backend,
                                          scann_config=scann_config if backend == "scann"
                                          else None)
        results[f"{backend}_build_s"] = time.perf_counter() - start
    results["scann_config"] = indexes["scann"].scann_config.to_json()

    exact_ids = indexes["brute_force"].search(queries, k).ids
    scann_ids = indexes["scann"].search(queries, k).ids
    per_query = [len(set(a) & set(e)) / len(e) for a, e in zip(scann_ids, exact_ids)]
    results[f"scann_recall_at_{k}"] = float(np.mean(per_query))

    singles = queries[:single_queries]
    results["single_queries_timed"] = int(len(singles))
    with tqdm(total=4 * runs, desc="timing", unit="run", file=sys.stderr) as bar:
        for backend, index in indexes.items():
            index.search(queries[:2], k)  # warm-up
            batch_s = _median_seconds(lambda index=index: index.search(queries, k), runs, bar)

            def one_at_a_time(index=index):
                for row in range(len(singles)):
                    index.search(singles[row:row + 1], k)

            single_s = _median_seconds(one_at_a_time, runs, bar)
            results[f"{backend}_batch_qps"] = len(queries) / batch_s
            results[f"{backend}_single_qps"] = len(singles) / single_s
    return results


def format_results(results: dict, source: str) -> str:
    k = results["k"]
    rows = [
        f"source: {source}",
        f"candidates: {results['num_candidates']:,} x {results['dim']}; "
        f"queries: {results['num_queries']:,}; k={k}; median of {results['runs']} runs; "
        f"one-at-a-time over the first {results['single_queries_timed']:,} queries",
        f"ScaNN settings: {results['scann_config']}",
        f"ScaNN recall@{k} vs exact top-{k}: {results[f'scann_recall_at_{k}']:.4f}",
        f"{'backend':<12} {'build s':>9} {'batch q/s':>12} {'single q/s':>12}",
    ]
    for backend in ("brute_force", "scann"):
        rows.append(f"{backend:<12} {results[f'{backend}_build_s']:>9.3f} "
                    f"{results[f'{backend}_batch_qps']:>12,.0f} "
                    f"{results[f'{backend}_single_qps']:>12,.0f}")
    return "\n".join(rows)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--synthetic", nargs=2, type=int, metavar=("N", "DIM"),
                        help="a seeded Gaussian mixture of N candidates of dimension DIM")
    source.add_argument("--embeddings", metavar="CANDIDATES.npy",
                        help="candidate embeddings [n, dim] (needs --queries)")
    arguments.add_model(source, help="a tt_zoo model, encoding ReQA-SQuAD(dev) (see --squad)")
    parser.add_argument("--queries", metavar="QUERIES.npy", help="query embeddings [q, dim]")
    parser.add_argument("--num-queries", type=int, default=None,
                        help="synthetic: queries to draw (default 1000); model: first N "
                             "questions (default all)")
    arguments.add_squad(parser, type=str,
                        help="SQuAD JSON for --model (default $TT_ZOO_DATA/squad/dev-v1.1.json)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--single-queries", type=int, default=1000,
                        help="how many queries to time one at a time")
    parser.add_argument("--num-leaves", type=int, default=None,
                        help="ScaNN leaves (default: ScannConfig.for_size; 0 = exact scoring)")
    parser.add_argument("--num-leaves-to-search", type=int, default=None)
    parser.add_argument("--reorder", type=int, default=None,
                        help="ScaNN candidates re-scored exactly (default 100)")
    parser.add_argument("--json", metavar="OUT.json", help="also write the results here")
    args = parser.parse_args(argv)

    if args.synthetic:
        n, dim = args.synthetic
        if n < 1 or dim < 1:
            parser.error(f"--synthetic N DIM must be positive (got {n} {dim}).")
        candidates, queries = gaussian_mixture(n, args.num_queries or 1000, dim, seed=args.seed)
        source_name = f"synthetic Gaussian mixture (50 components, seed {args.seed})"
    elif args.embeddings:
        if not args.queries:
            parser.error("--embeddings needs --queries.")
        candidates = _load_npy(args.embeddings, "embeddings")
        queries = _load_npy(args.queries, "queries")
        if queries.shape[1] != candidates.shape[1]:
            parser.error(f"--queries has dim {queries.shape[1]}, --embeddings has dim "
                         f"{candidates.shape[1]}.")
        source_name = f"{args.embeddings} / {args.queries}"
    else:
        candidates, queries, source_name = _model_embeddings(args.model, args.squad,
                                                             args.num_queries)

    scann_config = None
    if (args.num_leaves, args.num_leaves_to_search, args.reorder) != (None, None, None):
        default = ScannConfig.for_size(len(candidates))
        num_leaves = default.num_leaves if args.num_leaves is None else args.num_leaves
        to_search = args.num_leaves_to_search or min(num_leaves, default.num_leaves_to_search)
        scann_config = ScannConfig(
            num_leaves=num_leaves, num_leaves_to_search=0 if num_leaves == 0 else to_search,
            num_reordering_candidates=args.reorder or default.num_reordering_candidates)
    results = benchmark(candidates, queries, k=args.k, runs=args.runs,
                        single_queries=args.single_queries, scann_config=scann_config)
    results["source"] = source_name
    results["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs"
    print(format_results(results, source_name))
    if args.json:
        write_json(args.json, results, indent=2, sort_keys=True)
    return results


if __name__ == "__main__":
    main()
