"""Index a corpus once with a model of any kind (or BM25) into a folder that `tt-zoo search --index`
and `tt_zoo.load_index` query without encoding a passage again.

The corpus is a .jsonl ({"text", "title"?, "id"?} a line; BEIR's "_id" is an id), a .tsv with a
header line, a .txt (one passage a line), or a folder in BEIR's layout (its corpus.jsonl). A
two-tower model indexes its embeddings (ScaNN, exact below 20,000 passages, or --backend
brute_force), with --hybrid fused with BM25 (reciprocal-rank fusion, or --weight W: W times the
model's min-max normalised score plus 1 - W times BM25's); a ColBERT model its token vectors
(searched in the mode its card measured best, or --mode); an HDCT model its weighted BM25;
--bm25 BM25 alone. The index records the model that built it (name or path, and its weights'
sha256), which is loaded and checked again at search time.

Encoding is resumable: finished chunks of --chunk-size passages are kept in .DIR.partial/ beside
--output, so a run killed half way and run again encodes only what is left.

  tt-zoo index examples/squad_sample --model multitask_static_minilm_l6_384 --output runs/idx/static
  tt-zoo index examples/squad_sample --model minilm_l6_384 --hybrid --output runs/idx/hybrid
  tt-zoo index examples/squad_sample --bm25 --output runs/idx/bm25
  tt-zoo search --index runs/idx/static --query "who discovered penicillin?"
"""

from __future__ import annotations

import argparse
import sys
import time

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import DEFAULT_SEARCH_MODEL, load_model
from tt_zoo.data.text_files import TextFileError, read_texts

DEFAULT_CHUNK = 4096  # tt_zoo.zoo.index_build.DEFAULT_CHUNK (no TensorFlow for --help)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The options `tt-zoo index` and `tt-zoo search FILE` share: which model (or BM25), and how
    its index searches."""
    from tt_zoo.retrieval.index import MIN_PARTITIONED_SIZE  # noqa: PLC0415 (no TensorFlow)

    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", default=None, metavar="NAME_OR_PATH",
                       type=parsing.model_name_or_path,
                       help="a registered model name (tt-zoo list --shipped) or an export "
                            f"directory (default: {DEFAULT_SEARCH_MODEL})")
    which.add_argument("--bm25", action="store_true", help="BM25 instead of a model")
    p.add_argument("--hybrid", action="store_true",
                   help="a two-tower model's index fused with BM25 (reciprocal-rank fusion, or "
                        "a convex combination with --weight)")
    p.add_argument("--weight", type=numbers.fraction(), metavar="W",
                   help="with --hybrid: the model's share of a convex combination of min-max "
                        "normalised scores, in [0, 1] (default: reciprocal-rank fusion)")
    p.add_argument("--backend", default=None, choices=("scann", "brute_force"),
                   help="a two-tower model's index: ScaNN (exact below "
                        f"{MIN_PARTITIONED_SIZE:,} passages, approximate from there) or brute "
                        "force (exact); default: scann")
    p.add_argument("--mode", choices=("rerank", "token_index"),
                   help="a late-interaction (ColBERT) model's search: re-rank BM25's top 100 by "
                        "MaxSim, or its token index (default: the mode its card measured best)")
    p.add_argument("--batch-size", type=numbers.count(), default=256, help="texts a forward pass")


def check_model_arguments(p: argparse.ArgumentParser, args) -> None:
    """Refuses flags that do not go together (naming them), then sets the default model."""
    if args.bm25:
        for flag, value in (("--backend", args.backend), ("--mode", args.mode),
                            ("--hybrid", args.hybrid or None), ("--weight", args.weight)):
            if value is not None:
                p.error(f"{flag} is for a model's index; --bm25 indexes with BM25 alone: drop "
                        "one of them")
    if args.weight is not None and not args.hybrid:
        p.error("--weight is the model's share in a --hybrid index: add --hybrid, or drop it")
    args.model = None if args.bm25 else (args.model or DEFAULT_SEARCH_MODEL)
    args.backend = args.backend or "scann"


def check_model_kind(model, args, command: str) -> None:
    """Exits naming the flag when --mode, --hybrid or --backend does not fit `model`'s kind."""
    from tt_zoo.zoo.kind_models import (LateInteractionZooModel,  # noqa: PLC0415
                                        TermWeightZooModel)

    if args.mode is not None and not isinstance(model, LateInteractionZooModel):
        sys.exit(f"tt-zoo {command}: --mode is for late-interaction (ColBERT) models; "
                 f"{model.name} is not one.")
    if args.hybrid and isinstance(model, (LateInteractionZooModel, TermWeightZooModel)):
        sys.exit(f"tt-zoo {command}: --hybrid fuses a two-tower model's index with BM25; "
                 f"{model.name} is not a two-tower model (tt_zoo.fuse fuses any two indexes "
                 "from Python).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus", metavar="CORPUS",
                   help="the passages: a .jsonl, .tsv or .txt file, or a BEIR folder")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="the index folder: new, or an earlier index (replaced)")
    add_model_arguments(p)
    p.add_argument("--chunk-size", type=numbers.count(), default=DEFAULT_CHUNK,
                   help="passages encoded and kept at a time (what a rerun after a kill keeps)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace --output even if it holds something other than an index")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser("index", __doc__, add_arguments)
    args = p.parse_args(argv)
    check_model_arguments(p, args)
    from tt_zoo.atomic_io import check_replaceable  # noqa: PLC0415 (no TensorFlow)
    from tt_zoo.retrieval.passage_index import is_saved_index  # noqa: PLC0415
    try:
        check_replaceable(args.output, overwrite=args.overwrite, is_replaceable=is_saved_index,
                          what="saved tt_zoo index")
    except FileExistsError as e:
        p.error(f"--output: {e}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        passages = read_texts(args.corpus, "passages")
    except TextFileError as e:
        sys.exit(f"tt-zoo index: {e}")
    t0 = time.perf_counter()
    model = None
    if args.model is not None:
        model = load_model(args.model, "index")
        check_model_kind(model, args, "index")
    from tt_zoo.zoo.index_build import build_index  # noqa: PLC0415 (TensorFlow)

    index = build_index(passages.texts, passages.titles, passages.ids_or_positions(),
                        args.output, model=model, hybrid=args.hybrid, backend=args.backend,
                        mode=args.mode, weight=args.weight, chunk=args.chunk_size,
                        batch_size=args.batch_size, progress=not args.no_progress,
                        overwrite=args.overwrite, log=print)
    print(f"indexed {len(index):,} passages ({index.description}) into {args.output} in "
          f"{time.perf_counter() - t0:.1f} s; query it with: tt-zoo search --index "
          f"{args.output} --query TEXT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
