"""Score a TREC run against qrels (nDCG@10, R@k, MRR@10), or evaluate models and BM25 on ReQA
in the shape of Chang et al. 2020, Table 3.

--run RUN --qrels QRELS: the run (tt-zoo search --topics ... --run RUN, or any TREC run: qid
Q0 docid rank score tag) scored with trec_eval's measures through pytrec_eval, in %: nDCG@10,
R@k for each --recall-at, MRR@10. Qrels are TREC's (qid 0 docid relevance), BEIR's TSV
(query-id, corpus-id, score, with its header) or a BEIR folder (its qrels/test.tsv); queries of
the qrels without a line in the run count 0.

--model / --bm25: ReQA (Ahmad et al. 2019) over SQuAD; columns: model, encoder, pretraining,
search, R@1, R@5, R@10, R@50, R@100, MRR (in %), over a split's test questions
(``--split-file``, or ``--train-fraction`` + ``--seed`` to make one) or over all questions.
Candidates are always all (sentence, passage) pairs.

Examples:
  tt-zoo evaluate --run runs/static.run --qrels examples/squad_sample
  tt-zoo evaluate --bm25
  tt-zoo evaluate --model ict_bfs_wlp_512 --bm25 --train-fraction 0.8 --seed 0 \\
      --scann --json-out reqa_squad_80.json
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import MissingDataError, load_model, load_reqa
from tt_zoo.evaluation.tables import card_tables, format_table

BM25_FIELDS = ("sentence+passage", "sentence", "passage")  # tt_zoo.retrieval.bm25.FIELDS


# The ReQA options, which a --run evaluation does not take.
REQA_FLAGS = ("--squad", "--model", "--bm25", "--bm25-field", "--scann", "--split-file",
              "--train-fraction", "--seed", "--split-out", "--limit-questions", "--record-card")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", metavar="RUN", help="a TREC run file to score against --qrels")
    p.add_argument("--qrels", metavar="QRELS",
                   help="relevance judgements of the --run's queries: a TREC qrels file, a BEIR "
                        "qrels .tsv or a BEIR folder")
    p.add_argument("--recall-at", type=numbers.count(high=100_000), nargs="+", default=[10, 100],
                   metavar="K", help="the k of each R@k a --run is scored with")
    p.add_argument("--squad", help="SQuAD-format JSON (default: $TT_ZOO_DATA/squad/"
                                   "dev-v1.1.json, else SQuAD validation from Hugging Face)")
    p.add_argument("--model", action="append", default=[], metavar="NAME_OR_PATH",
                   type=parsing.model_name_or_path,
                   help="a registered model name or a saved model directory (repeatable)")
    p.add_argument("--bm25", action="store_true", help="add the BM25 baseline row")
    p.add_argument("--bm25-field", default="sentence+passage", choices=BM25_FIELDS,
                   help="the candidate text BM25 indexes")
    p.add_argument("--scann", action="store_true",
                   help="also search each model's candidates through a ScaNN index")
    p.add_argument("--split-file", help="a split written by tt_zoo.evaluation.reqa.save_split")
    p.add_argument("--train-fraction", type=numbers.SPLIT_FRACTION,
                   help="make a cold-start split with this training fraction (0.01, 0.05, 0.8)")
    p.add_argument("--seed", type=numbers.SEED, default=0, help="seed of the split made here")
    p.add_argument("--split-out", help="save the split made here (JSON)")
    p.add_argument("--limit-questions", type=numbers.count(),
                   help="evaluate only the first N evaluation questions (smoke tests)")
    p.add_argument("--json-out", help="write the table and settings as JSON here")
    p.add_argument("--record-card", action="store_true",
                   help="write the measured numbers into each --model's metadata.json and "
                        "MODEL_CARD.md (models given as export directories)")


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    p = parsing.command_parser("evaluate", __doc__, add_arguments)
    args = p.parse_args(argv)
    if args.run or args.qrels:
        if not (args.run and args.qrels):
            p.error("--run and --qrels go together: a run is scored against judgements")
        given = [f for f in REQA_FLAGS if any(a == f or a.startswith(f + "=") for a in argv)]
        if given:
            p.error(f"{', '.join(given)}: ReQA options; a --run is scored against --qrels "
                    "alone (evaluate a model on ReQA without --run)")
        for flag, path in (("--run", args.run), ("--qrels", args.qrels)):
            if not pathlib.Path(path).exists():
                parsing.exit_missing(p, f"{flag}: {path} does not exist")
        return args
    if args.split_file and args.train_fraction is not None:
        p.error("give either --split-file or --train-fraction, not both")
    if not args.model and not args.bm25:
        p.error("nothing to evaluate: give --run RUN --qrels QRELS, or --model NAME_OR_PATH "
                "and/or --bm25 (ReQA)")
    if args.record_card and not all(pathlib.Path(m).is_dir() for m in args.model):
        p.error("--record-card writes into export directories: give each --model as a path")
    if args.squad and not pathlib.Path(args.squad).is_file():
        p.error(f"--squad: {args.squad} does not exist")
    return args


def evaluate_run(args) -> dict:
    """Scores `args.run` against `args.qrels` (`tt_zoo.evaluation.trec`), prints the table."""
    from tt_zoo.evaluation.trec import evaluate_files  # noqa: PLC0415 (pytrec_eval)
    from tt_zoo.errors import TtZooError  # noqa: PLC0415

    try:
        scores, counts, table = evaluate_files(args.run, args.qrels, args.recall_at)
    except TtZooError as e:
        sys.exit(f"tt-zoo evaluate: {e}")
    print(table)
    result = {"run": args.run, "qrels": args.qrels, "scores": scores, **counts}
    if args.json_out:
        from tt_zoo.atomic_io import write_json  # noqa: PLC0415
        write_json(args.json_out, result)
        print(f"Wrote {args.json_out}")
    return result


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.run:
        return evaluate_run(args)
    from tt_zoo.evaluation import metrics as retrieval_metrics, reqa as reqa_lib

    t0 = time.perf_counter()
    try:
        reqa = load_reqa(args.squad)
    except MissingDataError as e:
        sys.exit(f"tt-zoo evaluate: {e}")
    print(reqa.summary())
    question_ids, where = reqa_lib.evaluation_questions(
        reqa, split_file=args.split_file, train_fraction=args.train_fraction, seed=args.seed,
        split_out=args.split_out, limit=args.limit_questions)
    print(f"Evaluating on {len(question_ids):,} questions ({where}) against "
          f"{len(reqa.candidates):,} candidates.")
    models = ((name, load_model(name, "evaluate")) for name in args.model)  # one at a time
    rows = retrieval_metrics.table3_rows(reqa, question_ids, models, scann=args.scann,
                                         bm25_field=args.bm25_field if args.bm25 else None)
    print(format_table(rows))
    if args.record_card:
        from tt_zoo.artifacts.export import update_metadata
        for path, tables in card_tables(rows, where, len(question_ids), len(reqa.candidates)):
            update_metadata(path, metrics=tables)
            print(f"Recorded the numbers in {path / 'MODEL_CARD.md'}")
    result = {"squad": reqa.source, "questions": where, "num_questions": len(question_ids),
              "num_candidates": len(reqa.candidates), "rows": rows,
              "seconds": time.perf_counter() - t0}
    if args.json_out:
        from tt_zoo.atomic_io import write_json
        write_json(args.json_out, result)
        print(f"Wrote {args.json_out}")
    return result


if __name__ == "__main__":
    main()
