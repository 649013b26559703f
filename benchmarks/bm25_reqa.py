"""BM25 on ReQA-SQuAD(dev), all questions: which text field, with and without stemming.

Usage:
  python -m benchmarks.bm25_reqa [--squad PATH] [--json-out FILE]

Prints one row per variant (R@1/5/10/50/100, MRR in %, wall seconds for index and search).
The default of ``tt_zoo.retrieval.bm25`` is the first row (sentence + passage, English stemming,
English stop words).
"""

from __future__ import annotations

import json
import time

from tt_zoo.evaluation.metrics import evaluate_bm25
from tt_zoo.evaluation import reqa as reqa_lib
from tt_zoo.atomic_io import write_text

from benchmarks import arguments

VARIANTS = [  # (field, stemmer, stopwords)
    ("sentence+passage", "english", "en"),
    ("sentence+passage", None, "en"),
    ("sentence+passage", "english", None),
    ("sentence", "english", "en"),
    ("sentence", None, "en"),
    ("passage", "english", "en"),
]


def main(argv=None):
    parser = arguments.parser(__doc__, summary="line")
    arguments.add_squad(parser, type=str, help=None)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    t = time.perf_counter()
    reqa = reqa_lib.build_reqa(args.squad)
    print(f"{reqa.summary()} [built in {time.perf_counter() - t:.1f}s]")
    header = (f"{'field':<17} {'stemmer':<8} {'stop':<5} " + " ".join(
        f"{c:>6}" for c in ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR")) + "  index_s search_s")
    print(header)
    rows = []
    for field, stemmer, stopwords in VARIANTS:
        m = evaluate_bm25(reqa, field=field, stemmer=stemmer, stopwords=stopwords)
        rows.append(m)
        print(f"{field:<17} {str(stemmer):<8} {str(stopwords):<5} " + " ".join(
            f"{100 * m['exact'][c]:6.1f}" for c in ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR"))
            + f"  {m['seconds']['build']:7.2f} {m['seconds']['exact_search']:8.2f}")
    if args.json_out:
        write_text(args.json_out, json.dumps(
            {"source": reqa.source, "num_questions": len(reqa.questions),
             "num_candidates": len(reqa.candidates), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
