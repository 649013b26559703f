"""The run config of `tt-zoo finetune`: `FinetuneConfig` and its argument groups, with
`ModelArguments`, the group that names the model a run starts from (`tt-zoo multitask` extends
it); `tt_zoo.training.finetune_run` runs it. No TensorFlow."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from tt_zoo import numbers
from tt_zoo.configs.run_config import (NO_PROGRESS_HELP, ComputeArguments,
                                       HardNegativeArguments, RunConfig,
                                       SequenceLengthArguments, TrainedModelArguments,
                                       option)


@dataclasses.dataclass(frozen=True)
class ModelArguments(TrainedModelArguments):
    """The model to fine-tune: a zoo name or an export, or towers at their random
    initialisation (--init none: the paper's "no pretraining" rows)."""

    init: Optional[str] = option(
        None, "'none': build an untrained model here (no pretraining)", choices=("none",))
    encoder: str = option("bert", "the tower of --init none: BERT or bag-of-words MLP",
                          choices=("bert", "bow_mlp"))
    size: str = option("tiny", "BERT tower size (tiny, mini, small, base)")
    num_layers: Optional[int] = option(None, "explicit BERT shape (overrides --size)",
                                       number=numbers.count(high=48))
    hidden_size: Optional[int] = option(None, "explicit BERT hidden size (overrides --size)",
                                        number=numbers.count(high=8192))
    num_attention_heads: Optional[int] = option(
        None, "explicit BERT attention heads (overrides --size)", number=numbers.count(high=128))
    inner_dim: Optional[int] = option(None, "explicit BERT feed-forward size (overrides --size)",
                                      number=numbers.count(high=32768))
    embedding_dim: int = option(512, "output dimension of both towers of --init none",
                                number=numbers.count(high=8192))
    vocab: Optional[str] = option(
        None, "vocab.txt for --init none (default: saved_models/vocab/vocab.txt if present, "
              "else $TT_ZOO_DATA/bert-vocab/vocab.txt)")
    name: Optional[str] = option(None, "model name written to the export's metadata")


@dataclasses.dataclass(frozen=True)
class DataArguments:
    """ReQA-SQuAD and its cold-start split (Chang et al. 2020, Sec. 5: 1%/5%/80% of the
    questions for training, 10% of them held out for validation)."""

    squad: Optional[str] = option(
        None, "SQuAD-format JSON (default: $TT_ZOO_DATA/squad/dev-v1.1.json)")
    train_fraction: Optional[float] = option(
        None, "make a cold-start split with this training fraction (0.01, 0.05, 0.8)",
        number=numbers.SPLIT_FRACTION)
    seed: int = option(0, "seed of the split, of --limit-questions, of shuffling and init",
                       number=numbers.SEED)
    split_file: Optional[str] = option(
        None, "load a split written by tt_zoo.evaluation.reqa.save_split")
    split_out: Optional[str] = option(None, "save the split made here (JSON)")
    limit_questions: Optional[int] = option(
        None, "keep a random, seeded subset of N questions (all candidates stay)",
        number=numbers.count())


@dataclasses.dataclass(frozen=True)
class TrainingArguments:
    """Fine-tuning with early stopping (paper: 2,000 steps, batch 512, Adam lr 5e-5)."""

    steps: int = option(2000, "optimizer steps at most", number=numbers.count())
    batch_size: int = option(512, "training questions a step (clamped to the training part)",
                             number=numbers.count())
    learning_rate: float = option(5e-5, "Adam learning rate", number=numbers.LEARNING_RATE)
    eval_every: Optional[int] = option(None, "steps between validation checks",
                                       number=numbers.count())
    patience: int = option(5, "validation checks without improvement before stopping",
                           number=numbers.count())
    min_delta: float = option(
        0.0, "smallest change of the validation value that counts as improvement",
        number=numbers.non_negative(1e6))
    validation_metric: str = option(
        "loss", "what early stopping watches on the validation part",
        choices=("loss", "R@1", "R@5", "R@10", "R@50", "R@100", "MRR"))
    log_dir: Optional[str] = option(None, "write the fine-tuning log (CSV, JSON) here")


@dataclasses.dataclass(frozen=True)
class OutputArguments:
    """The fine-tuned export, the evaluation and the JSON record."""

    output: Optional[str] = option(
        None, "export the fine-tuned model (SavedModel) to this directory")
    eval: bool = option(False, "evaluate on the split's test questions, with BM25 beside it")
    json_out: Optional[str] = option(
        None, "write settings, fine-tuning history and table as JSON")
    # --quiet: the old spelling, kept for the command lines that used it
    # (benchmarks/finetune_hard_negatives.py).
    no_progress: bool = option(False, NO_PROGRESS_HELP, hidden_aliases=("--quiet",))


@dataclasses.dataclass(frozen=True)
class FinetuneNegativeArguments(HardNegativeArguments):
    """Hard negatives among the ReQA candidates beside the in-batch ones: BM25's, or mined by a
    trained model (Maillard et al. 2021, Sec. 4.4); skipping the gold and answer-holding
    candidates, and with --hard-negatives-other-passages the gold passage's other sentences."""

    hard_negatives_from: Optional[str] = option(
        None, "mine the hard negatives with this model's exact search over the candidates "
              "(a zoo name or export, e.g. an earlier fine-tuned one) instead of BM25",
        metavar="NAME_OR_PATH")
    hard_negatives_other_passages: bool = option(
        False, "never take a sibling sentence of the gold passage as a hard negative: "
               "negatives from other paragraphs only")
    bm25_negatives: int = option(
        0, "K BM25 negatives per question beside the H --hard-negatives-from mines (other "
           "candidates; a sibling sentence of the gold passage allowed)", metavar="K",
        number=numbers.count(low=0, high=1000))


@dataclasses.dataclass(frozen=True)
class FinetuneConfig(RunConfig):
    """Every setting of a `tt-zoo finetune` run; recorded whole in its export and --json-out
    (`RUN_CONFIG_KEY`)."""

    model: ModelArguments
    lengths: SequenceLengthArguments
    data: DataArguments
    training: TrainingArguments
    compute: ComputeArguments
    negatives: FinetuneNegativeArguments
    output: OutputArguments

    COMMAND: ClassVar[str] = "finetune"
    ONE_OF = (("model", "init"),)
