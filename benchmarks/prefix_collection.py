"""The first articles of an ODQA collection as a collection of their own, with the embeddings a
cut-off encoding of the whole one already holds.

An encoding of the 130,638 Wikispeedia passages by a large model (all-mpnet-base-v2: about
2.5 hours on this 2-core CPU) writes its rows in collection order, article after article
(`tt_zoo.evaluation.document_embeddings.encode_documents_to_file`). The first N articles cut
into passages are exactly its first P rows (checked here, id by id), so a run cut off after P
rows is already a complete index of that smaller collection: this script takes the largest N
whose passages all lie in the rows every given cache holds, and writes each cache's first P rows
under the name `tt-zoo odqa --limit-articles N`, `tt-zoo adapt-queries --limit-articles N` and
`tt-zoo teacher-scores --limit-articles N` look for (`cache_file`), with the record that says
whose they are. Scores over the smaller collection compare models with each other, not with
the full collection's.

  python -m benchmarks prefix_collection --cache runs/odqa_cache/passages-TAG-130638.npy \\
      --cache runs/odqa_cache/passages-TAG2-130638.npy --output runs/odqa_prefix
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

from benchmarks import arguments


def main(argv=None) -> dict:
    p = arguments.parser(__doc__)
    p.add_argument("--cache", action="append", required=True, type=pathlib.Path,
                   help="a passages-TAG-N.npy of the whole collection, its .json beside it "
                        "(repeatable)")
    p.add_argument("--articles", default=None,
                   help="the article source (default: $TT_ZOO_DATA/wikispeedia)")
    p.add_argument("--words", type=int, default=100, help="words per passage")
    arguments.add_output(p, help="the folder the prefix caches are written to")
    args = p.parse_args(argv)
    if args.output is None:
        p.error("--output FOLDER is required")
    from tt_zoo.atomic_io import write_json
    from tt_zoo.data.passage_collection import passage_collection

    articles = args.articles or str(arguments.data_dir() / "wikispeedia")
    full = passage_collection(articles, args.words)
    states = []
    for cache in args.cache:
        state_path = cache.with_suffix(".json")
        if not state_path.is_file():
            sys.exit(f"--cache {cache}: no record {state_path} beside it (written by "
                     "encode_documents_to_file)")
        state = json.loads(state_path.read_text())
        if state.get("shape", [None])[0] != len(full):
            sys.exit(f"--cache {cache}: holds {state.get('shape')} rows, not the {len(full):,} "
                     f"passages of {articles}")
        states.append(state)
    rows = min(s["done"] for s in states)
    titles = list(dict.fromkeys(full.titles[:rows + 1]))
    n_articles = len(titles) - (1 if rows < len(full) else 0)  # the last may be cut
    prefix = passage_collection(articles, args.words, limit_articles=n_articles)
    if prefix.ids != full.ids[:len(prefix)]:
        sys.exit("the first articles' passages are not the whole collection's first rows")
    args.output.mkdir(parents=True, exist_ok=True)
    written = []
    for cache, state in zip(args.cache, states):
        name = cache.name.rsplit("-", 1)[0] + f"-{len(prefix)}.npy"
        out = args.output / name
        array = np.load(cache, mmap_mode="r")[:len(prefix)]
        tmp = out.with_suffix(".tmp.npy")
        np.save(tmp, np.asarray(array, np.float32))
        tmp.replace(out)
        write_json(out.with_suffix(".json"), {**state, "shape": [len(prefix), array.shape[1]],
                                              "done": len(prefix),
                                              "prefix_of": str(cache)})
        written.append(str(out))
        print(f"{out}: the first {len(prefix):,} rows of {cache}")
    result = {"limit_articles": n_articles, "passages": len(prefix), "of": len(full),
              "written": written}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
