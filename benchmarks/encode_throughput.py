"""Document encoding throughput of shipped models, side by side: docs/s on ReQA-SQuAD(dev).

Encodes the same (sentence, passage) candidates with each model in interleaved rounds
(A B A B ..., so machine noise hits every model alike) and reports the median docs/s of each and
its speed relative to the first model. Writes `results/encode_throughput.json` and `.md`.

  python benchmarks/encode_throughput.py --model ict_bfs_wlp_512 --model bow_mlp_ict_bfs_wlp_512
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

from tt_zoo.cli.common import default_data_dir

REPO = pathlib.Path(__file__).resolve().parents[1]

DATA = default_data_dir()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", required=True, help="name or path (repeatable)")
    p.add_argument("--documents", type=int, default=2048, help="candidates encoded per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--squad", default=str(DATA / "squad" / "dev-v1.1.json"))
    p.add_argument("--results", default=str(REPO / "results"))
    args = p.parse_args(argv)
    if not os.path.isfile(args.squad):
        sys.exit(f"SQuAD v1.1 dev not found at {args.squad} (set TT_ZOO_DATA or --squad)")

    import tt_zoo
    from tt_zoo.atomic_io import write_text
    from tt_zoo.retrieval.reqa import build_reqa

    candidates = build_reqa(args.squad).candidates[:args.documents]
    texts = [c.passage for c in candidates]
    titles = [c.sentence for c in candidates]
    models = {name: tt_zoo.load(name) for name in args.model}
    for model in models.values():  # warm-up: tracing is not timed
        model.encode_documents(texts[:args.batch_size], titles=titles[:args.batch_size],
                               batch_size=args.batch_size)
    rates = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            t = time.perf_counter()
            model.encode_documents(texts, titles=titles, batch_size=args.batch_size)
            rates[name].append(len(texts) / (time.perf_counter() - t))
    first = statistics.median(rates[args.model[0]])
    rows = [{"model": name, "encoder": models[name].encoder_name,
             "document_length": models[name].keras_model.document_preprocessor.seq_length,
             "median_docs_per_s": round(statistics.median(r), 1),
             "min_docs_per_s": round(min(r), 1), "max_docs_per_s": round(max(r), 1),
             "speed_vs_first": round(statistics.median(r) / first, 2)} for name, r in rates.items()]
    lines = ["# Document encoding throughput (ReQA-SQuAD(dev) candidates)", "",
             f"{len(texts):,} (sentence, passage) candidates per round, batch {args.batch_size}, "
             f"{args.rounds} interleaved rounds on this machine ({os.cpu_count()} cores); "
             "written by `benchmarks/encode_throughput.py`.", "",
             "| model | encoder | document length | median docs/s | range | vs first |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['encoder']} | {r['document_length']} | "
                     f"{r['median_docs_per_s']:,.0f} | {r['min_docs_per_s']:,.0f}–"
                     f"{r['max_docs_per_s']:,.0f} | x{r['speed_vs_first']:.2f} |")
    print("\n".join(lines))
    out = pathlib.Path(args.results)
    write_text(out / "encode_throughput.json", json.dumps({"settings": vars(args), "rows": rows},
                                                          indent=2))
    write_text(out / "encode_throughput.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
