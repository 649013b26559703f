"""Train HDCT term weights on pretraining pairs, starting from a two-tower export's encoder.

Dai & Callan, WWW 2020 (HDCT): a BERT encoder and a linear head predict each document word's
weight in [0, 1], trained by MSE against targets without labels: 1 when the word's BM25 term
occurs in the pair's query, else 0 (`tt_zoo.data.term_weight_targets`). The encoder starts
from --init-from (a registered name or an export directory with a BERT document tower), so a
tiny BERT trains in minutes. Checkpoints every N steps in --workdir; a rerun resumes (with
the same settings, or it stops naming the difference). The export records the
initialisation, the steps, the training CPU time and the pseudo-tf scale N.

  tt-zoo train-term-weights --pairs runs/pairs/ict_bfs_wlp_128 \\
      --init-from saved_models/ict_bfs_wlp_512 --steps 2000 --batch-size 64 \\
      --learning-rate 5e-4 --export runs/models/hdct_ict_bfs_wlp
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from tt_zoo.atomic_io import check_replaceable, is_remote, write_json
from tt_zoo.cli import parsing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pairs", required=True, help="a pair directory (tt-zoo make-pairs)")
    p.add_argument("--init-from", required=True, metavar="NAME_OR_PATH",
                   help="a two-tower export (registered name or directory) whose document "
                        "tower's BERT encoder starts the model")
    p.add_argument("--steps", type=int, required=True, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=64, help="documents per step")
    p.add_argument("--learning-rate", type=float, default=5e-4,
                   help="peak Adam learning rate (linear warm-up, then linear decay to 0)")
    p.add_argument("--warmup-fraction", type=float, default=0.1,
                   help="fraction of the steps of linear warm-up")
    p.add_argument("--export", required=True, help="export directory for the trained model")
    p.add_argument("--name", default=None, help="name in the metadata (default: the export "
                                                "folder's name)")
    p.add_argument("--workdir", default=None,
                   help="checkpoints, logs, CPU time (default runs/term_weights/NAME)")
    p.add_argument("--checkpoint-every", type=int, default=100,
                   help="steps between checkpoints (a killed run resumes from the last)")
    p.add_argument("--max-pairs", type=int, default=None, help="train on the first N pairs")
    p.add_argument("--token-cache", default=os.path.join("runs", "token_cache"),
                   help="where the tokenized documents and targets are kept ('': nowhere)")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation and batches")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    return parsing.command_parser("train-term-weights", __doc__, add_arguments).parse_args(argv)


def load_init(name_or_path):
    """The two-tower Keras model of --init-from and what the card records about it."""
    import tt_zoo  # noqa: PLC0415

    source = tt_zoo.load(name_or_path)
    meta = source.metadata
    return source.keras_model, {
        "from": str(name_or_path), "name": meta.get("name"), "sha256": meta.get("sha256"),
        "pretraining": meta.get("pretraining"), "train_steps": meta.get("train_steps"),
        "copied": "the document tower's BERT encoder (the head starts fresh)"}


def main(argv=None):
    args = parse_args(argv)
    for flag in ("steps", "batch_size", "checkpoint_every"):
        if getattr(args, flag) <= 0:
            sys.exit(f"--{flag.replace('_', '-')} must be positive (got {getattr(args, flag)})")
    if args.learning_rate <= 0 or not 0 <= args.warmup_fraction < 1:
        sys.exit(f"--learning-rate must be > 0 and --warmup-fraction in [0, 1) (got "
                 f"{args.learning_rate}, {args.warmup_fraction})")
    from tt_zoo.serving.term_weight_export import is_term_weight_export  # noqa: PLC0415
    try:  # before training, so a run never ends in a refused write
        check_replaceable(args.export, is_replaceable=is_term_weight_export,
                          what="tt_zoo term-weight export")
    except FileExistsError as e:
        sys.exit(f"--export: {e}")
    name = args.name or os.path.basename(os.path.normpath(args.export))
    workdir = args.workdir or os.path.join("runs", "term_weights", name)

    from tt_zoo.data.terms import TermSpace  # noqa: PLC0415 (TensorFlow after argparse)
    from tt_zoo.errors import TtZooError  # noqa: PLC0415
    from tt_zoo.modeling.term_weights import TermWeightModel  # noqa: PLC0415
    from tt_zoo.retrieval.term_weighting import COMBINE  # noqa: PLC0415
    from tt_zoo.serving.term_weight_export import export_term_weight_model  # noqa: PLC0415
    from tt_zoo.training import loop  # noqa: PLC0415
    from tt_zoo.training.term_weights import (cached_term_weight_arrays,  # noqa: PLC0415
                                              train_term_weights)

    loop.enable_checkpointable_randomness(args.seed)
    try:
        two_tower, init = load_init(args.init_from)
        model = TermWeightModel.from_two_tower(two_tower)
    except (TtZooError, KeyError, FileNotFoundError, TypeError) as e:
        sys.exit(f"--init-from {args.init_from}: {e}")
    terms = TermSpace()
    try:
        arrays = cached_term_weight_arrays(model, args.pairs, terms, args.token_cache or None,
                                           max_pairs=args.max_pairs)
    except TtZooError as e:
        sys.exit(f"--pairs {args.pairs}: {e}")
    if args.batch_size > len(arrays["input_word_ids"]):
        sys.exit(f"--batch-size {args.batch_size} exceeds the {len(arrays['input_word_ids'])} "
                 "pairs")
    pairs = args.pairs if is_remote(args.pairs) else os.path.abspath(args.pairs)
    settings = {"kind": "term_weights", "pairs": pairs, "max_pairs": args.max_pairs,
                "init_sha256": init["sha256"], "steps": args.steps,
                "batch_size": args.batch_size, "learning_rate": args.learning_rate,
                "warmup_fraction": args.warmup_fraction, "seed": args.seed,
                "terms": terms.settings(), "model": model.artifact_config()["config"]["tower"]}
    print(f"{name}: term weights on {len(arrays['input_word_ids']):,} pairs, {args.steps} steps "
          f"x batch {args.batch_size}, from {args.init_from}")
    try:
        trained = train_term_weights(
            model, arrays, steps=args.steps, batch_size=args.batch_size,
            learning_rate=args.learning_rate, warmup_fraction=args.warmup_fraction,
            workdir=workdir, checkpoint_every=args.checkpoint_every, seed=args.seed,
            settings=settings, progress=not args.no_progress)
    except TtZooError as e:  # settings that differ from the checkpoint's
        sys.exit(str(e))
    print(f"trained to step {trained['train_steps']} (resumed from {trained['resumed_from']}) "
          f"in {trained['train_wall_time_s']:.0f} s ({trained['train_steps_per_s_last_100']} "
          f"steps/s over the last 100); {trained['train_cpu_seconds']:.0f} CPU s in all runs; "
          f"final loss {trained['final_loss']}")

    from tt_zoo.data.pairs_io import read_manifest  # noqa: PLC0415
    manifest = read_manifest(args.pairs, verify="none")
    summary_path = os.path.join(workdir, "train_summary.json")
    metadata = {
        "name": name, "init": init, **trained,
        "training_data": f"pairs from {args.pairs}",
        "pairs": {"num_pairs": manifest["num_records"], "max_pairs": args.max_pairs,
                  "make_pairs_config": manifest.get("config", {})},
        "targets": "1 if the word's BM25 term occurs in the pair's query, else 0; stop words "
                   "0 (HDCT's content-based weak supervision with query terms)",
        "batch_size": args.batch_size, "learning_rate": args.learning_rate,
        "warmup_fraction": args.warmup_fraction, "seed": args.seed,
        "term_space": terms.settings(),
        "weighting": {"word_weight": "first piece", "term_weight": "max over occurrences",
                      "windows": COMBINE},
        "license": "Apache-2.0 (weights trained on CC BY-SA text)",
        "command": shlex.join(["tt-zoo", "train-term-weights",
                               *(sys.argv[1:] if argv is None else map(str, argv))])}
    if trained["final_loss"] is None and os.path.exists(summary_path):
        import json  # noqa: PLC0415
        with open(summary_path, encoding="utf-8") as f:  # a rerun of a finished run
            metadata["final_loss"] = json.load(f).get("final_loss")
    write_json(summary_path, metadata, indent=2)
    meta = export_term_weight_model(model, args.export, metadata)
    print(f"exported to {args.export} (sha256 {meta['sha256']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
