"""results/fusion.{md,json}: score fusion of BM25 with the single-vector flagships, on
ReQA-SQuAD(dev), open-domain ReQA and ODQA answer recall (issue 23, item 4).

Rows per benchmark: BM25; each dense model (exact search); RRF(BM25, model) (Cormack et al.
2009, rrf_k 60); convex(BM25, model), w * minmax(BM25) + (1 - w) * minmax(model) over each
searcher's top --depth, w chosen from a grid of 0.00..1.00 by 0.05 on questions that are not
reported: for ReQA the training questions of the 5% cold-start split (by MRR), for ODQA
webquestions-trainmodel over the same passages (by R@20); open-domain ReQA takes ReQA's w.
`tt_zoo.retrieval.fusion` does the fusing, `tt_zoo.evaluation.text_benchmarks` the scoring.
Candidate embeddings are cached under runs/ (resumable); BM25 and each model are searched
once per question set, the fusion rows reuse those searches and report the queries/s of a fresh
fused search (both searches plus the fusion).

  python -m benchmarks.fusion                                        # the full run
  python -m benchmarks.fusion --limit-questions 100 --limit-articles 20   # a smoke run
"""

from __future__ import annotations

import pathlib
import sys
import time
from typing import Optional

from benchmarks import arguments, text_rows

NAME = "fusion"
FLAGSHIPS = text_rows.FLAGSHIPS


def parse_args(argv=None):
    p = arguments.parser(__doc__)
    add_fusion_arguments(p)
    add_fuse_with(p)
    text_rows.add_arguments(p)
    args = text_rows.finish_arguments(p, p.parse_args(argv), NAME)
    check_fuse_with(p, args)
    check_fusion_arguments(p, args)
    text_rows.require_reqa_with_open_domain(p, args.benchmarks, "--benchmarks", "weight")
    return args


def add_fusion_arguments(p) -> None:
    """--depth, --rrf-k and --fill-depth of every fused row (`FusionSearcher`'s settings)."""
    text_rows.add_depth(p)
    p.add_argument("--rrf-k", type=float, default=60, help="RRF's constant (default: %(default)s)")
    p.add_argument("--fill-depth", type=int, default=None, metavar="N",
                   help="search each searcher to N (> --depth) and fill in the scores of the "
                        "other's candidates it holds there (default: a missing candidate gets "
                        "the list's floor)")


def check_fusion_arguments(p, args) -> None:
    """--depth at least 1, --fill-depth above it; the parser exits naming the option otherwise."""
    if args.depth < 1:
        p.error(f"--depth must be at least 1 (got {args.depth})")
    if args.fill_depth is not None and args.fill_depth <= args.depth:
        p.error(f"--fill-depth must be above --depth ({args.depth}); got {args.fill_depth}")


def fusion_rows(ctx: text_rows.Context) -> dict:
    """RRF and convex fusion of BM25 with each dense model on one benchmark; the convex weight
    chosen on the benchmark's validation queries (open-domain ReQA: ReQA's). With --fill-depth,
    each fused row twice, side by side: as it was (the floor) and with filled scores."""
    from tt_zoo.retrieval.fusion import FusionSearcher

    args, bench, bm25, rows, fused = ctx.args, ctx.bench, ctx.bm25, {}, {}
    fills = (None,) if args.fill_depth is None else (None, args.fill_depth)
    source = bench.name if bench.validation is not None else "reqa"  # where the weights come from
    for name, dense in ctx.dense.items():
        both_s = ctx.build_seconds["BM25"] + ctx.build_seconds[name]
        for fill in fills:
            tag = filled_tag(fill)
            rrf = FusionSearcher(bm25, dense, method="rrf", depth=args.depth, rrf_k=args.rrf_k,
                                 fill_depth=fill)
            label = f"RRF(BM25, {name}){tag}"
            rows[label] = text_rows.score_row(bench, label, rrf, both_s, rrf.describe())
            convex = convex_fusion(ctx, f"{name}{tag}", bm25, dense, fill)
            label = f"convex(BM25, {name}){tag}"
            rows[label] = text_rows.score_row(bench, label, convex, both_s,
                                              {**convex.describe(), "weight_chosen_on": source})
            fused[name] = convex  # the three-way rows fuse the last: filled, when asked
    if args.fuse_with is not None:
        rows.update(three_way_rows(ctx, fused, text_rows.model_name(ctx, args.fuse_with)))
    return rows


def filled_tag(fill_depth) -> str:
    """A fused row's label suffix: "" for the floor, " filled@N" with filled scores."""
    return "" if fill_depth is None else f" filled@{fill_depth}"


def add_fuse_with(p, fused: str = "each convex(BM25, model)") -> None:
    """--fuse-with MODEL: the `fused` rows fused again with MODEL's exact search."""
    p.add_argument("--fuse-with", default=None, metavar="MODEL",
                   help=f"one of --model: rows fusing {fused} with this model's exact search "
                        "(its weight chosen on the validation questions)")


def check_fuse_with(p, args) -> None:
    """--fuse-with must name one of --model, or the parser exits naming both."""
    if args.fuse_with is not None and args.fuse_with not in args.model:
        p.error(f"--fuse-with {args.fuse_with}: give it as a --model too (models: "
                f"{', '.join(args.model)})")


def three_way_rows(ctx: text_rows.Context, fused: dict, partner: str) -> dict:
    """convex(convex(BM25, model), partner) for every other model: three retrievers, each good at
    its own kind of match, the second weight chosen as the first (`convex_fusion`)."""
    from tt_zoo.evaluation.text_benchmarks import ReusedSearcher

    rows, fill = {}, ctx.args.fill_depth
    for name, convex in fused.items():
        if name == partner:
            continue
        label = f"convex(convex(BM25, {name}), {partner}){filled_tag(fill)}"
        three = convex_fusion(ctx, label, ReusedSearcher(convex), ctx.dense[partner], fill)
        both_s = ctx.build_seconds["BM25"] + ctx.build_seconds[name]
        rows[label] = text_rows.score_row(bench=ctx.bench, label=label, searcher=three,
                                          build_seconds=both_s + ctx.build_seconds[partner],
                                          settings=three.describe())
    return rows


def convex_fusion(ctx: text_rows.Context, key: str, first, second,
                  fill_depth: Optional[int] = None):
    """convex(first, second) at --depth (and `fill_depth`), its weight chosen on the benchmark's
    validation questions (recorded in ``out["weights"]``), or ReQA's for open-domain ReQA."""
    from tt_zoo.retrieval.fusion import FusionSearcher, choose_fusion_weight

    bench, depth = ctx.bench, ctx.args.depth
    if bench.validation is not None:
        t = time.perf_counter()
        fit = choose_fusion_weight(first, second, bench.validation.queries,
                                   bench.validation.metric, depth=depth, fill_depth=fill_depth)
        ctx.out["weights"].setdefault(bench.name, {})[key] = {
            **fit.as_dict(), "chosen_on": bench.validation.name,
            "metric": bench.validation.metric_name, "seconds": time.perf_counter() - t}
        weight = fit.weight
    else:
        weight = ctx.out["weights"]["reqa"][key]["weight"]
    return FusionSearcher(first, second, method="convex", weight=weight, depth=depth,
                          fill_depth=fill_depth)


def filled(settings: dict) -> str:
    """The report's words for --fill-depth ("" without it)."""
    n = settings.get("fill_depth")
    return "" if n is None else (
        f"; a row marked filled@{n} gives a candidate missing from one list that searcher's own "
        f"score from its top {n} instead of the floor 0 (filled scores)")


def main(argv=None) -> dict:
    out = text_rows.run(parse_args(argv), NAME, fusion_rows, report)
    print(report(out))
    return out


def report(out: dict) -> str:
    s = out["settings"]
    lines = text_rows.report_head(out, NAME, "Score fusion: BM25 with the single-vector flagships", (
        "Rows: BM25 (bm25s); each dense model by exact inner-product search; RRF "
        f"(reciprocal-rank fusion, Cormack et al. 2009, rrf_k {s['rrf_k']:g}) and a convex "
        "combination w * minmax(BM25) + (1 - w) * minmax(model) (Bruch et al. 2023) of each "
        f"searcher's top {s['depth']}{filled(s)} (`tt_zoo.retrieval.fusion.FusionSearcher`). "
        "w is "
        "chosen from 0.00..1.00 by 0.05 on questions not reported: ReQA by "
        f"{s['reqa_metric']} on the training questions of the "
        f"{100 * s['split_fraction']:g}% cold-start split, ODQA by {s['odqa_metric']} on "
        f"{pathlib.Path(s['odqa_validation']).name} over the same passages; open-domain "
        "ReQA uses ReQA's w. Queries/s: the search of all questions, query encoding "
        "included, a fused row counting both searches and the fusion. Build s: indexing, "
        "or encoding the candidates (about 0 when cached), a fused row both searchers'."))
    lines += text_rows.tables(out["benchmarks"], out["results"], out["ks"])
    if out["weights"]:
        lines += ["## The chosen weights", "",
                  "w is BM25's share. The validation metric of each grid weight (%):", ""]
        grid = None
        for bench, per_model in out["weights"].items():
            for model, choice in per_model.items():
                if grid is None:
                    grid = [w for w, _ in choice["grid"]]
                    lines += ["| benchmark | model | questions | metric | w | "
                              + " | ".join(f"{w:.2f}" for w in grid) + " |",
                              "|---|---|---|---|---|" + "---|" * len(grid)]
                lines.append(f"| {text_rows.TITLES[bench]} | {model} | {choice['num_queries']:,} "
                             f"| {choice['metric']} | **{choice['weight']:.2f}** | "
                             + " | ".join(f"{100 * v:.1f}" for _, v in choice["grid"]) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
