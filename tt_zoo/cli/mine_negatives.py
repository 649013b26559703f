"""Mine BM25 hard negatives for a pair set and store them with the pairs (Maillard et al. 2021).

Each pair gets H documents of its query's BM25 top --depth among the pair set's distinct
documents, skipping its own document, its article's passages (BFS, WLP) and documents that
contain the query; too few valid ones are filled at random (seeded). See
`tt_zoo.mining.hard_negatives`. The rows land in PAIRS/hard_negatives/ (or --output DIR) with a
JSON sidecar; a stored file with the same settings is reused. `tt-zoo pretrain --hard-negatives H`
mines (or reuses) the same file itself.

    tt-zoo mine-negatives --pairs runs/pairs/ict_bfs_wlp --num-negatives 1
    tt-zoo mine-negatives --pairs runs/pairs/ict_bfs_wlp --max-pairs 20000 \\
        --num-negatives 4 --output /tmp/hard_negatives
"""

from __future__ import annotations

import argparse
import sys

from tt_zoo import numbers
from tt_zoo.cli import parsing

# tt_zoo.mining.hard_negatives.DEFAULT_DEPTH, repeated so that --help imports no bm25s (a test
# checks that they agree).
DEFAULT_DEPTH = 32


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pairs", required=True, help="a pair directory (tt-zoo make-pairs); "
                   "only read")
    p.add_argument("--num-negatives", type=numbers.count(high=1000), default=1, help="H, negatives per pair")
    p.add_argument("--depth", type=numbers.count(high=100_000), default=DEFAULT_DEPTH,
                   help="BM25 results searched per query")
    p.add_argument("--max-pairs", type=numbers.count(), default=None,
                   help="mine for the first N pairs only (as pretrain --max-pairs trains on)")
    p.add_argument("--seed", type=numbers.SEED, default=0, help="seed of the random fallback")
    p.add_argument("--output", default=None,
                   help="directory for the .npy and its sidecar (default PAIRS/hard_negatives)")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser("mine-negatives", __doc__, add_arguments)
    args = p.parse_args(argv)
    if args.depth < args.num_negatives:
        p.error(f"--depth must be at least --num-negatives (got {args.depth} < "
                f"{args.num_negatives})")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    from tt_zoo.mining import hard_negatives as hn
    from tt_zoo.errors import TtZooError

    settings = hn.MiningSettings(args.num_negatives, args.depth, max_pairs=args.max_pairs,
                                 seed=args.seed)
    try:
        stored = hn.load_or_mine(args.pairs, settings, output_dir=args.output,
                                 progress=not args.no_progress)
    except TtZooError as e:
        sys.exit(str(e))
    counts = stored.sidecar["counts"]
    print(f"{'reused' if stored.reused else 'mined'} {stored.path}: {counts['pairs']:,} pairs x "
          f"{settings.num_negatives} negatives over {counts['distinct_documents']:,} documents "
          f"in {stored.sidecar['mining_seconds']} s ({stored.sidecar['pairs_per_s']:,} pairs/s); "
          f"fallback for {counts['pairs_with_fallback']:,} pairs "
          f"({counts['pairs_with_fallback'] / counts['pairs']:.2%}), "
          f"{counts['fallback_negatives']:,} negatives")
    return stored.sidecar


if __name__ == "__main__":
    main()
