"""What one run of the reproduce grid does, typed: `ReproduceConfig` (parsed by
`tt_zoo.cli.reproduce.parse_args`, read by every stage), its stages and default splits, and the
grid budget with ``--budget FIELD=VALUE`` changes (`budget_with`)."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Optional, Sequence, Tuple

from tt_zoo.zoo.recipe import Recipe

STAGES = ("data", "pretrain", "evaluate", "report", "ship")
SPLITS = (0.01, 0.05, 0.8)
# The recipe fields the grid's commands take (its vocabulary is --vocab; each cell warms up as
# its variant's recipe says).
BUDGET_FIELDS = tuple(f.name for f in dataclasses.fields(Recipe)
                      if f.name not in ("vocab_size", "warmup_fraction"))


def _budget_item(item: str):
    """FIELD=VALUE of the grid budget, the value cast to the field's type."""
    name, sep, value = item.partition("=")
    types = {f.name: f.type for f in dataclasses.fields(Recipe) if f.name in BUDGET_FIELDS}
    if not sep or name not in types:
        raise ValueError(f"expected FIELD=VALUE with FIELD one of {', '.join(types)} "
                         f"(got {item!r})")
    return name, (float if types[name] in ("float", float) else int)(value)


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
