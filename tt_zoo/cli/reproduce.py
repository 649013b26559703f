"""Reproduces the paper's Tables 3 and 5 at CPU scale: pretrain, fine-tune and evaluate a grid.

Chang et al. 2020, Table 3 (encoder x pretraining: none, MLM, ICT+BFS+WLP; BoW-MLP and
Transformer) and Table 5 (the tasks alone, and embedding dimensions 128/256/512). Every cell
gets one pretraining budget (`grid.GRID`: the same number of pairs seen, the same schedule),
then is scored zero-shot and fine-tuned on the ReQA-SQuAD(dev) cold-start splits 1% / 5% / 80%
(10% of the training part held out for validation), on the split's test questions against all
candidates, with BM25 on the same questions.

Stages, each skipped where its output already exists (so the grid resumes where it stopped):
  data      tt-zoo make-pairs for each task mix (runs/pairs/TASKS_128, MLM examples)
  pretrain  tt-zoo pretrain per cell -> runs/reproduce/CELL/model (checkpointed, resumable)
  evaluate  zero-shot and fine-tuned scores per cell and split -> runs/reproduce/CELL/*.json
  report    results/table3.md, results/table5.md, results/reproduce.json and the plots
  ship      fully evaluated models to saved_models/ with measured cards, listed with their
            sha256 and release URL in tt_zoo/zoo/shipped_models.json (the registry's list of
            shipped weights, package data)

  tt-zoo reproduce                      # everything not yet done
  tt-zoo reproduce --stages ship        # then ship what is fully evaluated
  tt-zoo reproduce --cells ict_512,bfs_512 --stages pretrain
  tt-zoo reproduce --stages report      # tables from the cells done so far
"""

# The grid, its stages and their outputs are the library's `tt_zoo.reproduction` (`run`); this
# command parses and checks the flags, calls it, and turns a failed stage into its message.

from __future__ import annotations

import argparse
import pathlib
import sys

from tt_zoo.cli import parsing
from tt_zoo.cli.common import clone_root, default_data_dir, default_vocab_path
from tt_zoo.errors import StageError
from tt_zoo.reproduction import run
from tt_zoo.reproduction.config import BUDGET_FIELDS, SPLITS, STAGES, ReproduceConfig, budget_with
from tt_zoo.reproduction.grid import CELLS, GRID
from tt_zoo.zoo.registry import SHIPPED_FILE, registered_name


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cells", default=",".join(CELLS),
                   help=f"comma-separated subset of: {', '.join(CELLS)} (or their ARCH.TAG "
                        "names, tt-zoo list)")
    p.add_argument("--stages", default="data,pretrain,evaluate,report",
                   help=f"comma-separated subset of: {', '.join(STAGES)} (default: all but ship)")
    p.add_argument("--data", type=pathlib.Path,
                   default=default_data_dir(),
                   help="the data folder ($TT_ZOO_DATA): wikispeedia/, squad/dev-v1.1.json")
    p.add_argument("--runs", type=pathlib.Path, default=pathlib.Path("runs"),
                   help="where pairs, checkpoints, models and cell results go")
    p.add_argument("--vocab", type=pathlib.Path, default=None,
                   help="the models' vocabulary (default: the project's saved_models/vocab/"
                        "vocab.txt in a git clone, else $TT_ZOO_DATA/bert-vocab/vocab.txt)")
    p.add_argument("--results", type=pathlib.Path, default=pathlib.Path("results"),
                   help="where the report stage writes the tables, JSON and plots")
    p.add_argument("--saved-models", type=pathlib.Path, default=None,
                   help="where the ship stage puts the models and committed models are found "
                        "(default: the git clone's saved_models/; needed for --stages ship "
                        "outside a clone)")
    p.add_argument("--shipped", type=pathlib.Path, default=None,
                   help="the shipped-model list the ship stage updates (default: the "
                        "registry's, in a git clone)")
    p.add_argument("--squad", type=pathlib.Path,
                   help="SQuAD v1.1 JSON of the ReQA evaluation ($TT_ZOO_DATA/squad/dev-v1.1.json)")
    p.add_argument("--splits", default=",".join(f"{f:g}" for f in SPLITS),
                   help="cold-start training fractions")
    p.add_argument("--budget", action="append", default=[], metavar="FIELD=VALUE",
                   help="change one field of the grid budget (e.g. steps=2000), for a bigger "
                        f"machine or a smoke test; fields: "
                        f"{', '.join(BUDGET_FIELDS)}")


def parse_args(argv=None) -> ReproduceConfig:
    """The command line as a `ReproduceConfig`, checked (a bad value exits naming its flag)."""
    p = parsing.command_parser("reproduce", __doc__, add_arguments)
    args = p.parse_args(argv)
    # A cell given by its ARCH.TAG (bert_tiny_512.ict) is the registered name it spells.
    given = [registered_name(c) or c for c in args.cells.split(",")]
    unknown = [c for c in given if registered_name(c) is None]
    if unknown:
        p.error(f"--cells: unknown {', '.join(unknown)}; the grid has {', '.join(CELLS)} (any "
                "registered variant may be evaluated and shipped once its model is in "
                "RUNS/reproduce/VARIANT/model)")
    stages = tuple(args.stages.split(","))
    bad = [s for s in stages if s not in STAGES]
    if bad:
        p.error(f"--stages: unknown {', '.join(bad)}; choose from {', '.join(STAGES)}")
    try:
        budget = budget_with(GRID, args.budget)
    except (TypeError, ValueError) as e:
        p.error(f"--budget: {e}")
    try:
        splits = tuple(float(f) for f in args.splits.split(","))
    except ValueError:
        p.error(f"--splits: expected comma-separated fractions such as 0.01,0.05,0.8 "
                f"(got {args.splits!r})")
    if not all(0 < f < 1 for f in splits):
        p.error(f"--splits: every fraction must be between 0 and 1 (got {splits})")
    squad = args.squad or args.data / "squad" / "dev-v1.1.json"
    if "evaluate" in stages and not squad.is_file():
        parsing.exit_missing(p, f"--squad: {squad} does not exist (set TT_ZOO_DATA or "
                                "pass --squad PATH)")
    where = {"saved_models": args.saved_models, "shipped": args.shipped}
    root = clone_root()  # the clone's files are the defaults; an installed package has none
    if root is not None:
        where = {"saved_models": args.saved_models or root / "saved_models",
                 "shipped": args.shipped or SHIPPED_FILE}
    elif "ship" in stages and None in where.values():
        p.error("--stages ship updates a git clone's saved_models/ and shipped-model list; "
                "tt_zoo is not running from a clone: pass --saved-models and --shipped")
    return ReproduceConfig(
        cells=tuple([c for c in CELLS if c in given] + [c for c in given if c not in CELLS]),
        stages=stages, budget=budget, splits=splits, data=args.data, runs=args.runs,
        vocab=args.vocab or pathlib.Path(default_vocab_path()), results=args.results,
        squad=squad, **where)


def main(argv=None) -> int:
    config = parse_args(argv)
    try:
        run(config)
    except StageError as e:  # a step failed: its one line, exit status 1
        sys.exit(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
