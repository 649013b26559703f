"""Pretrains a registered two-tower variant on pretraining pairs, then exports it for serving.

Chang et al. 2020, Sec. 5.1: Adam 1e-4 with 10% linear warm-up then linear decay, the corrected
sampled softmax over the (global) batch. Checkpoints every N steps and resumes after a kill;
TensorBoard scalars under --log-dir; a progress bar with pairs/s.

  python recipes/make_pairs.py --input $TT_ZOO_DATA/wikispeedia --tasks ict,bfs,wlp \
      --output runs/pairs/ict_bfs_wlp
  python recipes/pretrain.py --variant ict_bfs_wlp_512 --pairs runs/pairs/ict_bfs_wlp \
      --batch-size 128 --steps 1000 --strategy cpu --export saved_models/ict_bfs_wlp_512

On TPUs: --strategy tpu --tpu NAME (the cluster resolver's address, as in the Model Garden).
`none` variants skip training (--steps 0) and export the initialised model; `mlm` variants
pretrain the encoder with the masked-LM objective on --mlm-examples (recipes/make_pairs.py
--tasks mlm) and initialise both towers from it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from tt_zoo import registry, training  # noqa: E402
from tt_zoo.export import export_saved_model  # noqa: E402
from tt_zoo.zoo import build_untrained  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_VOCAB = REPO / "saved_models" / "vocab" / "vocab.txt"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", required=True, help="a registered name, e.g. ict_bfs_wlp_512")
    p.add_argument("--pairs", help="a pair directory written by recipes/make_pairs.py")
    p.add_argument("--mlm-examples", help="an MLM example directory (for mlm variants)")
    p.add_argument("--vocab", default=str(DEFAULT_VOCAB), help="vocab.txt of the model")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (registry default)")
    p.add_argument("--batch-size", type=int, default=None, help="global batch (registry default)")
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--warmup-fraction", type=float, default=None)
    p.add_argument("--query-length", type=int, default=None)
    p.add_argument("--document-length", type=int, default=None)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--tower-shape", default=None,
                   help="explicit BERT shape LAYERS,HIDDEN,HEADS overriding the registry size "
                        "(for smoke tests)")
    p.add_argument("--strategy", default="cpu", choices=training.STRATEGIES)
    p.add_argument("--tpu", default=None, help="TPU name/address for --strategy tpu")
    p.add_argument("--workdir", default=None, help="checkpoints and logs (runs/pretrain/VARIANT)")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--shuffle-buffer", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--export", default=None, help="export directory for the trained model")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def build_model(spec, args, vocab):
    shape = tuple(int(x) for x in args.tower_shape.split(",")) if args.tower_shape else None
    return build_untrained(spec, vocab, query_length=args.query_length,
                           document_length=args.document_length, dropout_rate=args.dropout,
                           tower_shape=shape)


def pair_dataset_fn(pairs_dir, batch, shuffle_buffer, seed):
    from tt_zoo.pairs_io import read_pairs

    def make():
        ds = read_pairs(pairs_dir)
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
        return ds.batch(batch, drop_remainder=True).prefetch(2)
    return make


def main(argv=None):
    args = parse_args(argv)
    try:
        spec = registry.get_spec(args.variant)
    except KeyError as e:
        sys.exit(str(e.args[0]))
    recipe = spec.recipe
    steps = recipe.steps if args.steps is None else args.steps
    batch = args.batch_size or recipe.batch_size
    lr = args.learning_rate or recipe.learning_rate
    warmup = recipe.warmup_fraction if args.warmup_fraction is None else args.warmup_fraction
    if spec.pretraining == "none" and steps:
        print(f"{spec.name} has no pretraining: ignoring --steps {steps}")
        steps = 0
    if steps and spec.pretraining != "mlm" and not args.pairs:
        sys.exit(f"{spec.name} pretrains on {spec.pretraining} pairs: pass --pairs DIR "
                 "(see recipes/make_pairs.py)")
    if steps and spec.pretraining == "mlm" and not args.mlm_examples:
        sys.exit(f"{spec.name} pretrains with MLM: pass --mlm-examples DIR "
                 "(recipes/make_pairs.py --tasks mlm)")
    if not os.path.isfile(args.vocab):
        sys.exit(f"vocabulary {args.vocab} not found (recipes/learn_vocab.py writes one)")

    workdir = pathlib.Path(args.workdir or REPO / "runs" / "pretrain" / spec.name)
    training.enable_checkpointable_randomness(args.seed)
    strategy = training.make_strategy(args.strategy, args.tpu)
    print(f"{spec.name}: {spec.encoder} {spec.tower_size or ''} dim {spec.embedding_dim}, "
          f"{steps} steps x batch {batch} on {strategy.num_replicas_in_sync} replica(s) "
          f"({args.strategy})")

    with strategy.scope():
        model = build_model(spec, args, args.vocab)
        model.build_by_calling()
        if steps:
            schedule = training.paper_learning_rate(lr, steps, warmup)
            model.compile(optimizer=tf.keras.optimizers.Adam(schedule))

    result = None
    if steps and spec.pretraining == "mlm":
        from tt_zoo.mlm import pretrain_mlm
        result = pretrain_mlm(model, args.mlm_examples, steps=steps, batch=batch,
                              learning_rate=lr, warmup_fraction=warmup, strategy=strategy,
                              workdir=str(workdir), checkpoint_every=args.checkpoint_every,
                              seed=args.seed, progress=not args.no_progress)
    elif steps:
        result = training.train_resumable(
            model, pair_dataset_fn(args.pairs, batch, args.shuffle_buffer, args.seed),
            steps=steps, global_batch=batch, checkpoint_dir=str(workdir / "checkpoints"),
            checkpoint_every=args.checkpoint_every, log_dir=str(workdir / "logs"),
            progress=not args.no_progress)
        print(f"trained to step {result.steps_done} (resumed from {result.resumed_from}) in "
              f"{result.wall_time_s:.0f} s, {result.pairs_per_s:.1f} pairs/s, "
              f"final loss {result.final_loss:.4f}")

    summary = {"name": spec.name, "encoder": spec.encoder, "tower_size": spec.tower_size,
               "pretraining": spec.pretraining, "train_steps": steps, "seed": args.seed,
               "training_data": (f"pairs from {args.pairs or args.mlm_examples}"
                                 if steps else "none (initialised, not trained)"),
               "license": "Apache-2.0 (weights trained on CC BY-SA text)"}
    if steps:
        summary.update(batch_size=batch, learning_rate=lr, warmup_fraction=warmup,
                       strategy=args.strategy)
    if result is not None:
        summary.update(train_wall_time_s=round(result.wall_time_s, 1),
                       train_pairs_per_s=round(result.pairs_per_s, 1),
                       final_loss=round(result.final_loss, 4),
                       resumed_from=result.resumed_from)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "train_summary.json").write_text(json.dumps(summary, indent=2))
    if args.export:
        meta = export_saved_model(model, args.export, summary)
        print(f"exported to {args.export} (sha256 {meta['sha256']})")
    # Without --export, the last checkpoint in WORKDIR/checkpoints holds the final weights;
    # recipes/export.py --variant ... --checkpoint WORKDIR exports it later.
    return 0


if __name__ == "__main__":
    sys.exit(main())
