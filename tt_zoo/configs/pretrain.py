"""The run config of `tt-zoo pretrain`: `PretrainConfig`, its argument groups, declared once
(the shared ones in `tt_zoo.configs.run_config`); `tt_zoo.training.pretrain_run` runs it, and a
registered variant (`tt_zoo.zoo.registry.ModelSpec.run`) holds one as its recipe. No
TensorFlow."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from tt_zoo import numbers
from tt_zoo.configs.run_config import (ComputeArguments, HardNegativeArguments, PairArguments,
                                       RunConfig, SequenceLengthArguments,
                                       TrainOutputArguments, option)

# tt_zoo.training.loop.STRATEGIES, repeated so that --help imports no TensorFlow (a test checks
# that they agree). TensorFlow and the modules that import it load after argparse.
STRATEGIES = ("cpu", "mirrored", "multiworker", "tpu")


@dataclasses.dataclass(frozen=True)
class ModelArguments:
    """The registered variant and its towers (None: the registry's setting)."""

    variant: Optional[str] = option(None, "a registered name, e.g. ict_bfs_wlp_512 (tt-zoo list)")
    vocab: Optional[str] = option(
        None, "vocab.txt of the model (default: the project's saved_models/vocab/vocab.txt in a "
              "git clone, else $TT_ZOO_DATA/bert-vocab/vocab.txt)")
    tower_shape: Optional[str] = option(
        None, "explicit BERT shape LAYERS,HIDDEN,HEADS overriding the registry size (for smoke "
              "tests)")
    dropout: float = option(0.1, "dropout rate of the towers",
                            number=numbers.fraction(high_open=True))
    pooling: Optional[str] = option(
        None, "BERT aggregator: [CLS] (the paper) or mean of the final states (registry "
              "default)", choices=("cls", "mean"))
    share_towers: Optional[str] = option(
        None, "one tower for queries and documents (registry default)", choices=("yes", "no"))
    normalize: Optional[str] = option(
        None, "L2-normalised embeddings, cosine scores (registry default)",
        choices=("yes", "no"))
    temperature: Optional[float] = option(
        None, "divides the logits in the loss (registry default; 0 = none)",
        number=numbers.non_negative(100.0))
    bow_output_activation: Optional[str] = option(
        None, "BoW-MLP output layer (registry default)", choices=("tanh", "linear"))
    # The older spelling of --precision, kept for the run configs that record it (every
    # shipped pretrained model's: "float32"); `training_policy` reads it.
    dtype_policy: Optional[str] = option(
        None, "older spelling of --precision (float32 or mixed_bfloat16), read when --precision "
              "is auto", choices=("float32", "mixed_bfloat16"))
    init_from: Optional[str] = option(
        None, "warm start: the towers start from this export's weights (a registered name or an "
              "export directory of the same architecture) and train with this run's own "
              "schedule; recorded in the card", metavar="NAME_OR_PATH")


@dataclasses.dataclass(frozen=True)
class DataArguments(PairArguments):
    """Pretraining pairs (tt-zoo make-pairs; Chang et al. 2020, Sec. 3), or MLM examples."""

    mlm_examples: Optional[str] = option(None, "an MLM example directory (for mlm variants)")


@dataclasses.dataclass(frozen=True)
class TrainingArguments:
    """Schedule, optimizer and devices (Chang et al. 2020, Sec. 5.1: Adam, 10% linear warm-up
    then linear decay; None: the registry's recipe)."""

    steps: Optional[int] = option(None, "optimizer steps (registry default; 0: export the "
                                        "initialised model)", number=numbers.count(low=0))
    batch_size: Optional[int] = option(None, "global batch (registry default)",
                                       number=numbers.count())
    learning_rate: Optional[float] = option(
        None, "peak Adam learning rate (registry default)", number=numbers.LEARNING_RATE)
    warmup_fraction: Optional[float] = option(
        None, "fraction of the steps of linear warm-up (registry default)",
        number=numbers.fraction(high_open=True))
    seed: int = option(0, "seed of initialisation and batches", number=numbers.SEED)
    strategy: str = option(
        "cpu", "tf.distribute strategy: this CPU, local GPUs, several workers or a TPU",
        choices=STRATEGIES)
    tpu: Optional[str] = option(None, "TPU name/address for --strategy tpu")
    jit_compile: str = option(
        "auto", "compile the training step with XLA (auto: yes for --strategy tpu). The step "
                "holds no strings (pairs are tokenized on the host), so it compiles; under XLA "
                "dropout ignores the seed, so a resumed run is not bit-exact",
        choices=("auto", "yes", "no"))
    grad_cache_chunk: int = option(
        0, "GradCache (Gao et al. 2021): embed and back-propagate N pairs at a time, with the "
           "gradients of the whole batch and the activation memory of N (0: off; the batch per "
           "replica must be a multiple of N)", number=numbers.count(low=0))


@dataclasses.dataclass(frozen=True)
class NegativeArguments(HardNegativeArguments):
    """BM25 hard negatives beside the in-batch ones (Multi-task DPR's hard confounders,
    Maillard et al. 2021; tt_zoo.mining.hard_negatives), mined once and stored beside the
    pairs."""

    hard_negatives_dir: Optional[str] = option(
        None, "where the mined negatives are stored (default PAIRS/hard_negatives; for a "
              "read-only or remote pair directory)")


@dataclasses.dataclass(frozen=True)
class ClusteringArguments:
    """Batches drawn from k-means clusters of the documents (tt_zoo.training.clustered_batches)."""

    cluster_every: int = option(
        0, "clustered batches (ProQA, Xiong et al. 2020, Sec. 3.2): every N steps, embed the "
           "next N steps' documents with the current document tower, k-means them and draw "
           "each batch from one cluster (0: off, random batches)",
        number=numbers.count(low=0))
    clusters: int = option(
        0, "clusters a round for --cluster-every (0: N // 4, about four batches a cluster)",
        number=numbers.count(low=0))
    cluster_length: int = option(
        0, "embed only the first L tokens of each document for the clustering (0: the "
           "document length); cheaper re-encoding", number=numbers.count(low=0, high=8192))
    cluster_start: Optional[int] = option(
        None, "first clustered step, a multiple of --cluster-every (default: --cluster-every; "
              "the steps before it are random batches)", number=numbers.count())
    cluster_encode_batch: int = option(
        256, "documents a forward pass when re-encoding for the clustering",
        number=numbers.count())
    cluster_threads: int = option(
        1, "threads of the k-means for --cluster-every (0: every core; 1 is faster when "
           "TensorFlow and other jobs share a few cores)", number=numbers.count(low=0, high=1024))


@dataclasses.dataclass(frozen=True)
class EvaluationArguments:
    """A zero-shot ReQA-SQuAD(dev) curve while training."""

    eval_every: int = option(
        0, "score ReQA-SQuAD(dev) zero-shot every N steps (0: never); the curve goes to "
           "WORKDIR/curve.jsonl", number=numbers.count(low=0))
    eval_questions: int = option(
        2000, "questions sampled (seed 0) for --eval-every; all candidates are used",
        number=numbers.count())
    squad: Optional[str] = option(
        None, "SQuAD v1.1 JSON for --eval-every ($TT_ZOO_DATA/squad/dev-v1.1.json)")


@dataclasses.dataclass(frozen=True)
class PretrainConfig(RunConfig):
    """Every setting of a `tt-zoo pretrain` run; recorded whole in its summary and export
    (`RUN_CONFIG_KEY`)."""

    model: ModelArguments
    lengths: SequenceLengthArguments
    data: DataArguments
    training: TrainingArguments
    compute: ComputeArguments
    negatives: NegativeArguments
    clustering: ClusteringArguments
    evaluation: EvaluationArguments
    output: TrainOutputArguments

    COMMAND: ClassVar[str] = "pretrain"
    REQUIRED = ("variant",)
