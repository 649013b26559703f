"""The run config of `tt-zoo adapt-queries`: `AdaptQueriesConfig` and its argument groups;
`tt_zoo.training.query_adaptation_run` runs it. No TensorFlow."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional, Tuple

from tt_zoo import numbers
from tt_zoo.configs.run_config import (ComputeArguments, RunConfig, TrainedModelArguments,
                                       TrainOutputArguments, option)


@dataclasses.dataclass(frozen=True)
class ModelArguments(TrainedModelArguments):
    """The trained two-tower model whose query tower is adapted."""

    name: Optional[str] = option(
        None, "model name written to the export's metadata (default: the model's + _adapted)")


@dataclasses.dataclass(frozen=True)
class DataArguments:
    """The training questions and the passages they are asked over."""

    questions: Tuple[str, ...] = option(
        (), "a question set: a name under $TT_ZOO_DATA/odqa (default: webquestions-trainmodel) "
            "or a WebQuestions JSON, CuratedTREC TSV or JSONL file; repeat for several",
        metavar="NAME_OR_PATH")
    articles: Optional[str] = option(
        None, "the article source cut into passages (default: $TT_ZOO_DATA/wikispeedia)")
    words: int = option(100, "words per passage (DPR's 100)", number=numbers.count(high=10000))
    passage_embeddings: Optional[str] = option(
        None, "the model's document embeddings of those passages, one float32 row per passage "
              "in order (.npy; e.g. the file tt-zoo odqa --cache-dir writes); checked on a sample "
              "of rows. Default: encoded into the workdir first (resumable)")
    limit_articles: Optional[int] = option(
        None, "cut only the first N articles into passages (a smaller index, as tt-zoo odqa "
              "--limit-articles)", number=numbers.count())
    teacher_scores: Optional[str] = option(
        None, "a teacher's scores of each training question's candidates over these passages "
              "(.npz, tt-zoo teacher-scores): its ranking is distilled (listwise KL, "
              "--distill-weight); every training question must be in it")


@dataclasses.dataclass(frozen=True)
class TrainingArguments:
    """The query tower's training: Adam at a constant rate, the full-index softmax."""

    epochs: float = option(3.0, "passes over the answerable training questions",
                           number=numbers.positive(1000.0))
    batch_size: int = option(32, "questions a step", number=numbers.count())
    learning_rate: float = option(1e-5, "Adam learning rate", number=numbers.LEARNING_RATE)
    temperature: Optional[float] = option(
        None, "softmax temperature tau (default: the model's own loss temperature, else 1)",
        number=numbers.positive(100.0))
    train_token_embeddings: bool = option(
        False, "train the query tower's token embedding table too (default frozen: the two "
               "towers keep one vocabulary table)")
    distill_weight: float = option(
        0.5, "with --teacher-scores: the teacher's share w of the loss, (1 - w) the answers' "
             "(1: the teacher alone)", number=numbers.fraction(low_open=True))
    teacher_temperature: Optional[float] = option(
        None, "with --teacher-scores: the temperature T of the teacher's softmax (default: tau)",
        number=numbers.positive(100.0))
    seed: int = option(0, "seed of the batch order and dropout", number=numbers.SEED)


@dataclasses.dataclass(frozen=True)
class OutputArguments(TrainOutputArguments):
    """Checkpoints, the export and the JSON record."""

    json_out: Optional[str] = option(None, "write the run's record (settings, counts, loss) as "
                                           "JSON")


@dataclasses.dataclass(frozen=True)
class AdaptQueriesConfig(RunConfig):
    """Every setting of a `tt-zoo adapt-queries` run; recorded whole in its export."""

    COMMAND: ClassVar[str] = "adapt-queries"

    model: ModelArguments
    data: DataArguments
    training: TrainingArguments
    compute: ComputeArguments
    output: OutputArguments
