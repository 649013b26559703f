"""Exports a model for serving, and optionally a ScaNN / brute-force index and `retrieve` model.

From a pretraining checkpoint (tt-zoo pretrain also calls the same export at its end):
  tt-zoo export --variant ict_bfs_wlp_512 --checkpoint runs/pretrain/ict_bfs_wlp_512 \\
      --document-length 128 --output saved_models/ict_bfs_wlp_512

A ColBERT model whose query tokens count by their idf over the corpus it will search (each
query token's MaxSim weighed idf ** ALPHA, the [MASK] tokens --query-mask-weight;
`tt_zoo.modeling.query_token_weights`), the weights inside the export's signatures:
  tt-zoo export --model multitask_colbert_ict_bfs_wlp_crop_span_qgen_64 --corpus passages.jsonl \\
      --query-idf 0.5 --query-mask-weight 0.25 --question-log questions.txt --query-beta 1 \\
      --output out/colbert_idf
(--question-log: questions users ask, one a line or as tt-zoo search reads queries; the words
most of them hold, "what", "?", weigh less: --query-beta.)

An index over a corpus (ReQA-SQuAD(dev) candidates, or a .jsonl/.tsv file of passages
{id, title, text} as tt-zoo search reads them), saved with ScaNN's own serializer (ids in a
plain file), plus a `retrieve` SavedModel (query string -> top-k ids and scores) with the TFRS
ScaNN layer or BruteForce:
  tt-zoo export --model ict_bfs_wlp_512 --corpus squad --index-output out/index \\
      --retrieve-output out/retrieve --backend brute_force --k 10
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import (MissingDataError, check_query_weight_flags, default_vocab_path,
                               load_reqa, progress_bar)
from tt_zoo.data.text_files import TextFileError, read_texts


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--variant", help="registered name, restored from --checkpoint")
    src.add_argument("--model", type=parsing.model_name_or_path,
                     help="a zoo name or an export directory")
    p.add_argument("--checkpoint", help="a pretrain workdir or checkpoint directory")
    p.add_argument("--vocab", help="vocab.txt of a --variant's model (default: the project's "
                                   "saved_models/vocab/vocab.txt in a git clone, else "
                                   "$TT_ZOO_DATA/bert-vocab/vocab.txt)")
    p.add_argument("--query-length", type=numbers.TOKEN_BUDGET,
                   help="query token budget of a --variant's model (default: the registry's)")
    p.add_argument("--document-length", type=numbers.TOKEN_BUDGET,
                   help="document token budget of a --variant's model (default: the registry's)")
    p.add_argument("--output", help="export directory for the model's SavedModel")
    p.add_argument("--corpus", help="'squad' (ReQA-SQuAD(dev) candidates) or a .jsonl/.tsv "
                                    "file of passages (tt-zoo search's formats)")
    p.add_argument("--index-output", help="directory for the saved index")
    p.add_argument("--retrieve-output", help="directory for the retrieve SavedModel")
    p.add_argument("--backend", default="scann", choices=("scann", "brute_force"),
                   help="the index and retrieve model: ScaNN (approximate) or brute force "
                        "(exact)")
    p.add_argument("-k", "--k", type=numbers.count(high=100_000), default=10,
                   help="results the retrieve SavedModel returns per query")
    p.add_argument("--query-idf", type=numbers.QUERY_WEIGHT, metavar="ALPHA",
                   help="a ColBERT model: weigh each query token's MaxSim by its idf ** ALPHA "
                        "over --corpus, kept in the --output export")
    p.add_argument("--query-mask-weight", type=numbers.QUERY_WEIGHT, default=0.0,
                   help="with --query-idf: the weight of the query augmentation's [MASK] "
                        "tokens (default: %(default)s; 1: ColBERT's)")
    p.add_argument("--question-log", metavar="FILE",
                   help="with --query-idf: a .txt/.jsonl/.tsv file of questions whose common "
                        "words weigh less (the factor (qidf / qidf_max) ** --query-beta)")
    p.add_argument("--query-beta", type=numbers.QUERY_WEIGHT, default=1.0,
                   help="with --question-log: the exponent of its factor (default: "
                        "%(default)s)")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser("export", __doc__, add_arguments)
    args = p.parse_args(argv)
    if args.variant and not args.checkpoint:
        p.error("--variant needs --checkpoint")
    if (args.index_output or args.retrieve_output) and not args.corpus:
        p.error("--index-output/--retrieve-output need --corpus")
    if args.query_idf is not None:
        if not (args.corpus and args.output):
            p.error("--query-idf needs --corpus (the idf's documents) and --output")
        check_query_weight_flags(p, args)
    if args.question_log and args.query_idf is None:
        p.error("--question-log weighs query tokens with --query-idf: give it too")
    if not (args.output or args.index_output or args.retrieve_output):
        p.error("nothing to do: give --output, --index-output or --retrieve-output")
    if args.variant:
        args.vocab = args.vocab or default_vocab_path()
        if not pathlib.Path(args.vocab).is_file():
            parsing.exit_missing(p, f"--vocab: vocabulary file {args.vocab} does not exist "
                                    "(pass --vocab PATH or set TT_ZOO_DATA)")
    if args.corpus and args.corpus != "squad" and not pathlib.Path(args.corpus).is_file():
        p.error(f"--corpus: {args.corpus} does not exist (give 'squad' or a passage file)")
    return args


def restore_from_checkpoint(args):
    """Rebuilds the variant and restores the latest checkpoint; returns (model, metadata)."""
    import tensorflow as tf

    from tt_zoo.serving.model_card import ModelCard
    from tt_zoo.zoo.registry import get_spec
    from tt_zoo.zoo.build import build_untrained

    spec = get_spec(args.variant)
    root = pathlib.Path(args.checkpoint)
    ckpt_dir = root / "checkpoints" if (root / "checkpoints").is_dir() else root
    latest = tf.train.latest_checkpoint(str(ckpt_dir))
    if latest is None:
        sys.exit(f"no checkpoint found in {ckpt_dir}")
    model = build_untrained(spec, args.vocab, query_length=args.query_length,
                            document_length=args.document_length)
    model.build_by_calling()
    tf.train.Checkpoint(model=model).read(latest).expect_partial().assert_existing_objects_matched()
    summary_file = root / "train_summary.json"
    card = ModelCard.from_dict(json.loads(summary_file.read_text())
                               if summary_file.is_file() else {})
    card.name, card.training.pretraining = spec.name, spec.pretraining
    card.architecture.encoder, card.architecture.tower_size = spec.encoder, spec.tower_size
    card.training.checkpoint = os.path.basename(latest)
    return model, card.to_dict()


def load_corpus(corpus: str):
    """(ids, titles, texts) of the corpus to index."""
    if corpus == "squad":
        try:
            reqa = load_reqa(flag=None)
        except MissingDataError as e:
            sys.exit(f"tt-zoo export: {e}")
        cands = reqa.candidates
        return ([str(i) for i in range(len(cands))], [c.sentence for c in cands],
                [c.passage for c in cands])
    try:
        passages = read_texts(corpus, "passages")
    except TextFileError as e:
        sys.exit(f"--corpus: {e}")
    return passages.ids_or_positions(), passages.titles, passages.texts


def main(argv=None):
    args = parse_args(argv)
    try:
        export(args)
    except FileExistsError as e:
        sys.exit(str(e))


def export(args):
    import tt_zoo
    import tt_zoo.zoo.loading
    from tt_zoo.serving.export import QueryEncoder, export_saved_model
    from tt_zoo.serving.retrieve import export_retrieval_model

    corpus = load_corpus(args.corpus) if args.corpus else None  # a bad file fails at once
    questions = None
    if args.question_log:
        try:
            questions = read_texts(args.question_log, "questions").texts
        except TextFileError as e:
            sys.exit(f"--question-log: {e}")
    if args.variant:
        keras_model, meta = restore_from_checkpoint(args)
        model = tt_zoo.zoo.loading.ZooModel(keras_model, metadata=meta)
    else:
        model = tt_zoo.load(args.model)
        keras_model, meta = model.keras_model, dict(model.metadata)
    if args.query_idf is not None:
        _, titles, texts = corpus
        from tt_zoo.modeling import query_token_weights as qtw  # noqa: PLC0415

        try:
            qtw.weigh_queries_over_documents(
                keras_model, titles, texts, alpha=args.query_idf,
                mask_weight=args.query_mask_weight,
                corpus="ReQA-SQuAD(dev) candidates" if args.corpus == "squad" else args.corpus,
                questions=questions, beta=args.query_beta, question_log=args.question_log or "")
        except TypeError as e:
            sys.exit(f"tt-zoo export: {e}")
    if args.output:
        meta.pop("sha256", None)
        written = export_saved_model(keras_model, args.output, meta)
        print(f"exported {args.output} (sha256 {written['sha256']}, "
              f"{written['parameters']:,} parameters)")
    if corpus and (args.index_output or args.retrieve_output):
        ids, titles, texts = corpus
        embeddings = model.encode_documents(texts, titles=titles,
                                            show_progress_bar=progress_bar(args.no_progress))
        index = model.index(texts, titles=titles, ids=ids, backend=args.backend,
                            embeddings=embeddings)
        print(f"indexed {len(index):,} documents with {args.backend}")
        if args.index_output:
            index.save(args.index_output)
            print(f"saved index to {args.index_output}")
        if args.retrieve_output:
            query_encoder = QueryEncoder(keras_model)
            export_retrieval_model(query_encoder, embeddings, ids, args.retrieve_output,
                                   k=args.k, backend=args.backend)
            print(f"exported retrieve SavedModel ({args.backend}, k={args.k}) to "
                  f"{args.retrieve_output}")


if __name__ == "__main__":
    main()
