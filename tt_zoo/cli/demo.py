"""The README's main command: load ict_bfs_wlp_512, index ReQA-SQuAD(dev), answer, and score.

Loads the shipped model, builds a ScaNN index over every (sentence, passage) candidate of
ReQA-SQuAD(dev), prints the top hits for a few questions, then R@1/10/100 over all questions
next to BM25 on the same questions. SQuAD dev is read from $TT_ZOO_DATA/squad/dev-v1.1.json,
or through Hugging Face `datasets` (squad, validation) when that file is absent.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import time

from tt_zoo.cli.common import load_reqa


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ict_bfs_wlp_512")
    parser.add_argument("--squad", help="SQuAD-format JSON (default: $TT_ZOO_DATA/squad/"
                                        "dev-v1.1.json)")
    parser.add_argument("--backend", default="scann", choices=("scann", "brute_force"))
    parser.add_argument("--questions", type=int, default=3, help="questions to show")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.squad and not pathlib.Path(args.squad).is_file():
        parser.error(f"--squad: {args.squad} does not exist")

    import tt_zoo
    from tt_zoo.retrieval import bm25, metrics as retrieval_metrics

    start = time.perf_counter()
    model = tt_zoo.load(args.model)
    print(f"loaded {model}")
    reqa = load_reqa(args.squad)
    print(f"ReQA-SQuAD(dev): {len(reqa.questions):,} questions, "
          f"{len(reqa.candidates):,} (sentence, passage) candidates")

    t = time.perf_counter()
    index = model.index([c.passage for c in reqa.candidates],
                        titles=[c.sentence for c in reqa.candidates], backend=args.backend)
    print(f"encoded and indexed the candidates with {args.backend} in "
          f"{time.perf_counter() - t:.0f} s")

    shown = random.Random(args.seed).sample(reqa.questions, args.questions)
    for question in shown:
        print(f"\nQ: {question.text}")
        for rank, hit in enumerate(index.search([question.text], k=3)[0], 1):
            mark = "*" if int(hit.id) == question.gold_index else " "
            print(f"  {rank}.{mark} [{hit.score:6.2f}] {hit.title[:110]}")
        print(f"  gold: {reqa.candidates[question.gold_index].sentence[:110]}")

    t = time.perf_counter()
    queries = [q.text for q in reqa.questions]
    gold = [q.gold_index for q in reqa.questions]
    model_metrics = retrieval_metrics.evaluate(index.embedding_index,
                                               model.encode_queries(queries), gold)["exact"]
    search_s = time.perf_counter() - t
    bm25_metrics = bm25.evaluate_bm25(reqa)["exact"]
    print(f"\nAll {len(queries):,} questions (model search {search_s:.0f} s; "
          "* = the gold (sentence, passage) pair):")
    print(f"{'':<24}{'R@1':>7}{'R@10':>7}{'R@100':>7}")
    for name, metrics in ((f"{args.model} ({args.backend})", model_metrics), ("BM25", bm25_metrics)):
        print(f"{name:<24}"
              + "".join(f"{100 * metrics[k]:7.1f}" for k in ("R@1", "R@10", "R@100")))
    print(f"\ndone in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
