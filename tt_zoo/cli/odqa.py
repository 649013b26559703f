"""Open-domain QA answer recall of models and BM25 (DPR's top-k retrieval accuracy).

Factoid questions (WebQuestions, CuratedTREC, or any JSONL of {question, answers | answer_regex})
against an article source cut into 100-word passages with titles (Wikispeedia by default); a
question is answered at k when a top-k passage holds an answer (`tt_zoo.evaluation.odqa`).
The default questions are the validation sets (WebQuestions val + CuratedTREC train): choose
settings on them, never train on them.

Examples:
  tt-zoo odqa --bm25 --model bow_mlp_ict_bfs_wlp_512
  tt-zoo odqa --bm25 --questions webquestions-devtest --questions my_questions.jsonl \\
      --articles enwiki-latest-pages-articles.xml.bz2 --json-out odqa.json
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import default_data_dir, question_sets_or_exit
from tt_zoo.configs.multitask import ODQA_CACHE
from tt_zoo.evaluation import odqa  # numpy only: --help stays fast
from tt_zoo.evaluation.tables import row_labels


CUTOFF = numbers.count(high=100_000)  # each --k: as `tt-zoo search --k` takes it


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", action="append", default=[], metavar="NAME_OR_PATH",
                   type=parsing.model_name_or_path,
                   help="a registered model name or an export directory (repeatable)")
    p.add_argument("--bm25", action="store_true", help="add the BM25 baseline row")
    p.add_argument("--questions", action="append", default=[], metavar="SET_OR_FILE",
                   help=f"a named set ({', '.join(odqa.NAMED_SETS)}) or a .json/.tsv/.jsonl "
                        f"file (repeatable; default: {' + '.join(odqa.VALIDATION)})")
    p.add_argument("--articles", default=None,
                   help="any article source tt_zoo reads (default: $TT_ZOO_DATA/wikispeedia)")
    p.add_argument("--passage-words", type=numbers.count(high=100_000), default=100,
                   help="words a passage (DPR: 100) (default: %(default)s)")
    p.add_argument("--k", default="1,5,20,100",
                   help="comma-separated cut-offs (default: %(default)s)")
    p.add_argument("--cache-dir", default=ODQA_CACHE,
                   help="answer rows and passage embeddings are kept here between runs "
                        "('' : nowhere) (default: %(default)s)")
    p.add_argument("--limit-articles", type=numbers.count(), default=None,
                   help="use only the first N articles (smoke runs)")
    p.add_argument("--json-out", default=None, help="write the results as JSON here")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser("odqa", __doc__, add_arguments)
    args = p.parse_args(argv)
    if not args.model and not args.bm25:
        p.error("nothing to score: pass --model NAME_OR_PATH and/or --bm25")
    try:
        row_labels([(given, given) for given in args.model])
    except ValueError as e:
        p.error(str(e))
    try:
        args.ks = tuple(sorted({CUTOFF(k.strip()) for k in args.k.split(",") if k.strip()}))
    except argparse.ArgumentTypeError as e:
        p.error(f"--k: each comma-separated cut-off {e}")
    if not args.ks:
        p.error(f"--k: expected comma-separated cut-offs such as 1,5,20,100 (got {args.k!r})")
    if args.passage_words < 1:
        p.error(f"--passage-words must be positive (got {args.passage_words})")
    data = default_data_dir()
    args.articles = parsing.articles_or_exit(p, args.articles, data)
    args.questions = args.questions or list(odqa.VALIDATION)
    args.data = data
    return args


def run(args) -> dict:
    question_sets = question_sets_or_exit(args.questions, args.data)
    cache = pathlib.Path(args.cache_dir) if args.cache_dir else None
    t = time.perf_counter()
    benchmark = odqa.Benchmark.build(args.articles, question_sets, args.passage_words,
                                     args.limit_articles, progress=not args.no_progress,
                                     cache_dir=cache)
    described = benchmark.describe()
    print(f"{described['num_passages']:,} passages of {args.passage_words} words; answerable: "
          + ", ".join(f"{n} {v['answerable']}/{v['num_questions']}"
                      for n, v in described["sets"].items())
          + f" ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
    results, seconds = {}, {}
    if args.bm25:
        t = time.perf_counter()
        results["BM25"] = benchmark.score(odqa.bm25_searcher(benchmark.collection), ks=args.ks)
        seconds["BM25"] = round(time.perf_counter() - t, 1)
    if args.model:
        import tt_zoo  # noqa: PLC0415
        from tt_zoo.evaluation.text_benchmarks import OdqaBenchmark, cache_file  # noqa: PLC0415

        models = [tt_zoo.load(name) for name in args.model]
        labels = row_labels([(given, m.name) for given, m in zip(args.model, models)])
        for label, model in zip(labels, models):
            t = time.perf_counter()
            path = None
            if cache is not None:
                path = cache_file(cache, OdqaBenchmark.cache_prefix, model,
                                  len(benchmark.collection))
            results[label] = benchmark.score_model(model, path, args.ks,
                                                   progress=not args.no_progress)
            seconds[label] = round(time.perf_counter() - t, 1)
    print(odqa.format_table(results, args.ks))
    out = {"benchmark": described, "ks": list(args.ks), "results": results, "seconds": seconds}
    if args.json_out:
        from tt_zoo.atomic_io import write_json  # noqa: PLC0415
        write_json(args.json_out, out)
    return out


def main(argv=None):
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
