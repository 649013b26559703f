"""Reproduces the paper's Tables 3 and 5 at CPU scale: pretrain, fine-tune and evaluate a grid.

Chang et al. 2020, Table 3 (encoder x pretraining: none, MLM, ICT+BFS+WLP; BoW-MLP and
Transformer) and Table 5 (the tasks alone, and embedding dimensions 128/256/512). Every cell
gets one pretraining budget (`GRID` below: the same number of pairs seen, the same schedule),
then is scored zero-shot and fine-tuned on the ReQA-SQuAD(dev) cold-start splits 1% / 5% / 80%
(10% of the training part held out for validation), on the split's test questions against all
candidates, with BM25 on the same questions.

Stages, each skipped where its output already exists (so the grid resumes where it stopped):
  data      tt-zoo make-pairs for each task mix (runs/pairs/TASKS_128, MLM examples)
  pretrain  tt-zoo pretrain per cell -> runs/reproduce/CELL/model (checkpointed, resumable)
  evaluate  zero-shot and fine-tuned scores per cell and split -> runs/reproduce/CELL/*.json
  report    results/table3.md, results/table5.md, results/reproduce.json and the plots
  ship      fully evaluated models to saved_models/ with measured cards, listed with their
            sha256 and release URL in tt_zoo/serving/shipped_models.json (the registry's list of
            shipped weights, package data)

  tt-zoo reproduce                      # everything not yet done
  tt-zoo reproduce --stages ship        # then ship what is fully evaluated
  tt-zoo reproduce --cells ict_512,bfs_512 --stages pretrain
  tt-zoo reproduce --stages report      # tables from the cells done so far
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import time
from typing import List, Optional

from tt_zoo.atomic_io import write_json, write_text  # no TensorFlow
from tt_zoo.cli import parsing
from tt_zoo.cli.common import clone_root, default_data_dir, default_vocab_path
from tt_zoo.serving.registry import SHIPPED_FILE

STAGES = ("data", "pretrain", "evaluate", "report", "ship")
SPLITS = (0.01, 0.05, 0.8)


@dataclasses.dataclass(frozen=True)
class GridBudget:
    """One pretraining budget and one fine-tuning budget for every cell.

    Pretraining: the flagship's CPU recipe (batch 128, Adam 1e-3 with 10% warm-up then linear
    decay, documents of 128 tokens) cut to `steps`, so each Transformer cell takes about 15
    minutes here. Fine-tuning scales the paper's (Adam 5e-5, 2,000 steps, batch 512) to
    this CPU: fewer, smaller steps at a larger rate, with early stopping on validation loss.
    """

    steps: int = 800
    batch_size: int = 128
    learning_rate: float = 1e-3
    document_length: int = 128
    pairs_per_article: int = 128
    max_doc_tokens: int = 96
    finetune_steps: int = 100
    finetune_batch_size: int = 64
    finetune_learning_rate: float = 2e-4
    finetune_eval_every: int = 20
    seed: int = 0


GRID = GridBudget()

# The grid's cells, each a registered variant; most informative first (the order the pretrain
# stage runs them in), so the grid is useful while it is still running.
CELLS = ("none_512", "bow_mlp_none_512", "ict_bfs_wlp_512", "mlm_512", "ict_512", "bfs_512",
         "wlp_512", "bow_mlp_ict_bfs_wlp_512", "ict_bfs_wlp_256", "ict_bfs_wlp_128")
# Shipped longer runs of grid variants, scored beside the grid's equal-budget cells.
FLAGSHIPS = ("ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_512")


def pretraining_of(variant: str) -> str:
    from tt_zoo.serving import registry
    return registry.get_spec(variant).pretraining


def cell_dir(runs: pathlib.Path, variant: str) -> pathlib.Path:
    return runs / "reproduce" / variant


def data_dir(runs: pathlib.Path, pretraining: str, budget: GridBudget) -> pathlib.Path:
    """Where the pairs (or MLM examples) of a pretraining mix live."""
    return runs / "pairs" / f"{pretraining}_{budget.pairs_per_article}"


def make_data_command(pretraining: str, output: pathlib.Path, args) -> List[str]:
    budget = args.budget
    command = [sys.executable, "-u", "-m", "tt_zoo.cli", "make-pairs",
               "--input", str(args.data / "wikispeedia"), "--output", str(output),
               "--max-doc-tokens", str(budget.max_doc_tokens), "--seed", str(budget.seed),
               "--no-progress"]
    if pretraining == "mlm":
        return command + ["--tasks", "mlm", "--vocab", str(args.vocab),
                          "--mlm-seq-length", str(budget.document_length)]
    return command + ["--tasks", pretraining.replace("_", ","), "--in-memory",
                      "--pairs-per-article", str(budget.pairs_per_article)]


def pretrain_command(variant: str, args) -> List[str]:
    budget, where = args.budget, cell_dir(args.runs, variant)
    command = [sys.executable, "-u", "-m", "tt_zoo.cli", "pretrain", "--variant", variant,
               "--vocab", str(args.vocab), "--document-length", str(budget.document_length),
               "--seed", str(budget.seed), "--workdir", str(where / "pretrain"),
               "--export", str(where / "model"), "--no-progress"]
    pretraining = pretraining_of(variant)
    if pretraining == "none":
        return command + ["--steps", "0"]
    source = data_dir(args.runs, pretraining, budget)
    command += ["--mlm-examples" if pretraining == "mlm" else "--pairs", str(source)]
    return command + ["--steps", str(budget.steps), "--batch-size", str(budget.batch_size),
                      "--learning-rate", f"{budget.learning_rate:g}",
                      "--checkpoint-every", str(max(1, budget.steps // 8))]


def run_logged(command: List[str], log: pathlib.Path) -> bool:
    """Runs one step of the grid as its own process, its output appended to `log`; returns
    whether it succeeded (a failed cell does not stop the others: rerun to retry it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  $ {shlex.join(command)}\n    (log: {log})", flush=True)
    t = time.perf_counter()
    with open(log, "a") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT)
    if code:
        print(f"    FAILED (exit {code}) after {time.perf_counter() - t:.0f} s; see {log}",
              flush=True)
        return False
    print(f"    done in {time.perf_counter() - t:.0f} s", flush=True)
    return True


def stage_data(cells: List[str], args) -> None:
    for mix in sorted({pretraining_of(c) for c in cells} - {"none"}):
        out = data_dir(args.runs, mix, args.budget)
        if (out / "manifest.json").is_file():
            print(f"data {mix}: {out} exists")
            continue
        print(f"data {mix}: making {out}")
        if not run_logged(make_data_command(mix, out, args),
                          args.runs / "reproduce" / "logs" / f"data_{mix}.log"):
            sys.exit(f"data {mix} failed: the cells that need it cannot run")


def committed_pretrained(variant: str, args) -> Optional[pathlib.Path]:
    """saved_models/VARIANT when it holds this variant pretrained at this grid budget (so a
    fresh clone does not retrain it), else None. The shipped flagships are longer runs."""
    if args.saved_models is None:  # not in a git clone: nothing committed to reuse
        return None
    path = args.saved_models / variant
    meta = _read_json(path / "metadata.json") or {}
    if variant in FLAGSHIPS or meta.get("name") != variant:
        return None
    budget = args.budget
    if pretraining_of(variant) == "none" or (
            meta.get("train_steps") == budget.steps and meta.get("batch_size") ==
            budget.batch_size and meta.get("learning_rate") == budget.learning_rate):
        return path
    return None


def stage_pretrain(cells: List[str], args) -> None:
    failed = []
    for variant in cells:
        where = cell_dir(args.runs, variant)
        if (where / "model" / "metadata.json").is_file():
            print(f"pretrain {variant}: {where / 'model'} exists")
            continue
        committed = committed_pretrained(variant, args)
        if committed is not None:  # trained at this budget on another machine and committed
            shutil.copytree(committed, where / "model")
            print(f"pretrain {variant}: copied the committed {committed} (same budget)")
            continue
        print(f"pretrain {variant}")
        if not run_logged(pretrain_command(variant, args), where / "pretrain.log"):
            failed.append(variant)
    if failed:  # checkpointed: a retry resumes where each one stopped
        print(f"pretrain failed for {', '.join(failed)}: retrying once")
        for variant in failed:
            run_logged(pretrain_command(variant, args), cell_dir(args.runs, variant) /
                       "pretrain.log")


def split_key(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def _file_key(fraction: float) -> str:
    return f"{100 * fraction:g}pct"


def evaluated_models(cells: List[str], runs: pathlib.Path) -> List[tuple]:
    """(name, model directory, result directory) of every model the evaluate stage scores: the
    grid's cells, and the shipped flagships (longer runs, reported beside the grid)."""
    models = [(c, cell_dir(runs, c) / "model", cell_dir(runs, c)) for c in cells]
    from tt_zoo.serving import registry
    for name in FLAGSHIPS:
        if name in cells:
            spec = registry.get_spec(name)
            if spec.shipped:
                models.append((f"{name} (flagship)", spec.artifact_path,
                               runs / "reproduce" / f"flagship_{name}"))
    return models


def _flat_bm25(metrics: dict) -> dict:
    """`evaluate_bm25`'s dict as runs/reproduce/bm25.json keeps it (written before the one
    evaluation shape, so earlier runs still read): R@k and MRR beside the counts and settings."""
    return {**metrics["exact"], **{k: v for k, v in metrics.items() if k not in ("exact", "index")}}


def stage_evaluate(cells: List[str], args) -> None:
    """Zero-shot and fine-tuned ReQA scores of each model on each split's test questions."""
    import tensorflow as tf
    import tt_zoo
    from tt_zoo.retrieval import bm25, reqa as reqa_lib, metrics as retrieval_metrics
    from tt_zoo.training import finetuning

    budget = args.budget
    reqa = reqa_lib.build_reqa(args.squad)
    splits = {f: reqa_lib.make_splits(reqa, f, seed=budget.seed) for f in args.splits}
    bm25_path = args.runs / "reproduce" / "bm25.json"
    if not bm25_path.is_file():
        write_json(bm25_path, {split_key(f): _flat_bm25(bm25.evaluate_bm25(reqa, s.test))
                                for f, s in splits.items()})
    for name, model_dir, out_dir in evaluated_models(cells, args.runs):
        if not (model_dir / "metadata.json").is_file():
            print(f"evaluate {name}: no model at {model_dir} yet (pretrain stage)")
            continue
        zero_shot = out_dir / "zero_shot.json"
        if not zero_shot.is_file():
            t = time.perf_counter()
            model = tt_zoo.load(model_dir)
            candidates = retrieval_metrics.encode_candidates(model, reqa)
            write_json(zero_shot, {split_key(f): retrieval_metrics.evaluate_encoder(
                model, reqa, s.test, candidate_embeddings=candidates)
                for f, s in splits.items()})
            print(f"evaluate {name}: zero-shot in {time.perf_counter() - t:.0f} s", flush=True)
        for fraction, split in splits.items():
            path = out_dir / f"finetuned_{_file_key(fraction)}.json"
            if path.is_file():
                continue
            t = time.perf_counter()
            tf.keras.backend.clear_session()
            model = tt_zoo.load(model_dir)
            history = finetuning.finetune(
                model.keras_model, reqa, split, steps=budget.finetune_steps,
                batch_size=budget.finetune_batch_size,
                learning_rate=budget.finetune_learning_rate,
                eval_every=budget.finetune_eval_every, seed=budget.seed, progress=False)
            metrics = retrieval_metrics.evaluate_encoder(model, reqa, split.test)
            write_json(path, {"split": split_key(fraction), "num_train": len(split.train),
                               "num_validation": len(split.validation), "metrics": metrics,
                               "finetune": history})
            print(f"evaluate {name}: fine-tuned on {split_key(fraction)} in "
                  f"{time.perf_counter() - t:.0f} s: R@100 "
                  f"{100 * metrics['exact']['R@100']:.1f}", flush=True)


# The paper's numbers quoted in ../shared/DESIGN.md (ReQA SQuAD, full, 101,951 candidates, R@100
# after fine-tuning on the 1% and 80% splits); other cells of its tables are not quoted there.
PAPER_R100 = {
    "BM25": {"1%": 77.9, "5%": 77.9, "80%": 77.9},
    "none_512": {"1%": 0.5, "80%": 61.5},
    "mlm_512": {"1%": 3.9, "80%": 80.3},
    "ict_bfs_wlp_512": {"1%": 89.9, "80%": 97.5},
    "bow_mlp_ict_bfs_wlp_512": {"1%": 77.0, "80%": 88.5},
}
COLUMNS = ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR")
LABELS = {"none": "none", "mlm": "MLM", "ict": "ICT", "bfs": "BFS", "wlp": "WLP",
          "ict_bfs_wlp": "ICT+BFS+WLP", "crop": "crop", "span": "span", "qgen": "qgen"}


def label(pretraining: str) -> str:
    """A pretraining mix as the tables write it: "ict_bfs_wlp_span" -> "ICT+BFS+WLP+span"."""
    return LABELS.get(pretraining) or "+".join(LABELS[t] for t in pretraining.split("_"))


def _read_json(path: pathlib.Path):
    return json.loads(path.read_text()) if path.is_file() else None


def collect(cells: List[str], runs: pathlib.Path, budget: GridBudget, splits) -> dict:
    """Every measured number of the grid so far, as one JSON-ready dict."""
    from tt_zoo.serving import registry

    out = {"budget": dataclasses.asdict(budget), "splits": [split_key(f) for f in splits],
           "bm25": {}, "models": {}, "paper_r100": PAPER_R100}
    bm25 = _read_json(runs / "reproduce" / "bm25.json") or {}
    out["bm25"] = {k: {c: v[c] for c in COLUMNS} | {"num_queries": v["num_queries"],
                                                        "num_candidates": v["num_candidates"]}
                   for k, v in bm25.items()}
    for name, model_dir, result_dir in evaluated_models(cells, runs):
        variant = name.split(" ")[0]
        spec = registry.get_spec(variant)
        meta = _read_json(model_dir / "metadata.json") or {}
        row = {"variant": variant, "encoder": spec.encoder, "pretraining": spec.pretraining,
               "embedding_dim": spec.embedding_dim, "model_dir": str(model_dir),
               "train_steps": meta.get("train_steps"), "pairs_seen": meta.get("pairs_seen"),
               "train_wall_time_s": meta.get("train_wall_time_s"),
               "final_loss": meta.get("final_loss"), "zero_shot": {}, "finetuned": {}}
        # Open-domain QA answer recall (`benchmarks/pretrain_tasks_eval.py odqa`), if measured.
        row["odqa"] = _read_json(result_dir / "odqa.json")
        zero_shot = _read_json(result_dir / "zero_shot.json") or {}
        row["zero_shot"] = {k: v["exact"] for k, v in zero_shot.items()}
        for fraction in splits:
            tuned = _read_json(result_dir / f"finetuned_{_file_key(fraction)}.json")
            if tuned:
                row["finetuned"][split_key(fraction)] = {
                    **tuned["metrics"]["exact"], "steps_run": tuned["finetune"]["steps_run"],
                    "best_step": tuned["finetune"]["best_step"],
                    "seconds": round(tuned["finetune"]["seconds"], 1)}
        out["models"][name] = row
    return out


def _pct(metrics: Optional[dict], column: str) -> str:
    return "–" if not metrics or column not in metrics else f"{100 * metrics[column]:.1f}"


def _row_label(name: str, row: dict) -> str:
    encoder = "BoW-MLP" if row["encoder"] == "bow_mlp" else "Transformer"
    text = f"{encoder}, {label(row['pretraining'])}"
    if row["embedding_dim"] != 512:
        text += f", dim {row['embedding_dim']}"
    if name.endswith("(flagship)"):
        text += f" (flagship, {row['train_steps']:,} steps)"
    return text


def _budget_header(grid: dict) -> str:
    g = GridBudget(**grid["budget"])
    candidates = next((f"{b['num_candidates']:,} " for b in grid["bm25"].values()), "")
    return (f"Pretraining (every cell): {g.steps:,} steps x batch {g.batch_size} "
            f"({g.steps * g.batch_size:,} pairs seen), Adam {g.learning_rate:g} with 10% warm-up "
            f"then linear decay, documents of {g.document_length} tokens, pairs from Wikispeedia "
            f"({g.pairs_per_article} per article). Fine-tuning (scaled down from the paper's "
            f"Adam 5e-5, 2,000 steps, batch 512): Adam {g.finetune_learning_rate:g}, at most "
            f"{g.finetune_steps} steps x batch {g.finetune_batch_size}, early stopping on the "
            f"validation loss every {g.finetune_eval_every} steps (best weights restored). "
            f"Scores: ReQA-SQuAD(dev), the split's test questions against all {candidates}candidates, "
            "exact search, in %.")


def table_markdown(grid: dict, names: List[str], title: str, paper: bool) -> str:
    lines = [f"# {title}", "", _budget_header(grid), "",
             "Generated by `python recipes/reproduce.py --stages report` from "
             "`results/reproduce.json`; – marks a cell not run yet.", ""]
    if paper:
        lines += ["Paper R@100: Chang et al. 2020 on ReQA SQuAD (the full set, 101,951 "
                  "candidates, BERT-base towers pretrained 100K steps x 8,192 on TPUs), as "
                  "quoted in DESIGN.md: the 1% and 80% splits, BM25 once for all splits. Its "
                  "other cells are not quoted there, so they are not shown. Compare the shape "
                  "(the order of the rows), not the values: the scales differ by orders of "
                  "magnitude.", ""]
    for split in grid["splits"]:
        bm25 = grid["bm25"].get(split)
        n = f", {bm25['num_queries']:,} test questions" if bm25 else ""
        lines += [f"## Split {split} train (cold start){n}", ""]
        head = "| model | zero-shot R@100 | " + " | ".join(COLUMNS) + " |"
        if paper:
            head += " paper R@100 |"
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
        row = f"| BM25 | {_pct(bm25, 'R@100')} | " + " | ".join(_pct(bm25, c) for c in COLUMNS)
        if paper:
            row += f" | {PAPER_R100['BM25'].get(split, '–')}"
        lines.append(row + " |")
        for name in names:
            r = grid["models"].get(name)
            if r is None:
                continue
            tuned = r["finetuned"].get(split)
            row = (f"| {_row_label(name, r)} | {_pct(r['zero_shot'].get(split), 'R@100')} | "
                   + " | ".join(_pct(tuned, c) for c in COLUMNS))
            if paper:
                quoted = PAPER_R100.get(name, {}).get(split)
                row += f" | {quoted if quoted is not None else '–'}"
            lines.append(row + " |")
        lines.append("")
    return "\n".join(lines)


def plot(grid: dict, path: pathlib.Path) -> None:
    """R@100 by model and split (bars), and R@k curves on the 80% split."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from tt_zoo.atomic_io import open_for_replace

    names = [n for n, r in grid["models"].items() if r["zero_shot"]]
    settings = ["zero-shot"] + [f"fine-tuned {s}" for s in grid["splits"]]
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(19, 6.5),
                                       gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(settings)
    x = np.arange(len(names) + 1)
    for i, setting in enumerate(settings):
        values = []
        for name in names:
            r = grid["models"][name]
            m = (r["zero_shot"].get(grid["splits"][-1]) if i == 0
                 else r["finetuned"].get(grid["splits"][i - 1]))
            values.append(100 * m["R@100"] if m else np.nan)
        bm25 = grid["bm25"].get(grid["splits"][-1] if i == 0 else grid["splits"][i - 1])
        values.append(100 * bm25["R@100"] if bm25 else np.nan)
        bars.bar(x + (i - len(settings) / 2 + 0.5) * width, values, width, label=setting)
    labels = [re.sub(r" \(flagship, [\d,]+ steps\)", "\nflagship", _row_label(n, grid["models"][n]))
              .replace(", ", "\n").replace("ICT+BFS+WLP", "ICT+BFS\n+WLP") for n in names]
    labels.append("BM25")
    bars.set_xticks(x, labels, fontsize=6.5)
    bars.set_ylabel("R@100 (%)")
    bars.set_title("ReQA-SQuAD(dev) R@100 by model and split (zero-shot on the 80% split's "
                   "test questions)", fontsize=9)
    bars.legend(fontsize=8)
    ks = [int(c[2:]) for c in COLUMNS if c.startswith("R@")]
    split = grid["splits"][-1]
    colours = plt.cm.tab20(np.linspace(0, 1, 20))  # 12+ lines: the default cycle repeats at 10
    for i, name in enumerate(names):
        m = grid["models"][name]["finetuned"].get(split)
        if m:
            curves.plot(ks, [100 * m[f"R@{k}"] for k in ks], marker="o", color=colours[i % 20],
                        linestyle="--" if "flagship" in name else "-",
                        label=_row_label(name, grid["models"][name]))
    bm25 = grid["bm25"].get(split)
    if bm25:
        curves.plot(ks, [100 * bm25[f"R@{k}"] for k in ks], "k--", marker="s", label="BM25")
    curves.set_xscale("log")
    curves.set_xticks(ks, [str(k) for k in ks])
    curves.set_xlabel("k")
    curves.set_ylabel("R@k (%)")
    curves.set_title(f"R@k after fine-tuning on the {split} split", fontsize=9)
    curves.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # off the lines
    fig.tight_layout()
    with open_for_replace(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


TABLE3 = ("bow_mlp_none_512", "bow_mlp_ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_512 (flagship)",
          "none_512", "mlm_512", "ict_bfs_wlp_512", "ict_bfs_wlp_512 (flagship)")
TABLE5 = ("ict_512", "bfs_512", "wlp_512", "ict_bfs_wlp_128", "ict_bfs_wlp_256",
          "ict_bfs_wlp_512")


def stage_report(cells: List[str], args) -> None:
    grid = collect(list(CELLS), args.runs, args.budget, args.splits)
    args.results.mkdir(parents=True, exist_ok=True)
    write_json(args.results / "reproduce.json", grid)
    write_text(args.results / "table3.md", table_markdown(
        grid, list(TABLE3), "Table 3 at CPU scale: encoder x pretraining x split", paper=True))
    write_text(args.results / "table5.md", table_markdown(
        grid, list(TABLE5), "Table 5 at CPU scale: pretraining tasks and embedding dimension",
        paper=False))
    if any(r["zero_shot"] for r in grid["models"].values()):
        plot(grid, args.results / "reproduce.png")
    print(f"wrote {args.results}/reproduce.json, table3.md, table5.md, reproduce.png")


WIKISPEEDIA = ("Wikispeedia (SNAP; 4,598 articles of the 2007 Wikipedia for Schools, CC BY-SA), "
               "vocabulary learned from it (7,964 WordPiece tokens)")


def card_metrics(row: dict, bm25: dict) -> dict:
    """The measured tables of one model for its card: zero-shot and fine-tuned per split, BM25
    on the same test questions (%)."""
    tables = {}
    for split, metrics in row["zero_shot"].items():
        n = bm25[split]["num_queries"]
        where = f"test part of the {split} split ({n:,} questions, all candidates), exact search"
        tables[f"ReQA-SQuAD(dev) zero-shot, {where} (%)"] = {
            c: round(100 * metrics[c], 2) for c in COLUMNS}
        tuned = row["finetuned"].get(split)
        if tuned:
            tables[f"ReQA-SQuAD(dev) fine-tuned on the {split} split (a copy of these weights, "
                   f"{tuned['steps_run']} steps), {where} (%)"] = {
                c: round(100 * tuned[c], 2) for c in COLUMNS}
        tables[f"BM25, {where} (%)"] = {c: round(100 * bm25[split][c], 2) for c in COLUMNS}
    if row.get("odqa"):
        from tt_zoo.retrieval.odqa import card_tables  # noqa: PLC0415 (numpy only)

        tables.update(card_tables(row["odqa"]["sets"], row["odqa"]["num_passages"]))
    return tables


def provenance(row: dict, meta: dict) -> str:
    tower = ("one shared BoW-MLP tower (linear output, cosine / 0.05)" if row["encoder"] ==
             "bow_mlp" else "one shared tiny BERT tower (mean pooling, cosine / 0.05)")
    if row["pretraining"] == "none":
        return f"no pretraining: {tower} initialised (seed 0); vocabulary from {WIKISPEEDIA}"
    if row["pretraining"] == "mlm":
        data = "MLM examples (masked-LM pretraining of the encoder)"
    else:
        pairs = meta.get("pairs", {})
        data = (f"{label(row['pretraining'])} pairs ({pairs.get('num_pairs', 0):,}; "
                f"{pairs.get('make_pairs_config', {}).get('pairs_per_article')} per article)")
    budget = " (the reproduce grid's budget)" if row["variant"] in CELLS else ""
    warm = meta.get("warm_start")
    if warm:
        budget += (f", warm-started from a {warm.get('train_steps') or 0:,}-step run "
                   f"x {warm.get('batch_size')} (a new schedule)")
    return (f"{data} from {WIKISPEEDIA}; {tower}, {row['train_steps']:,} steps x "
            f"{meta.get('batch_size')} on CPU{budget}")


def stage_ship(cells: List[str], args) -> None:
    """Copies each fully evaluated grid model to saved_models/ (a shipped flagship stays: it is
    the longer run of the same variant), writes its measured numbers into its card, and lists
    it in tt_zoo/serving/shipped_models.json (which the registry reads) with its sha256 and the URL a
    release is to publish it at (`tt_zoo.serving.download.release_url`)."""
    from tt_zoo.serving import download, registry
    from tt_zoo.atomic_io import write_directory
    from tt_zoo.serving.export import METADATA_FILE, is_model_export, update_metadata

    grid = collect(cells, args.runs, args.budget, args.splits)
    shipped = json.loads(args.shipped.read_text()) if args.shipped.is_file() else {}
    for name, row in grid["models"].items():
        complete = (set(row["zero_shot"]) == set(grid["splits"]) == set(row["finetuned"]))
        if not complete:
            print(f"ship {name}: not fully evaluated yet")
            continue
        variant = row["variant"]
        flagship = name.endswith("(flagship)")
        if variant in FLAGSHIPS and not flagship and variant in shipped:
            print(f"ship {name}: saved_models/{variant} is its longer run (flagship); the "
                  "grid's equal-budget model stays in runs/")
            continue
        dest = args.saved_models / variant
        if not flagship:
            source = pathlib.Path(row["model_dir"])
            if dest.exists():
                current = _read_json(dest / METADATA_FILE) or {}
                if current.get("name") != variant:
                    sys.exit(f"ship {name}: {dest} exists and is not an export of {variant}; "
                             "move it away first")

            def copy(staging: pathlib.Path, source=source) -> None:
                shutil.copytree(source, staging, dirs_exist_ok=True)

            write_directory(dest, copy, is_replaceable=is_model_export, what="tt_zoo model export")
        meta = update_metadata(dest, metrics=card_metrics(row, grid["bm25"]))
        entry = {"kind": registry.get_spec(variant).kind, "artifact": variant,
                 "sha256": meta["sha256"],
                 "url": download.release_url(variant),
                 "document_length": meta["document_length"],
                 "query_length": meta["query_length"],
                 "recipe": dataclasses.asdict(registry.RecipeSettings(
                     batch_size=meta.get("batch_size") or args.budget.batch_size,
                     steps=meta.get("train_steps") or 0,
                     learning_rate=meta.get("learning_rate") or args.budget.learning_rate,
                     pairs_per_article=args.budget.pairs_per_article,
                     max_doc_tokens=args.budget.max_doc_tokens)),
                 "provenance": shipped.get(variant, {}).get("provenance") if flagship
                 else provenance(row, meta),
                 "metrics": {f"R@100 {kind} {split}": round(100 * m["R@100"], 2)
                             for kind, per_split in (("zero-shot", row["zero_shot"]),
                                                     ("fine-tuned", row["finetuned"]))
                             for split, m in per_split.items()}}
        if row.get("odqa"):
            entry["metrics"]["ODQA validation R@20"] = round(
                100 * row["odqa"]["sets"]["all"]["R@20"], 2)
        elif "ODQA validation R@20" in shipped.get(variant, {}).get("metrics", {}):
            entry["metrics"]["ODQA validation R@20"] = shipped[variant]["metrics"][
                "ODQA validation R@20"]
        shipped[variant] = entry
        print(f"ship {name}: saved_models/{variant} (sha256 {meta['sha256'][:12]}…)")
    write_json(args.shipped, shipped, indent=2, sort_keys=True)
    print("pin the new models' outputs with `python tests/golden/regenerate.py`, then commit "
          f"saved_models/, {args.shipped.name}, tests/golden/ and the README together (and "
          "publish saved_models/ at the release URL when releases are published)")
    if args.readme.is_file():
        update_readme(args.readme, shipped_models_markdown(shipped, grid, args.saved_models))


README_BEGIN = "<!-- shipped-models:begin (generated by recipes/reproduce.py --stages ship) -->"
README_END = "<!-- shipped-models:end -->"


def _directory_mib(path: pathlib.Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def shipped_models_markdown(shipped: dict, grid: dict, saved_models: pathlib.Path) -> str:
    """The README's model list: every shipped two-tower model with its measured R@100 (%)
    (late-interaction and term-weight models have their own tables, `tt-zoo ship`)."""
    from tt_zoo.serving import registry

    splits = grid["splits"]
    head = ("| name | tower | pretraining | zero-shot R@100 | "
            + " | ".join(f"fine-tuned {s} R@100" for s in splits) + " | ODQA top-20 | MiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    two_tower = [n for n in shipped if registry.get_spec(n).kind == registry.TWO_TOWER]
    for name in sorted(two_tower, key=lambda n: (n.startswith("bow"), n)):
        entry = shipped[name]
        metrics = entry.get("metrics", {})
        spec = registry.get_spec(name)
        tower = "BoW-MLP" if spec.encoder == "bow_mlp" else f"{spec.tower_size} BERT"
        steps = entry.get("recipe", {}).get("steps", 0)
        pretraining = label(spec.pretraining) + (f", {steps:,} steps" if steps else "")
        zero = metrics.get(f"R@100 zero-shot {splits[-1]}")
        cells = [f"{metrics[f'R@100 fine-tuned {s}']:.1f}" if f"R@100 fine-tuned {s}" in metrics
                 else "–" for s in splits]
        odqa = metrics.get("ODQA validation R@20")
        lines.append(f"| `{name}` | {tower}, dim {spec.embedding_dim} | {pretraining} | "
                     f"{'–' if zero is None else f'{zero:.1f}'} | " + " | ".join(cells)
                     + f" | {'–' if odqa is None else f'{odqa:.1f}'}"
                     + f" | {_directory_mib(saved_models / entry['artifact']):.1f} |")
    bm25 = grid["bm25"]
    if bm25:
        odqa_bm25 = (_read_json(pathlib.Path("results") / "odqa.json") or {}).get("bm25", {})
        odqa_bm25 = odqa_bm25.get("all", {}).get("R@20")
        lines.append(f"| BM25 | – | – | {100 * bm25[splits[-1]]['R@100']:.1f} | "
                     + " | ".join(f"{100 * bm25[s]['R@100']:.1f}" for s in splits)
                     + f" | {'–' if odqa_bm25 is None else f'{100 * odqa_bm25:.1f}'} | – |")
    return "\n".join(lines)


def update_readme(readme: pathlib.Path, table: str) -> None:
    """Replaces the text between the README's shipped-models markers with `table`."""
    text = readme.read_text(encoding="utf-8")
    if README_BEGIN not in text or README_END not in text:
        print(f"{readme} has no shipped-models markers; its model list is left as it is")
        return
    head, rest = text.split(README_BEGIN, 1)
    write_text(readme, head + README_BEGIN + "\n" + table + "\n" + README_END
               + rest.split(README_END, 1)[1])
    print(f"updated the model list in {readme}")


def _budget_item(item: str):
    """FIELD=VALUE of the grid budget, the value cast to the field's type."""
    name, sep, value = item.partition("=")
    types = {f.name: f.type for f in dataclasses.fields(GridBudget)}
    if not sep or name not in types:
        raise ValueError(f"expected FIELD=VALUE with FIELD one of {', '.join(types)} "
                         f"(got {item!r})")
    return name, (float if types[name] in ("float", float) else int)(value)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cells", default=",".join(CELLS),
                   help=f"comma-separated subset of: {', '.join(CELLS)}")
    p.add_argument("--stages", default="data,pretrain,evaluate,report",
                   help=f"comma-separated subset of: {', '.join(STAGES)} (default: all but ship)")
    p.add_argument("--data", type=pathlib.Path,
                   default=default_data_dir(),
                   help="the data folder ($TT_ZOO_DATA): wikispeedia/, squad/dev-v1.1.json")
    p.add_argument("--runs", type=pathlib.Path, default=pathlib.Path("runs"),
                   help="where pairs, checkpoints, models and cell results go")
    p.add_argument("--vocab", type=pathlib.Path, default=None,
                   help="the models' vocabulary (default: the project's saved_models/vocab/"
                        "vocab.txt in a git clone, else $TT_ZOO_DATA/bert-vocab/vocab.txt)")
    p.add_argument("--results", type=pathlib.Path, default=pathlib.Path("results"),
                   help="where the report stage writes the tables, JSON and plots")
    p.add_argument("--saved-models", type=pathlib.Path, default=None,
                   help="where the ship stage puts the models and committed models are found "
                        "(default: the git clone's saved_models/; needed for --stages ship "
                        "outside a clone)")
    p.add_argument("--shipped", type=pathlib.Path, default=None,
                   help="the shipped-model list the ship stage updates (default: the "
                        "registry's, in a git clone)")
    p.add_argument("--readme", type=pathlib.Path, default=None,
                   help="the README whose shipped-model list the ship stage regenerates "
                        "(default: the git clone's README.md)")
    p.add_argument("--squad", type=pathlib.Path,
                   help="SQuAD v1.1 JSON of the ReQA evaluation ($TT_ZOO_DATA/squad/dev-v1.1.json)")
    p.add_argument("--splits", default=",".join(f"{f:g}" for f in SPLITS),
                   help="cold-start training fractions")
    p.add_argument("--budget", action="append", default=[], metavar="FIELD=VALUE",
                   help="change one field of the grid budget (e.g. steps=2000), for a bigger "
                        f"machine or a smoke test; fields: "
                        f"{', '.join(f.name for f in dataclasses.fields(GridBudget))}")


def parse_args(argv=None):
    p = parsing.command_parser("reproduce", __doc__, add_arguments)
    args = p.parse_args(argv)
    from tt_zoo.serving.registry import REGISTRY
    unknown = [c for c in args.cells.split(",") if c not in REGISTRY]
    if unknown:
        p.error(f"--cells: unknown {', '.join(unknown)}; the grid has {', '.join(CELLS)} (any "
                "registered variant may be evaluated and shipped once its model is in "
                "RUNS/reproduce/VARIANT/model)")
    bad = [s for s in args.stages.split(",") if s not in STAGES]
    if bad:
        p.error(f"--stages: unknown {', '.join(bad)}; choose from {', '.join(STAGES)}")
    args.cell_list = [c for c in CELLS if c in args.cells.split(",")] + [
        c for c in args.cells.split(",") if c not in CELLS]
    try:
        args.budget = dataclasses.replace(GRID, **dict(_budget_item(item)
                                                       for item in args.budget))
    except (TypeError, ValueError) as e:
        p.error(f"--budget: {e}")
    try:
        args.splits = tuple(float(f) for f in args.splits.split(","))
    except ValueError:
        p.error(f"--splits: expected comma-separated fractions such as 0.01,0.05,0.8 "
                f"(got {args.splits!r})")
    if not all(0 < f < 1 for f in args.splits):
        p.error(f"--splits: every fraction must be between 0 and 1 (got {args.splits})")
    args.squad = args.squad or args.data / "squad" / "dev-v1.1.json"
    if "evaluate" in args.stages.split(",") and not args.squad.is_file():
        parsing.exit_missing(p, f"--squad: {args.squad} does not exist (set TT_ZOO_DATA or "
                                "pass --squad PATH)")
    args.stage_list = args.stages.split(",")
    args.vocab = args.vocab or pathlib.Path(default_vocab_path())
    root = clone_root()  # the clone's files are the defaults; an installed package has none
    if root is not None:
        args.saved_models = args.saved_models or root / "saved_models"
        args.shipped = args.shipped or SHIPPED_FILE
        args.readme = args.readme or root / "README.md"
    elif "ship" in args.stage_list and None in (args.saved_models, args.shipped, args.readme):
        p.error("--stages ship updates a git clone's saved_models/, shipped-model list and "
                "README; tt_zoo is not running from a clone: pass --saved-models, --shipped "
                "and --readme")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if "data" in args.stage_list:
        stage_data(args.cell_list, args)
    if "pretrain" in args.stage_list:
        stage_pretrain(args.cell_list, args)
    if "evaluate" in args.stage_list:
        stage_evaluate(args.cell_list, args)
    if "report" in args.stage_list:
        stage_report(args.cell_list, args)
    if "ship" in args.stage_list:
        stage_ship(args.cell_list, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
