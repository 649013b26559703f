"""What one run of the reproduce grid does, typed: `ReproduceConfig` (parsed by
`tt_zoo.cli.reproduce.parse_args`, read by every stage), its stages and default splits, and the
grid's `Budget` (made from the run configs it stands for, `Budget.of`) with ``--budget
FIELD=VALUE`` changes (`budget_with`)."""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
from typing import Optional, Sequence, Tuple

from tt_zoo import numbers


@dataclasses.dataclass(frozen=True)
class Budget:
    """The grid's one budget, every cell's, flat: its pretraining schedule, pairs and document
    length, and the ReQA fine-tuning its cells are scored with; what ``--budget FIELD=VALUE``
    changes and the results record (``budget``). `of` makes it from the run configs it stands
    for: the CPU-scale `tt-zoo pretrain` run of the registry and a `tt-zoo finetune` run.

    The defaults are the paper's (Chang et al. 2020, Sec. 5.1: batch 8,192, 100K steps, Adam
    1e-4 with 10% warm-up then linear decay, documents of 288 tokens; fine-tuning Adam 5e-5,
    2,000 steps x 512).

    Args:
      batch_size, steps, learning_rate, warmup_fraction: the pretraining schedule.
      pairs_per_article, max_doc_tokens: the pairs `tt-zoo make-pairs` makes (max_doc_tokens:
        the passage budget in whitespace words).
      vocab_size: the WordPiece vocabulary's size.
      document_length: the document tower's token budget.
      finetune_steps, finetune_batch_size, finetune_learning_rate, finetune_eval_every: the
        ReQA cold-start fine-tuning (`tt_zoo.training.finetuning`), with early stopping on the
        validation loss every `finetune_eval_every` steps.
      seed: seeds the pairs, the pretraining and the fine-tuning splits.
    """

    batch_size: int = 8192
    steps: int = 100_000
    learning_rate: float = 1e-4
    warmup_fraction: float = 0.1
    pairs_per_article: int = 4
    vocab_size: int = 8192
    max_doc_tokens: int = 288
    document_length: int = 288
    finetune_steps: int = 2000
    finetune_batch_size: int = 512
    finetune_learning_rate: float = 5e-5
    finetune_eval_every: int = 20
    seed: int = 0

    @classmethod
    def of(cls, pretrain, pairs, document_length: int, finetune) -> "Budget":
        """The budget of a `tt-zoo pretrain` run config (`PretrainConfig`: its schedule and
        seed), the pairs it reads (`tt_zoo.zoo.registry.PairRecipe`), the document length and a
        `tt-zoo finetune` run config (`FinetuneConfig`: the fine-tuning)."""
        schedule, tuning = pretrain.training, finetune.training
        return cls(batch_size=schedule.batch_size, steps=schedule.steps,
                   learning_rate=schedule.learning_rate,
                   warmup_fraction=schedule.warmup_fraction or cls.warmup_fraction,
                   pairs_per_article=pairs.pairs_per_article,
                   max_doc_tokens=pairs.max_doc_tokens, document_length=document_length,
                   finetune_steps=tuning.steps, finetune_batch_size=tuning.batch_size,
                   finetune_learning_rate=tuning.learning_rate,
                   finetune_eval_every=tuning.eval_every, seed=schedule.seed)


STAGES = ("data", "pretrain", "evaluate", "report", "ship")
SPLITS = (0.01, 0.05, 0.8)
# The budget fields the grid's commands take (its vocabulary is --vocab; each cell warms up as
# its variant's recipe says).
BUDGET_FIELDS = tuple(f.name for f in dataclasses.fields(Budget)
                      if f.name not in ("vocab_size", "warmup_fraction"))
# Each field's range: the one of the flag of the command the grid runs it with (tt-zoo
# pretrain, make-pairs, finetune), so a budget holds what those commands would take.
BUDGET_RANGES = {
    "batch_size": numbers.count(), "steps": numbers.count(),
    "learning_rate": numbers.LEARNING_RATE, "pairs_per_article": numbers.count(high=1_000_000),
    "max_doc_tokens": numbers.count(high=1_000_000), "document_length": numbers.TOKEN_BUDGET,
    "finetune_steps": numbers.count(), "finetune_batch_size": numbers.count(),
    "finetune_learning_rate": numbers.LEARNING_RATE, "finetune_eval_every": numbers.count(),
    "seed": numbers.SEED}
assert set(BUDGET_RANGES) == set(BUDGET_FIELDS), "every budget field needs its range"


def _budget_item(item: str):
    """FIELD=VALUE of the grid budget, the value parsed and range-checked as the field's flag
    is (`BUDGET_RANGES`); a ValueError names the field and its range."""
    name, sep, value = item.partition("=")
    if not sep or name not in BUDGET_RANGES:
        raise ValueError(f"expected FIELD=VALUE with FIELD one of {', '.join(BUDGET_FIELDS)} "
                         f"(got {item!r})")
    try:
        return name, BUDGET_RANGES[name](value)
    except argparse.ArgumentTypeError as e:
        raise ValueError(f"{name} {e}") from None


def budget_with(budget: Budget, changes: Sequence[str]) -> Budget:
    """`budget` with each FIELD=VALUE of `changes` made (a ValueError names a bad one)."""
    return dataclasses.replace(budget, **dict(_budget_item(item) for item in changes))


@dataclasses.dataclass(frozen=True)
class ReproduceConfig:
    """The grid's cells and stages, its one budget, the cold-start splits, and where things are.

    Args:
      cells: the registered variants to run, the grid's own first (`grid.CELLS` order).
      stages: the stages to run (`STAGES`; they run in that order).
      budget: the pretraining and fine-tuning budget of every cell (`grid.GRID` with the
        ``--budget`` changes).
      splits: cold-start training fractions (Chang et al. 2020, Sec. 5: 1%, 5%, 80%).
      data, runs, vocab, results, squad: the data folder, the work folder (pairs, checkpoints,
        models, cell results), the models' vocabulary, the report's folder, the SQuAD file.
      saved_models, shipped: what the ship stage updates (None outside a git clone unless
        given).
    """

    cells: Tuple[str, ...]
    stages: Tuple[str, ...]
    budget: Budget
    splits: Tuple[float, ...]
    data: pathlib.Path
    runs: pathlib.Path
    vocab: pathlib.Path
    results: pathlib.Path
    squad: pathlib.Path
    saved_models: Optional[pathlib.Path] = None
    shipped: Optional[pathlib.Path] = None
