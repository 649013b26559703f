"""Search a saved index (tt-zoo index) or a file of passages with query text; print the hits,
write them as JSON Lines, or write a TREC run of a topics file.

--index DIR answers from an index `tt-zoo index` (or `tt-zoo export --index-output`, or
``index.save`` in Python) wrote, with the model that built it: no passage is encoded again. A
FILE of passages instead (.jsonl {"text", "title"?, "id"?} a line, .tsv with a header, .txt,
or a BEIR folder) is indexed on the spot with --model (default: the static MiniLM model) or
--bm25, and forgotten after: for more than one search, index it once with tt-zoo index.

Queries come from --query (repeatable), a --queries file (.txt, .jsonl or .tsv: their text), or
--topics (a .jsonl of {"_id" or "id", "text"} lines such as BEIR's queries.jsonl, a .tsv of
id<TAB>text lines, or a BEIR folder): the hits print as a table a query, or go to --output as
JSON Lines ({"query", "id"?, "hits": [{"rank", "id", "score", "title", "text"}]} a line), or
with --topics to --run as a TREC run (qid Q0 docid rank score tag), which tt-zoo evaluate --run
scores against qrels.

  tt-zoo search --index runs/idx/static --query "who discovered penicillin?"
  tt-zoo search --index runs/idx/static --topics examples/squad_sample -k 100 --run runs/static.run
  tt-zoo search examples/squad_sample --bm25 --query "when was the eiffel tower built?" -k 3
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import check_new_file, load_model, loaded_or_exit, progress_bar
from tt_zoo.cli.index import add_model_arguments, check_model_arguments, check_model_kind
from tt_zoo.data.text_files import TextFileError, read_texts, read_topics

MODEL_FLAGS = ("--model", "--bm25", "--hybrid", "--weight", "--backend", "--mode",
               "--batch-size")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("passages", metavar="FILE", nargs="?",
                   help="passages to index on the spot: a .jsonl, .tsv or .txt file, or a BEIR "
                        "folder (or --index)")
    p.add_argument("--index", metavar="DIR",
                   help="a saved index (tt-zoo index): searched with the model that built it")
    add_model_arguments(p)
    p.add_argument("--query", action="append", default=[], metavar="TEXT",
                   help="a query (repeatable)")
    p.add_argument("--queries", metavar="FILE",
                   help="a .txt, .jsonl or .tsv file of queries (their text), after any --query")
    p.add_argument("--topics", metavar="FILE",
                   help="queries with ids: a .jsonl ({\"_id\" or \"id\", \"text\"}), a .tsv "
                        "(id<TAB>text) or a BEIR folder (its queries.jsonl)")
    p.add_argument("-k", "--k", type=numbers.count(high=100_000), default=10, help="hits a query")
    p.add_argument("--run", metavar="RUN",
                   help="write the hits of the --topics as a TREC run here (qid Q0 docid rank "
                        "score tag)")
    p.add_argument("--run-tag", metavar="TAG",
                   help="the run's last column (default: what searched, e.g. the model's name)")
    p.add_argument("-o", "--output", help="write the hits as JSON Lines here (.jsonl) instead "
                                          "of printing them")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output or "
                                                            "--run")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    p = parsing.command_parser("search", __doc__, add_arguments)
    args = p.parse_args(argv)
    if (args.index is None) == (args.passages is None):
        p.error("give either a FILE of passages to index now or --index DIR (a saved index), "
                "not both" if args.index else "nothing to search: give --index DIR (a saved "
                "index: tt-zoo index) or a FILE of passages")
    if args.index is not None:
        given = [f for f in MODEL_FLAGS if any(a == f or a.startswith(f + "=") for a in argv)]
        if given:
            p.error(f"{', '.join(given)}: the saved index --index fixes how it searches (its "
                    "model and settings, chosen by tt-zoo index); drop them")
        if not pathlib.Path(args.index).is_dir():
            parsing.exit_missing(p, f"--index: {args.index} is not a folder (make one with "
                                    "tt-zoo index CORPUS --output DIR)")
    check_model_arguments(p, args)
    if not (args.query or args.queries or args.topics):
        p.error("nothing to search for: give --query TEXT, --queries FILE or --topics FILE")
    if args.topics and (args.query or args.queries):
        p.error("--topics brings its own queries (with ids); drop --query / --queries")
    if args.run and not args.topics:
        p.error("--run writes a TREC run, whose lines name each query's id: give --topics FILE")
    if args.run_tag and not args.run:
        p.error("--run-tag names a --run: add --run RUN")
    if args.run and args.output:
        p.error("--run and --output both take the hits: give one of them")
    for flag, path, suffix in (("--output", args.output, ".jsonl"), ("--run", args.run, None)):
        if not path:
            continue
        check_new_file(p, path, args.overwrite, flag, suffix)
    return args


def read_inputs(args):
    """(passages `Texts` or None, query ids or None, query strings), or exit naming the file and
    line at fault."""
    try:
        passages = read_texts(args.passages, "passages") if args.passages else None
        if args.topics:
            query_ids, queries = read_topics(args.topics)
            return passages, query_ids, queries
        queries = list(args.query)
        if args.queries:
            queries += read_texts(args.queries, "queries").texts
    except TextFileError as e:
        sys.exit(f"tt-zoo search: {e}")
    return passages, None, queries


def build_index(args, passages):
    """The index of a FILE of passages, built now (BM25, a model of any kind, or a hybrid)."""
    from tt_zoo.zoo.kind_models import LateInteractionZooModel, TermWeightZooModel  # noqa
    import tt_zoo  # noqa: PLC0415 (TensorFlow)

    ids = passages.ids_or_positions()
    if args.model is None:
        return tt_zoo.bm25_index(passages.texts, passages.titles, ids)
    model = load_model(args.model, "search")
    check_model_kind(model, args, "search")
    options = {"show_progress_bar": progress_bar(args.no_progress)}
    if isinstance(model, LateInteractionZooModel):
        options.update(mode=args.mode, batch_size=args.batch_size)
    elif not isinstance(model, TermWeightZooModel):
        options.update(backend=args.backend, batch_size=args.batch_size)
    index = model.index(passages.texts, titles=passages.titles, ids=ids, **options)
    if args.hybrid:
        index = tt_zoo.fuse(index, tt_zoo.bm25_index(passages.texts, passages.titles, ids),
                            weight=args.weight)
    return index


def load_saved_index(path: str):
    """`tt_zoo.load_index(path)`, or exit with its error in one line."""
    import tt_zoo  # noqa: PLC0415 (TensorFlow)

    return loaded_or_exit(tt_zoo.load_index, path, "search")


def main(argv=None) -> int:
    args = parse_args(argv)
    from tt_zoo.retrieval.passage_file_search import format_hits, write_hits  # noqa: PLC0415

    passages, query_ids, queries = read_inputs(args)  # before a model loads: bad files fail fast
    index = None
    if args.index:
        from tt_zoo.retrieval import numpy_queries  # noqa: PLC0415 (NumPy only)
        if numpy_queries.answers(queries):  # a static model's index (or BM25): no TensorFlow
            index = numpy_queries.load_index_without_tensorflow(args.index)
        index = index or load_saved_index(args.index)
    else:
        index = build_index(args, passages)
    hits = index.search_batch(list(queries), k=args.k)
    searcher = getattr(index, "description", type(index).__name__)
    if args.run:
        from tt_zoo.evaluation.trec import write_run  # noqa: PLC0415
        lines = write_run(args.run, query_ids, hits, tag=args.run_tag or searcher)
        print(f"wrote a run of {len(queries):,} topics ({lines:,} lines, top {args.k} of "
              f"{len(index):,} passages, {searcher}) to {args.run}")
    elif args.output:
        write_hits(args.output, queries, hits, query_ids)
        print(f"wrote the top {args.k} of {len(index):,} passages ({searcher}) for "
              f"{len(queries):,} quer{'y' if len(queries) == 1 else 'ies'} to {args.output}")
    else:
        print(format_hits(queries, hits, searcher))
    return 0


if __name__ == "__main__":
    sys.exit(main())
