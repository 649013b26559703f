"""results/late_interaction.{md,json}: a late-interaction (ColBERT) model beside BM25 and the
single-vector flagships, on ReQA-SQuAD(dev), open-domain ReQA and ODQA answer recall (issue 23,
items 1-2).

The ColBERT export's document token vectors of a benchmark's candidates are encoded once into a
`TokenStore` (float16, runs/token_stores/, resumable). Rows per benchmark:

* BM25 and each dense model (`text_rows`), and the --partner model through its ScaNN index
  (`EmbeddingIndex`, the settings `ScannConfig.for_size` gives), for the speed beside ColBERT's;
* ColBERT re-ranking BM25's top --depth by exact MaxSim (`MaxSimReranker`; Khattab & Zaharia
  2020, Sec. 3.5);
* ColBERT end to end (`TokenIndex`, Sec. 3.6): ScaNN over every document token, each query
  token's --token-k nearest tokens name the candidates, exact MaxSim ranks them (the benchmarks
  of --end-to-end);
* convex(BM25, ColBERT re-ranking): BM25's and MaxSim's min-max normalised scores over BM25's top
  --depth, the weight chosen on questions that are not reported (ReQA: the 5% cold-start
  split's training questions, by MRR; ODQA: webquestions-trainmodel, by R@20; open-domain ReQA
  takes ReQA's);
* with --fuse-with MODEL (one of --model): that fusion fused again with MODEL's exact search,
  convex(convex(BM25, ColBERT re-ranking), MODEL), its weight chosen the same way: three
  retrievers, each good at its own kind of match; and ColBERT re-ranking the fused list,
  convex(BM25, MODEL)'s top --depth, fused again with that pair (`fused_list_rows`).

With --query-weights ALPHA:MASK[:BETA][,...] every ColBERT row scores with idf-weighted query
tokens (`tt_zoo.modeling.query_token_weights`: each query token's MaxSim counted idf ** ALPHA
times, idf over the benchmark's candidates as BM25's, and (qidf / qidf_max) ** BETA over the
validation questions as the question log; [MASK] MASK times), the setting of the list that
re-ranks best on the benchmark's validation questions (open-domain ReQA takes ReQA's setting and
question log).

Memory per passage (store and token index) and each row's queries/s (query encoding included)
are recorded.

  python -m benchmarks.late_interaction --colbert saved_models/colbert_ict_bfs_wlp_crop_span_qgen_64
"""

from __future__ import annotations

import functools
import sys
import time

from benchmarks import arguments, fusion, text_rows
from benchmarks.fusion import convex_fusion

NAME = "late_interaction"


def parse_args(argv=None):
    p = arguments.parser(__doc__)
    p.add_argument("--colbert", required=True, metavar="NAME_OR_PATH",
                   help="a late-interaction export (tt-zoo pretrain --variant colbert_*)")
    text_rows.add_partner(p, "the single-vector model also searched through ScaNN (one of "
                             "--model; default: %(default)s)")
    text_rows.add_depth(p, "BM25 candidates re-ranked per query (default: %(default)s)")
    p.add_argument("--token-k", type=int, default=64,
                   help="end to end: neighbours of each query token (default: %(default)s)")
    p.add_argument("--end-to-end", default="reqa,odqa",
                   help="benchmarks with the end-to-end token index row (default: %(default)s)")
    p.add_argument("--colbert-benchmarks", default=",".join(text_rows.BENCHMARKS),
                   help="benchmarks with ColBERT rows (encoding open-domain ReQA's 578K "
                        "candidates takes ~45 min on 2 cores) (default: %(default)s)")
    fusion.add_fuse_with(p, "convex(BM25, ColBERT re-ranking)")
    p.add_argument("--query-weights", default=None,
                   metavar="ALPHA:MASK[:BETA][,ALPHA:MASK[:BETA]...]",
                   help="idf-weighted query tokens (idf ** ALPHA times the validation "
                        "questions' qidf factor ** BETA (default 0), [MASK] tokens MASK) for "
                        "every ColBERT row, the setting best on each benchmark's validation "
                        "questions (default: ColBERT's unweighted MaxSim)")
    text_rows.add_record_argument(p, "--colbert")
    text_rows.add_arguments(p)
    args = text_rows.finish_arguments(p, p.parse_args(argv), NAME)
    if args.query_weights is not None:
        args.query_weights = parse_query_weights(p, args.query_weights)
        if args.record:
            p.error("--query-weights scores with weights the --colbert export does not hold: "
                    "its card would record another model's numbers; drop --record")
    fusion.check_fuse_with(p, args)
    args.end_to_end = [b for b in args.end_to_end.split(",") if b]
    args.colbert_benchmarks = [b for b in args.colbert_benchmarks.split(",") if b]
    text_rows.require_reqa_with_open_domain(p, args.colbert_benchmarks, "--colbert-benchmarks",
                                            "weight")
    return args


def parse_query_weights(p, text: str) -> list:
    """'0.5:0.25,1:0:1' -> [(0.5, 0.25, 0.0), (1.0, 0.0, 1.0)], or exits naming the flag."""
    from tt_zoo.modeling.query_token_weights import check_weight_settings

    settings = []
    for part in text.split(","):
        try:
            values = tuple(float(v) for v in part.split(":"))
            if len(values) not in (2, 3):
                raise ValueError("two or three numbers")
            setting = values + (0.0,) * (3 - len(values))
            check_weight_settings(*setting)
        except ValueError as e:
            p.error(f"--query-weights {text!r}: {part!r} is not ALPHA:MASK[:BETA], numbers >= 0 "
                    f"({e})")
        settings.append(setting)
    return settings


# A benchmark's question log (its validation questions' counts), for open-domain ReQA, which has
# no validation questions and takes ReQA's.
_QUESTION_LOGS: dict = {}


def weigh_queries(ctx, colbert, store) -> None:
    """--query-weights: sets the ColBERT model's query-token weights for this benchmark, idf
    over its candidates and the validation questions as the question log
    (`weigh_queries_by_idf`), the setting that re-ranks BM25's top --depth best on those
    questions (open-domain ReQA: ReQA's setting and log); recorded in ``out["query_weights"]``.
    """
    import numpy as np

    from tt_zoo.modeling.query_token_weights import (document_frequencies, query_frequencies,
                                                     weigh_queries_by_idf)
    from tt_zoo.retrieval.late_interaction import MaxSimReranker

    args, bench, model = ctx.args, ctx.bench, colbert.keras_model
    t = time.perf_counter()
    frequencies = document_frequencies(model.document_preprocessor, bench.candidates.titles,
                                       bench.candidates.texts)
    corpus = f"{text_rows.TITLES[bench.name]} candidates"

    def weigh(alpha, mask, beta):
        return weigh_queries_by_idf(model, frequencies, alpha=alpha, mask_weight=mask,
                                    corpus=corpus, questions=questions, beta=beta,
                                    question_log=log_name)

    grid = []
    if bench.validation is None:
        reqa = ctx.out["query_weights"]["reqa"]
        chosen, chosen_on = (reqa["alpha"], reqa["mask_weight"], reqa.get("beta", 0.0)), "ReQA's"
        log_name, questions = _QUESTION_LOGS["reqa"]
    else:
        chosen_on = f"{bench.validation.name}, by {bench.validation.metric_name}"
        log_name = bench.validation.name
        questions = query_frequencies(model.query_preprocessor, bench.validation.queries)
        _QUESTION_LOGS[bench.name] = log_name, questions
        for setting in args.query_weights if len(args.query_weights) > 1 else ():
            weigh(*setting)
            rerank = MaxSimReranker(ctx.bm25, colbert.encode_query_tokens, store=store,
                                    depth=args.depth)
            rows = np.asarray(rerank.search(list(bench.validation.queries), args.depth).rows)
            grid.append((*setting, bench.validation.metric(rows)))
        # The first of the best on ties; one setting is taken as given.
        chosen = max(grid, key=lambda g: g[-1])[:3] if grid else args.query_weights[0]
    ctx.out.setdefault("query_weights", {})[bench.name] = {
        **weigh(*chosen), "chosen_on": chosen_on, "grid": grid,
        "seconds": time.perf_counter() - t}


def token_store(ctx, colbert):
    """The benchmark's candidates' document token vectors (built once, resumable)."""
    from tt_zoo.evaluation.document_embeddings import model_tag
    from tt_zoo.retrieval.token_store import CONFIG_FILE, TokenStore

    c, args = ctx.bench.candidates, ctx.args
    path = args.work / "token_stores" / f"{ctx.bench.name}-{model_tag(colbert)}-{len(c)}"
    if (path / CONFIG_FILE).is_file():
        return TokenStore.load(path)
    return TokenStore.build(path, colbert.encode_document_tokens, c.texts, c.titles, c.ids,
                            encoder=colbert.name, progress=not args.no_progress)


def scann_row(ctx) -> dict:
    """The partner model searched through its ScaNN index (the single-vector speed beside)."""
    import numpy as np

    from tt_zoo.evaluation import text_benchmarks as tb
    from tt_zoo.retrieval.index import EmbeddingIndex
    from tt_zoo.retrieval.search import QueryEncodingSearcher

    model = ctx.models[ctx.args.partner]
    embeddings = np.load(text_rows.embedding_cache(ctx.args, ctx.bench, model), mmap_mode="r")
    index, build_s = tb.searcher_seconds(lambda: text_rows.warmed_up(QueryEncodingSearcher(
        model.encode_queries, EmbeddingIndex(np.asarray(embeddings), ctx.bench.candidates.ids))))
    label = f"{ctx.args.partner} (ScaNN)"
    return {label: text_rows.score_row(ctx.bench, label, index, build_s,
                                       {"search": "scann",
                                        **vars(index.searcher.scann_config)})}


def colbert_rows(ctx: text_rows.Context) -> dict:
    from tt_zoo.evaluation import text_benchmarks as tb
    from tt_zoo.retrieval.late_interaction import MaxSimReranker
    from tt_zoo.retrieval.token_index import TokenIndex

    args, bench, rows = ctx.args, ctx.bench, {}
    if args.partner in ctx.dense:
        rows.update(scann_row(ctx))
    if bench.name not in args.colbert_benchmarks:
        return rows
    colbert = _load(args.colbert)
    store, store_s = tb.searcher_seconds(lambda: token_store(ctx, colbert))
    if args.query_weights:
        weigh_queries(ctx, colbert, store)
    name = "ColBERT (idf-weighted queries)" if args.query_weights else "ColBERT"
    memory = ctx.out.setdefault("memory", {})[bench.name] = {
        "store_bytes_per_passage": store.bytes_per_passage,
        "tokens_per_passage": store.num_tokens / len(store), "dtype": store.dtype}
    rerank = tb.ReusedSearcher(MaxSimReranker(ctx.bm25, colbert.encode_query_tokens,
                                              store=store, depth=args.depth))
    text_rows.warmed_up(rerank)
    label = f"{name} re-ranking BM25@{args.depth}"
    rows[label] = text_rows.score_row(bench, label, rerank, store_s + ctx.build_seconds["BM25"],
                                      {"depth": args.depth, "model": colbert.name})
    if bench.name in args.end_to_end:
        index, index_s = tb.searcher_seconds(lambda: text_rows.warmed_up(
            TokenIndex(store, colbert.encode_query_tokens, token_k=args.token_k)))
        memory.update(index.memory())
        label = f"{name} end to end (token index, k' {args.token_k})"
        rows[label] = text_rows.score_row(bench, label, index, store_s + index_s,
                                          {"token_k": args.token_k,
                                           "scann": vars(index.scann_config)})
    key = f"convex(BM25, {name} re-ranking BM25@{args.depth})"
    fused = convex_fusion(ctx, key, ctx.bm25, rerank)
    rows[key] = text_rows.score_row(bench, key, fused, 0.0, fused.describe())
    if args.fuse_with is not None:
        partner = text_rows.model_name(ctx, args.fuse_with)
        three = f"convex({key}, {partner})"
        fused3 = convex_fusion(ctx, three, tb.ReusedSearcher(fused), ctx.dense[partner])
        rows[three] = text_rows.score_row(bench, three, fused3, 0.0, fused3.describe())
        rows.update(fused_list_rows(ctx, name, colbert, store, partner))
    return rows


def fused_list_rows(ctx, name: str, colbert, store, partner: str) -> dict:
    """ColBERT re-ranking the fused list: convex(BM25, partner)'s top --depth ordered by exact
    MaxSim, and that re-ranking fused again with the pair's own scores over the same list (the
    first stage with the better recall, not BM25's alone)."""
    from tt_zoo.evaluation import text_benchmarks as tb
    from tt_zoo.retrieval.late_interaction import MaxSimReranker

    bench, depth = ctx.bench, ctx.args.depth
    pair_key = f"convex(BM25, {partner})"
    pair_fusion = convex_fusion(ctx, pair_key, ctx.bm25, ctx.dense[partner])
    pair = tb.ReusedSearcher(pair_fusion)
    rerank = tb.ReusedSearcher(MaxSimReranker(pair, colbert.encode_query_tokens, store=store,
                                              depth=depth))
    text_rows.warmed_up(rerank)
    label = f"{name} re-ranking {pair_key}@{depth}"
    key = f"convex({pair_key}, {label})"
    fused = convex_fusion(ctx, key, pair, rerank)
    return {pair_key: text_rows.score_row(bench, pair_key, pair, 0.0, pair_fusion.describe()),
            label: text_rows.score_row(bench, label, rerank, 0.0,
                                       {"depth": depth, "model": colbert.name}),
            key: text_rows.score_row(bench, key, fused, 0.0, fused.describe())}


@functools.lru_cache(maxsize=None)
def _load(name_or_path):
    """The ColBERT model, loaded once for all benchmarks (not a dense row of `text_rows`)."""
    import tt_zoo

    return tt_zoo.load(name_or_path)


def main(argv=None) -> dict:
    args = parse_args(argv)
    out = text_rows.run(args, NAME, colbert_rows, report)
    print(report(out))
    if args.record:  # the model's measured tables into its card (= tt-zoo ship --record-from)
        from tt_zoo.zoo.shipping import record_results
        record_results(args.colbert, out, results_path=args.output.with_suffix(".json"))
    return out


def report(out: dict) -> str:
    s = out["settings"]
    lines = text_rows.report_head(out, NAME, "Late interaction (ColBERT) beside BM25 and the "
                                  "single-vector models", (
        f"ColBERT model `{s['colbert']}`: its document token vectors of every candidate "
        "in a float16 `TokenStore`; re-ranking takes BM25's top "
        f"{s['depth']} and orders them by exact MaxSim"
        f"{' with idf-weighted query tokens (below)' if s.get('query_weights') else ''}; end "
        "to end, ScaNN over every document token gives"
        f" each query token's {s['token_k']} nearest tokens, whose "
        "documents exact MaxSim ranks. The convex fusion weights (the first searcher's "
        f"share) are chosen on questions not reported ({text_rows.chosen_on_text(s)}). "
        "Queries/s: all "
        "questions, query encoding included, on this machine in one run. Build s: BM25's "
        "index, the token store (0 when cached) and the token index."))
    lines += text_rows.tables(out["benchmarks"], out["results"], out["ks"])
    if out.get("memory"):
        lines += ["## Memory per passage", "",
                  "| benchmark | tokens / passage | store bytes / passage | token index bytes / "
                  "passage | total |", "|---|---|---|---|---|"]
        for bench, m in out["memory"].items():
            index = m.get("index_bytes_per_passage")
            lines.append(f"| {text_rows.TITLES[bench]} | {m['tokens_per_passage']:.1f} | "
                         f"{m['store_bytes_per_passage']:,.0f} | "
                         f"{'–' if index is None else f'{index:,.0f}'} | "
                         f"{m.get('bytes_per_passage', m['store_bytes_per_passage']):,.0f} |")
        lines.append("")
    if out.get("query_weights"):
        lines += ["## Query-token weights", "",
                  "idf ** alpha over each benchmark's candidates, times (qidf / qidf_max) ** "
                  "beta over its validation questions (the question log); [MASK] tokens weigh "
                  "`mask`. Grid: alpha:mask:beta: the validation metric, %.", "",
                  "| benchmark | alpha | mask | beta | documents | questions | chosen on | grid |",
                  "|---|---|---|---|---|---|---|---|"]
        for bench, q in out["query_weights"].items():
            grid = ", ".join(f"{a:g}:{m:g}:{b:g}: {100 * v:.1f}" for a, m, b, v in q["grid"])
            lines.append(f"| {text_rows.TITLES[bench]} | {q['alpha']:g} | {q['mask_weight']:g} "
                         f"| {q.get('beta', 0):g} | {q['documents']:,} | "
                         f"{format(q['questions'], ',') if 'questions' in q else '–'} | "
                         f"{q['chosen_on']} | {grid or '–'} |")
        lines.append("")
    if out["weights"]:
        lines += ["## Fusion weights chosen on validation questions", "",
                  "| benchmark | fusion | w | on | grid (metric, %) |", "|---|---|---|---|---|"]
        for bench, chosen in out["weights"].items():
            for what, c in chosen.items():
                grid = ", ".join(f"{w:.2f}: {100 * v:.1f}" for w, v in c["grid"])
                lines.append(f"| {text_rows.TITLES[bench]} | {what} | {c['weight']:.2f} | "
                             f"{c['chosen_on']} | {grid} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
