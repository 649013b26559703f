"""List the zoo's registered model names; with --shipped, only the ones with trained weights.

Every name of the paper's Tables 3 and 5 (and the variants past it) is registered; only the
shipped ones load by name (`tt_zoo.load`, or `tt_zoo.load_term_weighter` for hdct_*). With
--shipped each gets its kind, encoder, pretraining and its card's headline numbers, read from
the shipped-model list (no TensorFlow).

  tt-zoo list --shipped
  tt-zoo list '*ict_bfs_wlp*'
"""

from __future__ import annotations

import argparse
import sys

from tt_zoo.cli import parsing
from tt_zoo.modeling.kinds import KINDS
from tt_zoo.zoo import registry

# The card numbers `--shipped` shows, first found first: (label, metric key or key prefix).
# Two-tower cards carry ReQA zero-shot R@100 on the 80% split's test questions and ODQA
# validation R@20; late-interaction and term-weight cards carry them per search setting, whose
# first (sorted) is the model's own search, without fusion.
HEADLINES = (("ReQA R@100", ("R@100 zero-shot 80%", "ReQA R@100, ")),
             ("ODQA R@20", ("ODQA validation R@20", "ODQA validation R@20, ")))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pattern", nargs="?", default="*",
                   help="a glob pattern over the names, e.g. '*ict_bfs_wlp*' (quote it)")
    p.add_argument("--shipped", action="store_true",
                   help="only the models with trained weights, with their measured numbers")
    p.add_argument("--kind", choices=KINDS,
                   help="only the models of this kind (two-tower, late interaction, term "
                        "weights)")


def parse_args(argv=None):
    return parsing.command_parser("list", __doc__, add_arguments).parse_args(argv)


def headline(metrics) -> str:
    """'ReQA R@100 78.19, ODQA R@20 40.25' from a card's metrics (name -> %), or ''."""
    metrics = dict(metrics)
    parts = []
    for label, (exact, prefix) in HEADLINES:
        key = exact if exact in metrics else next(
            (k for k in sorted(metrics) if k.startswith(prefix)), None)
        if key is not None:
            parts.append(f"{label} {metrics[key]:g}")
    return ", ".join(parts)


def _encoder(spec) -> str:
    return f"{spec.encoder}-{spec.tower_size}" if spec.tower_size else spec.encoder


def shipped_table(names) -> str:
    """One line a shipped model: name, kind, encoder, pretraining, headline numbers."""
    specs = [registry.REGISTRY[n] for n in names]
    rows = [("name", "kind", "encoder", "pretraining", "measured (%, see its MODEL_CARD.md)")]
    rows += [(s.name, s.kind.replace("_", "-"), _encoder(s), s.pretraining, headline(s.metrics))
             for s in specs]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join(("  ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + "  " + r[4]).rstrip()
                     for r in rows)


def main(argv=None) -> int:
    args = parse_args(argv)
    names = registry.list_models(args.pattern, shipped_only=args.shipped, kind=args.kind)
    if not names:
        print(f"tt-zoo list: no {'shipped ' if args.shipped else ''}model matches "
              f"{args.pattern!r}{f' of kind {args.kind}' if args.kind else ''}.",
              file=sys.stderr)
        return 1
    print(shipped_table(names) if args.shipped else "\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
