"""Exports a model for serving, and optionally a ScaNN / brute-force index and `retrieve` model.

From a pretraining checkpoint (tt-zoo pretrain also calls the same export at its end):
  tt-zoo export --variant ict_bfs_wlp_512 --checkpoint runs/pretrain/ict_bfs_wlp_512 \\
      --document-length 128 --output runs/models/ict_bfs_wlp_512

A ColBERT model whose query tokens count by their idf over the corpus it will search (each
query token's MaxSim weighed idf ** ALPHA, the [MASK] tokens --query-mask-weight;
`tt_zoo.modeling.query_token_weights`), the weights inside the export's signatures:
  tt-zoo export --model multitask_colbert_ict_bfs_wlp_crop_span_qgen_64 --corpus examples/squad_sample \\
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
import pathlib
import sys

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import (MissingDataError, check_query_weight_flags, check_vocab_file,
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
        check_vocab_file(p, args)
    if args.corpus and args.corpus != "squad" and not pathlib.Path(args.corpus).exists():
        p.error(f"--corpus: {args.corpus} does not exist (give 'squad' or a passage file)")
    return args


def load_corpus(corpus: str):
    """The passages to index (a `Texts`): ReQA-SQuAD(dev)'s candidates or the --corpus file."""
    try:
        return (load_reqa(flag=None).candidate_passages() if corpus == "squad"
                else read_texts(corpus, "passages"))
    except MissingDataError as e:
        sys.exit(f"tt-zoo export: {e}")
    except TextFileError as e:
        sys.exit(f"--corpus: {e}")


def main(argv=None):
    try:
        export(parse_args(argv))
    except FileExistsError as e:
        sys.exit(str(e))


def export(args):
    import tt_zoo  # noqa: PLC0415 (TensorFlow: after argparse)
    from tt_zoo.errors import ArtifactError  # noqa: PLC0415
    from tt_zoo.serving.export_run import export_for_serving  # noqa: PLC0415
    from tt_zoo.zoo.build import restore_from_checkpoint  # noqa: PLC0415

    corpus = load_corpus(args.corpus) if args.corpus else None  # a bad file fails at once
    try:
        questions = read_texts(args.question_log, "questions").texts if args.question_log else None
    except TextFileError as e:
        sys.exit(f"--question-log: {e}")
    if args.variant:
        try:
            model = restore_from_checkpoint(args.variant, args.checkpoint, args.vocab,
                                            args.query_length, args.document_length)
        except ArtifactError as e:
            sys.exit(str(e))
    else:
        model = tt_zoo.load(args.model)
    if args.query_idf is not None:
        from tt_zoo.modeling import query_token_weights as qtw  # noqa: PLC0415
        try:
            qtw.weigh_queries_over_documents(
                model.keras_model, corpus.titles, corpus.texts, alpha=args.query_idf,
                mask_weight=args.query_mask_weight,
                corpus="ReQA-SQuAD(dev) candidates" if args.corpus == "squad" else args.corpus,
                questions=questions, beta=args.query_beta, question_log=args.question_log or "")
        except TypeError as e:
            sys.exit(f"tt-zoo export: {e}")
    export_for_serving(model, args.output, corpus, index_output=args.index_output,
                       retrieve_output=args.retrieve_output, backend=args.backend, k=args.k,
                       show_progress_bar=progress_bar(args.no_progress))


if __name__ == "__main__":
    main()
