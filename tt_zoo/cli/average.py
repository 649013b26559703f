"""Average the weights of models of one architecture into one export (a model soup).

The weighted mean of every weight of two or more exports (`tt_zoo.zoo.weight_averaging`;
Wortsman et al., ICML 2022): meant for models fine-tuned from the same weights with different
settings, whose mean can keep what each gained at the cost of one model. Models of another
architecture, or with other vocabularies or lengths, are refused. The card names each model
averaged and its weight; none of their metrics carry over: measure the export as any other
(`tt-zoo odqa`, `python -m benchmarks.checkpoints`).

  tt-zoo average runs/exports/a runs/exports/b --export runs/exports/a_b_soup
  tt-zoo average runs/exports/a runs/exports/b --weights 3,1 --name ab --export runs/exports/ab
"""

from __future__ import annotations

import argparse
import sys

from tt_zoo.cli import parsing
from tt_zoo.cli.common import check_model_export_target
from tt_zoo.configs.run_config import recorded_command

COMMAND = "average"


def _weights(value: str) -> list:
    """argparse ``type`` of --weights: comma-separated numbers."""
    try:
        return [float(w) for w in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, one per model (e.g. 0.5,0.5), got {value!r}"
        ) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", type=parsing.model_name_or_path,
                   help="two or more registered names or export directories of one "
                        "architecture")
    p.add_argument("--weights", type=_weights, default=None, metavar="W1,W2,...",
                   help="one non-negative weight per model, scaled to sum to 1 (default: "
                        "uniform)")
    p.add_argument("--name", default=None,
                   help="the averaged model's name in its card (default: the first model's "
                        "+ _averaged)")
    p.add_argument("--export", required=True,
                   help="the export directory to write (new, empty, or an earlier tt_zoo "
                        "export, which is replaced)")


def parse_args(argv=None):
    p = parsing.command_parser(COMMAND, __doc__, add_arguments)
    args = p.parse_args(argv)
    if len(args.models) < 2:
        p.error("give at least two models to average")
    if args.weights is not None and len(args.weights) != len(args.models):
        p.error(f"--weights: one weight per model ({len(args.models)} models, "
                f"{len(args.weights)} weights)")
    check_model_export_target(p, args.export, "--export")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from tt_zoo.errors import TtZooError  # noqa: PLC0415 (TensorFlow: after argparse)
    from tt_zoo.zoo.weight_averaging import average_models  # noqa: PLC0415

    command = recorded_command(COMMAND, argv)
    try:
        model = average_models(args.models, args.weights, name=args.name, command=command)
    except (FileNotFoundError, KeyError, TtZooError) as e:
        sys.exit(f"tt-zoo {COMMAND}: {e.args[0] if isinstance(e, KeyError) and e.args else e}")
    meta = model.export(args.export)
    averaged = meta["averaged"]
    parts = zip(averaged["models"], averaged["weights"])
    print(f"wrote {args.export}: "
          + " + ".join(f"{m['from']} x {w:.3g}" for m, w in parts)
          + f" (sha256 {meta['sha256'][:12]}…)")
    return 0
