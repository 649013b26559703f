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

--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `MultitaskConfig`); flags given with it override it.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from typing import Optional, Tuple

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import (check_init_vocab, check_model_export_target,
                               check_query_weight_flags, default_data_dir)
from tt_zoo.data.tasks import BATCHING, QUERY_TOWERS
from tt_zoo.training import initial_models
from tt_zoo.training.run_config import (RUN_CONFIG_KEY, RunConfig,  # noqa: F401 (the record's key)
                                        SequenceLengthArguments, TrainOutputArguments, option)
from tt_zoo.training.multi_task_tasks import (ODQA_CACHE, SPEC_FORMS, WIKI_QA, SpecError,
                                              class_overrides, needed_files, task_plan)

COMMAND = "multitask"


@dataclasses.dataclass(frozen=True)
class ModelArguments(initial_models.ModelArguments):
    """The model to train: --init NAME_OR_PATH (a registered model or an export), or --init none
    (towers at their random initialisation, shaped by the flags below, as tt-zoo finetune)."""

    model: Optional[str] = option(
        None, "the same as --init NAME_OR_PATH (tt-zoo finetune's spelling)",
        metavar="NAME_OR_PATH")
    init: Optional[str] = option(
        None, "a registered model name or an export directory (tt_zoo.load), or 'none': towers "
              "at their random initialisation, built here", metavar="NAME_OR_PATH|none")
    name: Optional[str] = option(
        None, "model name written to the export's metadata (default: the initial model's name "
              "+ _multitask; none_DIM_multitask for --init none)")
    query_idf: Optional[float] = option(
        None, "a ColBERT model only: weigh each query token's MaxSim by its idf ** ALPHA over "
              "the Wikispeedia passages ($TT_ZOO_DATA), the [MASK] tokens by "
              "--query-mask-weight (BERTScore's importance weighting, "
              "tt_zoo.modeling.query_token_weights); trained with and kept in the export",
        metavar="ALPHA", number=numbers.QUERY_WEIGHT)
    query_mask_weight: float = option(
        0.0, "with --query-idf: the weight of the query augmentation's [MASK] tokens (1: "
             "ColBERT's)", number=numbers.QUERY_WEIGHT)


@dataclasses.dataclass(frozen=True)
class TaskArguments:
    """The tasks trained on together (Maillard et al. 2021, Sec. 3-4; the forms are listed
    below)."""

    task: Tuple[str, ...] = option((), f"a task: {SPEC_FORMS}", metavar="SPEC")
    weight: Tuple[str, ...] = option(
        (), "W times the task's share of the batches (default 1: the shuffled union, "
            "each task in proportion to its size)", metavar="NAME=W")
    few_shot: Tuple[str, ...] = option(
        (), "train on N of the task's examples, drawn with --seed (Maillard et al.: "
            "128 and 1,024)", metavar="NAME=N")
    markers: bool = option(
        False, "one marker word per task class, added to the vocabulary and prepended to the "
               "queries (Sec. 4.3); recorded in the export, whose encode_queries adds them")
    query_towers: str = option(
        "shared", "shared: one query tower for every task; per-class: one query tower per task "
                  "class, each a copy of the initial one, picked by the query's marker word in "
                  "the graph (Sec. 4.3; needs --markers and tasks of two classes or more); one "
                  "document tower either way", choices=QUERY_TOWERS)
    untie_towers: bool = option(
        False, "a model whose queries and documents share one tower (the CPU-scale BoW-MLP and "
               "tiny BERT) gets a document tower of its own, a copy, so the sides train apart "
               "(multi-task DPR's two encoders; --query-towers per-class unties too)")
    task_class: Tuple[str, ...] = option(
        (), "the task's class instead of its own (e.g. reqa=sentence_qa: the two QA tasks get "
            "two markers, and two towers with --query-towers per-class)", metavar="NAME=CLASS")
    batching: str = option(
        "mixed", "mixed: every batch draws from the tasks by weight (the shuffled union); "
                 "homogeneous: one task fills a batch", choices=BATCHING)
    remine_with: Optional[str] = option(
        None, "re-mine the confounders of the tasks over Wikispeedia (webquestions, "
              "curatedtrec) with this model: its first top passage holding no answer "
              "(Sec. 4.4)", metavar="NAME_OR_PATH")
    reqa_train_fraction: float = option(
        0.8, "the reqa task: training fraction of the ReQA-SQuAD(dev) cold-start split",
        number=numbers.SPLIT_FRACTION)
    split_seed: int = option(
        0, "seed of the ReQA split and of the confounders' random fallback (tasks are data: "
           "--seed varies the training)", number=numbers.SEED)
    positives: int = option(
        1, "each example's first N positives (answer-holding passages of a QA task) as "
           "examples of their own (1: DPR's rule, the first only)", metavar="N",
        number=numbers.count())
    task_cache: Optional[str] = option(
        None, "where built tasks are kept, keyed by their inputs, for later runs (default: "
              "WORKDIR/tasks; share one across runs to build each task once)")


@dataclasses.dataclass(frozen=True)
class TrainingArguments:
    """Adam with warm-up and linear decay, one confounder per example (Maillard et al. 2021:
    batch 128, learning rate 2e-5)."""

    steps: int = option(1000, "optimizer steps", number=numbers.count())
    batch_size: int = option(128, "examples a step", number=numbers.count())
    learning_rate: float = option(
        2e-5, "Adam peak learning rate (Maillard et al.'s BERT; the BoW-MLP towers take ~5e-4)",
        number=numbers.LEARNING_RATE)
    warmup_fraction: float = option(0.1, "share of the steps spent warming up",
                                    number=numbers.fraction(high_open=True))
    seed: int = option(0, "seed of the batches, of --few-shot and of --init none's weights",
                       number=numbers.SEED)


@dataclasses.dataclass(frozen=True)
class OutputArguments(TrainOutputArguments):
    """Checkpoints (a killed or finished run resumes), the export, the evaluation."""

    workdir: Optional[str] = option(
        None, "checkpoints, cached tasks and summary.json (default: runs/multitask/NAME)")
    eval: bool = option(
        False, "ODQA validation answer recall (WebQuestions val + CuratedTREC train over "
               f"Wikispeedia; answers cached in {ODQA_CACHE}) of the trained model, BM25 "
               "beside it")
    json_out: Optional[str] = option(None, "write settings, tasks, training and scores as JSON")


@dataclasses.dataclass(frozen=True)
class MultitaskConfig(RunConfig):
    """Every setting of a `tt-zoo multitask` run; recorded whole in its export and --json-out
    (`RUN_CONFIG_KEY`)."""

    model: ModelArguments
    lengths: SequenceLengthArguments
    tasks: TaskArguments
    training: TrainingArguments
    output: OutputArguments

    ONE_OF = (("model", "init"),)


def add_arguments(p: argparse.ArgumentParser) -> None:
    MultitaskConfig.add_arguments(p)


def parse_args(argv=None) -> MultitaskConfig:
    p = parsing.command_parser(COMMAND, __doc__, add_arguments)
    args = MultitaskConfig.parse(p, argv)
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
        if s.kind in ("pairs", "jsonl") and not os.path.exists(s.path):
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

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        return multitask(config, data_dir=default_data_dir(), argv=argv)
    except MultitaskError as e:
        sys.exit(f"tt-zoo {COMMAND}: {e}")


if __name__ == "__main__":
    main()
