"""Pretrains a registered two-tower variant on pretraining pairs, then exports it for serving.

Chang et al. 2020, Sec. 5.1: Adam 1e-4 with 10% linear warm-up then linear decay, the corrected
sampled softmax over the (global) batch. Checkpoints every N steps and resumes after a kill;
TensorBoard scalars under --log-dir; a progress bar with pairs/s.

  tt-zoo make-pairs --input $TT_ZOO_DATA/wikispeedia --tasks ict,bfs,wlp \\
      --output runs/pairs/ict_bfs_wlp
  tt-zoo pretrain --variant ict_bfs_wlp_512 --pairs runs/pairs/ict_bfs_wlp \\
      --batch-size 128 --steps 1000 --strategy cpu --export saved_models/ict_bfs_wlp_512

On TPUs: --strategy tpu --tpu NAME (the cluster resolver's address, as in the Model Garden);
--workdir, --export, --token-cache and --pairs may be gs:// URLs (every file goes through
tf.io.gfile).
--hard-negatives H adds H BM25 hard negatives per pair (mined once by
`tt_zoo.data.hard_negatives` and stored in PAIRS/hard_negatives/, or --hard-negatives-dir).
`none` variants skip training (--steps 0) and export the initialised model; `mlm` variants
pretrain the encoder with the masked-LM objective on --mlm-examples (tt-zoo make-pairs
--tasks mlm) and initialise both towers from it. --grad-cache-chunk N trains on the whole batch
with the activation memory of N pairs (GradCache, `tt_zoo.training.grad_cache`). --cluster-every N draws each batch from one
k-means cluster of the documents, re-clustered every N steps with the current document tower
(ProQA, Xiong et al. 2020, Sec. 3.2; tt_zoo.training.clustered_batches).
`colbert_` variants (ColBERT's late interaction, `tt_zoo.modeling.late_interaction_model`) train
the same way on the same pairs; --init-from a single-vector BERT export copies its encoder (the
token projection starts fresh). They refuse --grad-cache-chunk, --cluster-every and
--eval-every, which need one vector per text.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys

from tt_zoo.atomic_io import check_replaceable, is_remote, write_text
from tt_zoo.cli import parsing
from tt_zoo.cli.common import default_squad_path, default_vocab_path
from tt_zoo.errors import TtZooError
from tt_zoo.serving import registry

# tt_zoo.training.loop.STRATEGIES, repeated so that --help imports no TensorFlow (a test checks
# that they agree). TensorFlow and the modules that import it load after argparse.
STRATEGIES = ("cpu", "mirrored", "multiworker", "tpu")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", required=True,
                   help="a registered name, e.g. ict_bfs_wlp_512 (tt-zoo list)")
    p.add_argument("--pairs", help="a pair directory written by tt-zoo make-pairs")
    p.add_argument("--mlm-examples", help="an MLM example directory (for mlm variants)")
    p.add_argument("--vocab", default=None,
                   help="vocab.txt of the model (default: the project's saved_models/vocab/"
                        "vocab.txt in a git clone, else $TT_ZOO_DATA/bert-vocab/vocab.txt)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (registry default)")
    p.add_argument("--batch-size", type=int, default=None, help="global batch (registry default)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="peak Adam learning rate (registry default)")
    p.add_argument("--warmup-fraction", type=float, default=None,
                   help="fraction of the steps of linear warm-up (registry default)")
    p.add_argument("--query-length", type=int, default=None,
                   help="query token budget (registry default)")
    p.add_argument("--document-length", type=int, default=None,
                   help="document token budget (registry default)")
    p.add_argument("--dropout", type=float, default=0.1, help="dropout rate of the towers")
    p.add_argument("--pooling", choices=("cls", "mean"), default=None,
                   help="BERT aggregator: [CLS] (the paper) or mean of the final states "
                        "(registry default)")
    p.add_argument("--share-towers", choices=("yes", "no"), default=None,
                   help="one tower for queries and documents (registry default)")
    p.add_argument("--normalize", choices=("yes", "no"), default=None,
                   help="L2-normalised embeddings, cosine scores (registry default)")
    p.add_argument("--temperature", type=float, default=None,
                   help="divides the logits in the loss (registry default; 0 = none)")
    p.add_argument("--bow-output-activation", choices=("tanh", "linear"), default=None,
                   help="BoW-MLP output layer (registry default)")
    p.add_argument("--jit-compile", choices=("auto", "yes", "no"), default="auto",
                   help="compile the training step with XLA (auto: yes for --strategy tpu). The "
                        "step holds no strings (pairs are tokenized on the host), so it compiles; "
                        "under XLA dropout ignores the seed, so a resumed run is not bit-exact")
    p.add_argument("--grad-cache-chunk", type=int, default=0,
                   help="GradCache (Gao et al. 2021): embed and back-propagate N pairs at a "
                        "time, with the gradients of the whole batch and the activation memory "
                        "of N (0: off; the batch per replica must be a multiple of N)")
    p.add_argument("--dtype-policy", choices=("float32", "mixed_bfloat16"), default="float32",
                   help="Keras dtype policy of the towers (scores and loss stay float32)")
    p.add_argument("--token-cache", default=os.path.join("runs", "token_cache"),
                   help="where pairs tokenized once are kept for later runs ('' : nowhere)")
    p.add_argument("--max-pairs", type=int, default=None,
                   help="train on the first N pairs of --pairs only")
    p.add_argument("--hard-negatives", type=int, default=0, metavar="H",
                   help="add H BM25 hard negatives per pair to the in-batch ones (Multi-task "
                        "DPR's hard confounders; tt_zoo.data.hard_negatives), mined once and "
                        "stored beside the pairs (0: none)")
    p.add_argument("--hard-negatives-depth", type=int, default=None,
                   help="BM25 results searched per query when mining (default "
                        "tt_zoo.data.hard_negatives.DEFAULT_DEPTH)")
    p.add_argument("--hard-negatives-dir", default=None,
                   help="where the mined negatives are stored (default PAIRS/hard_negatives; "
                        "for a read-only or remote pair directory)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="score ReQA-SQuAD(dev) zero-shot every N steps (0: never); the curve "
                        "goes to WORKDIR/curve.jsonl")
    p.add_argument("--eval-questions", type=int, default=2000,
                   help="questions sampled (seed 0) for --eval-every; all candidates are used")
    p.add_argument("--squad", default=None,
                   help="SQuAD v1.1 JSON for --eval-every ($TT_ZOO_DATA/squad/dev-v1.1.json)")
    p.add_argument("--tower-shape", default=None,
                   help="explicit BERT shape LAYERS,HIDDEN,HEADS overriding the registry size "
                        "(for smoke tests)")
    p.add_argument("--cluster-every", type=int, default=0,
                   help="clustered batches (ProQA, Xiong et al. 2020, Sec. 3.2): every N steps, "
                        "embed the next N steps' documents with the current document tower, "
                        "k-means them and draw each batch from one cluster (0: off, random "
                        "batches)")
    p.add_argument("--clusters", type=int, default=0,
                   help="clusters a round for --cluster-every (0: N // 4, about four batches "
                        "a cluster)")
    p.add_argument("--cluster-length", type=int, default=0,
                   help="embed only the first L tokens of each document for the clustering "
                        "(0: the document length); cheaper re-encoding")
    p.add_argument("--cluster-start", type=int, default=None,
                   help="first clustered step, a multiple of --cluster-every (default: "
                        "--cluster-every; the steps before it are random batches)")
    p.add_argument("--cluster-encode-batch", type=int, default=256,
                   help="documents a forward pass when re-encoding for the clustering")
    p.add_argument("--cluster-threads", type=int, default=1,
                   help="threads of the k-means for --cluster-every (0: every core; 1 is "
                        "faster when TensorFlow and other jobs share a few cores)")
    p.add_argument("--strategy", default="cpu", choices=STRATEGIES,
                   help="tf.distribute strategy: this CPU, local GPUs, several workers or a TPU")
    p.add_argument("--tpu", default=None, help="TPU name/address for --strategy tpu")
    p.add_argument("--workdir", default=None,
                   help="checkpoints and logs (default: runs/pretrain/VARIANT)")
    p.add_argument("--checkpoint-every", type=int, default=100,
                   help="steps between checkpoints (a killed run resumes from the last)")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation and batches")
    p.add_argument("--export", default=None, help="export directory for the trained model")
    p.add_argument("--init-from", default=None, metavar="NAME_OR_PATH",
                   help="warm start: the towers start from this export's weights (a registered "
                        "name or an export directory of the same architecture) and train with "
                        "this run's own schedule; recorded in the card")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    args = parsing.command_parser("pretrain", __doc__, add_arguments).parse_args(argv)
    args.vocab = args.vocab or default_vocab_path()
    return args


# Tower options a late-interaction (colbert_) model has no choice in (one BERT, per-token L2).
_NOT_FOR_COLBERT = ("pooling", "share_towers", "normalize", "bow_output_activation")


def model_options(spec, args) -> registry.ModelOptions:
    """The spec's training-time model options, with the command line's overrides."""
    if spec.encoder == "colbert":
        given = [f"--{k.replace('_', '-')}" for k in _NOT_FOR_COLBERT
                 if getattr(args, k) is not None]
        if given:
            sys.exit(f"{', '.join(given)}: {spec.name} is a late-interaction model (one shared "
                     "BERT, every token kept and L2-normalised); only --temperature applies")
    yes = {"yes": True, "no": False}
    options = dataclasses.asdict(spec.options)
    if args.pooling is not None:
        options["pooling"] = args.pooling
    if args.share_towers is not None:
        options["share_towers"] = yes[args.share_towers]
    if args.normalize is not None:
        options["normalize_embeddings"] = yes[args.normalize]
    if args.temperature is not None:
        options["temperature"] = args.temperature or None  # 0 means none
    if args.bow_output_activation is not None:
        options["bow_output_activation"] = {"tanh": "tanh", "linear": None}[
            args.bow_output_activation]
    return registry.ModelOptions(**options)


def build_model(spec, args, vocab):
    from tt_zoo.serving.zoo import build_untrained  # noqa: PLC0415 (TensorFlow)
    shape = (dict(zip(("num_layers", "hidden_size", "num_attention_heads"),
                      (int(x) for x in args.tower_shape.split(","))))
             if args.tower_shape else None)
    return build_untrained(spec, vocab, query_length=args.query_length,
                           document_length=args.document_length, dropout_rate=args.dropout,
                           tower_shape=shape, options=model_options(spec, args))


def run_settings(model, args, batch, lr, warmup, steps, hard_negatives=None,
                 clustering=None) -> dict:
    """What defines a pretraining run: resuming with anything else is refused.

    `hard_negatives`: the `MiningSettings` when the run trains with mined negatives;
    `clustering`: `ClusteredStepOrder.settings()` when --cluster-every is on."""
    towers = {"query_tower": model.query_tower.get_config(),
              "document_tower": None if model.share_towers else model.document_tower.get_config(),
              "query_length": model.query_preprocessor.seq_length,
              "document_length": model.document_preprocessor.seq_length,
              "vocabulary_sha256": model.query_preprocessor.vocabulary_sha256,
              "normalize_embeddings": model.normalize_embeddings,
              "loss": model.retrieval_loss.get_config()}
    pairs = args.pairs if is_remote(args.pairs) else os.path.abspath(args.pairs)
    return {"batch_size": batch, "learning_rate": lr, "warmup_fraction": warmup,
            "steps": steps, "seed": args.seed, "pairs": pairs,
            "max_pairs": args.max_pairs, "dtype_policy": args.dtype_policy,
            # Recorded only when on, so runs checkpointed before the flag existed still resume.
            **({"jit_compile": True} if jit_compile(args) else {}),
            **({"hard_negatives": {k: v for k, v in hard_negatives.as_dict().items()
                                   if k != "max_pairs"}} if hard_negatives else {}),
            **({"grad_cache_chunk": args.grad_cache_chunk} if args.grad_cache_chunk else {}),
            **({"clustered_batches": clustering} if clustering else {}), **towers}


def check_grad_cache_chunk(chunk: int, batch: int, replicas: int) -> None:
    """Exits with a clear message unless --grad-cache-chunk divides the batch per replica."""
    if chunk < 0:
        sys.exit(f"--grad-cache-chunk must be a number of pairs, or 0 for off (got {chunk})")
    per_replica, rest = divmod(batch, replicas)
    if chunk and (rest or per_replica % chunk):
        divisors = [d for d in range(1, per_replica + 1) if rest == 0 and per_replica % d == 0]
        hint = f" (e.g. {max(d for d in divisors if d <= chunk)})" if divisors else ""
        sys.exit(f"--grad-cache-chunk {chunk}: the batch of {batch} pairs over {replicas} "
                 f"replica(s) is {batch / replicas:g} pairs per replica, which must be a "
                 f"multiple of the chunk{hint}")


def jit_compile(args) -> bool:
    return args.jit_compile == "yes" or (args.jit_compile == "auto" and args.strategy == "tpu")


def mining_settings(args):
    """The hard-negative `MiningSettings` of --hard-negatives (None when off)."""
    if not args.hard_negatives:
        return None
    from tt_zoo.data.hard_negatives import DEFAULT_DEPTH, MiningSettings
    return MiningSettings(args.hard_negatives, args.hard_negatives_depth or DEFAULT_DEPTH,
                          max_pairs=args.max_pairs)


def zero_shot_curve(args, workdir, batch):
    """The callback that scores ReQA-SQuAD(dev) zero-shot every --eval-every steps."""
    from tt_zoo.retrieval.reqa import build_reqa
    from tt_zoo.training import loop as training  # noqa: PLC0415 (TensorFlow)
    squad = args.squad or default_squad_path()
    if not os.path.isfile(squad):
        sys.exit(f"--eval-every needs SQuAD v1.1 dev: {squad} not found (pass --squad)")
    return training.ZeroShotReqaCurve(build_reqa(squad), every_steps=args.eval_every,
                                      num_questions=args.eval_questions, global_batch=batch,
                                      output=os.path.join(workdir, "curve.jsonl"))


def clustered_order(args, arrays, batch, checkpoint_dir):
    """The clustered batch order of --cluster-every (None when off)."""
    if not args.cluster_every:
        return None
    from tt_zoo.training.clustered_batches import CLUSTER_DIR, ClusteredStepOrder
    try:
        return ClusteredStepOrder(arrays, batch, seed=args.seed, every=args.cluster_every,
                                  directory=os.path.join(checkpoint_dir, CLUSTER_DIR),
                                  start_step=args.cluster_start, num_clusters=args.clusters,
                                  cluster_length=args.cluster_length,
                                  encode_batch=args.cluster_encode_batch,
                                  kmeans_threads=args.cluster_threads or None)
    except ValueError as e:
        sys.exit(f"--cluster-every: {e}")


def clustering_summary(order, train_wall_time_s: float) -> dict:
    """This run's cost of the clustered batches (for the train summary)."""
    stats = order.stats
    return {"rounds_clustered": stats["rounds_clustered"],
            "rounds_read": stats["rounds_loaded"],
            "reencoding_seconds": round(stats["encode_seconds"], 1),
            "kmeans_seconds": round(stats["kmeans_seconds"], 1),
            "cluster_seconds": round(stats["seconds"], 1),
            "fraction_of_train_wall_time": round(stats["seconds"] / train_wall_time_s, 4)
            if train_wall_time_s > 0 else None}


def init_from(model, name_or_path) -> dict:
    """Copies an export's weights into `model` (a warm start); its name, sha256, steps and
    pretraining, for the card. The vocabulary and every weight's shape must match; a
    late-interaction model takes a single-vector BERT export's encoder only (`warm_start_from`:
    its token projection starts fresh), recorded under "copied" and "new"."""
    import tt_zoo  # noqa: PLC0415
    from tt_zoo.modeling.late_interaction_model import LateInteractionModel, warm_start_from

    source = tt_zoo.load(name_or_path)
    meta = source.metadata
    record = {"from": str(name_or_path), "sha256": meta.get("sha256"),
              "pretraining": meta.get("pretraining"), "train_steps": meta.get("train_steps"),
              "batch_size": meta.get("batch_size"), "pairs_seen": meta.get("pairs_seen")}
    if isinstance(model, LateInteractionModel) and not isinstance(source.keras_model,
                                                                  LateInteractionModel):
        try:
            return {**record, **warm_start_from(model, source.keras_model)}
        except TtZooError as e:
            sys.exit(f"--init-from {name_or_path}: {e}")
    theirs, ours = source.keras_model.get_weights(), model.get_weights()
    mismatch = [i for i, (a, b) in enumerate(zip(theirs, ours)) if a.shape != b.shape]
    if len(theirs) != len(ours) or mismatch:
        sys.exit(f"--init-from {name_or_path}: its towers do not match {model.name!r} "
                 f"({len(theirs)} weights against {len(ours)}; shapes differ at {mismatch[:5]})")
    if source.keras_model.document_preprocessor.vocabulary_sha256 != \
            model.document_preprocessor.vocabulary_sha256:
        sys.exit(f"--init-from {name_or_path}: its vocabulary differs from --vocab")
    model.set_weights(theirs)
    return record


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
                 "(see tt-zoo make-pairs)")
    if args.cluster_every and (not steps or spec.pretraining == "mlm"):
        sys.exit("--cluster-every groups the batches of pair pretraining; "
                 f"{spec.name} trains {'no steps' if not steps else 'with MLM'}")
    if spec.encoder == "colbert":
        for flag, value, why in (
                ("--cluster-every", args.cluster_every, "clusters one vector per document"),
                ("--eval-every", args.eval_every, "scores ReQA with one vector per text; "
                 "evaluate the export with the MaxSim re-ranker of tt_zoo.retrieval")):
            if value:
                sys.exit(f"{flag}: {spec.name} is a late-interaction model (token vectors) and "
                         f"{flag} {why}")
    if steps and spec.pretraining == "mlm" and not args.mlm_examples:
        sys.exit(f"{spec.name} pretrains with MLM: pass --mlm-examples DIR "
                 "(tt-zoo make-pairs --tasks mlm)")
    if args.hard_negatives < 0:
        sys.exit(f"--hard-negatives must be >= 0 (got {args.hard_negatives})")
    if args.hard_negatives and (spec.pretraining in ("mlm", "none") or not steps):
        sys.exit(f"--hard-negatives {args.hard_negatives}: {spec.name} trains on no pairs "
                 f"({spec.pretraining} pretraining, {steps} steps)")
    try:
        hard_negative_settings = mining_settings(args)
    except ValueError as e:
        sys.exit(f"--hard-negatives: {e}")
    if not os.path.isfile(args.vocab):
        sys.exit(f"tt-zoo pretrain: --vocab: vocabulary {args.vocab} not found (pass --vocab "
                 "PATH or set TT_ZOO_DATA; tt-zoo learn-vocab writes one)")
    import tensorflow as tf  # noqa: PLC0415 (after the arguments are checked)
    from tt_zoo.serving.export import export_saved_model, is_model_export  # noqa: PLC0415
    from tt_zoo.training import loop as training  # noqa: PLC0415
    if args.export:
        try:  # before training, so an hour's run never ends in a refused write
            check_replaceable(args.export, is_replaceable=is_model_export,
                              what="tt_zoo model export")
        except FileExistsError as e:
            sys.exit(f"--export: {e}")

    workdir = args.workdir or os.path.join("runs", "pretrain", spec.name)
    training.enable_checkpointable_randomness(args.seed)
    strategy = training.make_strategy(args.strategy, args.tpu)
    if steps and args.grad_cache_chunk:
        if spec.pretraining == "mlm":
            sys.exit("--grad-cache-chunk applies to the two-tower loss, not to MLM pretraining")
        check_grad_cache_chunk(args.grad_cache_chunk, batch, strategy.num_replicas_in_sync)
        if jit_compile(args):
            sys.exit("--grad-cache-chunk runs without XLA: pass --jit-compile no")
    print(f"{spec.name}: {spec.encoder} {spec.tower_size or ''} dim {spec.embedding_dim}, "
          f"{steps} steps x batch {batch} on {strategy.num_replicas_in_sync} replica(s) "
          f"({args.strategy})")

    with strategy.scope():
        # The towers take --dtype-policy when they are built; layers made later, at call time
        # (TFRS's accidental-hit and logQ layers inside the loss), must stay float32 like the
        # loss, so the global policy is float32 again before training.
        tf.keras.mixed_precision.set_global_policy(args.dtype_policy)
        try:
            model = build_model(spec, args, args.vocab)
            model.build_by_calling()
        finally:
            tf.keras.mixed_precision.set_global_policy("float32")
        warm_start = init_from(model, args.init_from) if args.init_from else None
        if steps:
            schedule = training.paper_learning_rate(lr, steps, warmup)
            model.compile(optimizer=tf.keras.optimizers.Adam(schedule),
                          jit_compile=jit_compile(args))
            try:
                model.use_grad_cache(args.grad_cache_chunk or None)
            except TtZooError as e:  # a model GradCache cannot train (late interaction)
                sys.exit(f"--grad-cache-chunk {args.grad_cache_chunk}: {e}")

    result, order, clustering = None, None, None
    if steps and spec.pretraining == "mlm":
        from tt_zoo.training.mlm import pretrain_mlm
        try:
            result = pretrain_mlm(model, args.mlm_examples, steps=steps, batch=batch,
                                  learning_rate=lr, warmup_fraction=warmup, strategy=strategy,
                                  workdir=workdir, checkpoint_every=args.checkpoint_every,
                                  seed=args.seed, progress=not args.no_progress)
        except training.SettingsMismatchError as e:
            sys.exit(str(e))
    elif steps:
        from tt_zoo.training.step_data import cached_tokenize_pair_set, distribute_step_batches
        arrays = cached_tokenize_pair_set(model, args.pairs, args.token_cache or None,
                                          max_pairs=args.max_pairs)
        negatives = None
        if hard_negative_settings:
            from tt_zoo.data.hard_negatives import load_or_mine
            try:
                mined = load_or_mine(args.pairs, hard_negative_settings,
                                     output_dir=args.hard_negatives_dir,
                                     progress=not args.no_progress)
            except TtZooError as e:
                sys.exit(f"--hard-negatives: {e}")
            negatives = mined.rows
        callbacks = [zero_shot_curve(args, workdir, batch)] if args.eval_every else []
        checkpoint_dir = os.path.join(workdir, "checkpoints")
        order = clustered_order(args, arrays, batch, checkpoint_dir)
        try:
            result = training.train_resumable(
                model, lambda start: distribute_step_batches(
                    strategy, arrays, batch, seed=args.seed, start_step=start, end_step=steps,
                    hard_negatives=negatives, order=order),
                steps=steps, global_batch=batch, checkpoint_dir=checkpoint_dir,
                checkpoint_every=args.checkpoint_every,
                settings=run_settings(model, args, batch, lr, warmup, steps,
                                      hard_negative_settings,
                                      clustering=order and order.settings()),
                log_dir=os.path.join(workdir, "logs"), progress=not args.no_progress,
                callbacks=callbacks, data_callbacks=[order.callback()] if order else [])
        except TtZooError as e:  # settings that differ; a clustered round's order missing
            sys.exit(str(e))
        if order is not None and result.final_loss is not None:
            clustering = clustering_summary(order, result.wall_time_s)
            print(f"clustered batches: {clustering['rounds_clustered']} rounds clustered in "
                  f"{clustering['cluster_seconds']:.1f} s (re-encoding "
                  f"{clustering['reencoding_seconds']:.1f} s), "
                  f"{100 * clustering['fraction_of_train_wall_time']:.1f}% of the training "
                  "wall time")
        if result.final_loss is None:
            print(f"already trained to step {result.steps_done}: nothing to do")
        else:
            print(f"trained to step {result.steps_done} (resumed from {result.resumed_from}) in "
                  f"{result.wall_time_s:.0f} s, {result.pairs_per_s:.1f} pairs/s (first 100 "
                  f"steps {result.pairs_per_s_over(first=True):.1f}, last 100 "
                  f"{result.pairs_per_s_over(first=False):.1f}), final loss "
                  f"{result.final_loss:.4f}")

    summary = {"name": spec.name, "encoder": spec.encoder, "tower_size": spec.tower_size,
               "pretraining": spec.pretraining, "train_steps": steps, "seed": args.seed,
               "training_data": (f"pairs from {args.pairs or args.mlm_examples}"
                                 if steps else "none (initialised, not trained)"),
               "license": "Apache-2.0 (weights trained on CC BY-SA text)"}
    summary["model_options"] = dataclasses.asdict(model_options(spec, args))
    if warm_start:
        summary["warm_start"] = warm_start
    summary["command"] = shlex.join(["tt-zoo", "pretrain",
                                     *(sys.argv[1:] if argv is None else map(str, argv))])
    if steps and args.pairs:
        from tt_zoo.data.pairs_io import read_manifest
        manifest = read_manifest(args.pairs, verify="none")
        summary["pairs"] = {"num_pairs": manifest["num_records"],
                            "num_distinct_docs": manifest.get("num_distinct_docs"),
                            "make_pairs_config": manifest.get("config", {})}
    if steps:
        summary.update(batch_size=batch, learning_rate=lr, warmup_fraction=warmup,
                       strategy=args.strategy, dtype_policy=args.dtype_policy,
                       pairs_seen=steps * batch)
        if args.grad_cache_chunk:
            summary["grad_cache_chunk"] = args.grad_cache_chunk
    if hard_negative_settings and steps:
        summary["hard_negatives"] = mined.summary()
    if order is not None:
        summary["clustered_batches"] = order.settings()
    summary_path = os.path.join(workdir, "train_summary.json")
    if result is not None and result.final_loss is not None:
        # A rerun of a finished run trains nothing: the first run's summary stays the record.
        summary.update(train_wall_time_s=round(result.wall_time_s, 1),
                       train_pairs_per_s=round(result.pairs_per_s, 1),
                       train_pairs_per_s_first_100=round(result.pairs_per_s_over(True), 1),
                       train_pairs_per_s_last_100=round(result.pairs_per_s_over(False), 1),
                       final_loss=round(result.final_loss, 4),
                       resumed_from=result.resumed_from)
        if clustering is not None:
            summary["train_clustered_batches"] = clustering
    elif result is not None and tf.io.gfile.exists(summary_path):
        with tf.io.gfile.GFile(summary_path) as f:
            previous = json.load(f)
        summary.update({k: v for k, v in previous.items() if k.startswith(("train_", "final_"))
                        or k == "resumed_from"})
    write_text(summary_path, json.dumps(summary, indent=2))
    if args.export:
        meta = export_saved_model(model, args.export, summary)
        print(f"exported to {args.export} (sha256 {meta['sha256']})")
    # Without --export, the last checkpoint in WORKDIR/checkpoints holds the final weights;
    # tt-zoo export --variant ... --checkpoint WORKDIR exports it later.
    return 0


if __name__ == "__main__":
    sys.exit(main())
