"""Make pretraining pairs (ICT, BFS, WLP; Chang et al. 2020, Sec. 3) or MLM examples from a
corpus, write them as TFRecord shards with a manifest, and print the Table 1 report.

    tt-zoo make-pairs --input $TT_ZOO_DATA/wikispeedia --tasks ict,bfs,wlp \\
        --output runs/pairs/wikispeedia_ict_bfs_wlp --vocab $TT_ZOO_DATA/bert-vocab/vocab.txt

``--runner local`` streams ``generate_pairs`` into ``pairs_io.write_pair_shards`` on this
machine; ``--runner beam`` runs ``beam_pairs.run_beam_pipeline`` (DirectRunner unless
``--beam-runner`` says otherwise; extra Beam options after ``--beam-arg``). Both give the same
pairs for the same seed. ``stats.json`` (the report, wall time, pairs/s) lands beside the shards.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import sys
import time

from tt_zoo.atomic_io import check_replaceable, is_remote, write_directory
from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.data import pretraining_tasks  # numpy only; pairs_io and pair_stats (TensorFlow) later
from tt_zoo.data.articles import ReadReport

PAIR_TASKS = pretraining_tasks.TASKS


def read_articles(source, report, progress=True):
    """``article_sources.read_articles`` when present, else the Wikispeedia reader."""
    try:
        from tt_zoo.data.article_sources import read_articles as reader
    except ImportError:
        from tt_zoo.data.wikispeedia import read_wikispeedia as reader
    return reader(source, report=report, progress=progress)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True,
                        help="any source read_articles accepts (Wikispeedia folder, XML dump, "
                             "JSONL of articles, HF dataset)")
    parser.add_argument("--tasks", default="ict,bfs,wlp",
                        help=f"comma-separated subset of {','.join(PAIR_TASKS)} (the paper's "
                             "ICT/BFS/WLP; Contriever crops, Spider recurring spans, ProQA "
                             "generated questions); or 'mlm'")
    parser.add_argument("--output", required=True, help="output directory for the shards")
    parser.add_argument("--seed", type=numbers.SEED, default=0, help="seed of every random choice")
    parser.add_argument("--pairs-per-article", type=numbers.count(high=1_000_000), default=4,
                        help="pairs a task draws from each article")
    parser.add_argument("--num-shards", type=numbers.count(high=100_000), default=8, help="TFRecord shards written")
    parser.add_argument("--max-doc-tokens", type=numbers.count(high=1_000_000), default=288,
                        help="passage budget in whitespace words (the paper's 288 tokens)")
    defaults = pretraining_tasks.TaskConfig()
    parser.add_argument("--crop-deletion-prob", type=numbers.fraction(high_open=True), default=defaults.crop_deletion_prob,
                        help="crop: probability of deleting each word of a crop (Contriever)")
    parser.add_argument("--crop-source-words", type=numbers.count(low=0), default=defaults.crop_source_words,
                        help="crop: 0 crops one passage; N > 0 crops a window of N contiguous "
                             "words of the article (Contriever crops 256-token chunks)")
    parser.add_argument("--span-keep-prob", type=numbers.fraction(), default=defaults.span_keep_prob,
                        help="span: probability that the recurring span stays in the query "
                             "(Spider)")
    parser.add_argument("--span-query-words", type=numbers.count(high=1_000_000), default=defaults.span_query_words,
                        help="span: the query's window of words around the span")
    parser.add_argument("--question-generator", default=defaults.question_generator,
                        help="qgen: the question generator's name")
    parser.add_argument("--runner", choices=("local", "beam"), default="local",
                        help="this process, or an Apache Beam pipeline (the 'beam' extra)")
    parser.add_argument("--beam-runner", default="DirectRunner",
                        help="the Beam runner of --runner beam")
    parser.add_argument("--beam-arg", action="append", default=[],
                        help="an extra Beam option, e.g. --beam-arg=--direct_num_workers=2")
    parser.add_argument("--vocab", default=None,
                        help="WordPiece vocab.txt for the token counts (and MLM); without it "
                             "the report counts whitespace words")
    parser.add_argument("--mlm-seq-length", type=numbers.TOKEN_BUDGET, default=None,
                        help="MLM sequence length (default: --max-doc-tokens)")
    parser.add_argument("--limit", type=numbers.count(), default=None, help="use only the first N articles")
    parser.add_argument("--in-memory", action="store_true",
                        help="local runner: read the corpus once and hold it in memory, instead "
                             "of streaming it twice (WLP's reverse-link index needs a first pass)")
    parsing.add_no_progress(parser)


def parse_args(argv=None):
    parser = parsing.command_parser("make-pairs", __doc__, add_arguments)
    args = parser.parse_args(argv)
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    if tasks == ("mlm",):
        if args.vocab is None:
            parser.error("--tasks mlm needs --vocab")
        if args.runner != "local":
            parser.error("--tasks mlm runs with --runner local only")
    elif not tasks or not set(tasks) <= set(PAIR_TASKS):
        parser.error(f"--tasks must be a subset of {','.join(PAIR_TASKS)} or 'mlm' "
                     f"(got {args.tasks!r})")
    args.tasks = tasks
    return args


def make_pairs_local(args, config):
    # generate_pairs reads the articles twice (pass 1: the reverse-link index for WLP; pass 2:
    # the pairs), streaming each time; the reader's report of the last pass is the one we keep.
    # With --in-memory the articles are read once and held in a list instead.
    from tt_zoo.data import pairs_io  # noqa: PLC0415 (TensorFlow: after argparse)
    reports = []

    def articles():
        reports.append(ReadReport())
        return itertools.islice(read_articles(args.input, reports[-1], not args.no_progress),
                                args.limit)

    if args.in_memory:
        articles = list(articles())

    counters = collections.Counter()
    pairs = pretraining_tasks.generate_pairs(articles, config, counters)
    manifest = pairs_io.write_pair_shards(pairs, args.write_to, args.num_shards,
                                          config=_config_json(config, args),
                                          progress=not args.no_progress)
    return manifest, reports[-1].as_dict(), dict(sorted(counters.items()))


def make_pairs_beam(args, config):
    from tt_zoo.data import beam_pairs  # noqa: PLC0415 (Beam is an optional extra)
    manifest = beam_pairs.run_beam_pipeline(args.input, args.write_to, config, args.num_shards,
                                            runner=args.beam_runner, pipeline_args=args.beam_arg,
                                            limit=args.limit)
    return manifest, manifest["read_report"], manifest["generator_counters"]


def make_mlm(args):
    from tt_zoo.data import pairs_io, passages as passages_lib  # noqa: PLC0415
    report = ReadReport()
    articles = itertools.islice(read_articles(args.input, report, not args.no_progress),
                                args.limit)
    passages = (p for a in articles
                for p in passages_lib.make_passages(a, max_tokens=args.max_doc_tokens))
    seq_length = args.mlm_seq_length or args.max_doc_tokens
    examples = pretraining_tasks.mlm_examples(passages, args.vocab, seq_length, seed=args.seed)
    config = {"tasks": ["mlm"], "seq_length": seq_length, "seed": args.seed,
              "max_doc_tokens": args.max_doc_tokens, "source": str(args.input),
              "limit": args.limit, "vocab": args.vocab}
    return pairs_io.write_mlm_shards(examples, args.write_to, args.num_shards, config=config,
                                     progress=not args.no_progress), report.as_dict()


def _config_json(config, args) -> dict:
    import dataclasses  # noqa: PLC0415
    out = {k: (list(v) if isinstance(v, tuple) else v)
           for k, v in dataclasses.asdict(config).items()}
    out.update(source=str(args.input), limit=args.limit)
    return out


def main(argv=None) -> int:
    """Writes the new output beside --output and swaps it in only when complete: a failed or
    killed rerun leaves the previous pairs as they were (remote paths such as gs:// are written
    in place)."""
    args = parse_args(argv)
    if is_remote(args.output):
        args.write_to = args.output
        return make(args)
    from tt_zoo.data import pairs_io  # noqa: PLC0415 (TensorFlow: after argparse)
    what = "pair directory (tt-zoo make-pairs output)"
    try:
        check_replaceable(args.output, is_replaceable=pairs_io.is_pair_directory, what=what)
    except FileExistsError as e:
        sys.exit(f"--output: {e}")

    def build(staging):
        args.write_to = str(staging)
        make(args)

    write_directory(args.output, build, is_replaceable=pairs_io.is_pair_directory, what=what)
    return 0


def make(args) -> int:
    from tt_zoo.data import pair_stats, pairs_io  # noqa: PLC0415 (TensorFlow: after argparse)
    start = time.perf_counter()
    if args.tasks == ("mlm",):
        manifest, read_report = make_mlm(args)
        wall = time.perf_counter() - start
        n = manifest["num_records"]
        print(f"MLM examples: {n:,} (seq_length {manifest['feature_lengths']['input_word_ids']})"
              f" in {manifest['num_shards']} shards at {args.output}")
        print(f"reader: {read_report}")
        print(f"wall time {wall:.1f} s, {n / wall:.1f} examples/s")
        return 0

    try:
        config = pretraining_tasks.TaskConfig(
            tasks=args.tasks, pairs_per_article=args.pairs_per_article,
            max_doc_tokens=args.max_doc_tokens, seed=args.seed,
            crop_deletion_prob=args.crop_deletion_prob,
            crop_source_words=args.crop_source_words, span_keep_prob=args.span_keep_prob,
            span_query_words=args.span_query_words, question_generator=args.question_generator)
    except ValueError as e:
        sys.exit(f"make-pairs: {e}")
    make = make_pairs_beam if args.runner == "beam" else make_pairs_local
    manifest, read_report, counters = make(args, config)
    wall = time.perf_counter() - start
    n = manifest["num_records"]

    stats = pair_stats.compute_pair_stats(pairs_io.iter_pair_records(args.write_to), args.vocab,
                                          read_report=read_report, generator_counters=counters,
                                          progress=not args.no_progress)
    runner = "local" if args.runner == "local" else f"beam:{args.beam_runner}"
    stats.extra.update({"runner": runner, "wall_s": round(wall, 3),
                        "pairs_per_s": round(n / wall, 1) if wall > 0 else None,
                        "num_pairs": n, "num_shards": manifest["num_shards"],
                        "config": manifest["config"]})
    stats.save(os.path.join(args.write_to, "stats.json"))
    print(pair_stats.format_table(stats))
    print(f"{n:,} pairs in {manifest['num_shards']} shards at {args.output}")
    print(f"runner {runner}: wall time {wall:.1f} s (read + generate + write), "
          f"{n / wall:.1f} pairs/s")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
