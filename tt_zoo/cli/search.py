"""Index a file of passages with a zoo model (default: the flagship) or BM25, and query it.

The passages are a .jsonl ({"text", "title"?, "id"?} a line), a .tsv with a header line
naming its columns (text, title, id) or a .txt (one passage a line); a passage's id is its
position when the file gives none. A model of any kind indexes each (title, text) with its
``index``: a two-tower model its embeddings (ScaNN, exact below 20,000 passages, or --backend
brute_force), a late-interaction (ColBERT) model its token vectors, searched in the mode its
card measured best (re-ranking BM25's top 100 by MaxSim) or --mode, a term-weight (HDCT) model
its weighted BM25. --bm25 indexes "title text" with BM25 instead
(`tt_zoo.retrieval.bm25.BM25Retriever`: bm25s, English stemming and stop words). Queries come
from --query (repeatable) and/or a --queries file (.txt, .jsonl or .tsv: their text). The hits print as a table a query, or go to --output
as JSON Lines, one line a query: {"query", "hits": [{"rank", "id", "score", "title", "text"}]}.

  tt-zoo search passages.jsonl --query "who discovered penicillin?"
  tt-zoo search passages.tsv --bm25 --queries questions.txt -k 5 --output hits.jsonl
  tt-zoo search passages.jsonl --model colbert_ict_bfs_wlp_crop_span_qgen_64 --query "..."
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import FLAGSHIP, check_new_file, load_model, progress_bar
from tt_zoo.data.text_files import TextFileError, Texts, read_texts


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tt_zoo.retrieval.index import MIN_PARTITIONED_SIZE  # noqa: PLC0415 (no TensorFlow)

    p.add_argument("passages", metavar="FILE", help="the passages: a .jsonl, .tsv or .txt file")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", default=FLAGSHIP, metavar="NAME_OR_PATH",
                       type=parsing.model_name_or_path,
                       help="a registered model name (tt-zoo list --shipped) or an export "
                            "directory")
    which.add_argument("--bm25", action="store_true", help="search with BM25 instead of a model")
    p.add_argument("--query", action="append", default=[], metavar="TEXT",
                   help="a query (repeatable)")
    p.add_argument("--queries", metavar="FILE",
                   help="a .txt, .jsonl or .tsv file of queries (their text), after any --query")
    p.add_argument("-k", "--k", type=numbers.count(high=100_000), default=10, help="hits a query")
    p.add_argument("--backend", default=None, choices=("scann", "brute_force"),
                   help="a model's index: ScaNN (exact below "
                        f"{MIN_PARTITIONED_SIZE:,} passages, approximate from there) or brute "
                        "force (exact); default: scann. Not with --bm25")
    p.add_argument("--mode", choices=("rerank", "token_index"),
                   help="a late-interaction (ColBERT) model's search: re-rank BM25's top 100 by "
                        "MaxSim, or its token index (default: the mode its card measured best)")
    p.add_argument("--batch-size", type=numbers.count(), default=256, help="texts a forward pass")
    p.add_argument("-o", "--output", help="write the hits as JSON Lines here (.jsonl) instead "
                                          "of printing them")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser("search", __doc__, add_arguments)
    args = p.parse_args(argv)
    if not args.query and not args.queries:
        p.error("nothing to search for: give --query TEXT and/or --queries FILE")
    if args.k < 1:
        p.error(f"-k must be at least 1 (got {args.k})")
    if args.bm25 and args.backend is not None:
        p.error(f"--backend {args.backend} chooses a model's index; --bm25 searches with BM25 "
                "and has no backend: drop one of them")
    if args.bm25 and args.mode is not None:
        p.error(f"--mode {args.mode} chooses a ColBERT model's search; --bm25 searches with BM25: "
                "drop one of them")
    args.backend = args.backend or "scann"
    if args.batch_size < 1:
        p.error(f"--batch-size must be at least 1 (got {args.batch_size})")
    if args.output:
        if not args.output.endswith(".jsonl"):
            p.error(f"--output must be a .jsonl file (got {args.output!r})")
        problem = check_new_file(args.output, args.overwrite)
        if problem:
            p.error(problem)
    return args


def read_inputs(args):
    """(passages `Texts`, query strings), or exit naming the file and line at fault."""
    try:
        passages = read_texts(args.passages, "passages")
        queries = list(args.query)
        if args.queries:
            queries += read_texts(args.queries, "queries").texts
    except TextFileError as e:
        sys.exit(f"tt-zoo search: {e}")
    return passages, queries


def model_hits(args, passages: Texts, queries: Sequence[str]):
    """(what searched, hits) of any kind of model: its ``index`` (a two-tower model's
    embeddings, a ColBERT model's token vectors in its card's best mode or --mode, an HDCT
    model's weighted BM25) searched with the queries' text."""
    from tt_zoo.zoo.kind_models import LateInteractionZooModel, TermWeightZooModel  # noqa: PLC0415

    model = load_model(args.model, "search")
    options = {"show_progress_bar": progress_bar(args.no_progress)}
    if isinstance(model, LateInteractionZooModel):
        options.update(mode=args.mode, batch_size=args.batch_size)
    elif not isinstance(model, TermWeightZooModel):
        options.update(backend=args.backend, batch_size=args.batch_size)
    if args.mode is not None and not isinstance(model, LateInteractionZooModel):
        sys.exit(f"tt-zoo search: --mode is for late-interaction (ColBERT) models; "
                 f"{model.name} is not one.")
    index = model.index(passages.texts, titles=passages.titles,
                        ids=passages.ids_or_positions(), **options)
    return index.description, index.search_batch(list(queries), k=args.k)


def main(argv=None) -> int:
    args = parse_args(argv)
    from tt_zoo.retrieval.passage_file_search import (  # noqa: PLC0415 (after argparse)
        bm25_hits, format_hits, write_hits)

    passages, queries = read_inputs(args)  # before the model loads: a bad file fails at once
    if args.bm25:
        searcher, hits = "BM25", bm25_hits(passages, queries, args.k, not args.no_progress)
    else:
        searcher, hits = model_hits(args, passages, queries)
    if args.output:
        write_hits(args.output, queries, hits)
        print(f"wrote the top {args.k} of {len(passages):,} passages ({searcher}) for "
              f"{len(queries):,} quer{'y' if len(queries) == 1 else 'ies'} to {args.output}")
    else:
        print(format_hits(queries, hits, searcher))
    return 0


if __name__ == "__main__":
    sys.exit(main())
