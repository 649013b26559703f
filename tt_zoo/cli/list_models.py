"""List the models that load by name, as `tt_zoo.list_models()` does; --include-recipes: every
registered name.

A listed name has weights (shipped, or a public checkpoint imported from its package): `tt-zoo
search --model NAME`, `tt_zoo.load(NAME)` (`tt_zoo.load_term_weighter` for hdct_*) take it.
Each model is listed under both its names: the registered one, then its ARCH.TAG (timm's
architecture and weights tag, e.g. bert_tiny_512.ict_bfs_wlp); either loads, and the pattern
matches either.
Every other name of the paper's Tables 3 and 5 (and the variants past it) is a recipe, trained
by the command `tt_zoo.get_spec(NAME).recipe_command()` gives. With --shipped each model gets
its kind, encoder, pretraining and its card's headline numbers, read from the shipped-model
list (no TensorFlow).

  tt-zoo list
  tt-zoo list --shipped
  tt-zoo list '*ict_bfs_wlp*' --include-recipes
  tt-zoo list 'bow_mlp_512.*'
"""

from __future__ import annotations

import argparse
import sys

from tt_zoo.cli import parsing
from tt_zoo.modeling.kinds import KINDS
from tt_zoo.zoo import registry

# The card numbers `--shipped` shows, as the README's table does: (label, the metric names that
# hold it, first found first). A late-interaction or term-weight card holds one per search
# setting ("ReQA R@100, ColBERT re-ranking BM25@100"): the model's own search's is shown
# (`tt_zoo.zoo.own_search`).
HEADLINES = (("ReQA R@100 80% test", ("R@100 zero-shot 80%",
                                      "ReQA (test part of the 80% split) R@100")),
             ("ReQA R@100 all", ("ReQA R@100",)),
             ("ODQA R@20", ("ODQA validation R@20",)))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pattern", nargs="?", default="*",
                   help="a glob pattern over the names or their ARCH.TAG names, e.g. "
                        "'*ict_bfs_wlp*', 'bow_mlp_512.*' (quote it)")
    p.add_argument("--shipped", action="store_true",
                   help="a table of the models that load, with their measured numbers")
    p.add_argument("--include-recipes", action="store_true",
                   help="also the registered names without weights (recipes to train)")
    p.add_argument("--kind", choices=KINDS,
                   help="only the models of this kind (two-tower, late interaction, term "
                        "weights)")


def parse_args(argv=None):
    return parsing.command_parser("list", __doc__, add_arguments).parse_args(argv)


def headline(metrics, name: str = "", kind: str = "two_tower") -> str:
    """'ReQA R@100 80% test 78.19, ODQA R@20 40.25' from a card's metrics (name -> %) of model
    `name` of `kind`, or ''. A number measured per search setting is its own search's."""
    from tt_zoo.zoo.own_search import own_label  # noqa: PLC0415

    metrics = dict(metrics)
    tables = {}  # metric -> {search label: value}, for the late-interaction mode rule
    for key, value in metrics.items():
        base, _, label = key.partition(", ")
        if label:
            tables.setdefault(base, {})[label] = {base: value}
    by_label = {label: rows for label, rows in tables.items()}
    labels = {label for rows in tables.values() for label in rows}
    own = own_label(name, kind, labels, {t: {l: v for l, v in rows.items()}
                                         for t, rows in by_label.items()})
    parts = []
    for label, keys in HEADLINES:
        value = next((metrics[k] for k in keys if k in metrics), None)
        if value is None and own is not None:
            value = next((metrics[f"{k}, {own}"] for k in keys if f"{k}, {own}" in metrics),
                         None)
        if value is not None:
            parts.append(f"{label} {value:g}")
    return ", ".join(parts)


def _encoder(spec) -> str:
    return f"{spec.encoder}-{spec.tower_size}" if spec.tower_size else spec.encoder


def columns(rows) -> str:
    """The rows (tuples of strings) as left-aligned columns, two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(("".join(f"{c:<{w}}  " for c, w in zip(r, widths)) + r[-1]).rstrip()
                     for r in rows)


def name_lines(names) -> str:
    """One line a model: its registered name, then its ARCH.TAG."""
    return columns([(n, registry.REGISTRY[n].arch_tag) for n in names])


def shipped_table(names) -> str:
    """One line a shipped model: name, ARCH.TAG, kind, encoder, pretraining, headline numbers."""
    specs = [registry.REGISTRY[n] for n in names]
    rows = [("name", "arch.tag", "kind", "encoder", "pretraining",
             "measured (%, see its MODEL_CARD.md)")]
    rows += [(s.name, s.arch_tag, s.kind.replace("_", "-"), _encoder(s), s.pretraining,
              headline(s.metrics, s.name, s.kind)) for s in specs]
    return columns(rows)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.shipped and args.include_recipes:
        raise SystemExit("tt-zoo list: --shipped shows the models that load with their numbers; "
                         "--include-recipes lists names without weights: use one of them.")
    names = registry.list_models(args.pattern, kind=args.kind,
                                 include_recipes=args.include_recipes)
    if not names:
        recipes = registry.list_models(args.pattern, kind=args.kind, include_recipes=True)
        hint = (f" {len(recipes)} recipe(s) without weights match: tt-zoo list "
                f"{args.pattern!r} --include-recipes." if recipes and not args.include_recipes
                else "")
        print(f"tt-zoo list: no model{'' if args.include_recipes else ' that loads'} matches "
              f"{args.pattern!r}{f' of kind {args.kind}' if args.kind else ''}.{hint}",
              file=sys.stderr)
        return 1
    print(shipped_table(names) if args.shipped else name_lines(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
