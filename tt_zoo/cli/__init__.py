"""`tt-zoo COMMAND [ARGS]`: the pipeline's recipes, data to serving (Chang et al. 2020).

Each command is a module here with a `main(argv)`; `recipes/NAME.py` runs the same one.

    tt-zoo make-pairs --input $TT_ZOO_DATA/wikispeedia --tasks ict,bfs,wlp --output runs/pairs/x
    tt-zoo pretrain --variant ict_bfs_wlp_512 --pairs runs/pairs/x --export runs/models/x
    tt-zoo evaluate --model ict_bfs_wlp_512 --bm25
"""

from __future__ import annotations

import importlib
import sys

# command -> (module in tt_zoo.cli, what it does), in pipeline order.
COMMANDS = {
    "learn-vocab": ("learn_vocab", "learn a WordPiece vocabulary from articles"),
    "make-pairs": ("make_pairs", "ICT/BFS/WLP pairs or MLM examples as TFRecord shards (Sec. 3)"),
    "mine-negatives": ("mine_negatives", "BM25 hard negatives for a pair set, stored beside it"),
    "pretrain": ("pretrain", "pretrain a registered variant, resumable, then export it (Sec. 5.1)"),
    "export": ("export", "export a checkpoint for serving, with a ScaNN index and retrieve model"),
    "train-term-weights": ("train_term_weights",
                           "HDCT term weights from pairs' query terms, from an export's encoder"),
    "finetune": ("finetune", "fine-tune on a ReQA split and evaluate (Sec. 5)"),
    "evaluate": ("evaluate", "ReQA R@k and MRR of models and BM25 (Table 3's shape)"),
    "odqa": ("odqa", "open-domain QA answer recall of models and BM25 (DPR's top-k accuracy)"),
    "reproduce": ("reproduce", "the Tables 3 and 5 grid: pretrain, fine-tune, evaluate, ship"),
    "ship": ("ship", "ship an export (any kind) to saved_models/ with its measured tables"),
    "demo": ("demo", "load the flagship, index ReQA-SQuAD(dev), answer and score"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    return "\n".join(["usage: tt-zoo COMMAND [ARGS]   (tt-zoo COMMAND --help for its options)",
                      "", "commands:"] +
                     [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()])


def exit_code(result) -> int:
    """A command's `main` returns an exit code, or its results (a dict: success)."""
    return result if isinstance(result, int) else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"tt-zoo: unknown command {name!r}.\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"tt_zoo.cli.{COMMANDS[name][0]}")  # only the one asked for
    return exit_code(module.main(rest))
