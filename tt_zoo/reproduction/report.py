"""The report stage of `tt-zoo reproduce`: the grid's measured numbers as one JSON, Tables 3 and 5
in Markdown beside the paper's quoted numbers, and a plot.

Chang et al. 2020, Table 3 (encoder x pretraining x split) and Table 5 (pretraining tasks and
embedding dimension), at CPU scale: results/reproduce.json (`collect`), results/table3.md and
results/table5.md (`table_markdown`), results/reproduce.png (`plot`), from the cells' result
files (`tt_zoo.reproduction.grid`), whatever is done so far.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
from typing import List, Optional, Sequence

from tt_zoo.atomic_io import write_text
from tt_zoo.evaluation.tables import COLUMNS
from tt_zoo.reproduction.grid import (CELLS, FLAGSHIP_SUFFIX, bm25_file, evaluated_models,
                                      read_card, result_file, split_key)
from tt_zoo.reproduction.config import Budget
from tt_zoo.reproduction.runner import read_json, save_figure, write_report

# The paper's numbers quoted in ../shared/DESIGN.md (ReQA SQuAD, full, 101,951 candidates, R@100
# after fine-tuning on the 1% and 80% splits); other cells of its tables are not quoted there.
PAPER_R100 = {
    "BM25": {"1%": 77.9, "5%": 77.9, "80%": 77.9},
    "none_512": {"1%": 0.5, "80%": 61.5},
    "mlm_512": {"1%": 3.9, "80%": 80.3},
    "ict_bfs_wlp_512": {"1%": 89.9, "80%": 97.5},
    "bow_mlp_ict_bfs_wlp_512": {"1%": 77.0, "80%": 88.5},
}
LABELS = {"none": "none", "mlm": "MLM", "ict": "ICT", "bfs": "BFS", "wlp": "WLP",
          "ict_bfs_wlp": "ICT+BFS+WLP", "crop": "crop", "span": "span", "qgen": "qgen"}
TABLE3 = ("bow_mlp_none_512", "bow_mlp_ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_512 (flagship)",
          "none_512", "mlm_512", "ict_bfs_wlp_512", "ict_bfs_wlp_512 (flagship)")
TABLE5 = ("ict_512", "bfs_512", "wlp_512", "ict_bfs_wlp_128", "ict_bfs_wlp_256",
          "ict_bfs_wlp_512")


def label(pretraining: str) -> str:
    """A pretraining mix as the tables write it: "ict_bfs_wlp_span" -> "ICT+BFS+WLP+span"."""
    return LABELS.get(pretraining) or "+".join(LABELS[t] for t in pretraining.split("_"))


def collect(cells: Sequence[str], runs: pathlib.Path, budget: Budget, splits) -> dict:
    """Every measured number of the grid so far, as one JSON-ready dict."""
    from tt_zoo.zoo import registry

    out = {"budget": dataclasses.asdict(budget), "splits": [split_key(f) for f in splits],
           "bm25": {}, "models": {}, "paper_r100": PAPER_R100}
    bm25 = read_json(bm25_file(runs)) or {}
    out["bm25"] = {k: {c: v[c] for c in COLUMNS} | {"num_queries": v["num_queries"],
                                                        "num_candidates": v["num_candidates"]}
                   for k, v in bm25.items()}
    for name, model_dir, result_dir in evaluated_models(cells, runs):
        variant = name.split(" ")[0]
        spec = registry.get_spec(variant)
        card = read_card(model_dir)
        row = {"variant": variant, "encoder": spec.encoder, "pretraining": spec.pretraining,
               "embedding_dim": spec.embedding_dim, "model_dir": str(model_dir),
               "train_steps": card.training.train_steps, "pairs_seen": card.training.pairs_seen,
               "train_wall_time_s": card.result.train_wall_time_s,
               "final_loss": card.result.final_loss, "zero_shot": {}, "finetuned": {}}
        # Open-domain QA answer recall (`benchmarks/pretrain_tasks_eval.py odqa`), if measured.
        row["odqa"] = read_json(result_dir / "odqa.json")
        zero_shot = read_json(result_file(result_dir)) or {}
        row["zero_shot"] = {k: v["exact"] for k, v in zero_shot.items()}
        for fraction in splits:
            tuned = read_json(result_file(result_dir, fraction))
            if tuned:
                row["finetuned"][split_key(fraction)] = {
                    **tuned["metrics"]["exact"], "steps_run": tuned["finetune"]["steps_run"],
                    "best_step": tuned["finetune"]["best_step"],
                    "seconds": round(tuned["finetune"]["seconds"], 1)}
        out["models"][name] = row
    return out


def _pct(metrics: Optional[dict], column: str) -> str:
    return "–" if not metrics or column not in metrics else f"{100 * metrics[column]:.1f}"


def row_label(name: str, row: dict) -> str:
    """A model's row as the tables name it: "Transformer, ICT+BFS+WLP, dim 128"."""
    encoder = "BoW-MLP" if row["encoder"] == "bow_mlp" else "Transformer"
    text = f"{encoder}, {label(row['pretraining'])}"
    if row["embedding_dim"] != 512:
        text += f", dim {row['embedding_dim']}"
    if name.endswith(FLAGSHIP_SUFFIX):
        text += f" (flagship, {row['train_steps']:,} steps)"
    return text


def _budget_header(grid: dict) -> str:
    g = Budget(**grid["budget"])
    candidates = next((f"{b['num_candidates']:,} " for b in grid["bm25"].values()), "")
    return (f"Pretraining (every cell): {g.steps:,} steps x batch {g.batch_size} "
            f"({g.steps * g.batch_size:,} pairs seen), Adam {g.learning_rate:g} with 10% warm-up "
            f"then linear decay, documents of {g.document_length} tokens, pairs from Wikispeedia "
            f"({g.pairs_per_article} per article). Fine-tuning (scaled down from the paper's "
            f"Adam 5e-5, 2,000 steps, batch 512): Adam {g.finetune_learning_rate:g}, at most "
            f"{g.finetune_steps} steps x batch {g.finetune_batch_size}, early stopping on the "
            f"validation loss every {g.finetune_eval_every} steps (best weights restored). "
            f"Scores: ReQA-SQuAD(dev), the split's test questions against all "
            f"{candidates}candidates, exact search, in %.")


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
            row = (f"| {row_label(name, r)} | {_pct(r['zero_shot'].get(split), 'R@100')} | "
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
    labels = [re.sub(r" \(flagship, [\d,]+ steps\)", "\nflagship", row_label(n, grid["models"][n]))
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
                        label=row_label(name, grid["models"][name]))
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
    save_figure(fig, path, dpi=110)


def stage_report(config) -> None:
    """results/reproduce.json, table3.md, table5.md and reproduce.png from every cell of the
    grid done so far (whichever --cells this run was given)."""
    write_results(collect(list(CELLS), config.runs, config.budget, config.splits),
                  config.results)


def write_results(grid: dict, results: pathlib.Path) -> None:
    """RESULTS/reproduce.json (`grid`, `collect`'s), table3.md, table5.md and reproduce.png
    (once a model has zero-shot scores): the report rendered from the grid's JSON alone."""
    plotted = any(r["zero_shot"] for r in grid["models"].values())
    write_report(results / "reproduce", grid,
                 plot=functools.partial(plot, grid) if plotted else None)
    write_text(results / "table3.md", table_markdown(
        grid, list(TABLE3), "Table 3 at CPU scale: encoder x pretraining x split", paper=True))
    write_text(results / "table5.md", table_markdown(
        grid, list(TABLE5), "Table 5 at CPU scale: pretraining tasks and embedding dimension",
        paper=False))
    print(f"wrote {results}/reproduce.json, table3.md, table5.md, reproduce.png")
