"""The settings of an HDCT term-weight training run (Dai & Callan 2020): ``tt-zoo
train-term-weights``'s flags as one typed run config, `TermWeightConfig`, recorded whole in the
export (``run_config``) and read back by ``--config``; `tt_zoo.training.train_term_weighter` runs
it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional, Tuple

from tt_zoo import numbers
from tt_zoo.configs.run_config import PairArguments, RunConfig, TrainOutputArguments, option


@dataclasses.dataclass(frozen=True)
class ModelArguments:
    """The two-tower export whose encoder starts the term-weight model, and the card's name."""

    init_from: Optional[str] = option(
        None, "a two-tower export (registered name or directory) whose document tower's BERT "
              "encoder starts the model, or a term-weight export to train on",
        metavar="NAME_OR_PATH")
    name: Optional[str] = option(
        None, "name in the metadata (default: the export folder's name)")


@dataclasses.dataclass(frozen=True)
class LabelledTaskArguments:
    """Labelled tasks whose questions are the queries of the targets (DeepCT's supervision)."""

    task: Tuple[str, ...] = option(
        (), "a labelled task, as tt-zoo multitask reads it: webquestions, curatedtrec, reqa or "
            "jsonl:PATH[:CLASS]", metavar="SPEC")
    untitled: Tuple[str, ...] = option(
        (), "a task (by name) whose documents are read without their titles (reqa: the "
            "passage without the candidate's sentence)", metavar="NAME")
    reqa_train_fraction: float = option(
        0.8, "the reqa task's share of the ReQA-SQuAD(dev) cold-start split (its training part)",
        number=numbers.SPLIT_FRACTION)
    split_seed: int = option(0, "seed of the ReQA split and of the tasks' confounders",
                             number=numbers.SEED)
    task_cache: Optional[str] = option(
        None, "where the built tasks are kept (default: WORKDIR/tasks; tt-zoo multitask's "
              "cache may be shared)")


@dataclasses.dataclass(frozen=True)
class TrainingArguments:
    """MSE against the query-term targets (HDCT, Dai & Callan 2020), Adam with a linear
    warm-up, then a linear decay to 0."""

    steps: Optional[int] = option(None, "optimizer steps", number=numbers.count())
    batch_size: int = option(64, "documents per step", number=numbers.count())
    learning_rate: float = option(
        5e-4, "peak Adam learning rate (linear warm-up, then linear decay to 0)",
        number=numbers.LEARNING_RATE)
    warmup_fraction: float = option(0.1, "fraction of the steps of linear warm-up",
                                    number=numbers.fraction(high_open=True))
    seed: int = option(0, "seed of initialisation and batches", number=numbers.SEED)


@dataclasses.dataclass(frozen=True)
class TermWeightConfig(RunConfig):
    """Every setting of a `tt-zoo train-term-weights` run; recorded whole in its summary and
    export (`RUN_CONFIG_KEY`)."""

    model: ModelArguments
    data: PairArguments
    tasks: LabelledTaskArguments
    training: TrainingArguments
    output: TrainOutputArguments

    COMMAND: ClassVar[str] = "train-term-weights"
    REQUIRED = ("init_from", "steps", "export")
