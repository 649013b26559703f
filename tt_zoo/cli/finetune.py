"""Fine-tune a two-tower model on a ReQA split and evaluate it (Chang et al. 2020, Sec. 5).

The model is a zoo name or an export directory (``--model``), or an untrained tower built here
(``--init none``: the paper's "no pretraining" rows). Training follows the paper's fine-tuning
(Adam, lr 5e-5, 2,000 steps, batch 512, all settable) with early stopping on the split's
validation part; ``--eval`` scores the split's test questions against all ReQA candidates, with
BM25 beside it, and prints the Table 3 rows (R@1/5/10/50/100, MRR, in %).

Examples:
  tt-zoo finetune --model ict_bfs_wlp_512 --train-fraction 0.05 --seed 0 --eval \\
      --output runs/finetune/ict_bfs_wlp_512_5pct
  tt-zoo finetune --init none --encoder bert --size tiny --embedding-dim 512 \\
      --vocab $TT_ZOO_DATA/bert-vocab/vocab.txt --train-fraction 0.01 --steps 300 \\
      --batch-size 128 --document-length 128 --eval --json-out runs/finetune/none_512_1pct.json

--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `FinetuneConfig`); flags given with it override it.
"""

# The run itself is the library's `tt_zoo.training.finetune` (`tt_zoo.training.finetune_run`);
# this command parses and checks the flags and calls it.

from __future__ import annotations

import logging
import pathlib
import sys

from tt_zoo.cli import parsing
from tt_zoo.cli.common import check_init_vocab, check_model_export_target, default_squad_path
from tt_zoo.errors import TtZooError
from tt_zoo.hardware import training_dtype_policy
from tt_zoo.training.finetune_run import FinetuneConfig, finetune


add_arguments = FinetuneConfig.add_arguments  # (the flags of its run config)


def parse_args(argv=None) -> FinetuneConfig:
    p, args = parsing.parse_run_config(FinetuneConfig, __doc__, argv)
    args.squad = args.squad or default_squad_path()

    if args.split_file and args.train_fraction is not None:
        p.error("give either --split-file or --train-fraction, not both")
    if not args.split_file and args.train_fraction is None:
        p.error("give --train-fraction (0.01, 0.05, 0.8) or --split-file")
    if args.split_file and args.limit_questions:
        p.error("--limit-questions makes a new question set; it cannot reuse --split-file")
    if not pathlib.Path(args.squad).is_file():
        parsing.exit_missing(p, f"--squad: SQuAD file {args.squad} does not exist (set "
                                "TT_ZOO_DATA or pass --squad PATH)")
    if args.split_file and not pathlib.Path(args.split_file).is_file():
        p.error(f"--split-file: {args.split_file} does not exist")
    if args.hard_negatives and args.hard_negatives_depth is not None and (
            args.hard_negatives_depth < args.hard_negatives):
        p.error(f"--hard-negatives-depth must be at least --hard-negatives (got "
                f"{args.hard_negatives_depth} < {args.hard_negatives})")
    if not args.hard_negatives and (args.hard_negatives_from
                                    or args.hard_negatives_other_passages):
        p.error("--hard-negatives-from and --hard-negatives-other-passages choose how the hard "
                "negatives are mined: give --hard-negatives H (H >= 1) too")
    if args.bm25_negatives and not args.hard_negatives_from:
        p.error("--bm25-negatives K adds BM25 negatives to those --hard-negatives-from MODEL "
                "mines: give --hard-negatives-from too (or --hard-negatives H+K for BM25's "
                "alone)")
    if args.output:
        check_model_export_target(p, args.output, "--output")
    check_init_vocab(p, args)
    try:
        training_dtype_policy(args.precision)
    except TtZooError as e:  # TT_ZOO_PRECISION holds no precision
        p.error(f"--precision {args.precision}: {e}")
    return FinetuneConfig.from_namespace(args)


def main(argv=None) -> dict:
    return run(parse_args(argv), sys.argv[1:] if argv is None else list(argv))


def run(config: FinetuneConfig, argv: list) -> dict:
    """Fine-tunes, evaluates (--eval) and exports (--output) as `config` says; returns (and
    writes to --json-out) the record of the run. `argv`: the command line, recorded."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    return finetune(config, argv)


if __name__ == "__main__":
    main()
