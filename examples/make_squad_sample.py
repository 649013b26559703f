"""Writes examples/squad_sample/: a small corpus in BEIR's layout made from SQuAD v1.1 dev.

The first PARAGRAPHS_PER_ARTICLE paragraphs of each of the 48 articles of SQuAD v1.1 dev
(Rajpurkar et al. 2016, CC BY-SA 4.0) are the passages (`corpus.jsonl`: `_id`, `title` the
article's title, `text` the paragraph); the first question of one of those paragraphs an article
is a query (`queries.jsonl`), judged relevant to its paragraph (`qrels/test.tsv`). Deterministic:
the same file gives the same corpus.

  python examples/make_squad_sample.py                    # reads $TT_ZOO_DATA/squad/dev-v1.1.json
  python examples/make_squad_sample.py --squad PATH --output examples/squad_sample
"""

import argparse
import json
import os
import pathlib

PARAGRAPHS_PER_ARTICLE = 6
HERE = pathlib.Path(__file__).resolve().parent


def sample(squad: dict):
    """(passages, queries, qrels): lists of dicts and (query-id, corpus-id, score) rows."""
    passages, queries, qrels = [], [], []
    for a, article in enumerate(squad["data"]):
        title = article["title"].replace("_", " ")
        paragraphs = article["paragraphs"][:PARAGRAPHS_PER_ARTICLE]
        for p, paragraph in enumerate(paragraphs):
            passages.append({"_id": f"d{a:02d}{p}", "title": title,
                             "text": " ".join(paragraph["context"].split())})
        asked = a % len(paragraphs)  # one paragraph an article, in turn
        question = paragraphs[asked]["qas"][0]
        queries.append({"_id": f"q{a:02d}", "text": question["question"].strip()})
        qrels.append((f"q{a:02d}", f"d{a:02d}{asked}", 1))
    return passages, queries, qrels


def write(output: pathlib.Path, passages, queries, qrels) -> None:
    (output / "qrels").mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", passages), ("queries.jsonl", queries)):
        with open(output / name, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    with open(output / "qrels" / "test.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)


def main() -> None:
    data = pathlib.Path(os.environ.get("TT_ZOO_DATA", HERE.parent.parent / "shared" / "data"))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--squad", default=str(data / "squad" / "dev-v1.1.json"))
    p.add_argument("--output", default=str(HERE / "squad_sample"))
    args = p.parse_args()
    with open(args.squad, encoding="utf-8") as f:
        passages, queries, qrels = sample(json.load(f))
    write(pathlib.Path(args.output), passages, queries, qrels)
    print(f"wrote {len(passages)} passages, {len(queries)} queries and {len(qrels)} judgements "
          f"to {args.output}")


if __name__ == "__main__":
    main()
