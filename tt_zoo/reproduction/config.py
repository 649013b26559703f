"""What one run of the reproduce grid does, typed: `ReproduceConfig` (parsed by
`tt_zoo.cli.reproduce.parse_args`, read by every stage), its stages and default splits, and the
grid budget with ``--budget FIELD=VALUE`` changes (`budget_with`)."""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
from typing import Optional, Sequence, Tuple

from tt_zoo import numbers
from tt_zoo.zoo.recipe import Recipe

STAGES = ("data", "pretrain", "evaluate", "report", "ship")
SPLITS = (0.01, 0.05, 0.8)
# The recipe fields the grid's commands take (its vocabulary is --vocab; each cell warms up as
# its variant's recipe says).
BUDGET_FIELDS = tuple(f.name for f in dataclasses.fields(Recipe)
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


def budget_with(budget: Recipe, changes: Sequence[str]) -> Recipe:
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
    budget: Recipe
    splits: Tuple[float, ...]
    data: pathlib.Path
    runs: pathlib.Path
    vocab: pathlib.Path
    results: pathlib.Path
    squad: pathlib.Path
    saved_models: Optional[pathlib.Path] = None
    shipped: Optional[pathlib.Path] = None
