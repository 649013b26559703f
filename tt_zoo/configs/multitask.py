"""The settings of a multi-task run (Maillard et al. 2021, Sec. 3-4): ``tt-zoo multitask``'s
flags as one typed run config, `MultitaskConfig` (groups ``model``, ``lengths``, ``tasks``,
``training``, ``output``), recorded whole in the export (``run_config``) and read back by
``--config``; `tt_zoo.training.multitask` runs it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar, Optional, Tuple

from tt_zoo import numbers
from tt_zoo.configs.finetune import ModelArguments as InitialModelArguments
from tt_zoo.configs.run_config import (ComputeArguments, RunConfig, SequenceLengthArguments,
                                       TrainOutputArguments, option)
from tt_zoo.data.task_choices import BATCHING, DISTILL_LOSSES, QUERY_TOWERS

# Where the ODQA answers are cached, and the forms of --task (`tt_zoo.training.multi_task_tasks`
# reads both from here).
ODQA_CACHE = os.path.join("runs", "odqa_cache")
SPEC_FORMS = ("webquestions, curatedtrec, reqa, lexical[:N], pairs:DIR[:MAX], "
              "jsonl:PATH[:CLASS] or distill:FILE")


@dataclasses.dataclass(frozen=True)
class ModelArguments(InitialModelArguments):
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
class DistillationArguments:
    """Distillation tasks (--task distill:FILE): the student learns a teacher's scores over
    each question's candidates (`tt_zoo.modeling.distillation`)."""

    distill_loss: str = option(
        "kl", "kl: KL between the teacher's softmax over the K candidates and the student's "
              "(RocketQAv2, Ren et al. 2021); margin_mse: the squared error of the score "
              "margins of the teacher's best over each other candidate (Hofstatter et al. 2020)",
        choices=DISTILL_LOSSES)
    distill_candidates: int = option(
        8, "K candidates of each question a step: the teacher's best and K - 1 others drawn "
           "from the file's list", metavar="K", number=numbers.count(low=2, high=10_000))
    distill_temperature: Optional[float] = option(
        None, "kl: T dividing the teacher's scores (default: the student's own loss temperature, "
              "0.05 for the cosine models, else 1; the student's scores are divided by that)",
        metavar="T", number=numbers.positive(10_000.0))


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
    (`tt_zoo.configs.run_config.RUN_CONFIG_KEY`)."""

    model: ModelArguments
    lengths: SequenceLengthArguments
    tasks: TaskArguments
    distillation: DistillationArguments
    training: TrainingArguments
    compute: ComputeArguments
    output: OutputArguments

    COMMAND: ClassVar[str] = "multitask"
    ONE_OF = (("model", "init"),)
