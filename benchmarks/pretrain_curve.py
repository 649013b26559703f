"""Learning curves of pretraining configurations: ReQA-SQuAD(dev) zero-shot against pairs seen.

Each configuration is one `recipes/pretrain.py` run with `--eval-every` (its own work directory,
checkpointed and resumable, so a stopped benchmark continues where it stopped); this script runs
the configurations one after another, skipping any whose curve is complete, then collects their
`curve.jsonl` files into `results/pretrain_curve.json`, a PNG (R@1/10/100 against pairs seen and
against training minutes, one line per configuration) and `results/pretrain_curve.md` (the table
at equal pairs, and at equal wall time by linear interpolation of each curve).

  python -m benchmarks.pretrain_curve --pairs runs/pairs/ict_bfs_wlp_128 --steps 600 \
      --eval-every 200 --configs paper_cls_separate,mean_shared,mean_shared_cosine

The issue behind it: towers pretrained from random initialisation on a CPU budget barely learned
with the paper's settings ([CLS], separate towers); these curves are how the zoo's CPU-scale
recipe (`tt_zoo.zoo.registry.CPU_SCALE`) was chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
from typing import Optional

from benchmarks import arguments
from tt_zoo.cli.common import default_data_dir

REPO = pathlib.Path(__file__).resolve().parents[1]

DATA = default_data_dir()

# name -> (variant, extra recipes/pretrain.py arguments). The variant fixes the encoder; every
# other choice is spelled out, so a configuration does not change when registry defaults do.
PAPER_FLAGS = ["--pooling", "cls", "--share-towers", "no", "--normalize", "no",
               "--temperature", "0"]
CONFIGS = {
    "paper_cls_separate": ("ict_bfs_wlp_512", PAPER_FLAGS),
    "cls_shared": ("ict_bfs_wlp_512", ["--pooling", "cls", "--share-towers", "yes",
                                       "--normalize", "no", "--temperature", "0"]),
    "mean_separate": ("ict_bfs_wlp_512", ["--pooling", "mean", "--share-towers", "no",
                                          "--normalize", "no", "--temperature", "0"]),
    "mean_shared": ("ict_bfs_wlp_512", ["--pooling", "mean", "--share-towers", "yes",
                                        "--normalize", "no", "--temperature", "0"]),
    "mean_shared_cosine": ("ict_bfs_wlp_512", ["--pooling", "mean", "--share-towers", "yes",
                                               "--normalize", "yes", "--temperature", "0.05"]),
    "mean_shared_cosine_bert_vocab": (
        "ict_bfs_wlp_512", ["--pooling", "mean", "--share-towers", "yes", "--normalize", "yes",
                            "--temperature", "0.05",
                            "--vocab", str(DATA / "bert-vocab" / "vocab.txt")]),
    "mean_shared_cosine_bf16": ("ict_bfs_wlp_512", ["--pooling", "mean", "--share-towers", "yes",
                                                    "--normalize", "yes", "--temperature", "0.05",
                                                    "--dtype-policy", "mixed_bfloat16"]),
    "mini_mean_shared_cosine": ("bert_mini_ict_bfs_wlp_512",
                                ["--pooling", "mean", "--share-towers", "yes", "--normalize",
                                 "yes", "--temperature", "0.05"]),
    "bow_mlp_paper": ("bow_mlp_ict_bfs_wlp_512", ["--share-towers", "no", "--normalize", "no",
                                                  "--temperature", "0",
                                                  "--bow-output-activation", "tanh"]),
    "bow_mlp_shared_cosine": ("bow_mlp_ict_bfs_wlp_512",
                              ["--share-towers", "yes", "--normalize", "yes", "--temperature",
                               "0.05", "--bow-output-activation", "linear"]),
}
# What the plots' legends call each configuration (the names above are run directories).
LABELS = {
    "paper_cls_separate": "tiny BERT: [CLS], two towers, dot product (the paper's)",
    "cls_shared": "tiny BERT: [CLS], one shared tower, dot product",
    "mean_separate": "tiny BERT: mean pooling, two towers, dot product",
    "mean_shared": "tiny BERT: mean pooling, one shared tower, dot product",
    "mean_shared_cosine": "tiny BERT: mean pooling, one shared tower, cosine / 0.05 (the zoo's)",
    "mean_shared_cosine_bert_vocab": "tiny BERT: the zoo's recipe, BERT's 30,522-token vocabulary",
    "mean_shared_cosine_bf16": "tiny BERT: the zoo's recipe in mixed bfloat16",
    "mini_mean_shared_cosine": "BERT-mini (4 layers, hidden 256): the zoo's recipe",
    "bow_mlp_paper": "BoW-MLP: two towers, tanh output, dot product (the paper's)",
    "bow_mlp_shared_cosine": "BoW-MLP: one shared tower, linear output, cosine / 0.05",
}


def read_curve(path: pathlib.Path) -> list:
    if not path.is_file():
        return []
    points = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    # A resumed run re-evaluates nothing it already logged; keep the last point of each step.
    return sorted({p["step"]: p for p in points}.values(), key=lambda p: p["step"])


def run_config(name: str, args) -> list:
    variant, flags = CONFIGS[name]
    workdir = pathlib.Path(args.workdir) / name
    curve = read_curve(workdir / "curve.jsonl")
    if curve and curve[-1]["step"] >= args.steps:
        print(f"{name}: curve complete ({len(curve)} points), skipped")
        return curve
    cmd = [sys.executable, str(REPO / "recipes" / "pretrain.py"), "--variant", variant,
           "--pairs", args.pairs, "--steps", str(args.steps), "--batch-size", str(args.batch),
           "--learning-rate", str(args.learning_rate), "--document-length",
           str(args.document_length), "--eval-every", str(args.eval_every),
           "--eval-questions", str(args.eval_questions), "--checkpoint-every",
           str(args.eval_every), "--workdir", str(workdir), "--no-progress", *flags]
    print(f"{name}: {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return read_curve(workdir / "curve.jsonl")


def interpolate(curve: list, x_key: str, x: float, y_key: str):
    """y at x by linear interpolation between logged points (None beyond the curve)."""
    for a, b in zip(curve, curve[1:]):
        if a[x_key] <= x <= b[x_key]:
            t = 0.0 if b[x_key] == a[x_key] else (x - a[x_key]) / (b[x_key] - a[x_key])
            return a[y_key] + t * (b[y_key] - a[y_key])
    return None


def write_report(curves: dict, long_runs: dict, args) -> None:
    from tt_zoo.atomic_io import write_text
    results = pathlib.Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    write_text(results / "pretrain_curve.json", json.dumps(
        {"settings": {k: v for k, v in vars(args).items() if k != "configs"},
         "configs": {n: {"variant": CONFIGS[n][0], "flags": CONFIGS[n][1], "curve": c}
                     for n, c in curves.items() if c},
         "long_runs": long_runs}, indent=2))

    done = {n: c for n, c in curves.items() if c}
    candidates = next((c[-1].get("num_candidates") for c in done.values()), None)
    equal_minutes = min(c[-1]["train_seconds"] for c in done.values()) / 60 if done else 0
    lines = [f"# Pretraining curves: ReQA-SQuAD(dev) zero-shot during pretraining",
             "",
             f"Pairs: `{args.pairs}` (ICT+BFS+WLP on Wikispeedia); batch {args.batch}, Adam "
             f"{args.learning_rate:g} with 10% warm-up then linear decay over {args.steps} steps, "
             f"document length {args.document_length}, query length 64. Scored every "
             f"{args.eval_every} steps on {args.eval_questions} questions (seed 0) against all "
             f"{candidates:,} candidates, exact search. Written by `benchmarks/pretrain_curve.py`.",
             "", *[line for note in args.note for line in (f"Note: {note}", "")],
             f"## At equal pairs ({args.steps * args.batch:,} pairs seen)",
             "",
             "| configuration | R@1 | R@10 | R@100 | MRR | train minutes | pairs/s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, curve in done.items():
        last = curve[-1]
        minutes = last["train_seconds"] / 60
        rate = last["pairs_seen"] / max(last["train_seconds"], 1e-9)
        lines.append(f"| {name} | {100 * last['R@1']:.1f} | {100 * last['R@10']:.1f} | "
                     f"{100 * last['R@100']:.1f} | {last['MRR']:.3f} | {minutes:.1f} | "
                     f"{rate:.0f} |")
    lines += ["", f"## At equal wall time ({equal_minutes:.1f} training minutes, the shortest "
              "run; interpolated)", "", "| configuration | R@10 | R@100 | pairs seen |",
              "| --- | --- | --- | --- |"]
    for name, curve in done.items():
        x = equal_minutes * 60
        r10 = interpolate(curve, "train_seconds", x, "R@10")
        r100 = interpolate(curve, "train_seconds", x, "R@100")
        pairs = interpolate(curve, "train_seconds", x, "pairs_seen")
        if r100 is None:
            continue
        lines.append(f"| {name} | {100 * r10:.1f} | {100 * r100:.1f} | {pairs:,.0f} |")
    if long_runs:
        lines += ["", "## Longer runs (their own schedules; every logged point)", ""]
        for name, curve in long_runs.items():
            lines += [f"**{name}**", "", "| step | pairs seen | train minutes | loss | R@1 | R@10 | "
                      "R@100 | MRR |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
            for point in curve:
                loss = "" if point["loss"] is None else f"{point['loss']:.3f}"
                lines.append(f"| {point['step']} | {point['pairs_seen']:,} | "
                             f"{point['train_seconds'] / 60:.1f} | {loss} | "
                             f"{100 * point['R@1']:.1f} | {100 * point['R@10']:.1f} | "
                             f"{100 * point['R@100']:.1f} | {point['MRR']:.3f} |")
            lines.append("")
    lines += ["", "![curves](pretrain_curve.png)", ""]
    write_text(results / "pretrain_curve.md", "\n".join(lines))
    plot({**done, **{f"{n} (long run)": c for n, c in long_runs.items() if c}},
         results / "pretrain_curve.png", labels=LABELS)


X_AXES = (("pairs_seen", "pairs seen (thousands)", 1e3), ("train_seconds", "training minutes", 60))


def plot(curves: dict, path: pathlib.Path, x_axes=X_AXES,
         title: str = "ReQA-SQuAD(dev) zero-shot during pretraining",
         labels: Optional[dict] = None) -> None:
    """R@1/10/100 of each curve, one row per x axis ((point key, label, divisor) triples); the
    legend names a curve by `labels` (its key when absent)."""
    labels = labels or {}
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(x_axes), 3, figsize=(15, 4.25 * len(x_axes)), sharey="col",
                             squeeze=False)
    # Ten curves or fewer: the default colours; more: tab20, so no two curves share a colour.
    colors = plt.get_cmap("tab20").colors if len(curves) > 10 else [None] * len(curves)
    for row, (x_key, x_label, scale) in enumerate(x_axes):
        for col, metric in enumerate(("R@1", "R@10", "R@100")):
            ax = axes[row, col]
            for (name, curve), color in zip(curves.items(), colors):
                ax.plot([p[x_key] / scale for p in curve], [100 * p[metric] for p in curve],
                        marker="o", markersize=3, label=labels.get(name, name), color=color)
            ax.set_xlabel(x_label)
            ax.set_ylabel(f"{metric} (%)")
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    from tt_zoo.atomic_io import open_for_replace
    with open_for_replace(path, "wb") as f:
        fig.savefig(f, format="png", dpi=90)


def add_curve_arguments(p: argparse.ArgumentParser, configs: dict, workdir: str) -> None:
    """The arguments every curve benchmark shares (this one and benchmarks/batch_signal.py)."""
    p.add_argument("--pairs", required=True, help="a pair directory (tt-zoo make-pairs)")
    p.add_argument("--configs", default=",".join(configs),
                   help=f"comma-separated subset of {', '.join(configs)}")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--document-length", type=int, default=128)
    p.add_argument("--eval-questions", type=int, default=2000)
    p.add_argument("--workdir", default=workdir)
    p.add_argument("--results", default=str(REPO / "results"))
    p.add_argument("--report-only", action="store_true",
                   help="only collect the curves already in --workdir")
    p.add_argument("--note", action="append", default=[],
                   help="a sentence to print under the report's heading (repeatable)")


def selected_configs(args, configs: dict) -> list:
    """The names of --configs; exits naming any that `configs` does not define."""
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in configs]
    if unknown:
        sys.exit(f"unknown configuration(s) {unknown}; expected some of {list(configs)}")
    return names


def main(argv=None):
    p = arguments.parser(__doc__, summary="line")
    add_curve_arguments(p, CONFIGS, str(REPO / "runs" / "curve"))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--long-run", action="append", default=[], metavar="NAME=CURVE_JSONL",
                   help="a longer run's curve (e.g. a shipped model's) to plot and tabulate "
                        "beside the configurations")
    args = p.parse_args(argv)
    names = selected_configs(args, CONFIGS)
    if not args.report_only:
        for name in names:
            run_config(name, args)
    # The report covers every configuration whose curve is in --workdir, not only this call's.
    curves = {name: read_curve(pathlib.Path(args.workdir) / name / "curve.jsonl")
              for name in CONFIGS}
    long_runs = {}
    for item in args.long_run:
        name, _, path = item.partition("=")
        long_runs[name] = read_curve(pathlib.Path(path))
    write_report(curves, long_runs, args)
    print(f"wrote {args.results}/pretrain_curve.md, .json, .png")


if __name__ == "__main__":
    main()
