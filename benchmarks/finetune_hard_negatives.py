"""ReQA fine-tuning with and without BM25 hard negatives (multi-task DPR's "hard confounders").

Maillard et al. 2021 (Sec. 3) fine-tune each example against the batch plus one BM25 passage
that does not hold the answer; `tt-zoo finetune --hard-negatives H` mines them among the ReQA
candidates (`tt_zoo.mining.hard_negatives.mine_reqa_negatives`: the gold candidate and every
candidate whose sentence holds one of the question's answers are skipped). This runs the
reproduce grid's fine-tuning budget (100 steps of 64 pairs, Adam 2e-4, early stopping on the
validation loss every 20 steps) on each cold-start split and split seed, with H = 0 and H = 1,
and reports R@k on each split's test questions against all candidates (median over the seeds).

  python -m benchmarks.finetune_hard_negatives --model bow_mlp_ict_bfs_wlp_512 --seeds 0,1,2
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys

from benchmarks.batch_signal import median_and_range
from benchmarks import arguments

REPO = arguments.REPO
METRICS = ("R@1", "R@10", "R@100", "MRR")


def model_sha(model: str) -> str:
    """The first 12 hex digits of a shipped model's sha256 ("path" for a model directory): the
    weights a run file belongs to, so a re-shipped model is fine-tuned again."""
    from tt_zoo.zoo import registry
    name = registry.registered_name(model)  # the registered name or its ARCH.TAG
    return (registry.REGISTRY[name].sha256 or "unshipped")[:12] if name else "path"


def run_one(args, sha: str, fraction: float, hard: int, seed: int) -> dict:
    """One fine-tuning run's JSON (`tt-zoo finetune --json-out`), run unless already there."""
    out = (pathlib.Path(args.workdir)
           / f"{args.model}-{sha}_f{fraction:g}_h{hard}_s{seed}.json")
    if not out.is_file():
        cmd = [sys.executable, "-m", "tt_zoo.cli", "finetune", "--model", args.model,
               "--train-fraction", f"{fraction:g}", "--seed", str(seed), "--steps", "100",
               "--batch-size", "64", "--learning-rate", "2e-4", "--eval-every", "20",
               "--hard-negatives", str(hard), "--eval", "--quiet", "--json-out", str(out)]
        print(" ".join(cmd[2:]), flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                       stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main(argv=None):
    p = arguments.parser(__doc__, summary="line")
    arguments.add_model(p, "bow_mlp_ict_bfs_wlp_512")
    p.add_argument("--fractions", default="0.05,0.8")
    p.add_argument("--seeds", default="0,1,2", help="split seeds")
    p.add_argument("--workdir", default=str(REPO / "runs" / "finetune_hard_negatives"))
    p.add_argument("--results", default=str(REPO / "results"))
    args = p.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    sha = model_sha(args.model)
    runs = {(f, h, s): run_one(args, sha, f, h, s)
            for f in fractions for h in (0, 1) for s in seeds}

    from tt_zoo.atomic_io import write_json, write_text
    lines = ["# ReQA fine-tuning with one BM25 hard negative per question", "",
             f"`{args.model}` (sha256 {sha}…) fine-tuned 100 steps of 64 pairs (Adam 2e-4, early "
             "stopping on the validation loss every 20 steps) on each cold-start split of "
             "ReQA-SQuAD(dev), "
             "with H = 0 or 1 BM25 hard negatives per question (`tt-zoo finetune "
             "--hard-negatives H`); R@k (%) on the split's test questions against all 10,255 "
             f"candidates, exact search; median (min-max) over split seeds {args.seeds}. "
             "Written by `benchmarks/finetune_hard_negatives.py`.", "",
             "| split | hard negatives | " + " | ".join(METRICS) + " | R@100 vs H = 0, same "
             "seed |", "|---|---|" + "---|" * (len(METRICS) + 1)]
    for f in fractions:
        for h in (0, 1):
            rows = [runs[(f, h, s)]["rows"][0] for s in seeds]
            cells = [median_and_range([r[k] for r in rows]) for k in METRICS]
            gains = [100 * (runs[(f, h, s)]["rows"][0]["R@100"]
                            - runs[(f, 0, s)]["rows"][0]["R@100"]) for s in seeds]
            gain = "" if h == 0 else (f"{statistics.median(gains):+.1f} ({min(gains):+.1f} to "
                                      f"{max(gains):+.1f})")
            lines.append(f"| {100 * f:g}% | {h} | " + " | ".join(cells) + f" | {gain} |")
    write_text(pathlib.Path(args.results) / "finetune_hard_negatives.md", "\n".join(lines) + "\n")
    write_json(pathlib.Path(args.results) / "finetune_hard_negatives.json",
               {"model": args.model, "sha256": sha, "runs": [
                   {"train_fraction": f, "hard_negatives": h, "seed": s,
                    "metrics": {k: runs[(f, h, s)]["rows"][0][k] for k in METRICS},
                    "finetune": {k: runs[(f, h, s)]["finetune"][k]
                                 for k in ("steps_run", "best_step", "best_value")}}
                   for (f, h, s) in runs]}, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
