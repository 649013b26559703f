"""Evaluate two-tower models and BM25 on ReQA, in the shape of Chang et al. 2020, Table 3.

Columns: encoder, pretraining, search, R@1, R@5, R@10, R@50, R@100, MRR (in %), over a split's
test questions (``--split-file``, or ``--train-fraction`` + ``--seed`` to make one) or over all
questions. Candidates are always all (sentence, passage) pairs (ReQA, Ahmad et al. 2019).

Examples:
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
from tt_zoo.cli.common import MissingDataError, load_reqa
from tt_zoo.evaluation.tables import COLUMNS, format_table

BM25_FIELDS = ("sentence+passage", "sentence", "passage")  # tt_zoo.retrieval.bm25.FIELDS


def _libs():
    """The tt_zoo modules, imported after the arguments are checked (tt_zoo imports TensorFlow)."""
    from tt_zoo.evaluation import reqa, metrics as retrieval_metrics

    return reqa, retrieval_metrics


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    p = parsing.command_parser("evaluate", __doc__, add_arguments)
    args = p.parse_args(argv)
    if args.split_file and args.train_fraction is not None:
        p.error("give either --split-file or --train-fraction, not both")
    if not args.model and not args.bm25:
        p.error("nothing to evaluate: give --model NAME_OR_PATH and/or --bm25")
    if args.record_card and not all(pathlib.Path(m).is_dir() for m in args.model):
        p.error("--record-card writes into export directories: give each --model as a path")
    if args.squad and not pathlib.Path(args.squad).is_file():
        p.error(f"--squad: {args.squad} does not exist")
    return args


def evaluation_questions(args, reqa):
    """The question ids to score and a description of where they come from."""
    reqa_lib, _ = _libs()
    if args.split_file:
        split = reqa_lib.load_split(args.split_file)
        ids, where = split.test, f"test part of {args.split_file}"
    elif args.train_fraction is not None:
        split = reqa_lib.make_splits(reqa, args.train_fraction, seed=args.seed)
        if args.split_out:
            reqa_lib.save_split(split, args.split_out)
        ids = split.test
        where = f"test part of a {args.train_fraction:g} cold-start split, seed {args.seed}"
    else:
        ids, where = reqa.question_ids, "all questions"
    if args.limit_questions:
        ids = ids[:args.limit_questions]
        where += f", first {len(ids)}"
    return ids, where


def load_model(name_or_path: str):
    import tt_zoo  # Lazy: the models are heavy.

    return tt_zoo.load(name_or_path)


def scann_index_builder(embeddings):
    from tt_zoo.retrieval.index import EmbeddingIndex  # Lazy: imports TensorFlow and ScaNN.

    return EmbeddingIndex(embeddings, [str(i) for i in range(len(embeddings))], backend="scann")


def record_cards(args, rows, where, num_questions, num_candidates) -> None:
    """Adds this evaluation's numbers (in %) to each evaluated export's card."""
    from tt_zoo.serving.export import update_metadata
    search = "exact search"
    bm25 = next((r for r in rows if r["encoder"] == "BM25"), None)
    for row in rows:
        if row["encoder"] == "BM25" or row["search"] != "exact":
            continue
        table = {f"ReQA-SQuAD(dev), zero-shot, {where} ({num_questions:,} questions, "
                 f"{num_candidates:,} candidates), {search} (%)":
                 {c: round(100 * row[c], 2) for c in COLUMNS}}
        if bm25 is not None:
            table["BM25 on the same questions (%)"] = {c: round(100 * bm25[c], 2)
                                                       for c in COLUMNS}
        path = pathlib.Path(row["model"])
        update_metadata(path, metrics=table)
        print(f"Recorded the numbers in {path / 'MODEL_CARD.md'}")


def main(argv=None) -> dict:
    args = parse_args(argv)
    reqa_lib, retrieval_metrics = _libs()
    t0 = time.perf_counter()
    try:
        reqa = load_reqa(args.squad)
    except MissingDataError as e:
        sys.exit(f"tt-zoo evaluate: {e}")
    print(reqa.summary())
    question_ids, where = evaluation_questions(args, reqa)
    print(f"Evaluating on {len(question_ids):,} questions ({where}) against "
          f"{len(reqa.candidates):,} candidates.")
    rows = []
    if args.bm25:
        m = retrieval_metrics.evaluate_bm25(reqa, question_ids, field=args.bm25_field)
        rows.append({"encoder": "BM25", "pretraining": "-", "search": "exact",
                     **{c: m["exact"][c] for c in COLUMNS}, "details": m})
    for name in args.model:
        model = load_model(name)
        m = retrieval_metrics.evaluate_encoder(
            model, reqa, question_ids, build_index=scann_index_builder if args.scann else None)
        base = {"encoder": str(getattr(model, "encoder_name", name)),
                "pretraining": str(getattr(model, "pretraining", "?")), "model": name}
        rows.append({**base, "search": "exact", **{c: m["exact"][c] for c in COLUMNS},
                     "details": m})
        if m["index"] is not None:
            rows.append({**base, "search": "ScaNN", **{c: m["index"][c] for c in COLUMNS}})
    print(format_table(rows))
    if args.record_card:
        record_cards(args, rows, where, len(question_ids), len(reqa.candidates))
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
