"""Train one retriever on several tasks at once (Maillard et al. 2021), resumable, and export it.

Multi-task DPR (Maillard et al. 2021, *Multi-task Retrieval for Knowledge-Intensive Tasks*,
Sec. 3-4) trains one query and one passage encoder on the union of several tasks' training
sets, each example a (query, positive passage, one BM25 "hard confounder") triple
(`tt_zoo.training.multi_task`); optionally with one marker word per task class prepended to the
queries (--markers, Sec. 4.3), with one query tower per task class picked by that marker
(--query-towers per-class, Sec. 4.3's task-specific query encoders; `TaskRoutedTower`) and with
confounders re-mined by a trained model (--remine-with, Sec. 4.4, "adversarial confounder
selection"). The tasks (--task SPEC, repeatable):

  webquestions        WebQuestions trainmodel over Wikispeedia cut into 100-word passages
                      ($TT_ZOO_DATA): positives = the answer-holding passages of BM25's top 100
                      (DPR's rule), one BM25 confounder holding no answer
  curatedtrec         CuratedTREC train, built the same way. It is one of the two ODQA
                      validation sets: a model trained on it is not validated on it any more
  reqa                the training part of a ReQA-SQuAD(dev) cold-start split
                      (--reqa-train-fraction, --split-seed): gold candidate + BM25 confounder
  lexical[:N]         BM25 as the teacher (SPAR's lexical model, Chen et al. 2021): N (100,000)
                      word spans of random Wikispeedia passages as queries, BM25's top 3
                      passages as positives, its passage at a rank in [8, 20) as confounder;
                      no question set is read
  pairs:DIR[:MAX]     a pair directory (tt-zoo make-pairs), its first MAX pairs, with its
                      stored BM25 negative (mined and stored beside the pairs the first time)
  jsonl:PATH[:CLASS]  any task file: one {"query", "positives", "negatives"?, "answers"?} a
                      line (tt_zoo.data.tasks.read_task_jsonl); CLASS (default qa) is its task
                      class, e.g. self_supervised
  distill:FILE        distillation: a teacher-scores file (tt-zoo teacher-scores) of questions
                      with candidates over Wikispeedia's 100-word passages scored by a teacher;
                      each step gives each question --distill-candidates K of them (the
                      teacher's best and K - 1 others) and the student learns the teacher's
                      scores (--distill-loss kl: RocketQAv2's listwise KL at
                      --distill-temperature; margin_mse: Hofstatter et al.'s Margin-MSE). Its
                      batches hold only its questions; the file's collection must be this one

A task's NAME (for --weight, --few-shot and --task-class) is the spec's word, the pair
directory's name, or the task file's name without .jsonl. A task's class (one marker, and with
--query-towers per-class one query tower, per class) is qa for the named tasks,
self_supervised for pairs, CLASS for a task file, or --task-class NAME=CLASS's. Tasks built
from a collection (webquestions, curatedtrec, reqa, lexical, and any re-mined task) are cached in
WORKDIR/tasks/NAME.jsonl (or --task-cache), with NAME.json beside it recording what defines the
task; a rerun reads them back. --positives N makes each of an example's first N positives an
example of its own. Training checkpoints in WORKDIR/checkpoints: the same command resumes a
killed run exactly.

Examples:
  tt-zoo multitask --init bow_mlp_ict_bfs_wlp_512 --task webquestions --task reqa \\
      --steps 800 --batch-size 128 --learning-rate 5e-4 --eval --export runs/models/mt
  tt-zoo multitask --init none --encoder bow_mlp --embedding-dim 128 --task jsonl:a.jsonl \\
      --task jsonl:b.jsonl:self_supervised --markers --weight b=2 --few-shot a=128 --steps 200
  tt-zoo multitask --init bow_mlp_ict_bfs_wlp_512 --task webquestions --task reqa \\
      --task-class reqa=sentence_qa --markers --query-towers per-class --steps 800
  tt-zoo multitask --init minilm_l6_384 --task distill:runs/distill/webquestions.npz \\
      --task reqa --distill-loss kl --distill-candidates 16 --steps 2000 --export runs/models/d

--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `MultitaskConfig`); flags given with it override it.
"""

from __future__ import annotations

import os
import sys

from tt_zoo.cli import parsing
from tt_zoo.cli.common import (check_init_vocab, check_model_export_target,
                               check_query_weight_flags, default_data_dir, run_training)
from tt_zoo.training.multi_task_tasks import (FILE_KINDS, SPEC_FORMS, WIKI_QA, SpecError,
                                              class_overrides, needed_files, task_plan)
from tt_zoo.configs.multitask import MultitaskConfig
from tt_zoo.configs.run_config import RUN_CONFIG_KEY  # noqa: F401 (the record's key)

COMMAND = "multitask"


add_arguments = MultitaskConfig.add_arguments  # (the flags of its run config)


def parse_args(argv=None) -> MultitaskConfig:
    p, args = parsing.parse_run_config(MultitaskConfig, __doc__, argv)
    if not args.task:
        p.error(f"give at least one --task SPEC ({SPEC_FORMS})")
    try:
        tasks = MultitaskConfig.from_namespace(args).tasks
        specs, _, _ = task_plan(tasks)
        overrides = class_overrides(tasks, specs)
    except SpecError as e:
        p.error(str(e))
    if args.query_towers == "per-class":
        if not args.markers:
            p.error("--query-towers per-class picks each query's tower by its task class's "
                    "marker word: give --markers too")
        classes = sorted({overrides.get(s.name, s.task_class) for s in specs})
        if len(classes) < 2:
            p.error(f"--query-towers per-class: every task is of class {classes[0]!r}, and one "
                    "query tower for one class is the shared tower (--query-towers shared); "
                    "give tasks of two classes, e.g. --task-class reqa=sentence_qa")
    data = default_data_dir()
    for s in specs:
        for path in needed_files(s, data):
            if not path.exists():
                parsing.exit_missing(p, f"--task {s.spec}: {path} does not exist (set "
                                        "TT_ZOO_DATA to the shared data folder)")
        if s.kind in FILE_KINDS and not os.path.exists(s.path):
            p.error(f"--task {s.spec!r}: {s.path} does not exist")
    if args.remine_with and not any(s.kind in WIKI_QA for s in specs):
        p.error(f"--remine-with re-mines the confounders of the tasks over Wikispeedia "
                f"({', '.join(WIKI_QA)}); no --task is one of them")
    if args.query_idf is not None:
        check_query_weight_flags(p, args)
        if not (data / "wikispeedia").exists():
            parsing.exit_missing(p, f"--query-idf: {data / 'wikispeedia'} does not exist (set "
                                    "TT_ZOO_DATA to the shared data folder)")
    check_init_vocab(p, args)
    if args.export:
        check_model_export_target(p, args.export, "--export")
    return MultitaskConfig.from_namespace(args)


def main(argv=None) -> dict:
    return run(parse_args(argv), sys.argv[1:] if argv is None else list(argv))


def run(config: MultitaskConfig, argv: list) -> dict:
    """`tt_zoo.training.multitask` of `config` over the data folder (`default_data_dir`); exits
    with its `MultitaskError` in one line naming the command. `argv`: the command line,
    recorded."""
    from tt_zoo.training.multitask_run import MultitaskError, multitask  # noqa: PLC0415

    return run_training(COMMAND, multitask, config, argv, MultitaskError)


if __name__ == "__main__":
    main()
