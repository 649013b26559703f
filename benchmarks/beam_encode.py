"""results/beam_encode.{json,md}: the Beam corpus pipeline (`tt-zoo index-corpus`) on the
DirectRunner against plain encoding, on 100-word Wikispeedia passages with titles, and what
float16 / int8 storage of the embeddings costs in recall.

Chang et al. 2020, Sec. 2 ("Inference"): the candidate embeddings are computed once, offline;
this measures what running that through Apache Beam costs on one machine. The passages are the
first N of Wikispeedia cut DPR-style into disjoint 100-word blocks with their titles
(`tt_zoo.data.passages.word_passages`, the open-domain benchmarks' passages). Three contenders,
each once per round, in the same order every round (`measure.interleaved_rounds`), medians
reported:

- ``pipeline``: `tt_zoo.serving.corpus_index.index_corpus` on the DirectRunner (one worker) into
  a fresh folder: read the JSONL, RunInference through the export's ``encode_document``
  signature in batches of ``--batch-size``, group by shard, store float32, build each shard's
  ScaNN index, write the manifest. End to end: Beam's start, the model's loading in the worker
  (``model_load_s`` says how long one load takes) and the shards' indexes are inside.
- ``signature``: the same signature, loaded once before the rounds, called on the passages in
  file order in batches of ``--batch-size`` (what the pipeline's workers run, without Beam).
- ``encode_documents``: `ZooModel.encode_documents` (length bucketing; XLA when its default
  decides), loaded once before the rounds.

``overhead`` = a plain path's docs/s over the pipeline's. Storage: the float32 embeddings are
stored and decoded with `EmbeddingStorage` as the pipeline stores them (float16; int8 with a
scale per row or per dimension) and searched exactly with the ODQA validation questions
(WebQuestions val + CuratedTREC train, `tt_zoo.evaluation.odqa`): neighbour recall@10/@100
(the fraction of float32's exact top-k found) and answer recall R@20/R@100 over the questions
answerable in these N passages.

  python -m benchmarks.beam_encode                                  # 2,048 passages, 3 rounds
  python -m benchmarks.beam_encode --limit 300 --rounds 1 --output /tmp/beam_encode  # smoke
"""

from __future__ import annotations

import itertools
import json
import pathlib
import shutil
import tempfile
import time

from benchmarks import arguments, text_rows

REPO = arguments.REPO

from benchmarks.measure import (interleaved_rounds, machine_info,
                           machine_line, rates, recall_at_k, stopwatch)


def parse_args(argv=None):
    from tt_zoo.cli.common import FLAGSHIP

    p = arguments.parser(__doc__, summary="line")
    arguments.add_model(p, FLAGSHIP, help="a registered name or an export directory")
    p.add_argument("--limit", type=int, default=2048, help="passages encoded")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--num-shards", type=int, default=4, help="the pipeline's shards")
    p.add_argument("--batch-size", type=int, default=256,
                   help="passages a signature call (pipeline and signature)")
    p.add_argument("--data", type=pathlib.Path, default=arguments.data_dir(),
                   help="the data folder (wikispeedia/, odqa/)")
    arguments.add_output(p, REPO / "results" / "beam_encode",
                         help="writes OUTPUT.json and OUTPUT.md")
    p.add_argument("--no-recall", action="store_true", help="skip the storage recall section")
    return p.parse_args(argv)


def first_passages(source, limit: int):
    """The first `limit` 100-word passages (with titles) of an article source."""
    from tt_zoo.data.article_sources import read_articles
    from tt_zoo.data.passages import word_passages

    passages = itertools.chain.from_iterable(
        word_passages(a) for a in read_articles(source, progress=False))
    found = list(itertools.islice(passages, limit))
    if len(found) < limit:
        raise SystemExit(f"{source} holds only {len(found)} passages (asked {limit}).")
    return found


def measure_speed(args, model, model_path: str, passages, work: pathlib.Path) -> dict:
    from tt_zoo.serving.corpus_index import index_corpus
    from tt_zoo.artifacts.export import LoadedEncoder

    corpus = work / "passages.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.doc_id, "title": p.title, "text": p.text})
                              + "\n" for p in passages), encoding="utf-8")
    titles, texts = [p.title for p in passages], [p.text for p in passages]
    start = time.perf_counter()
    signature = LoadedEncoder(model_path)
    load_s = time.perf_counter() - start
    b = args.batch_size
    runs = itertools.count()
    manifests = []

    def pipeline():
        out = work / f"run{next(runs)}"
        manifests.append(index_corpus(str(corpus), out, model_path,
                                      num_shards=args.num_shards, batch_size=b))
        shutil.rmtree(out)

    def call_signature():
        return signature(titles, texts, batch_size=b)

    def library():
        return model.encode_documents(texts, titles=titles, batch_size=b,
                                      show_progress_bar=False)

    for warm in (call_signature, library):  # trace the functions before timing
        warm()
    seconds = interleaved_rounds(
        {"pipeline": stopwatch(pipeline), "signature": stopwatch(call_signature),
         "encode_documents": stopwatch(library)},
        args.rounds, log=lambda line: print(line, flush=True))
    docs_per_s = {name: rates(s, len(passages)) for name, s in seconds.items()}
    pipe = docs_per_s["pipeline"]["median_per_s"]
    return {"seconds": seconds, "docs_per_s": docs_per_s, "model_load_s": round(load_s, 3),
            "overhead": {name: round(docs_per_s[name]["median_per_s"] / pipe, 3)
                         for name in ("signature", "encode_documents")},
            "pipeline_counters": manifests[-1]["counters"],
            "embeddings": library()}


def measure_storage(args, model, passages, embeddings) -> dict:
    import numpy as np

    from tt_zoo.evaluation import odqa
    from tt_zoo.retrieval.embedding_storage import SMALLER
    from tt_zoo.retrieval.search import ExactSearcher

    ids = [p.doc_id for p in passages]
    sets = [odqa.load_question_set(name, args.data) for name in odqa.VALIDATION]
    questions = [q for s in sets for q in s.questions]
    index = odqa.AnswerIndex([p.text for p in passages])
    gold = index.rows_with_answers(questions)
    answerable = [i for i, rows in enumerate(gold) if rows]
    queries = model.encode_queries([q.text for q in questions], show_progress_bar=False)
    ks = [k for k in (10, 20, 100) if k <= len(passages)]
    exact = ExactSearcher(embeddings, ids).search(queries, max(ks)).rows
    out = {"questions": len(questions), "answerable": len(answerable), "rows": {}}

    def row(rows, bytes_per_passage):
        entry = {"bytes_per_passage": bytes_per_passage}
        entry.update({f"neighbour_recall@{k}": round(recall_at_k(rows, exact, k), 4)
                      for k in ks if k != 20})
        if answerable:
            entry.update({k: round(v, 4) for k, v in odqa.answer_recall(
                rows[answerable], [gold[i] for i in answerable],
                ks=[k for k in ks if k != 10]).items()})
        return entry

    dim = embeddings.shape[1]
    out["rows"]["float32"] = row(exact, 4 * dim)
    for storage in SMALLER:
        decoded = storage.decode(*storage.encode(embeddings))
        per_passage = storage.bytes_per_row(dim, len(passages))
        rows = ExactSearcher(decoded, ids).search(queries, max(ks)).rows
        out["rows"][str(storage)] = dict(row(rows, round(per_passage, 2)),
                                         max_abs_error=float(np.abs(decoded - embeddings).max()))
    return out


def report(result: dict) -> str:
    s = result["speed"]
    lines = ["# Corpus encoding on Apache Beam (DirectRunner) against plain encoding", "",
             f"{result['passages']:,} 100-word Wikispeedia passages with titles "
             f"(`word_passages`), model `{result['model']}`, batch {result['batch_size']}, "
             f"{result['num_shards']} shards; {s['docs_per_s']['pipeline']['rounds']} "
             "interleaved rounds, medians. Generated by `python -m benchmarks.beam_encode`.", "",
             "| path | docs/s (median) | min | max | pipeline is slower by |",
             "|---|---|---|---|---|"]
    for name, r in s["docs_per_s"].items():
        ratio = "" if name == "pipeline" else f"x{s['overhead'][name]:.2f}"
        lines.append(f"| {name} | {r['median_per_s']:.1f} | {r['min_per_s']:.1f} | "
                     f"{r['max_per_s']:.1f} | {ratio} |")
    lines += ["", f"The pipeline's time is end to end: Beam's start, loading the export in the "
                  f"worker (one load: {s['model_load_s']:.2f} s), encoding, grouping, storing "
                  "float32 and building each shard's ScaNN index; counters "
                  f"{s['pipeline_counters']}.", ""]
    if result.get("storage"):
        st = result["storage"]
        cols = [c for c in next(iter(st["rows"].values())) if c != "max_abs_error"]
        lines += ["## What storing the embeddings smaller costs", "",
                  f"{st['questions']:,} ODQA validation questions ({st['answerable']} answerable "
                  "in these passages), exact search over the decoded embeddings; neighbour "
                  "recall = fraction of float32's exact top-k found.", "",
                  "| storage | " + " | ".join(cols) + " | max abs error |",
                  "|---|" + "---|" * (len(cols) + 1)]
        for name, r in st["rows"].items():
            lines.append(f"| {name} | " + " | ".join(str(r[c]) for c in cols)
                         + f" | {r.get('max_abs_error', 0):.2g} |")
        lines.append("")
    lines.append(machine_line(result["machine"]))
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    import tt_zoo
    from tt_zoo.cli.index_corpus import export_of
    from tt_zoo.serving.corpus_index import resolve_model

    model_path, meta = resolve_model(*export_of(args.model))
    model = tt_zoo.load(args.model)
    passages = first_passages(args.data / "wikispeedia", args.limit)
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="beam_encode-") as work:
        speed = measure_speed(args, model, model_path, passages, pathlib.Path(work))
    embeddings = speed.pop("embeddings")
    result = {"generator": "benchmarks/beam_encode.py", "model": meta.get("name", args.model),
              "passages": len(passages), "batch_size": args.batch_size,
              "num_shards": args.num_shards, "speed": speed}
    if not args.no_recall:
        result["storage"] = measure_storage(args, model, passages, embeddings)
    return text_rows.finish(result, info, args.output, report)


if __name__ == "__main__":
    main()
