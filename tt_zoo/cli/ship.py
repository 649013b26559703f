"""Ship an export under a registered name, with the measured tables of benchmark results.

Copies --export (default saved_models/NAME itself) into saved_models/NAME, lists it in
tt_zoo/zoo/shipped_models.json with its kind, sha256, release URL, recipe and provenance
(`tt_zoo.zoo.shipping.ship`), then writes the model's rows of each --record-from results
JSON (benchmarks/late_interaction.py, benchmarks/term_weights.py, ...) into its metadata and
MODEL_CARD.md (`record_results`), and writes its recipe: the run config of the command that
trained it, which `tt-zoo COMMAND --config` reads (`tt_zoo.training.shipped_recipes`). Any
kind: two-tower, late interaction (colbert_*), term weights (hdct_*).

  tt-zoo ship colbert_ict_bfs_wlp_crop_span_qgen_64 --export runs/models/colbert_64
  tt-zoo ship hdct_ict_bfs_wlp_crop_span_qgen --record-from results/term_weights.json
  tt-zoo ship multitask_minilm_l6_384 --float16    # in place: the weights stored in float16
  python tests/golden/regenerate.py colbert_ict_bfs_wlp_crop_span_qgen_64   # then pin its outputs
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from tt_zoo.cli import parsing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the registered name it ships as (tt_zoo.list_models())")
    p.add_argument("--export", type=pathlib.Path, default=None,
                   help="the export to ship (default: saved_models/NAME, shipped in place)")
    p.add_argument("--record-from", type=pathlib.Path, action="append", default=[],
                   metavar="RESULTS_JSON",
                   help="a text-benchmark results JSON whose rows of this model go into its "
                        "card (repeatable)")
    p.add_argument("--rows", default=None,
                   help="the label text of the model's rows in the results (default: ColBERT "
                        "for late interaction, HDCT for term weights, the name for two-tower)")
    p.add_argument("--float16", action="store_true",
                   help="store the weights in float16 (half the bytes; tt_zoo.load materialises "
                        "the float32 SavedModel in its cache); measure the recall cost first: "
                        "python -m benchmarks.precision_cost --compare storage")
    p.add_argument("--share-with", default=None, metavar="NAME",
                   help="with --float16: the registered name of a shipped model whose arrays "
                        "the export holds too (a query-adapted model's base); they are read "
                        "from it on load, not stored again")
    p.add_argument("--provenance", default=None,
                   help="the shipped entry's training data and license line (default: kept, "
                        "or made from the metadata)")


def parse_args(argv=None):
    return parsing.command_parser("ship", __doc__, add_arguments).parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from tt_zoo.errors import TtZooError
    from tt_zoo.training import shipped_recipes
    from tt_zoo.zoo import registry, shipping

    from tt_zoo.manifest import read_json_object

    try:  # every results file read before anything ships
        results = [(path, read_json_object(path, "a text-benchmark results JSON",
                                           error=TtZooError)) for path in args.record_from]
    except TtZooError as e:
        sys.exit(f"--record-from: {e}")
    try:
        registry.get_spec(args.name)
    except KeyError as e:
        sys.exit(f"ship: {e.args[0]}")
    source = args.export or registry.SAVED_MODELS_DIR / args.name
    try:
        shipping.ship(source, args.name, provenance=args.provenance, float16=args.float16,
                      share_with=args.share_with)
        for path, out in results:
            shipping.record_results(args.name, out, rows=args.rows, results_path=path)
    except TtZooError as e:  # ArtifactError included
        sys.exit(f"ship {args.name}: {e}")
    recipe = ""
    try:  # the run config of its recorded training command
        recipe = f", {shipped_recipes.write_recipe(args.name)}"
        print(f"wrote its recipe{recipe[1:]}")
    except ValueError as e:
        print(f"no recipe written: {e}")
    print(f"next: python tests/golden/regenerate.py {args.name}, then commit "
          f"saved_models/{args.name}, {registry.SHIPPED_FILE.name}{recipe} and "
          f"tests/golden/{args.name}.json together")
    return 0


if __name__ == "__main__":
    sys.exit(main())
