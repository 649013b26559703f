"""results/amx_training.{json,md}: training in bfloat16 on the AMX units against float32.

Three parts, each a section of the record:

- ``step``: one training step of the imported all-MiniLM-L6-v2 (`tt_zoo.load("minilm_l6_384")`,
  one shared tower), batch 32, query length 64, document length 128, on token ids made once
  on the host (`tt_zoo.training.step_data`), through `model.fit`: the loaded float32 model
  against its ``mixed_bfloat16`` training copy (`tt_zoo.modeling.pair_model.with_dtype_policy`,
  what every training command trains a Transformer under ``--precision auto`` on a CPU with
  AMX or AVX512-BF16; the record says which policy auto chose for the model), both in
  one process, in interleaved rounds (`benchmarks.measure.interleaved_rounds`); medians.
- ``kernels``: the oneDNN kernels the bfloat16 step's matmuls run on, read from
  ``ONEDNN_VERBOSE=1`` in a child process (primitive, implementation, source type, count).
- ``finetune``: `tt-zoo finetune` of the same MiniLM on ReQA-SQuAD(dev)'s 0.8 cold-start split
  (seed 0), run twice with the same settings, ``--precision float32`` and ``--precision
  bfloat16``; validation R@1/MRR every ``--eval-every`` steps (the validation questions against
  all candidates, scored by the same evaluator for both: `encode_*`'s default precision).

Usage:
  python -m benchmarks.amx_training                        # all parts, ~35 min here
  python -m benchmarks.amx_training --parts step,kernels --rounds 3 --output /tmp/amx  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

from benchmarks import arguments, measure

MODEL = "minilm_l6_384"
PARTS = ("step", "kernels", "finetune")
KERNEL_MARKER = "=== timed step"


def parse_args(argv=None):
    p = arguments.parser(__doc__, prog="python -m benchmarks.amx_training")
    arguments.add_model(p, default=MODEL)
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--query-length", type=int, default=64)
    p.add_argument("--document-length", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the step")
    p.add_argument("--steps", type=int, default=5, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps (tracing)")
    p.add_argument("--finetune-steps", type=int, default=120)
    p.add_argument("--finetune-batch", type=int, default=16)
    p.add_argument("--eval-every", type=int, default=40)
    p.add_argument("--learning-rate", type=float, default=2e-5)
    p.add_argument("--keep", action="store_true",
                   help="keep the parts of an earlier OUTPUT.json not measured now")
    p.add_argument("--kernels-child", action="store_true", help=argparse.SUPPRESS)
    arguments.add_output(p, help="write OUTPUT.json and OUTPUT.md (default results/amx_training)",
                         type=str, default="results/amx_training")
    return p.parse_args(argv)


# ------------------------------------------------------------------ the step

def contenders(args, log=print):
    """{"float32": (model, batches), "mixed_bfloat16": (its training copy, batches)}."""
    import tensorflow as tf

    import tt_zoo
    from tt_zoo.modeling.pair_model import with_dtype_policy, with_sequence_lengths
    from tt_zoo.training.step_data import step_batches, tokenize_pair_set
    from benchmarks.train_step import synthetic_pairs

    tf.keras.utils.set_random_seed(0)
    model = with_sequence_lengths(tt_zoo.load(args.model).keras_model, args.query_length,
                                  args.document_length)
    vocab = list(model.query_preprocessor.vocabulary)
    pairs = synthetic_pairs(vocab, args.batch, args.query_length, args.document_length)
    arrays = tokenize_pair_set(model, pairs.take(4).unbatch(), log=log)
    built = {}
    for policy in ("float32", "mixed_bfloat16"):
        trained = with_dtype_policy(model, policy)
        trained.compile(optimizer=tf.keras.optimizers.Adam(1e-5))
        built[policy] = (trained, iter(step_batches(arrays, args.batch, seed=0, start_step=0)))
    return built


def step_runner(model, batches, steps: int):
    """A runner of `steps` training steps returning their seconds (`StepTimer`: the steps
    only, not fit's set-up)."""
    from benchmarks.train_step import StepTimer

    def run() -> float:
        timer = StepTimer()
        model.fit(batches, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[timer])
        return sum(timer.times)
    return run


def measure_step(args, log=print) -> dict:
    built = contenders(args, log)
    for model, batches in built.values():  # tracing, untimed
        model.fit(batches, steps_per_epoch=args.warmup, epochs=1, verbose=0)
    seconds = measure.interleaved_rounds(
        {policy: step_runner(m, b, args.steps) for policy, (m, b) in built.items()},
        args.rounds, log=log)
    rows = []
    for policy, values in seconds.items():
        per_step = [s / args.steps for s in values]
        rows.append({"policy": policy,
                     "median_step_ms": round(1000 * statistics.median(per_step), 1),
                     "min_step_ms": round(1000 * min(per_step), 1),
                     "max_step_ms": round(1000 * max(per_step), 1),
                     "pairs_per_s": round(args.batch / statistics.median(per_step), 1),
                     "rounds": len(values), "steps_per_round": args.steps})
    rows[1]["speed_vs_float32"] = round(rows[0]["median_step_ms"] / rows[1]["median_step_ms"], 2)
    from tt_zoo.training.precision import training_policy

    return {"model": args.model, "batch": args.batch, "query_length": args.query_length,
            "document_length": args.document_length, "rows": rows,
            "auto_policy": training_policy(built["float32"][0])}


# ------------------------------------------------------------------ the kernels

def kernels_child(args) -> None:
    """In the child (ONEDNN_VERBOSE=1): a warm bfloat16 step, the marker, one more step."""
    model, batches = contenders(args, log=lambda *_: None)["mixed_bfloat16"]
    model.fit(batches, steps_per_epoch=2, epochs=1, verbose=0)
    print(KERNEL_MARKER, flush=True)
    model.fit(batches, steps_per_epoch=1, epochs=1, verbose=0)
    print(KERNEL_MARKER, flush=True)


def onednn_kernels(log_text: str) -> list:
    """(primitive, implementation, source type, count) of each oneDNN primitive executed in the
    marked step of an ``ONEDNN_VERBOSE=1`` log, most frequent first."""
    marked = log_text.split(KERNEL_MARKER)[1]
    counts = {}
    for line in marked.splitlines():
        fields = line.split(",")
        if line.startswith("onednn_verbose") and ",exec," in line and len(fields) > 8:
            source = fields[8].split(" ")[0].split(":")
            key = (fields[5], fields[6], source[1] if len(source) > 1 else "?")
            counts[key] = counts.get(key, 0) + 1
    return [{"primitive": p, "implementation": i, "source_type": t, "count": n}
            for (p, i, t), n in sorted(counts.items(), key=lambda kv: -kv[1])]


def measure_kernels(args, log=print) -> dict:
    command = [sys.executable, "-m", "benchmarks.amx_training", "--kernels-child",
               "--model", args.model, "--batch", str(args.batch),
               "--query-length", str(args.query_length),
               "--document-length", str(args.document_length)]
    env = dict(os.environ, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3")
    log("kernels: one bfloat16 step under ONEDNN_VERBOSE=1")
    run = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    kernels = onednn_kernels(run.stdout)
    matmuls = [k for k in kernels if k["primitive"] in ("matmul", "inner_product")]
    return {"command": "ONEDNN_VERBOSE=1 " + " ".join(command[1:]), "kernels": kernels,
            "matmul_on_amx": sum(k["count"] for k in matmuls if "amx" in k["implementation"]),
            "matmul_elsewhere": sum(k["count"] for k in matmuls
                                    if "amx" not in k["implementation"])}


# ------------------------------------------------------------------ the fine-tune

def finetune_config(args, precision: str):
    from tt_zoo.training.finetune_run import FinetuneConfig

    squad = str(arguments.data_dir() / "squad" / "dev-v1.1.json")
    return FinetuneConfig.from_dict({
        "model": {"model": args.model},
        "lengths": {"query_length": args.query_length,
                    "document_length": args.document_length},
        "data": {"squad": squad, "train_fraction": 0.8, "seed": 0},
        "training": {"steps": args.finetune_steps, "batch_size": args.finetune_batch,
                     "learning_rate": args.learning_rate, "eval_every": args.eval_every,
                     "patience": 1000, "validation_metric": "MRR"},
        "compute": {"precision": precision},
        "output": {"no_progress": True}})


def measure_finetune(args, log=print) -> dict:
    from tt_zoo.training.finetune_run import finetune

    runs = {}
    for precision in ("float32", "bfloat16"):
        log(f"finetune: --precision {precision}")
        start = time.perf_counter()
        record = finetune(finetune_config(args, precision))
        history = record["finetune"]["history"]
        runs[precision] = {
            "dtype_policy": record["finetune"]["dtype_policy"],
            "seconds": round(record["finetune"]["seconds"], 1),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "train_pairs_per_s": round(record["finetune"]["train_pairs_per_s"], 2),
            "curve": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in h.items()
                       if k in ("step", "loss", "val_R@1", "val_R@5", "val_MRR")}
                      for h in history]}
        log(json.dumps(runs[precision]["curve"]))
    return {"model": args.model, "split": "ReQA-SQuAD(dev) 0.8 cold-start, seed 0",
            "num_validation": record["num_validation"], "num_candidates": record["num_candidates"],
            "steps": args.finetune_steps, "batch": args.finetune_batch,
            "learning_rate": args.learning_rate, "eval_every": args.eval_every,
            "query_length": args.query_length, "document_length": args.document_length,
            "runs": runs}


# ------------------------------------------------------------------ the record

def _auto_policy(part: dict) -> str:
    """What ``--precision auto`` trains the part's model in on its machine: the policy recorded
    at the run (`tt_zoo.training.precision.training_policy`), or, in records made before the
    tower family counted, bfloat16 on AMX only."""
    auto = part.get("auto_policy")
    if auto is None:
        auto = ("mixed_bfloat16" if part.get("machine", {}).get("matrix_units", {}).get("amx")
                else "float32")
    if auto == "mixed_bfloat16":
        return "what `--precision auto` trains this model in on this CPU"
    return "`--precision bfloat16`; `auto` trains this model in float32 on this CPU"


def markdown(record: dict, plot_name: str = "amx_training.png") -> str:
    out = ["# Training in bfloat16 on the AMX units (issue 65)", "",
           "Made by `benchmarks/amx_training.py`; each section names its command and machine.",
           ""]
    if "step" in record:
        s = record["step"]
        out += [f"## One training step: {s['model']}, batch {s['batch']}, query length "
                f"{s['query_length']}, document length {s['document_length']}", "",
                "The loaded float32 model against its mixed_bfloat16 training copy "
                f"({_auto_policy(s)}), interleaved rounds in one process.", "",
                *_provenance(s),
                "| policy | median step (ms) | min | max | pairs/s | speed |",
                "|---|---|---|---|---|---|"]
        for r in s["rows"]:
            out.append(f"| {r['policy']} | {r['median_step_ms']} | {r['min_step_ms']} | "
                       f"{r['max_step_ms']} | {r['pairs_per_s']} | "
                       f"x{r.get('speed_vs_float32', 1.0):.2f} |")
        out.append("")
    if "kernels" in record:
        k = record["kernels"]
        out += ["## oneDNN kernels of the bfloat16 step", "", *_provenance(k),
                f"Matmul/inner-product executions on AMX kernels: {k['matmul_on_amx']}, "
                f"elsewhere: {k['matmul_elsewhere']}.", "",
                "| primitive | implementation | source type | count |", "|---|---|---|---|"]
        out += [f"| {r['primitive']} | {r['implementation']} | {r['source_type']} | "
                f"{r['count']} |" for r in k["kernels"]]
        out.append("")
    if "finetune" in record:
        f = record["finetune"]
        runs = f["runs"]
        out += [f"## ReQA fine-tune side by side: {f['model']}, {f['split']}", "",
                *_provenance(f),
                f"{f['steps']} steps of {f['batch']}, Adam {f['learning_rate']:g}, same seed and "
                f"data; validation ({f['num_validation']} questions against all "
                f"{f['num_candidates']:,} candidates) every {f['eval_every']} steps. "
                "Training seconds: " + ", ".join(f"{p} {r['seconds']} s "
                                                 f"({r['train_pairs_per_s']} pairs/s)"
                                                 for p, r in runs.items()) + ".", "",
                "| step | R@1 float32 | R@1 bfloat16 | MRR float32 | MRR bfloat16 | "
                "loss float32 | loss bfloat16 |", "|---|---|---|---|---|---|---|"]
        for a, b in zip(runs["float32"]["curve"], runs["bfloat16"]["curve"]):
            cells = [a["step"]]
            for key in ("val_R@1", "val_MRR", "loss"):
                cells += [_pct(a.get(key), key), _pct(b.get(key), key)]
            out.append("| " + " | ".join(map(str, cells)) + " |")
        out += ["", f"![validation curves]({plot_name})", ""]
    return "\n".join(out)


def _provenance(section: dict) -> list:
    """A section's machine line and command (lines of Markdown), where it records them."""
    if "machine" not in section:
        return []
    return [measure.machine_line(section["machine"]), "", "    " + section["command"], ""]


def _pct(value, key: str) -> str:
    if value is None:
        return "–"
    return f"{value:.4f}" if key == "loss" else f"{100 * value:.1f}"


def plot(record: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = record["finetune"]["runs"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, key, name in zip(axes, ("val_R@1", "val_MRR"), ("validation R@1 (%)",
                                                           "validation MRR (%)")):
        for precision, run in runs.items():
            points = [(h["step"], 100 * h[key]) for h in run["curve"] if key in h]
            ax.plot(*zip(*points), marker="o", label=f"{precision} ({run['dtype_policy']})")
        ax.set_xlabel("step")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{record['finetune']['model']} ReQA fine-tune: float32 vs bfloat16 training")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    args = parse_args(argv)
    if args.kernels_child:
        kernels_child(args)
        return
    parts = arguments.comma_choices(args.parts, PARTS, "--parts")
    output = pathlib.Path(args.output)
    record = {}
    if args.keep and output.with_suffix(".json").exists():
        record = json.loads(output.with_suffix(".json").read_text())
    command = "python -m benchmarks.amx_training " + " ".join(argv or sys.argv[1:])
    measures = {"step": measure_step, "kernels": measure_kernels, "finetune": measure_finetune}
    for part in parts:  # each part records its own command line and machine
        machine = measure.machine_info()
        record[part] = {**measures[part](args), "command": command, "machine": machine}
        machine["other_busy_cores_at_end"] = measure.busy_cores()
        output.parent.mkdir(parents=True, exist_ok=True)
        output.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    if "finetune" in record:
        plot(record, output.with_suffix(".png"))
    text = markdown(record, output.with_suffix(".png").name)
    output.with_suffix(".md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
