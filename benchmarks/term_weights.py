"""results/term_weights.{md,json}: HDCT-weighted BM25 (issue 23, item 3) beside plain BM25 and the
single-vector flagships, on ReQA-SQuAD(dev), open-domain ReQA and ODQA answer recall.

A `TermWeightModel` export (`tt-zoo train-term-weights`) weights every document of a benchmark
(`tt_zoo.retrieval.term_weighting.weigh_corpus`, cached under runs/term_weights_cache): an ODQA
passage as (title, passage); a ReQA candidate by its passage, each distinct passage once (the
sentence written before it in the BM25 text is then an occurrence the weighting did not read,
`BM25Retriever(unread=...)`), or with --reqa-documents candidate as (sentence, passage), each
candidate its own weights (a model trained on ReQA's questions reads the candidates so).
bm25s indexes the pseudo term frequencies round(N sqrt(y)) (Dai & Callan 2020, Sec. 3.3). Rows
per benchmark:

* BM25 and each dense model (`text_rows`);
* HDCT-weighted BM25 with bm25s's k1 1.5, b 0.75, unread occurrences plain;
* HDCT-weighted BM25 with k1 and `unread` chosen on validation questions that are not reported
  (ReQA: the 5% cold-start split's training questions, by MRR; ODQA: webquestions-trainmodel,
  by R@20; open-domain ReQA takes ReQA's): pseudo tfs near N saturate BM25's tf at k1 1.5, and
  DeepCT (Dai & Callan 2019) tuned k1 for its weighted index too;
* convex fusions (`tt_zoo.retrieval.fusion`) of the chosen weighted BM25 with plain BM25 and
  with the --partner dense model, each weight chosen on the same validation questions.

  python -m benchmarks.term_weights --term-model saved_models/hdct_ict_bfs_wlp_crop_span_qgen
  python -m benchmarks.term_weights --term-model PATH --limit-questions 100 --limit-articles 20
"""

from __future__ import annotations

import sys
import time

from benchmarks import arguments, text_rows

NAME = "term_weights"
K1_GRID = (0.9, 1.5, 4.0, 10.0)
HDCT = "HDCT-weighted BM25"


def parse_args(argv=None):
    p = arguments.parser(__doc__)
    p.add_argument("--term-model", required=True, metavar="PATH",
                   help="a term-weight export (tt-zoo train-term-weights)")
    text_rows.add_partner(p, "the dense model fused with the weighted BM25 (one of --model, "
                             "by name or path; default: %(default)s)")
    text_rows.add_depth(p)
    p.add_argument("--reqa-documents", default="passage", choices=("passage", "candidate"),
                   help="what weighs a ReQA candidate: its passage (each distinct passage "
                        "once) or (sentence, passage) (default: %(default)s)")
    text_rows.add_record_argument(p, "--term-model")
    text_rows.add_arguments(p)
    args = text_rows.finish_arguments(p, p.parse_args(argv), NAME)
    text_rows.require_reqa_with_open_domain(p, args.benchmarks, "--benchmarks", "settings")
    return args


def corpus_weights(ctx, weighter):
    """The benchmark's documents' term weights: ODQA (title, passage); ReQA's passages, or
    its (sentence, passage) candidates."""
    from tt_zoo.retrieval.term_weighting import weigh_corpus

    c = ctx.bench.candidates
    with_titles = ctx.bench.name == "odqa" or ctx.args.reqa_documents == "candidate"
    titles = c.titles if with_titles else None
    return weigh_corpus(weighter, titles, c.texts, progress=not ctx.args.no_progress,
                        cache_dir=str(ctx.args.work / "term_weights_cache"),
                        log=lambda *a: print(*a, file=sys.stderr))


def choose_settings(ctx, build) -> dict:
    """k1 and `unread` by the validation metric (ReQA and ODQA), or ReQA's (open-domain)."""
    import numpy as np

    from tt_zoo.evaluation.text_benchmarks import KS

    bench = ctx.bench
    if bench.validation is None:
        return {**ctx.out["weights"]["reqa"][HDCT], "chosen_on": "reqa"}
    unread = ("plain", "weighted") if bench.name == "reqa" else ("plain",)
    grid = []
    for mode in unread:
        for k1 in K1_GRID:
            rows = build(k1, mode).search(list(bench.validation.queries), max(KS)).rows
            grid.append({"k1": k1, "unread": mode, "value": float(bench.validation.metric(
                np.asarray(rows)))})
    best = max(grid, key=lambda g: g["value"])  # the first of equals: the smaller k1, plain
    return {"k1": best["k1"], "unread": best["unread"], "grid": grid,
            "chosen_on": bench.validation.name, "metric": bench.validation.metric_name}


def term_weight_rows(ctx: text_rows.Context) -> dict:
    from tt_zoo.evaluation import text_benchmarks as tb
    from tt_zoo.retrieval.bm25 import BM25Retriever
    from tt_zoo.retrieval.fusion import FusionSearcher, choose_fusion_weight
    from tt_zoo.artifacts.term_weight_export import load_term_weighter

    args, bench, rows = ctx.args, ctx.bench, {}
    c = bench.candidates
    t = time.perf_counter()
    weights = corpus_weights(ctx, load_term_weighter(args.term_model))
    weigh_s = time.perf_counter() - t

    def build(k1=1.5, unread="plain"):
        return BM25Retriever(c.bm25_texts, ids=c.ids, weights=weights, k1=k1, unread=unread)

    plain, index_s = tb.searcher_seconds(build)
    label = f"{HDCT} (k1 1.5, b 0.75)"
    rows[label] = text_rows.score_row(bench, label, plain, weigh_s + index_s, {
        "k1": 1.5, "b": 0.75, "unread": "plain", "weighted_fraction": plain.weighted_fraction,
        "weigh_seconds": weigh_s, "distinct_documents": weights.num_rows})
    choice = choose_settings(ctx, build)
    ctx.out["weights"].setdefault(bench.name, {})[HDCT] = choice
    chosen, index_s = tb.searcher_seconds(
        lambda: tb.ReusedSearcher(build(choice["k1"], choice["unread"])))
    label = f"{HDCT} (k1 {choice['k1']:g}, unread {choice['unread']})"
    rows[label] = text_rows.score_row(bench, label, chosen, weigh_s + index_s, {
        "k1": choice["k1"], "b": 0.75, "unread": choice["unread"],
        "chosen_on": choice["chosen_on"], "weigh_seconds": weigh_s})
    partner_name = text_rows.model_name(ctx, args.partner)  # a name or an export path
    partners = {"BM25": ctx.bm25}
    if partner_name in ctx.dense:  # (--skip may leave it out of this benchmark)
        partners[partner_name] = ctx.dense[partner_name]
    for name, partner in partners.items():
        key = f"convex({HDCT}, {name})"
        if bench.validation is not None:
            fit = choose_fusion_weight(chosen, partner, bench.validation.queries,
                                       bench.validation.metric, depth=args.depth)
            ctx.out["weights"][bench.name][key] = {**fit.as_dict(),
                                                   "chosen_on": bench.validation.name}
            weight = fit.weight
        else:
            weight = ctx.out["weights"]["reqa"][key]["weight"]
        fused = FusionSearcher(chosen, partner, method="convex", weight=weight, depth=args.depth)
        rows[key] = text_rows.score_row(bench, key, fused, 0.0, fused.describe())
    return rows


def main(argv=None) -> dict:
    args = parse_args(argv)
    out = text_rows.run(args, NAME, term_weight_rows, report)
    print(report(out))
    if args.record:  # the model's measured tables into its card (= tt-zoo ship --record-from)
        from tt_zoo.zoo.shipping import record_results
        record_results(args.term_model, out, results_path=args.output.with_suffix(".json"))
    return out


def report(out: dict) -> str:
    s = out["settings"]
    lines = text_rows.report_head(out, NAME, "Learned term weights (HDCT) in a BM25 index", (
        f"The term-weight model `{s['term_model']}` (a tiny-BERT term-weight head, "
        "`tt-zoo train-term-weights`) weights each document's terms; bm25s indexes the "
        "pseudo term frequencies round(100 sqrt(y)) (Dai & Callan 2020, Sec. 3.3). "
        "An ODQA passage is weighted as (title, passage); "
        + (("a ReQA candidate as (sentence, passage), each candidate its own weights "
            "(`--reqa-documents candidate`; every occurrence read, so `unread` changes "
            "nothing). ") if s.get("reqa_documents") == "candidate" else
           ("a ReQA candidate by its passage (each distinct passage once), its sentence an "
            "occurrence the weighting did not read (`unread`: plain count, or the passage's "
            "pseudo tf scaled by occurrences). ")) +
        f"k1 from {', '.join(map(str, K1_GRID))} and `unread` are chosen on questions not "
        f"reported ({text_rows.chosen_on_text(s)}), as are the "
        "convex fusion weights (w = the weighted BM25's share). Build s: weighting the "
        "documents (0 when cached) plus indexing."))
    lines += text_rows.tables(out["benchmarks"], out["results"], out["ks"])
    if out["weights"]:
        lines += ["## Settings chosen on validation questions", "",
                  "| benchmark | what | chosen | on | grid (validation metric, %) |",
                  "|---|---|---|---|---|"]
        for bench, chosen in out["weights"].items():
            for what, c in chosen.items():
                if what == HDCT:
                    pick = f"k1 {c['k1']:g}, unread {c['unread']}"
                    grid = ", ".join(f"{g['k1']:g}/{g['unread']}: {100 * g['value']:.1f}"
                                     for g in c.get("grid", []))
                else:
                    pick = f"w {c['weight']:.2f}"
                    grid = ", ".join(f"{w:.2f}: {100 * v:.1f}" for w, v in c.get("grid", []))
                lines.append(f"| {text_rows.TITLES[bench]} | {what} | {pick} | "
                             f"{c['chosen_on']} | {grid or '(ReQA’s)'} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
