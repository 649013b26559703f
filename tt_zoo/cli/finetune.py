"""Fine-tune a two-tower model on a ReQA split and evaluate it (Chang et al. 2020, Sec. 5).

The model is a zoo name or an export directory (``--model``), or an untrained tower built here
(``--init none``: the paper's "no pretraining" rows). Training follows the paper's fine-tuning
(Adam, lr 5e-5, 2,000 steps, batch 512, all settable) with early stopping on the split's
validation part; ``--eval`` scores the split's test questions against all ReQA candidates, with
BM25 beside it, and prints the Table 3 rows (R@1/5/10/50/100, MRR, in %).

Examples:
  tt-zoo finetune --model ict_bfs_wlp_512 --train-fraction 0.05 --seed 0 --eval \\
      --output runs/finetune/ict_bfs_wlp_512_5pct
  tt-zoo finetune --init none --encoder bert --size tiny --embedding-dim 512 \\
      --vocab $TT_ZOO_DATA/bert-vocab/vocab.txt --train-fraction 0.01 --steps 300 \\
      --batch-size 128 --document-length 128 --eval --json-out runs/finetune/none_512_1pct.json
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
import time

from tt_zoo.cli import parsing
from tt_zoo.cli.common import COLUMNS, default_squad_path, default_vocab_path, format_table


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("model")
    which = src.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", metavar="NAME_OR_PATH",
                       help="a registered model name or an export directory (tt_zoo.load)")
    which.add_argument("--init", choices=["none"],
                       help="'none': build an untrained model here (no pretraining)")
    src.add_argument("--encoder", default="bert", choices=["bert", "bow_mlp"],
                     help="the tower of --init none: BERT or bag-of-words MLP")
    src.add_argument("--size", default="tiny", help="BERT tower size (tiny, mini, small, base)")
    src.add_argument("--num-layers", type=int, help="explicit BERT shape (overrides --size)")
    src.add_argument("--hidden-size", type=int, help="explicit BERT hidden size (overrides --size)")
    src.add_argument("--num-attention-heads", type=int,
                     help="explicit BERT attention heads (overrides --size)")
    src.add_argument("--inner-dim", type=int,
                     help="explicit BERT feed-forward size (overrides --size)")
    src.add_argument("--embedding-dim", type=int, default=512,
                     help="output dimension of both towers of --init none")
    src.add_argument("--vocab", default=None,
                     help="vocab.txt for --init none (default: saved_models/vocab/vocab.txt if "
                          "present, else $TT_ZOO_DATA/bert-vocab/vocab.txt)")
    src.add_argument("--query-length", type=int, help="query token budget (paper: 64)")
    src.add_argument("--document-length", type=int, help="document token budget (paper: 288)")
    src.add_argument("--name", help="model name written to the export's metadata")
    data = p.add_argument_group("data")
    data.add_argument("--squad", default=None,
                      help="SQuAD-format JSON (default: $TT_ZOO_DATA/squad/dev-v1.1.json)")
    data.add_argument("--train-fraction", type=float,
                      help="make a cold-start split with this training fraction (0.01, 0.05, 0.8)")
    data.add_argument("--seed", type=int, default=0,
                      help="seed of the split, of --limit-questions, of shuffling and init")
    data.add_argument("--split-file", help="load a split written by tt_zoo.retrieval.reqa.save_split")
    data.add_argument("--split-out", help="save the split made here (JSON)")
    data.add_argument("--limit-questions", type=int,
                      help="keep a random, seeded subset of N questions (all candidates stay)")
    train = p.add_argument_group("training (paper: 2,000 steps, batch 512, lr 5e-5)")
    train.add_argument("--steps", type=int, default=2000, help="optimizer steps at most")
    train.add_argument("--batch-size", type=int, default=512,
                       help="training questions a step (clamped to the training part)")
    train.add_argument("--learning-rate", type=float, default=5e-5, help="Adam learning rate")
    train.add_argument("--eval-every", type=int, help="steps between validation checks")
    train.add_argument("--patience", type=int, default=5,
                       help="validation checks without improvement before stopping")
    train.add_argument("--min-delta", type=float, default=0.0,
                       help="smallest change of the validation value that counts as improvement")
    train.add_argument("--validation-metric", default="loss",
                       choices=["loss", "R@1", "R@5", "R@10", "R@50", "R@100", "MRR"],
                       help="what early stopping watches on the validation part")
    train.add_argument("--hard-negatives", type=int, default=0, metavar="H",
                       help="H BM25 hard negatives per training question beside the in-batch "
                            "ones (Multi-task DPR), skipping the gold and answer-holding "
                            "candidates (0: none)")
    train.add_argument("--hard-negatives-depth", type=int, default=None,
                       help="BM25 results searched per question when mining (default "
                            "tt_zoo.data.hard_negatives.DEFAULT_DEPTH)")
    train.add_argument("--log-dir", help="write the fine-tuning log (CSV, JSON) here")
    out = p.add_argument_group("output")
    out.add_argument("--output", help="export the fine-tuned model (SavedModel) to this directory")
    out.add_argument("--eval", action="store_true",
                     help="evaluate on the split's test questions, with BM25 beside it")
    out.add_argument("--json-out", help="write settings, fine-tuning history and table as JSON")
    parsing.add_no_progress(out)
    # The old spelling, kept for the command lines that used it
    # (benchmarks/finetune_hard_negatives.py).
    out.add_argument("--quiet", dest="no_progress", action="store_true", help=argparse.SUPPRESS)


def parse_args(argv=None):
    p = parsing.command_parser("finetune", __doc__, add_arguments)
    args = p.parse_args(argv)
    args.squad = args.squad or default_squad_path()

    if args.split_file and args.train_fraction is not None:
        p.error("give either --split-file or --train-fraction, not both")
    if not args.split_file and args.train_fraction is None:
        p.error("give --train-fraction (0.01, 0.05, 0.8) or --split-file")
    if args.train_fraction is not None and not 0.0 < args.train_fraction < 1.0:
        p.error(f"--train-fraction must be between 0 and 1, exclusive, e.g. 0.01, 0.05 or 0.8 "
                f"(got {args.train_fraction})")
    if args.split_file and args.limit_questions:
        p.error("--limit-questions makes a new question set; it cannot reuse --split-file")
    if not pathlib.Path(args.squad).is_file():
        parsing.exit_missing(p, f"--squad: SQuAD file {args.squad} does not exist (set "
                                "TT_ZOO_DATA or pass --squad PATH)")
    if args.split_file and not pathlib.Path(args.split_file).is_file():
        p.error(f"--split-file: {args.split_file} does not exist")
    for flag in ("steps", "batch_size", "limit_questions", "eval_every", "query_length",
                 "document_length", "embedding_dim"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1 (got {value})")
    if not args.learning_rate > 0:
        p.error(f"--learning-rate must be positive (got {args.learning_rate})")
    if args.hard_negatives < 0:
        p.error(f"--hard-negatives must be >= 0 (got {args.hard_negatives})")
    if args.hard_negatives and args.hard_negatives_depth is not None and (
            args.hard_negatives_depth < args.hard_negatives):
        p.error(f"--hard-negatives-depth must be at least --hard-negatives (got "
                f"{args.hard_negatives_depth} < {args.hard_negatives})")
    if args.output:
        from tt_zoo.atomic_io import check_replaceable
        from tt_zoo.serving.export import is_model_export
        try:  # before fine-tuning, so the run never ends in a refused write
            check_replaceable(args.output, is_replaceable=is_model_export,
                              what="tt_zoo model export")
        except FileExistsError as e:
            p.error(f"--output: {e}")
    if args.init == "none":
        args.vocab = args.vocab or default_vocab_path()
        if not pathlib.Path(args.vocab).is_file():
            parsing.exit_missing(p, f"--vocab: vocabulary file {args.vocab} does not exist "
                                    "(pass --vocab PATH or set TT_ZOO_DATA)")
    elif args.vocab:
        p.error("--vocab is only for --init none (a loaded model carries its vocabulary)")
    return args


def limit_questions(reqa, n: int, seed: int):
    """A ReQA with a random, seeded subset of n questions (in their original order) and all the
    candidates."""
    import numpy as np
    from tt_zoo.retrieval import reqa as reqa_lib

    if n >= len(reqa.questions):
        return reqa
    keep = np.sort(np.random.default_rng(seed).choice(len(reqa.questions), n, replace=False))
    return reqa_lib.ReQA([reqa.questions[i] for i in keep], reqa.candidates, reqa.report,
                         source=f"{reqa.source} ({n} random questions, seed {seed})")


def build_untrained(args):
    """The "no pretraining" model: towers at their random initialisation (seeded), with the
    paper's choices ([CLS], separate towers; `tt_zoo.serving.registry.PAPER`)."""
    import tensorflow as tf
    from tt_zoo.serving import registry, zoo

    tf.keras.utils.set_random_seed(args.seed)
    shape = {k: getattr(args, k) for k in ("num_layers", "hidden_size", "num_attention_heads",
                                           "inner_dim") if getattr(args, k) is not None}
    bert = args.encoder == "bert"
    spec = registry.ModelSpec(name=args.name or f"none_{args.embedding_dim}",
                              encoder=args.encoder, tower_size=args.size if bert else None,
                              embedding_dim=args.embedding_dim, pretraining="none",
                              options=registry.PAPER)
    model = zoo.build_untrained(spec, args.vocab, query_length=args.query_length,
                                document_length=args.document_length,
                                tower_shape=shape if bert else None)
    model.build_by_calling()
    size = args.size if not shape else (
        f"L{model.query_tower.shape_.num_layers}/H{model.query_tower.shape_.hidden_size}")
    info = {"name": spec.name, "encoder": args.encoder,
            "tower_size": size if bert else None, "pretraining": "none",
            "vocabulary": str(args.vocab)}
    return model, info


def load_pretrained(args):
    import tt_zoo
    from tt_zoo.modeling.models import with_sequence_lengths

    zoo_model = tt_zoo.load(args.model)
    model = with_sequence_lengths(zoo_model.keras_model, args.query_length,
                                  args.document_length)
    zoo_model.keras_model = model
    spec, meta = zoo_model.spec, zoo_model.metadata
    info = {"name": args.name or f"{zoo_model.name}_reqa",
            "encoder": spec.encoder if spec else meta.get("encoder", "?"),
            "tower_size": spec.tower_size if spec else meta.get("tower_size"),
            "pretraining": zoo_model.pretraining, "base_model": str(args.model)}
    return zoo_model, model, info


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    t_start = time.perf_counter()
    from tt_zoo.retrieval import bm25, reqa as reqa_lib
    from tt_zoo.serving import export as export_lib
    from tt_zoo.training import finetuning
    from tt_zoo.retrieval import metrics as retrieval_metrics

    reqa = reqa_lib.build_reqa(args.squad)
    if args.limit_questions:
        reqa = limit_questions(reqa, args.limit_questions, args.seed)
    print(reqa.summary())
    if args.split_file:
        split, where = reqa_lib.load_split(args.split_file), f"split file {args.split_file}"
        reqa.questions_for(split.train + split.validation + split.test)  # ids must exist here
    else:
        split = reqa_lib.make_splits(reqa, args.train_fraction, seed=args.seed)
        where = f"{args.train_fraction:g} cold-start split, seed {args.seed}"
        if args.split_out:
            reqa_lib.save_split(split, args.split_out)
            print(f"Wrote the split to {args.split_out}")
    fraction = split.meta.get("train_fraction", args.train_fraction)
    print(f"Split ({where}): {len(split.train):,} training, {len(split.validation):,} "
          f"validation, {len(split.test):,} test questions.")

    if args.init == "none":
        zoo_model, (model, info) = None, build_untrained(args)
    else:
        zoo_model, model, info = load_pretrained(args)
    info.update(embedding_dim=model.embedding_dim,
                query_length=model.query_preprocessor.seq_length,
                document_length=model.document_preprocessor.seq_length,
                parameters=export_lib.count_parameters(model))
    print(f"Model: {info}")

    result = finetuning.finetune(
        model, reqa, split, steps=args.steps, batch_size=args.batch_size,
        learning_rate=args.learning_rate, eval_every=args.eval_every, patience=args.patience,
        min_delta=args.min_delta, validation_metric=args.validation_metric, seed=args.seed,
        log_dir=args.log_dir, progress=not args.no_progress, hard_negatives=args.hard_negatives,
        hard_negatives_depth=args.hard_negatives_depth)

    table, rows = None, []
    if args.eval:
        t = time.perf_counter()
        m = retrieval_metrics.evaluate_encoder(model, reqa, split.test)
        base = {"encoder": f"{info['encoder']}-{info.get('tower_size')}"
                if info.get("tower_size") else info["encoder"],
                "pretraining": info["pretraining"], "train_fraction": fraction}
        rows.append({**base, "search": "exact", **{c: m["exact"][c] for c in COLUMNS},
                     "details": m})
        b = bm25.evaluate_bm25(reqa, split.test)
        rows.append({"encoder": "BM25", "pretraining": "-", "train_fraction": fraction,
                     "search": "exact", **{c: b["exact"][c] for c in COLUMNS}, "details": b})
        table = format_table(rows)
        print(f"ReQA ({reqa.source}): {len(split.test):,} test questions of the {where}, "
              f"{len(reqa.candidates):,} candidates (evaluation {time.perf_counter() - t:.0f} s)")
        print(table)

    training = {k: result[k] for k in ("steps", "steps_run", "best_step", "best_value", "monitor",
                                       "batch_size", "requested_batch_size", "learning_rate",
                                       "seconds", "train_pairs_per_s")}
    if "hard_negatives" in result:
        training["hard_negatives"] = result["hard_negatives"]
    if args.output:
        # The export records the lineage itself (base model name, sha256, steps, date).
        metadata = {**{k: v for k, v in info.items() if k != "base_model"},
                    "training_data": f"ReQA {reqa.source}: training part of the {where} "
                                     f"({len(split.train)} questions)",
                    "finetune": training, "train_steps": result["steps_run"],
                    "batch_size": result["batch_size"], "learning_rate": args.learning_rate,
                    "train_wall_time_s": round(result["seconds"], 1),
                    "train_pairs_per_s": round(result["train_pairs_per_s"] or 0.0, 1)}
        if rows:
            metadata["metrics"] = {f"ReQA test questions, {where}":
                                   {c: round(100 * rows[0][c], 2) for c in COLUMNS}}
        if zoo_model is not None:
            zoo_model.export(args.output, metadata)
        else:
            export_lib.export_saved_model(model, args.output, metadata)
        print(f"Exported the fine-tuned model to {args.output}")

    wall = time.perf_counter() - t_start
    output = {"squad": reqa.source, "split": where, "train_fraction": fraction,
              "seed": args.seed, "limit_questions": args.limit_questions,
              "num_train": len(split.train), "num_validation": len(split.validation),
              "num_questions": len(split.test), "num_candidates": len(reqa.candidates),
              "model": info, "finetune": result, "rows": rows, "output": args.output,
              "argv": sys.argv[1:] if argv is None else list(argv), "wall_seconds": wall}
    if args.json_out:
        from tt_zoo.atomic_io import write_json
        write_json(args.json_out, output)
        print(f"Wrote {args.json_out}")
    print(f"Wall time: {wall:.1f} s (fine-tuning {result['seconds']:.1f} s, "
          f"{result['steps_run']} steps of {result['batch_size']})")
    return output


if __name__ == "__main__":
    main()
