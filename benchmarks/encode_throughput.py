"""Document encoding throughput of shipped models and encode settings: docs/s on what users
index (100-word Wikipedia passages with their titles) and on ReQA-SQuAD(dev) candidates.

Encodes the same documents with each (model, setting) in interleaved rounds (A B A B ..., so
machine noise hits every row alike) and reports the median docs/s of each, its speed relative
to the first row, and how far its embeddings are from the same model's first setting (max
1 - cosine over the documents). Inputs (`--inputs`): `passages` (the ODQA collection: Wikispeedia
cut into 100-word passages, each with its article title: `tt_zoo.evaluation.odqa`) and
`candidates` (ReQA's (sentence, passage) pairs). A setting is how the documents are encoded
(`tt_zoo.modeling.inference`):

- `pad`: every text padded to the full length; `bucketing`: batches of similar lengths, each
  padded to its longest member, no XLA (`encode_documents`' default below
  `XLA_AUTO_MIN_DOCUMENTS`); `+bf16` / `+xla` on top
  (`precision="bfloat16"`, `jit_compile=True`; the others are float32); `default`:
  `encode_documents` with no options (XLA by `XLA_AUTO_MIN_DOCUMENTS`; bfloat16 on a CPU with
  AMX for a BERT tower, `tt_zoo.modeling.inference`);
- `layers` / `layers+xla`: `bucketing` / `+xla` with a BERT tower run through its Model Garden
  layers (`plain_inference=False`: the training graph) instead of the fused plain-matmul
  inference graph of `tt_zoo.modeling.bert_inference`;
- `signature`: the shipped export's `encode_document(title, passage)` serving signature,
  `--batch-size` documents a call (what TF Serving or `tf.saved_model.load` users run);
  `export`: the same signature of the model exported now, by this code, to a temporary folder.

Each row is encoded once untimed first (tracing; with XLA, every document, so each shape is
compiled: `warm-up`). `--queries N` also times N ReQA questions through the query tower.
Writes `results/<output>.json` and `.md`.

  python -m benchmarks.encode_throughput --model ict_bfs_wlp_512 \
      --model bow_mlp_ict_bfs_wlp_crop_span_qgen_512 --inputs passages,candidates \
      --configs bucketing,bucketing+xla,bucketing+bf16,signature --queries 1000 \
      --output encode_speed
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

from benchmarks import arguments

REPO = arguments.REPO

DATA = arguments.data_dir()

# Encode settings by name: keyword arguments of `encode_documents` / `encode_queries`.
SETTINGS = {
    "default": dict(),
    "signature": None,  # the shipped export's encode_document signature
    "export": None,  # the encode_document signature of the model exported now
    "pad": dict(bucketing=False, jit_compile=False, precision="float32"),
    "bucketing": dict(bucketing=True, jit_compile=False, precision="float32"),
    "layers": dict(bucketing=True, jit_compile=False, plain_inference=False, precision="float32"),
    "layers+xla": dict(bucketing=True, jit_compile=True, plain_inference=False, precision="float32"),
    "bucketing+bf16": dict(bucketing=True, precision="bfloat16", jit_compile=False),
    "bucketing+xla": dict(bucketing=True, jit_compile=True, precision="float32"),
    "bucketing+bf16+xla": dict(bucketing=True, precision="bfloat16", jit_compile=True),
    "pad+bf16": dict(bucketing=False, precision="bfloat16", jit_compile=False),
    "pad+xla": dict(bucketing=False, jit_compile=True, precision="float32"),
}
INPUTS = ("passages", "candidates")


def parse_configs(text: str) -> list:
    names = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in names if c not in SETTINGS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown settings {unknown}; expected a comma list of "
                                         f"{sorted(SETTINGS)}")
    return names


def cpu_description() -> str:
    """The CPU model and whether it has bfloat16 instructions (which `+bf16` needs to pay)."""
    from benchmarks.measure import cpu_model
    try:
        info = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return "CPU unknown"
    model = cpu_model()
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    bf16 = sorted(f for f in flags if f in ("avx512_bf16", "amx_bf16", "avx_vnni_bf16"))
    return f"{model}; bfloat16 instructions: {', '.join(bf16) if bf16 else 'none'}"


def max_cosine_deviation(a, b) -> float:
    """max over rows of 1 - cos(a_i, b_i)."""
    import numpy as np
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(np.max(1.0 - cos))


def load_inputs(args) -> dict:
    """{input name: (texts, titles)} of `args.inputs`, `args.documents` documents each."""
    from tt_zoo.evaluation.odqa import passage_collection
    from tt_zoo.evaluation.reqa import build_reqa
    inputs = {}
    for name in args.inputs:
        if name == "passages":
            # About 30 passages an article: read a few more articles than needed.
            collection = passage_collection(DATA / "wikispeedia",
                                            limit_articles=args.documents // 20 + 10)
            inputs[name] = (collection.texts[:args.documents],
                            collection.titles[:args.documents])
        else:
            candidates = build_reqa(args.squad).candidates[:args.documents]
            inputs[name] = ([c.passage for c in candidates], [c.sentence for c in candidates])
    return inputs


def main(argv=None):
    p = arguments.parser(__doc__, summary="line")
    arguments.add_model(p, repeat=True, required=True, help="name or path (repeatable)")
    p.add_argument("--configs", type=parse_configs, default=["bucketing"],
                   help=f"comma list of encode settings, of {sorted(SETTINGS)}")
    p.add_argument("--inputs", default="passages",
                   help=f"comma list of {INPUTS} (default: %(default)s)")
    p.add_argument("--documents", type=int, default=2048, help="documents encoded per round")
    p.add_argument("--queries", type=int, default=0, help="questions encoded per round (0: none)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=256)
    arguments.add_squad(p, type=str, help=None)
    p.add_argument("--results", default=str(REPO / "results"))
    arguments.add_output(p, "encode_throughput", help="results file stem", type=str)
    args = p.parse_args(argv)
    args.inputs = [i for i in args.inputs.split(",") if i]
    if not args.inputs or set(args.inputs) - set(INPUTS):
        p.error(f"--inputs: a comma list of {INPUTS} (got {args.inputs})")
    if not os.path.isfile(args.squad):
        sys.exit(f"SQuAD v1.1 dev not found at {args.squad} (set TT_ZOO_DATA or --squad)")

    import tt_zoo
    import tensorflow as tf
    from tt_zoo.atomic_io import write_text
    from tt_zoo.evaluation.reqa import build_reqa
    from tt_zoo.artifacts.export import LoadedEncoder, export_saved_model

    inputs = load_inputs(args)
    questions = [q.text for q in build_reqa(args.squad).questions[:args.queries]]
    models = {name: tt_zoo.load(name) for name in args.model}
    signatures = {(name, "signature"): LoadedEncoder(models[name].path)
                  for name in models if "signature" in args.configs}
    exports = tempfile.TemporaryDirectory(prefix="encode_throughput-")
    for name in models if "export" in args.configs else ():
        path = pathlib.Path(exports.name) / name
        export_saved_model(models[name].keras_model, path)
        signatures[(name, "export")] = LoadedEncoder(path)
    rows = [(name, config) for name in models for config in args.configs]

    def encode_documents(name, config, texts, titles):
        if SETTINGS[config] is None:
            return signatures[(name, config)](titles, texts, batch_size=args.batch_size)
        return models[name].encode_documents(texts, titles=titles, batch_size=args.batch_size,
                                             show_progress_bar=False, **SETTINGS[config])

    def encode_queries(name, config, n=len(questions)):
        settings = SETTINGS[config] if SETTINGS[config] is not None else {}
        return models[name].encode_queries(questions[:n], batch_size=args.batch_size,
                                           show_progress_bar=False, **settings)

    tables, out = {}, pathlib.Path(args.results)
    for input_name, (texts, titles) in inputs.items():
        warm_up, embeddings, query_embeddings = {}, {}, {}
        for row in rows:  # tracing and XLA compilation are not timed
            # One batch traces a tower function; XLA compiles once per shape: it sees them all.
            xla = (SETTINGS[row[1]] or {}).get("jit_compile", "auto") is not False
            n = len(texts) if xla else args.batch_size
            t = time.perf_counter()
            encode_documents(*row, texts[:n], titles[:n])
            if questions:
                encode_queries(*row, n=len(questions) if xla else args.batch_size)
            warm_up[row] = time.perf_counter() - t
        rates = {row: [] for row in rows}
        query_rates = {row: [] for row in rows}
        for _ in range(args.rounds):
            for row in rows:
                t = time.perf_counter()
                embeddings[row] = encode_documents(*row, texts, titles)
                rates[row].append(len(texts) / (time.perf_counter() - t))
                if questions:
                    t = time.perf_counter()
                    query_embeddings[row] = encode_queries(*row)
                    query_rates[row].append(len(questions) / (time.perf_counter() - t))
        tables[input_name] = table(args, models, rows, texts, titles, questions, rates,
                                   query_rates, embeddings, query_embeddings, warm_up,
                                   input_name)
    lines = [f"# Document encoding throughput ({', '.join(tables)})", ""]
    for input_name, (md, _) in tables.items():
        lines += md + [""]
    print("\n".join(lines))
    write_text(out / f"{args.output}.json",
               json.dumps({"settings": vars(args), "cpu": cpu_description(),
                           "cores": os.cpu_count(), "tensorflow": tf.__version__,
                           "inputs": {name: record for name, (_, record) in tables.items()}},
                          indent=2))
    write_text(out / f"{args.output}.md", "\n".join(lines))


INPUT_TITLES = {"passages": "100-word Wikispeedia passages with their article titles",
                "candidates": "ReQA-SQuAD(dev) (sentence, passage) candidates"}


def table(args, models, rows, texts, titles, questions, rates, query_rates, embeddings,
          query_embeddings, warm_up, input_name):
    """(markdown lines, JSON record) of one input's measurements."""
    import numpy as np
    import tensorflow as tf
    from tt_zoo.modeling.inference import plan_batches

    first = statistics.median(rates[rows[0]])
    first_queries = statistics.median(query_rates[rows[0]]) if questions else None
    out_rows = []
    for name, config in rows:
        row, reference = (name, config), (name, args.configs[0])
        r = rates[row]
        pre = models[name].keras_model.document_preprocessor
        record = {"model": name, "encoder": models[name].encoder_name, "setting": config,
                  "document_length": pre.seq_length,
                  "median_docs_per_s": round(statistics.median(r), 1),
                  "min_docs_per_s": round(min(r), 1), "max_docs_per_s": round(max(r), 1),
                  "speed_vs_first": round(statistics.median(r) / first, 2),
                  "warm_up_s": round(warm_up[row], 1),
                  "max_1_minus_cos_vs_first_setting": max_cosine_deviation(embeddings[row],
                                                                           embeddings[reference]),
                  "docs_per_s_by_round": [round(x, 1) for x in r]}
        if questions:
            q = query_rates[row]
            record.update(median_queries_per_s=round(statistics.median(q), 1),
                          queries_per_s_by_round=[round(x, 1) for x in q],
                          queries_speed_vs_first=round(statistics.median(q) / first_queries, 2),
                          queries_max_1_minus_cos_vs_first_setting=max_cosine_deviation(
                              query_embeddings[row], query_embeddings[reference]))
        out_rows.append(record)

    full, kept = {}, {}
    for name, model in models.items():  # how much padding there is to save
        keras_model = model.keras_model
        for kind, pre, packed in (
                ("documents", keras_model.document_preprocessor,
                 keras_model.document_preprocessor((tf.constant(titles), tf.constant(texts)))),
                ("queries", keras_model.query_preprocessor,
                 keras_model.query_preprocessor(tf.constant(questions or [""])))):
            if kind == "queries" and not questions:
                continue
            lengths = packed["input_mask"].numpy().sum(1)
            if kind == "documents":
                full[name] = float(np.mean(lengths == pre.seq_length))
            cut = sum(len(rows) * length for rows, length in
                      plan_batches(lengths, args.batch_size, pre.seq_length))
            kept[f"{name} {kind}"] = round(cut / (len(lengths) * pre.seq_length), 3)
    lines = [f"## {INPUT_TITLES[input_name]}", "",
             f"{len(texts):,} documents per round, batch {args.batch_size}, "
             f"{args.rounds} interleaved rounds on this machine ({os.cpu_count()} cores; "
             f"{cpu_description()}); "
             f"written by `benchmarks/encode_throughput.py`. Settings: {', '.join(args.configs)} "
             "(see the script's docstring); `max 1−cos` compares each row's embeddings with the "
             "same model's first setting; `warm-up` is the untimed first call (one batch, or "
             "with XLA every document, so that each shape is compiled). "
             + " ".join(f"{full[name]:.0%} of these documents fill {name}'s "
                        f"{models[name].keras_model.document_preprocessor.seq_length}-token "
                        "budget." for name in models)
             + " Token positions bucketing keeps, of the padded ones: "
             + ", ".join(f"{k} {v:.0%}" for k, v in kept.items()) + ".", "",
             "| model | encoder | setting | document length | median docs/s | range | vs first | "
             "warm-up (s) | max 1−cos |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in out_rows:
        lines.append(f"| {r['model']} | {r['encoder']} | {r['setting']} | "
                     f"{r['document_length']} | {r['median_docs_per_s']:,.0f} | "
                     f"{r['min_docs_per_s']:,.0f}–{r['max_docs_per_s']:,.0f} | "
                     f"x{r['speed_vs_first']:.2f} | {r['warm_up_s']:.1f} | "
                     f"{r['max_1_minus_cos_vs_first_setting']:.1e} |")
    if questions:
        lines += ["", f"Queries: {len(questions):,} ReQA questions per round, timed in the same "
                  "rounds (`signature` rows: the library's default).", "",
                  "| model | setting | median queries/s | vs first | max 1−cos |",
                  "| --- | --- | --- | --- | --- |"]
        for r in out_rows:
            lines.append(f"| {r['model']} | {r['setting']} | {r['median_queries_per_s']:,.0f} | "
                         f"x{r['queries_speed_vs_first']:.2f} | "
                         f"{r['queries_max_1_minus_cos_vs_first_setting']:.1e} |")
    return lines, {"full_length_fraction": full, "bucketed_positions_kept": kept,
                   "rows": out_rows}


if __name__ == "__main__":
    main()
