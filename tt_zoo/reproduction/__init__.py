"""The paper's Tables 3 and 5 at CPU scale: pretrain, fine-tune and evaluate a grid, report it,
ship it (`tt-zoo reproduce` parses its flags into a `ReproduceConfig` and calls `run`).

Chang et al. 2020, Table 3 (encoder x pretraining: none, MLM, ICT+BFS+WLP; BoW-MLP and
Transformer) and Table 5 (the tasks alone, and embedding dimensions 128/256/512). Every cell
gets one pretraining budget (`grid.GRID`), then is scored zero-shot and fine-tuned on the
ReQA-SQuAD(dev) cold-start splits, with BM25 on the same questions.

The stages are modules of this package, one idea each: `grid` (which runs to make, where their
outputs live; the data and pretrain stages, as `tt-zoo` subprocesses), `evaluate` (ReQA
scores), `report` (tables, JSON and plot under results/), `ship` (saved_models/ and the
shipped list, through `tt_zoo.zoo.shipping`); `config` holds the typed settings. A stage
that cannot go on raises `tt_zoo.errors.StageError`. `runner` holds the mechanics every grid
shares (steps as logged `tt-zoo` processes skipped once done, cached result JSON, the report's
files), this one's and the benchmarks' (``benchmarks/pretrain_tasks.py``, ``multi_task.py``).
"""

from __future__ import annotations

from tt_zoo.reproduction import evaluate, grid, report, ship
from tt_zoo.reproduction.config import STAGES, ReproduceConfig


def run(config: ReproduceConfig) -> None:
    """The stages `config` names, in `STAGES` order, each resuming where it stopped."""
    steps = {"data": grid.stage_data, "pretrain": grid.stage_pretrain,
             "evaluate": evaluate.stage_evaluate, "report": report.stage_report,
             "ship": ship.stage_ship}
    for stage in STAGES:
        if stage in config.stages:
            steps[stage](config)
