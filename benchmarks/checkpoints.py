"""results/checkpoints.{md,json}: the zoo started from a public checkpoint (all-MiniLM-L6-v2),
side by side with BM25, on ReQA-SQuAD(dev), ODQA answer recall and open-domain ReQA.

Rows: BM25; every --model by exact search (MiniLM as imported, MiniLM after the tasks or
multi-task, the static BoW distilled from it and trained on, ...); RRF and convex fusion of
BM25 with each (`benchmarks/fusion.py`'s rows, the convex weight chosen on questions not
reported). A second table gives each model's cost: parameters, training CPU minutes (its card)
and documents/s encoding 100-word Wikispeedia passages with their titles (measured here, median
of --speed-runs runs, one model after the other in this process).

MiniLM's training pairs include NQ and SQuAD questions (its card): every MiniLM-derived number
on these question sets is a *supervised start*, not zero-shot. A model trained here on the
ReQA split's training questions (`tt-zoo multitask --task reqa`) is read on the split's test
questions (--split-fraction 0.8 --reqa-choose-on validation).

  python -m benchmarks.checkpoints --split-fraction 0.8 --reqa-choose-on validation \\
      --model minilm_l6_384 --model runs/exports/multitask_minilm_l6_384 \\
      --skip minilm_l6_384@open_domain_reqa --skip multitask_minilm_l6_384@open_domain_reqa
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time

from benchmarks import arguments, fusion, text_rows

NAME = "checkpoints"
SPEED_PASSAGES = 512  # 100-word Wikispeedia passages encoded per speed run


def parse_args(argv=None):
    p = arguments.parser(__doc__)
    fusion.add_fusion_arguments(p)
    p.add_argument("--speed-runs", type=int, default=3,
                   help="timed encodings of the speed passages per model (default: %(default)s)")
    p.add_argument("--record", action="store_true",
                   help="write each registered model's tables into its card (an imported "
                        "checkpoint's: tt_zoo/zoo/imported_measured.json; a shipped export's: "
                        "tt_zoo.zoo.shipping.record_results)")
    p.add_argument("--record-from", type=pathlib.Path, default=None, metavar="RESULTS.json",
                   help="measure nothing: record the tables of an earlier run's results file "
                        "(under results/) into the cards, as --record does")
    fusion.add_fuse_with(p)
    text_rows.add_arguments(p)
    args = text_rows.finish_arguments(p, p.parse_args(argv), NAME)
    fusion.check_fuse_with(p, args)
    fusion.check_fusion_arguments(p, args)
    if args.speed_runs < 1:
        p.error(f"--speed-runs must be at least 1 (got {args.speed_runs})")
    text_rows.require_reqa_with_open_domain(p, args.benchmarks, "--benchmarks", "weight")
    return args


def speed_passages(articles, n: int = SPEED_PASSAGES):
    """The first `n` 100-word passages (titles, texts) of the article source, in order."""
    from tt_zoo.evaluation.odqa import passage_collection

    collection = passage_collection(articles, 100, limit_articles=max(1, n // 20))
    if len(collection) < n:
        collection = passage_collection(articles, 100)
    return collection.titles[:n], collection.texts[:n]


def encoding_speed(model, titles, texts, runs: int) -> dict:
    """Documents/s of ``model.encode_documents`` on the passages: the median of `runs` timed
    encodings after one untimed warm-up (tracing)."""
    model.encode_documents(texts[:64], titles=titles[:64], show_progress_bar=False)
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        model.encode_documents(texts, titles=titles, show_progress_bar=False)
        rates.append(len(texts) / (time.perf_counter() - start))
    return {"docs_per_s": statistics.median(rates), "runs": [round(r, 1) for r in rates],
            "passages": len(texts)}


def cost(model) -> dict:
    """What a model costs: parameters, training CPU minutes of its card (this model's own run,
    not its base's), what it was trained on."""
    card = model.card
    cpu, wall = card.result.train_cpu_seconds, card.result.train_wall_time_s
    return {"parameters": card.architecture.parameters,
            "train_cpu_minutes": None if cpu is None else round(cpu / 60, 1),
            "train_wall_minutes": None if wall is None else round(wall / 60, 1),
            "pretraining": card.training.pretraining,
            "base_model": getattr(card.lineage.base_model, "name", None)}


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.record_from is not None:
        import json

        out = json.loads(args.record_from.read_text(encoding="utf-8"))
        record(out, args.record_from)
        return out
    out = text_rows.run(args, NAME, fusion.fusion_rows, report)
    import tt_zoo
    from tt_zoo.evaluation.tables import row_labels

    titles, texts = speed_passages(args.articles)
    out["costs"] = {}
    loaded = [tt_zoo.load(given) for given in args.model]
    for label, model in zip(row_labels([(g, m.name) for g, m in zip(args.model, loaded)]),
                            loaded):
        out["costs"][label] = {**cost(model),
                               **encoding_speed(model, titles, texts, args.speed_runs)}
        print(f"  {label}: {out['costs'][label]['docs_per_s']:,.0f} docs/s", file=sys.stderr)
    text_rows.write(out, args.output, report)
    print(report(out))
    if args.record and not args.smoke:
        record(out, args.output.with_suffix(".json"))
    return out


def record(out: dict, results: pathlib.Path) -> None:
    """Each model's rows (its own and its fusion rows, with BM25's) into its card: an imported
    checkpoint's through `tt_zoo.zoo.imported.record_tables` ("supervised start"), a shipped
    export's through `tt_zoo.zoo.shipping.record_results`; other models are not recorded."""
    from tt_zoo.zoo import imported, registry, shipping

    relative = str(results.resolve().relative_to(text_rows.REPO))
    # One source per results file: recording one run (e.g. the ODQA columns alone) leaves the
    # tables another run's file gave.
    source = f"{out['generator']}: {relative}"
    for name in out["costs"]:
        spec = registry.REGISTRY.get(name)
        if spec is not None and spec.imported is not None:
            # Its own rows and its fusions only ("static_minilm_l6_384" holds the name too).
            tables = shipping.benchmark_tables(
                out, lambda label: label == name or label.endswith(f", {name})"),
                regime=f"as imported ({imported.SUPERVISED_START})")
            imported.record_tables(name, tables, source=source, results=relative,
                                   summary=shipping.headline_numbers(out, name,
                                                                     own_row_only=True))
        elif spec is not None and spec.shipped:
            shipping.record_results(name, out, rows=name, results_path=relative)


def report(out: dict) -> str:
    s = out["settings"]
    lines = text_rows.report_head(out, NAME, "Starting from a public checkpoint (all-MiniLM-L6-v2)", (
        "Rows: BM25 (bm25s); each model by exact inner-product search; RRF (rrf_k "
        f"{s['rrf_k']:g}) and convex fusion w * minmax(BM25) + (1 - w) * minmax(model) of "
        f"each searcher's top {s['depth']}{fusion.filled(s)}, w chosen on questions not "
        "reported ("
        f"{text_rows.chosen_on_text(s)}). **Supervised start**: all-MiniLM-L6-v2 was trained on "
        "about 1B sentence pairs that include NQ and SQuAD questions, so every MiniLM-derived "
        "row (the static BoW distilled from it included) is not zero-shot on these question "
        "sets."))
    costs = out.get("costs") or {}
    if costs:
        lines += ["## Cost of each model", "",
                  f"Documents/s: `encode_documents` on the first {next(iter(costs.values()))['passages']:,} "
                  "100-word Wikispeedia passages with their titles, float32, median of the runs "
                  "shown (one model after the other in one process). Training minutes: the "
                  "model's own training run (its card), not its base's: CPU minutes where the "
                  "card records them, else wall minutes on this 2-core machine (shared with "
                  "other jobs while they ran).", "",
                  "| model | parameters | pretraining | train CPU min | train wall min | docs/s "
                  "| runs |", "|---|---|---|---|---|---|---|"]
        for name, c in costs.items():
            cpu, wall = c["train_cpu_minutes"], c.get("train_wall_minutes")
            lines.append(f"| {name} | {c['parameters'] or 0:,} | {c['pretraining'] or '–'} | "
                         f"{'–' if cpu is None else f'{cpu:,.1f}'} | "
                         f"{'–' if wall is None else f'{wall:,.1f}'} | {c['docs_per_s']:,.0f} | "
                         + ", ".join(f"{r:,.0f}" for r in c["runs"]) + " |")
        lines.append("")
    lines += text_rows.tables(out["benchmarks"], out["results"], out["ks"])
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
