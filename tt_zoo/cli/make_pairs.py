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
import sys

from tt_zoo.atomic_io import check_replaceable, is_remote, write_directory
from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.data import pretraining_tasks  # numpy only; pairs_run (TensorFlow) later

PAIR_TASKS = pretraining_tasks.TASKS


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


def main(argv=None) -> int:
    """Writes the new output beside --output and swaps it in only when complete: a failed or
    killed rerun leaves the previous pairs as they were (remote paths such as gs:// are written
    in place)."""
    args = parse_args(argv)
    if is_remote(args.output):
        return make(args, args.output)
    from tt_zoo.data import pairs_io  # noqa: PLC0415 (TensorFlow: after argparse)
    what = "pair directory (tt-zoo make-pairs output)"
    try:
        check_replaceable(args.output, is_replaceable=pairs_io.is_pair_directory, what=what)
    except FileExistsError as e:
        sys.exit(f"--output: {e}")
    write_directory(args.output, lambda staging: make(args, str(staging)),
                    is_replaceable=pairs_io.is_pair_directory, what=what)
    return 0


def make(args, write_to: str) -> int:
    """Makes the pairs (or MLM examples) into `write_to` (`tt_zoo.data.pairs_run`) and prints
    what it wrote."""
    from tt_zoo.data import pairs_run  # noqa: PLC0415 (TensorFlow: after argparse)
    progress = not args.no_progress
    if args.tasks == ("mlm",):
        written = pairs_run.make_mlm(args.input, write_to, args.vocab, args.num_shards,
                                     seq_length=args.mlm_seq_length or args.max_doc_tokens,
                                     max_doc_tokens=args.max_doc_tokens, seed=args.seed,
                                     limit=args.limit, progress=progress)
        print(pairs_run.describe(written, args.output))
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
    written = pairs_run.make_pairs(args.input, write_to, config, args.num_shards,
                                   runner=args.runner, beam_runner=args.beam_runner,
                                   beam_args=args.beam_arg, vocab=args.vocab, limit=args.limit,
                                   in_memory=args.in_memory, progress=progress)
    print(pairs_run.describe(written, args.output))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
