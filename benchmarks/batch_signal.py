"""More signal per CPU step: learning curves of the CPU-scale recipe against clustered batches
(ProQA), BM25-mined hard negatives (multi-task DPR), both, and a GradCache large batch.

The paper (Chang et al. 2020, Sec. 5.1) trains with batch 8,192 on 32 TPU chips, so its in-batch
negatives include hard ones; on two CPU cores our batch is 128 and most negatives are easy. Three
answers, each a setting of `recipes/pretrain.py`:

* clustered batches (Xiong et al. 2020, ProQA, Sec. 3.2): every N steps the documents of the
  coming steps are encoded with the current tower and k-means'd; each batch comes from one
  cluster (`--cluster-every`);
* BM25 hard negatives (Maillard et al. 2021): each pair also brings a BM25 neighbour of its query
  that is not its positive (`--hard-negatives`, mined once by `tt-zoo mine-negatives`);
* GradCache (Gao et al. 2021): a large batch's negatives in a small batch's memory
  (`--grad-cache-chunk`).

Each configuration is one `recipes/pretrain.py` run per seed with `--eval-every` in its own work
directory (checkpointed and resumable, so a stopped benchmark continues where it stopped); complete
curves are skipped. The runs of one tower get step counts that spend about the same CPU time (a hard
negative costs a document forward and backward more per pair; GradCache a forward more), and every
point logs both the wall time and the process's CPU time without the evaluations: on this shared
2-core machine CPU time is the fair clock, because it does not grow when other processes share the
cores. The report compares the configurations at the end of each run (about equal CPU time) and
at exactly equal CPU time (each curve interpolated at the shortest run's CPU time).

  python -m benchmarks.batch_signal --pairs runs/pairs/ict_bfs_wlp_128 --configs bow_baseline,... \
      --seeds 0,1,2
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys

from benchmarks import arguments, pretrain_curve

REPO = pathlib.Path(__file__).resolve().parents[1]

BERT, BOW = "ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_512"

# name -> (variant, steps, batch, eval every, extra recipes/pretrain.py flags). Steps are set so
# the runs of one tower spend about the same CPU time (measured: see the report's CPU minutes).
# `*_batch_512` is the GradCache batch without GradCache: the same gradients (tests/
# test_grad_cache.py) without the second forward pass, so the two separate the gain of the
# large batch from the cost of GradCache.
CLUSTERED = ["--cluster-every", "250"]
HARD = ["--hard-negatives", "1"]
GRAD_CACHE = ["--grad-cache-chunk", "128"]
# The BERT tower re-encodes for the clustering only the first 32 tokens of each document, so a
# round costs a few percent of its steps (ProQA re-encodes the corpus; at our scale that would
# be a quarter of the training time).
BERT_CLUSTERED = ["--cluster-length", "32"]
CONFIGS = {
    "bert_baseline": (BERT, 600, 128, 150, []),
    "bert_clustered": (BERT, 560, 128, 140, ["--cluster-every", "140", *BERT_CLUSTERED]),
    "bert_hard_negatives": (BERT, 380, 128, 95, HARD),
    "bert_both": (BERT, 360, 128, 90, ["--cluster-every", "90", *BERT_CLUSTERED, *HARD]),
    # Batch 512 with the baseline's warm-up in steps (60): with 10% of 160 steps (16) the
    # BERT tower collapses (`bert_batch_512_warmup16`: the loss stays above ln 512).
    "bert_grad_cache_512": (BERT, 130, 512, 26, [*GRAD_CACHE, "--warmup-fraction", "0.46"]),
    "bert_batch_512": (BERT, 160, 512, 32, ["--warmup-fraction", "0.375"]),
    "bert_batch_512_warmup16": (BERT, 160, 512, 32, []),
    # Not a way to more signal but to more steps: the baseline with bfloat16 matmuls (issue 14),
    # to see whether quality holds at equal CPU time.
    "bert_bfloat16": (BERT, 660, 128, 165, ["--dtype-policy", "mixed_bfloat16"]),
    "bow_both": (BOW, 1200, 128, 300, CLUSTERED + HARD),
    "bow_baseline": (BOW, 2000, 128, 500, []),
    "bow_hard_negatives": (BOW, 1400, 128, 350, HARD),
    "bow_clustered": (BOW, 1600, 128, 400, CLUSTERED),
    "bow_grad_cache_512": (BOW, 400, 512, 100, GRAD_CACHE),
    "bow_batch_512": (BOW, 500, 512, 125, []),
    "bow_batch_2048": (BOW, 125, 2048, 25, []),
}
# What the plots' legends call each configuration (one plot a tower, so no tower in them).
LABELS = {
    "baseline": "baseline: batch 128",
    "clustered": "clustered batches (ProQA)",
    "hard_negatives": "one BM25 hard negative a pair",
    "both": "clustered batches + BM25 hard negatives",
    "grad_cache_512": "GradCache, batch 512",
    "batch_512": "batch 512",
    "batch_512_warmup16": "batch 512, 16 warm-up steps",
    "batch_2048": "batch 2,048",
    "bfloat16": "baseline in mixed bfloat16",
}
TOWER_NAMES = {"bert": "tiny BERT", "bow": "BoW-MLP"}


def run_dir(args, name: str, seed: int) -> pathlib.Path:
    return pathlib.Path(args.workdir) / name / f"seed-{seed}"


def run_config(name: str, seed: int, args) -> list:
    variant, steps, batch, eval_every, flags = CONFIGS[name]
    workdir = run_dir(args, name, seed)
    curve = pretrain_curve.read_curve(workdir / "curve.jsonl")
    if curve and curve[-1]["step"] >= steps:
        print(f"{name} seed {seed}: curve complete ({len(curve)} points), skipped")
        return curve
    cmd = [sys.executable, str(REPO / "recipes" / "pretrain.py"), "--variant", variant,
           "--pairs", args.pairs, "--steps", str(steps), "--batch-size", str(batch),
           "--learning-rate", str(args.learning_rate), "--document-length",
           str(args.document_length), "--eval-every", str(eval_every),
           "--eval-questions", str(args.eval_questions), "--checkpoint-every", str(eval_every),
           "--seed", str(seed), "--workdir", str(workdir), "--no-progress", *flags]
    print(f"{name} seed {seed}: {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return pretrain_curve.read_curve(workdir / "curve.jsonl")


def summary_of(workdir: pathlib.Path) -> dict:
    path = workdir / "train_summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def tower_of(name: str) -> str:
    return name.split("_", 1)[0]


METRICS = ("R@1", "R@10", "R@100")


def median_and_range(values) -> str:
    """'median (min-max)' of percentages, or the one value when there is one run."""
    values = [100 * v for v in values]
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def median_curve(runs: dict) -> list:
    """The point-wise median of the seeds' curves (they log the same steps)."""
    curves = list(runs.values())
    length = min(len(c) for c in curves)
    return [{key: statistics.median(c[i][key] for c in curves)
             for key in ("step", "pairs_seen", "train_cpu_seconds", "train_seconds", *METRICS,
                         "MRR")} for i in range(length)]


def table(runs: dict, summaries: dict) -> list:
    """Per tower: each configuration at the end of its runs and at the shortest run's CPU time,
    median (min-max) over seeds."""
    lines = []
    for tower in sorted({tower_of(n) for n in runs}):
        names = [n for n in runs if tower_of(n) == tower]
        cpu = min(c[-1]["train_cpu_seconds"] for n in names for c in runs[n].values())
        at_cpu = {n: {s: {k: pretrain_curve.interpolate(c, "train_cpu_seconds", cpu, k)
                          for k in (*METRICS, "pairs_seen")} for s, c in runs[n].items()}
                  for n in names}
        base = at_cpu.get(f"{tower}_baseline")
        lines += [f"## {tower}: at the end of each run (about equal CPU time)", "",
                  "| configuration | seeds | steps × batch | CPU min | wall min | R@1 | R@10 | "
                  "R@100 | MRR |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name in names:
            ends = [c[-1] for c in runs[name].values()]
            _, steps, batch, _, _ = CONFIGS[name]
            lines.append(
                f"| {name} | {len(ends)} | {steps} × {batch} | "
                f"{statistics.median(e['train_cpu_seconds'] for e in ends) / 60:.1f} | "
                f"{statistics.median(e['train_seconds'] for e in ends) / 60:.1f} | "
                + " | ".join(median_and_range([e[k] for e in ends]) for k in METRICS)
                + f" | {statistics.median(e['MRR'] for e in ends):.3f} |")
        lines += ["", f"## {tower}: at equal CPU time ({cpu / 60:.2f} CPU minutes, the shortest "
                  "run; each curve interpolated)", "",
                  "| configuration | seeds | R@1 | R@10 | R@100 | R@100 vs baseline, same seed "
                  "| pairs seen |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for name in names:
            points = [p for p in at_cpu[name].values() if p["R@1"] is not None]
            if not points:
                continue
            gains = [p["R@100"] - base[s]["R@100"] for s, p in at_cpu[name].items()
                     if base and s in base and p["R@1"] is not None
                     and base[s]["R@1"] is not None and name != f"{tower}_baseline"]
            gain = (f"{100 * statistics.median(gains):+.1f} "
                    f"({100 * min(gains):+.1f} to {100 * max(gains):+.1f})" if len(gains) > 1
                    else f"{100 * gains[0]:+.1f}" if gains else "")
            lines.append(f"| {name} | {len(points)} | "
                         + " | ".join(median_and_range([p[k] for p in points]) for k in METRICS)
                         + f" | {gain} | "
                         f"{statistics.median(p['pairs_seen'] for p in points):,.0f} |")
        extra = [f"- {name} seed {seed}: " + ", ".join(f"{k} {v}" for k, v in summary.items())
                 for name in names for seed, summary in summaries[name].items() if summary]
        if extra:
            lines += ["", "Settings and costs recorded by each run (train_summary.json):", "",
                      *extra]
        lines.append("")
    return lines


SUMMARY_KEYS = ("hard_negatives", "grad_cache_chunk", "clustered_batches",
                "train_clustered_batches", "train_pairs_per_s", "train_wall_time_s")


def machine_line() -> str:
    import platform
    from benchmarks.measure import cpu_model
    return f"{os.cpu_count()} cores, {cpu_model()}, {platform.machine()}"


def write_report(runs: dict, args) -> None:
    from tt_zoo.atomic_io import write_text
    results = pathlib.Path(args.results)
    summaries = {n: {s: {k: v for k, v in summary_of(run_dir(args, n, s)).items()
                         if k in SUMMARY_KEYS} for s in seeds} for n, seeds in runs.items()}
    write_text(results / "batch_signal.json", json.dumps(
        {"settings": {k: v for k, v in vars(args).items() if k not in ("configs", "seeds")},
         "machine": machine_line(),
         "configs": {n: {"variant": CONFIGS[n][0], "steps": CONFIGS[n][1],
                         "batch": CONFIGS[n][2], "flags": CONFIGS[n][4],
                         "runs": {str(s): {"curve": c, "summary": summaries[n][s]}
                                  for s, c in seeds.items()}}
                     for n, seeds in runs.items()}}, indent=2))
    candidates = next(iter(next(iter(runs.values())).values()))[-1]["num_candidates"]
    towers = sorted({tower_of(n) for n in runs})
    lines = ["# More signal per CPU step: clustered batches, BM25 hard negatives, GradCache", "",
             f"Pairs: `{args.pairs}` (ICT+BFS+WLP on Wikispeedia); Adam {args.learning_rate:g} "
             "with 10% warm-up then linear decay over each run's steps; document length "
             f"{args.document_length}, query length 64; the CPU-scale recipe (mean pooling, one "
             "shared tower, cosine scores at temperature 0.05). ReQA-SQuAD(dev) zero-shot on "
             f"{args.eval_questions} questions (seed 0) against all {candidates:,} candidates, "
             "exact search. Each configuration ran with the seeds listed (model initialisation "
             "and batch order); cells give the median over seeds and (min-max). CPU minutes: "
             "the training process's CPU time (both cores) without the evaluations. Machine: "
             f"{machine_line()}. Written by `benchmarks/batch_signal.py`.", "",
             *[line for note in args.note for line in (f"Note: {note}", "")],
             *table(runs, summaries),
             *[f"![{tower} curves](batch_signal_{tower}.png)" for tower in towers], ""]
    write_text(results / "batch_signal.md", "\n".join(lines))
    for tower in towers:  # one figure a tower: their CPU minutes differ 8-fold
        pretrain_curve.plot({n: median_curve(seeds) for n, seeds in runs.items()
                             if tower_of(n) == tower},
                            results / f"batch_signal_{tower}.png",
                            x_axes=(("pairs_seen", "pairs seen (thousands)", 1e3),
                                    ("train_cpu_seconds", "training CPU minutes", 60)),
                            title=f"ReQA-SQuAD(dev) zero-shot, {TOWER_NAMES[tower]}: more "
                                  "signal per CPU step (median over seeds)",
                            labels={n: LABELS[n.split("_", 1)[1]] for n in runs})


def main(argv=None):
    p = arguments.parser(__doc__, summary="line")
    pretrain_curve.add_curve_arguments(p, CONFIGS, str(REPO / "runs" / "batch_signal"))
    p.add_argument("--seeds", default="0",
                   help="comma-separated seeds; each configuration runs once per seed")
    args = p.parse_args(argv)
    names = pretrain_curve.selected_configs(args, CONFIGS)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        sys.exit(f"--seeds must be comma-separated integers (got {args.seeds!r})")
    if not args.report_only:
        for seed in seeds:
            for name in names:
                run_config(name, seed, args)
    # The report covers every run whose curve is in --workdir, not only this call's.
    runs = {}
    for name in CONFIGS:
        for seed_dir in sorted((pathlib.Path(args.workdir) / name).glob("seed-*")):
            curve = pretrain_curve.read_curve(seed_dir / "curve.jsonl")
            if curve and curve[-1]["step"] >= CONFIGS[name][1]:
                runs.setdefault(name, {})[int(seed_dir.name.split("-", 1)[1])] = curve
    if not runs:
        sys.exit(f"no complete curve in {args.workdir} yet")
    write_report(runs, args)
    print(f"wrote {args.results}/batch_signal.md, .json, .png")


if __name__ == "__main__":
    main()
