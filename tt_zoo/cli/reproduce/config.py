"""What one `tt-zoo reproduce` run does, typed: `ReproduceConfig` (parsed by
`tt_zoo.cli.reproduce.parse_args`, read by every stage)."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Optional, Tuple

from tt_zoo.zoo.recipe import Recipe


@dataclasses.dataclass(frozen=True)
class ReproduceConfig:
    """The grid's cells and stages, its one budget, the cold-start splits, and where things are.

    Args:
      cells: the registered variants to run, the grid's own first (`grid.CELLS` order).
      stages: the stages to run (`tt_zoo.cli.reproduce.STAGES`; they run in that order).
      budget: the pretraining and fine-tuning budget of every cell (`grid.GRID` with the
        ``--budget`` changes).
      splits: cold-start training fractions (Chang et al. 2020, Sec. 5: 1%, 5%, 80%).
      data, runs, vocab, results, squad: the data folder, the work folder (pairs, checkpoints,
        models, cell results), the models' vocabulary, the report's folder, the SQuAD file.
      saved_models, shipped, readme: what the ship stage updates (None outside a git clone
        unless given).
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
    readme: Optional[pathlib.Path] = None
