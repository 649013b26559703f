"""results/pretrain_tasks.{md,json,png} from the cells `benchmarks/pretrain_tasks.py` ran
(written through the shared grid runner, `tt_zoo.reproduction.runner`)."""

from __future__ import annotations

import functools
import pathlib

from tt_zoo.reproduction import runner
from tt_zoo.reproduction.runner import read_json, save_figure

from benchmarks import arguments

REPO = arguments.REPO
ODQA_KS = ("R@1", "R@5", "R@20", "R@100")


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _baselines() -> dict:
    """BM25's rows, measured by the same benchmarks: results/odqa.json, results/open_domain.json
    and ReQA over all questions (`pretrain_tasks_eval.py bm25_reqa`, cached in runs/grid/)."""
    out = {}
    reqa = read_json(REPO / "runs" / "grid" / "bm25_reqa.json")
    if reqa is not None:
        out["reqa"] = reqa
    odqa = read_json(REPO / "results" / "odqa.json")
    if odqa is not None:
        out["odqa"] = odqa.get("bm25", {})
    open_domain = read_json(REPO / "results" / "open_domain.json")
    if open_domain is not None:
        out["open_domain_reqa"] = open_domain["bm25"]  # R@k at its top
    return out


def _odqa(result: dict, split: str = "all") -> dict:
    """One question set's recall: ``split`` of a cell's ``{"sets": ...}`` or of BM25's row."""
    result = result or {}
    return result.get("sets", result).get(split, {})


def format_report(rows, baselines) -> str:
    lines = ["# Pretraining tasks past the paper, side by side (issue 22)", "",
             "Each cell pretrains one tower from random initialisation on one pair source (or a "
             "mixture: each pair draws its task uniformly) made from Wikispeedia (128 pairs a "
             "page, passages of at most 96 words), batch and steps as given, Adam 1e-3 with 10% "
             "warm-up and linear decay, one shared tower, cosine / 0.05. Training CPU minutes are "
             "the pretraining process's own CPU time (both cores, evaluations excluded). "
             "Zero-shot everywhere:", "",
             "- **ODQA**: top-k answer recall on the validation questions (WebQuestions val + "
             "CuratedTREC train, those whose answer occurs in the collection) over Wikispeedia "
             "cut into 100-word passages with titles (`tt_zoo.evaluation.odqa`);",
             "- **ReQA**: ReQA-SQuAD(dev), all 10,570 questions against all 10,255 candidates;",
             "- **open-domain ReQA**: the same questions against 578K candidates (ReQA's + "
             "Wikispeedia's), for the cells named (4-5 min a BoW-MLP, ~23 min a tiny BERT "
             "here; – = not measured).", "",
             "A warm-started cell continues from the named cell's export with its own schedule "
             "(warm-up and decay again); its CPU minutes are the continuation's only, so its "
             "total is the sum with the named cell's.", "",
             "Vocabulary: the shipped 7,964-token WordPiece vocabulary (saved_models/vocab) "
             "unless the row names another: vocab32k, 32K tokens learned from the same text; "
             "bert-vocab, BERT's uncased 30,522 ($TT_ZOO_DATA/bert-vocab; four cells took it "
             "by mistake when run from a copy of the code outside the git clone, and are kept as "
             "measured).", "",
             "| tower | pretraining | steps x batch | warm start | train CPU min | ODQA R@1 | "
             "R@5 | R@20 | R@100 | ReQA R@1 | ReQA R@100 | open-domain ReQA R@100 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    bm25_odqa = _odqa(baselines.get("odqa"))
    if bm25_odqa:
        lines.append("| BM25 | – | – | – | – | " + " | ".join(_pct(bm25_odqa.get(k))
                                                             for k in ODQA_KS)
                     + f" | {_pct(baselines.get('reqa', {}).get('R@1'))}"
                     + f" | {_pct(baselines.get('reqa', {}).get('R@100'))} | "
                     + _pct(baselines.get("open_domain_reqa", {}).get("R@100")) + " |")
    for r in rows:
        o = _odqa(r.get("odqa"))
        lines.append(
            f"| {'BoW-MLP' if r['tower'] == 'bow_mlp' else 'tiny BERT'} | {r['label']} | "
            f"{r['steps']:,} x {r['batch']} | {r['warm_start'] or '–'} | "
            f"{r['train_cpu_minutes']:.1f} | " + " | ".join(_pct(o.get(k)) for k in ODQA_KS)
            + f" | {_pct(r['reqa'].get('R@1'))} | {_pct(r['reqa'].get('R@100'))} | "
            f"{_pct((r.get('open_domain_reqa') or {}).get('R@100'))} |")
    return "\n".join(lines) + "\n"


def pair_stats_of(pairs: pathlib.Path):
    """Table 1's statistics of the pair set in folder `pairs` (its stats.json), per task: pairs,
    tokens, average query and document tokens, skipped slots; None when the set is gone. A
    cell's row keeps them (``pair_stats``), so the report outlives the pair set."""
    stats = read_json(pairs / "stats.json")
    if stats is None:
        return None
    counters = stats.get("generator_counters") or {}
    return {"token_unit": stats.get("token_unit", "?"), "tasks": {
        task: {"num_pairs": t["num_pairs"], "num_tokens": t["num_tokens"],
               "avg_query_tokens": t["avg_query_tokens"], "avg_doc_tokens": t["avg_doc_tokens"],
               "skipped": sum(v for k, v in counters.items() if k.startswith(f"{task}_skipped"))}
        for task, t in stats["tasks"].items()}}


def pair_statistics(rows) -> str:
    """Table 1 of Chang et al. 2020 for each pair set the cells trained on, as a row of a cell
    on that set recorded it (`pair_stats_of`); a set no row recorded gets no line."""
    lines = ["", "Pair sets (Table 1's statistics; `recipes/make_pairs.py --pairs-per-article "
             "128 --max-doc-tokens 96`; tokens are whitespace words, or WordPiece tokens of the "
             "shipped 8K vocabulary where the unit says so):",
             "", "| pair set | task | #pairs | #tokens | unit | avg query tokens | avg doc tokens | "
             "skipped slots |", "|---|---|---|---|---|---|---|---|"]
    recorded = {}
    for row in rows:
        if row.get("pair_stats") is not None:
            recorded.setdefault(row.get("pair_set", row["tasks"]), row["pair_stats"])
    for tasks in dict.fromkeys(r.get("pair_set", r["tasks"]) for r in rows):
        stats = recorded.get(tasks)
        if stats is None:
            continue
        for task, t in stats["tasks"].items():
            lines.append(f"| {tasks} | {task} | {t['num_pairs']:,} | {t['num_tokens']:,} | "
                         f"{stats['token_unit']} | {t['avg_query_tokens']:.1f} | "
                         f"{t['avg_doc_tokens']:.1f} | {t['skipped']:,} |")
    return "\n".join(lines) + "\n"


def plot(rows, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    final_cpu = {r["cell"]: r["curve"][-1]["train_cpu_seconds"] for r in rows}
    for r in rows:
        points = r["curve"]
        label = f"{'BoW-MLP' if r['tower'] == 'bow_mlp' else 'BERT'} {r['label']}"
        # A warm start's curve goes on from its source cell's CPU time (cumulative compute).
        offset = final_cpu.get(r["warm_start"], 0.0) if r["warm_start"] else 0.0
        if r["warm_start"]:
            label += f", {r['steps']:,} more steps (warm start)"
        axes[0].plot([(offset + p["train_cpu_seconds"]) / 60 for p in points],
                     [100 * p["R@100"] for p in points], marker="o", label=label)
    axes[0].set_xlabel("training CPU minutes")
    axes[0].set_ylabel("ReQA R@100 (2,000 questions, zero-shot)")
    axes[0].set_title("learning curves")
    axes[0].legend(fontsize=7)
    names = [f"{'BoW' if r['tower'] == 'bow_mlp' else 'BERT'} {r['label']}\n"
             f"{r['steps']}x{r['batch']}" + (" more (warm start)" if r["warm_start"] else "")
             for r in rows]
    values = [100 * _odqa(r.get("odqa")).get("R@20", 0) for r in rows]
    axes[1].barh(range(len(rows)), values)
    axes[1].set_yticks(range(len(rows)), names, fontsize=7)
    axes[1].set_xlabel("ODQA validation top-20 answer recall (%)")
    bm25 = _odqa(_baselines().get("odqa")).get("R@20")
    if bm25:
        axes[1].axvline(100 * bm25, color="black", linestyle="--", label="BM25")
        axes[1].legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def write_report(rows, output: pathlib.Path) -> None:
    """OUTPUT.json (the rows and BM25's), OUTPUT.md and OUTPUT.png."""
    baselines = _baselines()
    runner.write_report(output, {"cells": rows, "baselines": baselines},
                format_report(rows, baselines) + pair_statistics(rows)
                + f"\n![pretraining tasks]({output.name}.png)\n",
                functools.partial(plot, rows))
    print(format_report(rows, baselines))
