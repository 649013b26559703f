"""Embed the texts of a file with a zoo model into a .npy file (float32 [n, dim], file order).

The texts are documents by default, each encoded with its title when the file gives one
(`ZooModel.encode_documents`); --queries encodes them with the query tower instead
(`encode_queries`; titles are not used). The input is a .jsonl ({"text", "title"?, "id"?} a
line), a .tsv with a header line (text, title, id) or a .txt (one text a line), as
tt-zoo search reads it. The .npy is written to a temp file and renamed into place; an existing
file is replaced only with --overwrite.

  tt-zoo encode ict_bfs_wlp_512 examples/squad_sample --output runs/passages.npy
  tt-zoo encode ict_bfs_wlp_512 examples/squad_sample/queries.jsonl --queries \\
      --output runs/questions.npy
"""

from __future__ import annotations

import argparse
import sys

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import check_new_file, load_model, progress_bar
from tt_zoo.data.text_files import TextFileError, read_texts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", type=parsing.model_name_or_path,
                   help="a registered model name (tt-zoo list --shipped) or an export directory")
    p.add_argument("input", metavar="FILE", help="the texts: a .jsonl, .tsv or .txt file")
    p.add_argument("-o", "--output", required=True,
                   help="the .npy file to write, one row a text in the file's order")
    p.add_argument("--queries", action="store_true",
                   help="encode the texts as queries (query tower, no titles) instead of as "
                        "documents")
    p.add_argument("--batch-size", type=numbers.count(), default=256, help="texts a forward pass")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser("encode", __doc__, add_arguments)
    args = p.parse_args(argv)
    check_new_file(p, args.output, args.overwrite, suffix=".npy")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:  # before the model loads: a bad file fails at once
        texts = read_texts(args.input)
    except TextFileError as e:
        sys.exit(f"tt-zoo encode: {e}")
    if args.queries and texts.has_titles:
        print(f"tt-zoo encode: --queries encodes the texts of {args.input} without their "
              "titles.", file=sys.stderr)

    import numpy as np  # noqa: PLC0415
    from tt_zoo.atomic_io import open_for_replace  # noqa: PLC0415

    model = load_model(args.model, "encode")
    if hasattr(model.keras_model, "encode_query_tokens"):
        sys.exit(f"tt-zoo encode: {model.name} is a late-interaction model (token vectors, "
                 "not one vector a text); encode it in Python with "
                 "encode_query_tokens / encode_document_tokens.")
    bar = progress_bar(args.no_progress)
    if args.queries:
        embeddings = model.encode_queries(texts.texts, batch_size=args.batch_size,
                                          show_progress_bar=bar)
    else:
        embeddings = model.encode_documents(texts.texts, titles=texts.titles,
                                            batch_size=args.batch_size, show_progress_bar=bar)
    embeddings = np.asarray(embeddings, dtype=np.float32)
    with open_for_replace(args.output, "wb") as f:
        np.save(f, embeddings)
    side = "query" if args.queries else "document"
    print(f"wrote {embeddings.shape[0]:,} x {embeddings.shape[1]} {side} embeddings of "
          f"{model.name} to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
