"""The retrieval loop timed end to end from the command line: `tt-zoo index` once, then `tt-zoo
search --index` (one query, twice; a topics file to a TREC run) and `tt-zoo evaluate --run
--qrels`, each a fresh process as a user runs it, for every kind of index, on the sample corpus
(examples/squad_sample: 288 passages, 48 questions). Also `tt-zoo search FILE`, which encodes the
corpus on every call, for comparison, and the run's scores recomputed with pytrec_eval directly.

Each search is timed 3 times (median reported); each index is built once (what the loop does).

  python -m benchmarks.search_loop                     # writes results/search_loop.{md,json}
  python -m benchmarks.search_loop --kinds static bm25 --output /tmp/search_loop
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import arguments

REPO = pathlib.Path(__file__).resolve().parents[1]
CORPUS = REPO / "examples" / "squad_sample"
QUERY = "what is the original meaning of the word Norman?"
REPEATS = 3
# kind -> (what it is, `tt-zoo index` options)
KINDS = {
    "static": ("multitask_static_minilm_l6_384 (static tower)",
               ["--model", "multitask_static_minilm_l6_384"]),
    "minilm": ("minilm_l6_384 (all-MiniLM-L6-v2)", ["--model", "minilm_l6_384"]),
    "bm25": ("BM25", ["--bm25"]),
    "hybrid": ("multitask_static_minilm_l6_384 + BM25 (RRF)",
               ["--model", "multitask_static_minilm_l6_384", "--hybrid"]),
    "colbert": ("colbert_ict_bfs_wlp_crop_span_qgen_64 (ColBERT)",
                ["--model", "colbert_ict_bfs_wlp_crop_span_qgen_64"]),
    "hdct": ("hdct_ict_bfs_wlp_crop_span_qgen (HDCT)",
             ["--model", "hdct_ict_bfs_wlp_crop_span_qgen"]),
}


def tt_zoo(*args) -> float:
    """Seconds `python -m tt_zoo.cli ARGS` takes, a fresh process (fails loudly)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tt_zoo.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"tt-zoo {' '.join(map(str, args))} failed:\n{done.stderr[-2000:]}")
    return seconds


def median(times):
    return round(statistics.median(times), 2)


def measure(kind: str, work: pathlib.Path) -> dict:
    what, options = KINDS[kind]
    index, run = work / kind, work / f"{kind}.run"
    row = {"kind": kind, "index": what, "index_s": round(tt_zoo("index", CORPUS, *options,
                                                                 "--output", index,
                                                                 "--no-progress"), 2)}
    row["numpy_query_tower"] = (index / "query_encoder").is_dir() or (
        index / "first" / "query_encoder").is_dir()
    firsts, seconds, runs, evaluations = [], [], [], []
    for _ in range(REPEATS):
        firsts.append(tt_zoo("search", "--index", index, "--query", QUERY, "-k", 10))
        seconds.append(tt_zoo("search", "--index", index, "--query", QUERY, "-k", 10))
        runs.append(tt_zoo("search", "--index", index, "--topics", CORPUS, "-k", 100, "--run",
                           run, "--overwrite"))
        evaluations.append(tt_zoo("evaluate", "--run", run, "--qrels", CORPUS, "--json-out",
                                  work / f"{kind}.json"))
    row.update(search_1_s=median(firsts), search_2_s=median(seconds),
               topics_run_s=median(runs), evaluate_s=median(evaluations),
               search_1_all=[round(t, 2) for t in firsts],
               search_2_all=[round(t, 2) for t in seconds])
    row["scores"] = json.loads((work / f"{kind}.json").read_text())["scores"]
    row["pytrec_eval_direct"] = direct_scores(run)
    row["scores_equal"] = all(abs(row["scores"][k] - v) < 1e-9
                              for k, v in row["pytrec_eval_direct"].items())
    return row


def direct_scores(run_path) -> dict:
    """nDCG@10, R@10, R@100 and MRR@10 of the run by pytrec_eval itself, every judged query in
    the run (the sample's are): the reference `tt-zoo evaluate` must equal."""
    import pytrec_eval

    qrels, run = {}, {}
    for line in (CORPUS / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        qrels.setdefault(q, {})[d] = int(r)
    for line in pathlib.Path(run_path).read_text().splitlines():
        q, _, d, _, score, _ = line.split()
        run.setdefault(q, {})[d] = float(score)
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10", "recall.100"}
                                          ).evaluate(run)
    top10 = {q: dict(sorted(docs.items(), key=lambda i: (i[1], i[0]), reverse=True)[:10])
             for q, docs in run.items()}
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    n = len(qrels)
    return {"nDCG@10": 100 * sum(v["ndcg_cut_10"] for v in full.values()) / n,
            "R@10": 100 * sum(v["recall_10"] for v in full.values()) / n,
            "R@100": 100 * sum(v["recall_100"] for v in full.values()) / n,
            "MRR@10": 100 * sum(v["recip_rank"] for v in mrr.values()) / n}


def file_search_s(kind: str) -> float:
    """One `tt-zoo search FILE` (the corpus encoded again), for comparison."""
    return round(tt_zoo("search", CORPUS, *KINDS[kind][1], "--query", QUERY, "--no-progress"), 2)


def markdown(result: dict) -> str:
    lines = ["# The search loop, end to end from the command line", "",
             f"Corpus: `examples/squad_sample` ({result['passages']} passages, "
             f"{result['topics']} topics with qrels). Every number is the wall time of a fresh "
             f"`tt-zoo` process (Python start, imports, loading, answering), median of "
             f"{REPEATS}; an index is built once. CPU: {result['cpu']}, load average at the "
             f"start {result['load_average']} (the machine was shared).", "",
             "| index | built in (s) | search 1 (s) | search 2 (s) | 48 topics to a run (s) | "
             "evaluate (s) | nDCG@10 | R@100 | MRR@10 | NumPy query tower | = pytrec_eval |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        s = r["scores"]
        lines.append(f"| {r['index']} | {r['index_s']} | {r['search_1_s']} | {r['search_2_s']} | "
                     f"{r['topics_run_s']} | {r['evaluate_s']} | {s['nDCG@10']:.2f} | "
                     f"{s['R@100']:.2f} | {s['MRR@10']:.2f} | "
                     f"{'yes' if r['numpy_query_tower'] else 'no'} | "
                     f"{'yes' if r['scores_equal'] else 'NO'} |")
    apart = [f"{r['index']}: {r['measured_apart']}" for r in result["rows"]
             if r.get("measured_apart")]
    if apart:
        lines += ["", "Measured in a later run (`--kinds`): " + "; ".join(apart) + "."]
    lines += ["", "`tt-zoo search FILE` (the corpus encoded on every call), one run each: "
              + ", ".join(f"{k} {v} s" for k, v in result["file_search_s"].items()) + ".", "",
              "A search answered with the model's query tower saved in NumPy (static and "
              "BERT towers, ASCII queries, exact indexes) imports no TensorFlow, nor do BM25 and "
              "HDCT (whose term weights are the index); a ColBERT index loads its model through "
              "TensorFlow. `= pytrec_eval`: "
              "`tt-zoo evaluate`'s scores equal pytrec_eval's computed directly on the same "
              "run.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = arguments.parser(__doc__, summary="paragraph")
    p.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS))
    arguments.add_output(p, default=str(REPO / "results" / "search_loop"), type=str,
                         help="writes OUTPUT.json and OUTPUT.md")
    p.add_argument("--render", action="store_true",
                   help="write OUTPUT.md again from OUTPUT.json, measuring nothing")
    args = p.parse_args(argv)
    out = pathlib.Path(args.output)
    if args.render:
        out.with_suffix(".md").write_text(markdown(json.loads(out.with_suffix(".json")
                                                              .read_text())))
        return 0
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="search_loop_") as tmp:
        rows = []
        for kind in args.kinds:
            rows.append(measure(kind, pathlib.Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    files = {k: file_search_s(k) for k in ("static", "minilm") if k in args.kinds}
    cpu = next((line.split(":", 1)[1].strip() for line in
                pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    result = {"passages": sum(1 for _ in open(CORPUS / "corpus.jsonl")),
              "topics": sum(1 for _ in open(CORPUS / "queries.jsonl")), "repeats": REPEATS,
              "cpu": f"{cpu}, {os.cpu_count()} cores", "load_average": round(load[0], 2),
              "rows": rows, "file_search_s": files}
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
