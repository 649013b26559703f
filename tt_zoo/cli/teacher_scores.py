"""Mine candidates for distillation and score them with a teacher (RocketQAv2; Margin-MSE).

For every question of --questions (named sets or question files, as `tt-zoo odqa` takes them),
the union of the top --depth passages of BM25, of the student's dense search and of the
teacher's, over the article source cut into 100-word passages (Wikispeedia by default), each
scored by the teacher (<phi_t(q), psi_t(d)>) and flagged when it holds an answer
(`tt_zoo.mining.teacher_candidates`). Written to --output, a versioned .npz that records the
teacher, the student and the collection (`tt_zoo.data.teacher_scores`); `tt-zoo multitask
--task distill:FILE` trains on it and refuses it over another collection.

The passage embeddings are each model's .npy over the collection's rows: --teacher-embeddings
and --student-embeddings, by default the files `tt-zoo odqa --model NAME` keeps in --cache-dir.
A file recorded as another model's is refused; a missing one is encoded (resumable: the teacher's
takes hours on a CPU).

Example:
  tt-zoo teacher-scores --teacher mpnet_base_768 --student minilm_l6_384 \\
      --questions webquestions-trainmodel --output runs/distill/webquestions.npz
"""

from __future__ import annotations

import argparse
import sys
import time

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import check_new_file, default_data_dir, question_sets_or_exit
from tt_zoo.configs.multitask import ODQA_CACHE
from tt_zoo.data.question_sets import NAMED_SETS, VALIDATION

COMMAND = "teacher-scores"
DEPTH = 100  # tt_zoo.mining.teacher_candidates.DEPTH (numpy and bm25s stay out of --help)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--teacher", required=True, metavar="NAME_OR_PATH",
                   type=parsing.model_name_or_path,
                   help="the teacher: a registered model name or an export directory "
                        "(e.g. mpnet_base_768)")
    p.add_argument("--student", required=True, metavar="NAME_OR_PATH",
                   type=parsing.model_name_or_path,
                   help="the student whose own top passages join the candidates (e.g. "
                        "minilm_l6_384)")
    p.add_argument("--questions", action="append", required=True, metavar="SET_OR_FILE",
                   help=f"a named set ({', '.join(NAMED_SETS)}) or a .json/.tsv/.jsonl "
                        "question file (repeatable)")
    p.add_argument("--output", required=True, help="the teacher-scores file to write (.npz)")
    p.add_argument("--teacher-embeddings", default=None, metavar="NPY",
                   help="the teacher's passage embeddings (default: its file in --cache-dir)")
    p.add_argument("--student-embeddings", default=None, metavar="NPY",
                   help="the student's passage embeddings (default: its file in --cache-dir)")
    p.add_argument("--depth", type=numbers.count(high=10_000), default=DEPTH,
                   help="top passages taken from each search (default: %(default)s)")
    p.add_argument("--lexical-weight", type=numbers.fraction(high_open=True), default=0.0,
                   metavar="W",
                   help="a hybrid teacher: each candidate scored by BM25 and the teacher fused "
                        "convexly, w * minmax(BM25) + (1 - w) * minmax(teacher), on the teacher's "
                        "scale (choose w on validation questions, e.g. with python -m "
                        "benchmarks.fusion) (default: %(default)s, the teacher alone)")
    p.add_argument("--articles", default=None,
                   help="any article source tt_zoo reads (default: $TT_ZOO_DATA/wikispeedia)")
    p.add_argument("--passage-words", type=numbers.count(high=100_000), default=100,
                   help="words a passage (DPR: 100) (default: %(default)s)")
    p.add_argument("--cache-dir", default=ODQA_CACHE,
                   help="answer rows and passage embeddings are kept here between runs "
                        "(default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser(COMMAND, __doc__, add_arguments)
    args = p.parse_args(argv)
    if not args.output.endswith(".npz"):
        p.error(f"--output: a teacher-scores file ends in .npz (got {args.output})")
    check_new_file(p, args.output, args.overwrite)
    data = default_data_dir()
    args.articles = parsing.articles_or_exit(p, args.articles, data)
    args.data = data
    return args


def run(args) -> dict:
    from tt_zoo.data.teacher_scores import write_teacher_scores  # noqa: PLC0415
    from tt_zoo.errors import TtZooError  # noqa: PLC0415
    from tt_zoo.data.answer_passages import answered_passages  # noqa: PLC0415
    from tt_zoo.evaluation.document_embeddings import cache_file  # noqa: PLC0415
    from tt_zoo.evaluation.text_benchmarks import OdqaBenchmark  # noqa: PLC0415
    from tt_zoo.mining import teacher_candidates  # noqa: PLC0415

    sets = question_sets_or_exit(args.questions, args.data, prefix=f"tt-zoo {COMMAND}: ")
    for s in sets:
        if s.name in VALIDATION:
            print(f"WARNING: --questions {s.name} is an ODQA validation set "
                  "(tt_zoo.evaluation.odqa.VALIDATION): a model distilled on it is no longer "
                  "validated on it.", file=sys.stderr)
    progress = not args.no_progress
    answered = answered_passages(args.articles, sets, args.passage_words, progress=progress,
                                 cache_dir=args.cache_dir)
    collection = answered.collection
    found = [dict(zip(a.questions, a.rows)) for a in answered.sets]
    answer_rows = [[rows.get(q, frozenset()) for q in s.questions]
                   for s, rows in zip(sets, found)]
    from tt_zoo.cli.common import load_model  # noqa: PLC0415 (TensorFlow)

    models = {}
    for role in ("teacher", "student"):
        model = load_model(getattr(args, role), COMMAND)
        path = (getattr(args, f"{role}_embeddings")
                or cache_file(args.cache_dir, OdqaBenchmark.cache_prefix, model, len(collection)))
        try:
            embeddings = teacher_candidates.passage_embeddings(
                model, collection, path, flag=f"--{role}-embeddings", progress=progress,
                log=lambda line: print(line, file=sys.stderr))
        except TtZooError as e:
            sys.exit(f"tt-zoo {COMMAND}: {e}")
        models[role] = (model, embeddings)
    t = time.perf_counter()
    try:
        scores = teacher_candidates.build_teacher_scores(
            sets, collection, teacher=models["teacher"][0], student=models["student"][0],
            teacher_embeddings=models["teacher"][1], student_embeddings=models["student"][1],
            depth=args.depth, answer_rows=answer_rows, lexical_weight=args.lexical_weight,
            collection_source=(
                f"{args.articles}, {args.passage_words}-word passages"),
            progress=progress, log=lambda line: print(line, file=sys.stderr))
    except TtZooError as e:
        sys.exit(f"tt-zoo {COMMAND}: {e}")
    write_teacher_scores(scores, args.output)
    summary = {"output": args.output, **scores.summary(), "teacher": scores.meta["teacher"],
               "student": scores.meta["student"], "question_sets": scores.meta["question_sets"],
               "seconds": round(time.perf_counter() - t, 1)}
    print(f"Wrote {args.output}: {summary['questions']:,} questions, "
          f"{summary['candidates']:,} candidates (min/mean/max per question "
          f"{summary['per_question']}); the teacher's best holds an answer for "
          f"{summary['teacher_best_holds_answer']:.1%}")
    return summary


def main(argv=None) -> dict:
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
