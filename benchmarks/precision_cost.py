"""results/precision_cost.{json,md}: what encoding in bfloat16 instead of float32 costs in recall;
results/float16_storage.{json,md} (--compare storage): what storing the weights in float16 costs
(`tt_zoo.artifacts.float16_storage`, `tt-zoo ship --float16`). Both on ReQA-SQuAD(dev) and on the
ODQA validation questions over the first N Wikispeedia passages.

- ``--compare precision``: `encode_documents(precision="bfloat16")` (the default on a CPU with
  AMX) runs the tower's matrix products in bfloat16 on the AMX units, its layer norms, GELU and
  softmax statistics in float32 (`tt_zoo.modeling.bert_inference.encode_sequence_bfloat16`); the
  vectors come back as float32.
- ``--compare storage``: --model (a float32 export) against its float16 artifact, written to a
  temp folder and loaded as `tt_zoo.load` loads a shipped one (the float32 copy materialised
  from it, removed at the end); both encode in float32.
- ``--compare int8``: float32 against bfloat16 and the document tower converted to TFLite with
  dynamic-range int8 weights (`TfliteInt8`: the weights stored int8, each activation quantised
  at run time, the matrix products in int8 through TFLite's XNNPACK/ruy kernels, which use
  AVX512-VNNI where the CPU has it); the queries stay float32. A measurement of an int8 path
  (issue 65), not a path `encode_documents` takes.

Both variants encode the same texts with the same model, one after the other in this process,
and are searched exactly (`ExactSearcher`, Chang et al. 2020, Sec. 4: inner product over every
candidate):

- ReQA: every question (or the first --limit-questions) against all (sentence, passage)
  candidates (`tt_zoo.evaluation.metrics.evaluate_encoder`); R@1/5/10/100 and MRR.
- ODQA: the validation questions (WebQuestions val + CuratedTREC train) answerable in the first
  --passages 100-word passages with titles (`word_passages`, DPR's blocks); answer recall
  R@1/5/20/100 (`tt_zoo.evaluation.odqa.answer_recall`).

Beside them: the smallest cosine between a text's two vectors, the share of questions whose top
candidate is the same, and each variant's documents/s in this run (one timing each; the
side-by-side medians are results/performance.md's).

  python -m benchmarks.precision_cost --model minilm_l6_384            # ~15 min here
  python -m benchmarks.precision_cost --compare storage --model saved_models/multitask_minilm_l6_384
  python -m benchmarks.precision_cost --model minilm_l6_384 --limit-questions 50 --passages 200 \\
      --output /tmp/precision_cost                                     # smoke
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import tempfile
import time

import numpy as np

from benchmarks import arguments, text_rows
from benchmarks.beam_encode import first_passages
from benchmarks.measure import machine_info, machine_line, min_cosine

PRECISIONS = ("float32", "bfloat16")
# --compare: (title, the two variants' labels, default output name)
COMPARISONS = {"precision": ("What bfloat16 encoding costs in recall", PRECISIONS,
                             "precision_cost"),
               "storage": ("What storing the weights in float16 costs in recall",
                           ("float32 weights", "float16 weights"), "float16_storage"),
               "int8": ("What dynamic-range int8 document encoding (TFLite) costs in recall",
                        ("float32", "bfloat16", "int8 documents"), "int8_cost")}
REQA_KS = (1, 5, 10, 100)
ODQA_KS = (1, 5, 20, 100)


def parse_args(argv=None):
    p = arguments.parser(__doc__)
    arguments.add_model(p, "minilm_l6_384")
    arguments.add_squad(p)
    arguments.add_data_dir(p)
    p.add_argument("--passages", type=int, default=4096,
                   help="ODQA: the first N Wikispeedia passages searched (default: %(default)s)")
    p.add_argument("--limit-questions", type=int, default=None, metavar="N",
                   help="ReQA: score only the first N questions (default: all)")
    p.add_argument("--batch-size", type=int, default=64, help="texts a tower call")
    p.add_argument("--compare", choices=sorted(COMPARISONS), default="precision",
                   help="precision: float32 against bfloat16 encoding; storage: the float32 "
                        "export against its float16 artifact (default: %(default)s)")
    arguments.add_output(p, None, help="writes OUTPUT.json and OUTPUT.md (default: "
                                       "results/precision_cost, or results/float16_storage)")
    args = p.parse_args(argv)
    args.output = args.output or arguments.RESULTS / COMPARISONS[args.compare][2]
    return args


class AtPrecision:
    """A loaded model whose encode_queries / encode_documents run at one `precision`."""

    def __init__(self, model, precision: str, batch_size: int):
        self.model, self.precision, self.batch_size = model, precision, batch_size

    def encode_queries(self, texts):
        return self.model.encode_queries(list(texts), batch_size=self.batch_size,
                                         show_progress_bar=False, precision=self.precision)

    def encode_documents(self, texts, titles=None):
        return self.model.encode_documents(list(texts), titles=titles, batch_size=self.batch_size,
                                           show_progress_bar=False, precision=self.precision)


class TfliteInt8(AtPrecision):
    """`model` with its document tower run as TFLite with dynamic-range int8 weights
    (`tf.lite.TFLiteConverter`, ``Optimize.DEFAULT``), one interpreter per batch shape, on the
    batches `encode_documents` makes (sorted by length, cut to a multiple of 16 tokens:
    `tt_zoo.modeling.inference.encode_in_buckets`); queries in float32. `note` says what was
    converted. The flatbuffer runs in LiteRT's interpreter (`ai_edge_litert`, which
    tf-models-official requires, so the pinned stack holds it), where TensorFlow 2.20 points from
    its deprecated `tf.lite.Interpreter`."""

    def __init__(self, model, batch_size: int):
        import tensorflow as tf
        from tt_zoo.modeling.inference import PACKED_KEYS

        super().__init__(model, "float32", batch_size)
        keras_model = model.keras_model
        spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in PACKED_KEYS}
        encode = tf.function(lambda packed: keras_model.embed_document_inputs(packed,
                                                                              training=False),
                             input_signature=[spec])
        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [encode.get_concrete_function()], keras_model)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # TFLite builtins only
        self.flatbuffer = converter.convert()
        self.interpreters = {}
        self.note = f"a {len(self.flatbuffer) / 2**20:.1f} MiB flatbuffer"

    def _run(self, batch: dict):
        import tensorflow as tf

        shape = tuple(batch["input_word_ids"].shape)
        if shape not in self.interpreters:
            from ai_edge_litert.interpreter import Interpreter

            interpreter = Interpreter(model_content=self.flatbuffer, num_threads=os.cpu_count())
            for detail in interpreter.get_input_details():
                interpreter.resize_tensor_input(detail["index"], list(shape))
            interpreter.allocate_tensors()
            self.interpreters[shape] = interpreter
        interpreter = self.interpreters[shape]
        for detail in interpreter.get_input_details():
            key = next(k for k in batch if k in detail["name"])
            interpreter.set_tensor(detail["index"], np.asarray(batch[key], np.int32))
        interpreter.invoke()
        return tf.constant(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))

    def encode_documents(self, texts, titles=None):
        import tensorflow as tf
        from tt_zoo.modeling.inference import EncodeOptions, encode_in_buckets

        from tt_zoo.arguments import as_documents

        keras_model = self.model.keras_model
        texts, titles, _ = as_documents(list(texts), titles)
        preprocessor = keras_model.document_preprocessor

        def pack(start, end):
            return preprocessor((tf.constant(titles[start:end]), tf.constant(texts[start:end])))

        # jit_compile=True only asks for bounded shapes (lengths cut to a multiple of 16, rows
        # padded to a power of two): few shapes, so few interpreters. Nothing compiles here.
        return encode_in_buckets(pack, self._run, len(texts), keras_model.embedding_dim,
                                 preprocessor.seq_length, self.batch_size,
                                 EncodeOptions(precision="float32", jit_compile=True))


def _percent(metrics: dict) -> dict:
    return {k: round(100 * v, 2) for k, v in metrics.items()}


def measure_reqa(variants: dict, squad_path, batch_size: int, limit_questions=None) -> dict:
    """ReQA rows of each variant (label -> encoder), in order."""
    from tt_zoo.evaluation.metrics import encode_candidates, evaluate_encoder
    from tt_zoo.evaluation.reqa import build_reqa

    reqa = build_reqa(squad_path)
    ids = reqa.question_ids[:limit_questions]
    out = {"questions": len(ids), "candidates": len(reqa.candidates), "rows": {}}
    vectors = {}
    for label, encoder in variants.items():
        start = time.perf_counter()
        vectors[label] = encode_candidates(encoder, reqa, batch_size=batch_size)
        seconds = time.perf_counter() - start
        result = evaluate_encoder(encoder, reqa, ids, REQA_KS, batch_size=batch_size,
                                  candidate_embeddings=vectors[label])
        out["rows"][label] = {**_percent(result["exact"]),
                              "candidates_per_s": round(len(reqa.candidates) / seconds, 1)}
    out.update(_against_first(vectors))
    return out


def _against_first(vectors: dict) -> dict:
    """The smallest cosine between the first variant's vectors and the second's, and with
    more than two variants each one's against the first."""
    first, *others = vectors.values()
    out = {"smallest_cosine": round(min_cosine(first, others[0]), 6)}
    if len(others) > 1:
        out["smallest_cosine_each"] = {label: round(min_cosine(first, v), 6)
                                       for label, v in list(vectors.items())[1:]}
    return out


def measure_odqa(variants: dict, data_dir, n_passages: int) -> dict:
    """ODQA rows of each variant (label -> encoder), in order, and how often the first two
    rank the same passage first."""
    from tt_zoo.evaluation import odqa
    from tt_zoo.retrieval.search import ExactSearcher

    passages = first_passages(data_dir / "wikispeedia", n_passages)
    questions = [q for name in odqa.VALIDATION
                 for q in odqa.load_question_set(name, data_dir).questions]
    gold = odqa.AnswerIndex([p.text for p in passages]).rows_with_answers(questions)
    answerable = [i for i, rows in enumerate(gold) if rows]
    if not answerable:
        raise SystemExit(f"no ODQA validation question is answerable in the first {n_passages} "
                         "passages; raise --passages.")
    texts = [questions[i].text for i in answerable]
    ks = [k for k in ODQA_KS if k <= len(passages)]
    out = {"passages": len(passages), "questions": len(questions),
           "answerable": len(answerable), "rows": {}}
    vectors, tops = {}, {}
    for label, encoder in variants.items():
        start = time.perf_counter()
        vectors[label] = encoder.encode_documents([p.text for p in passages],
                                                  [p.title for p in passages])
        seconds = time.perf_counter() - start
        rows = ExactSearcher(vectors[label]).search(encoder.encode_queries(texts),
                                                    max(ks)).rows
        tops[label] = rows[:, 0]
        recall = odqa.answer_recall(rows, [gold[i] for i in answerable], ks=ks)
        out["rows"][label] = {**_percent(recall),
                              "docs_per_s": round(len(passages) / seconds, 1)}
    out.update(_against_first(vectors))
    first, *others = tops.values()
    out["same_top_passage"] = round(float(np.mean(first == others[0])), 4)
    if len(others) > 1:
        out["same_top_passage_each"] = {label: round(float(np.mean(first == top)), 4)
                                        for label, top in list(tops.items())[1:]}
    return out


def _table(section: dict, speed_key: str, speed_label: str, column: str) -> list:
    rows = section["rows"]
    base, *variants = rows
    metrics = [k for k in rows[base] if k != speed_key]
    lines = [f"| {column} | " + " | ".join(metrics) + f" | {speed_label} |",
             "|---|" + "---|" * (len(metrics) + 1)]
    for label, r in rows.items():
        lines.append(f"| {label} | " + " | ".join(f"{r[m]:.1f}" for m in metrics)
                     + f" | {r[speed_key]:.1f} |")
    for variant in variants:
        cost = {m: round(rows[variant][m] - rows[base][m], 2) for m in metrics}
        lines.append(f"| {variant} - {base} | "
                     + " | ".join(f"{v:+.1f}" for v in cost.values()) + " | |")
    return lines


def _cosines(section: dict, what: str) -> str:
    """The report's line on the smallest cosines (each variant's against the first)."""
    each = section.get("smallest_cosine_each")
    if not each:
        return f"Smallest cosine between a {what}'s two vectors: {section['smallest_cosine']}"
    return (f"Smallest cosine between a {what}'s vectors and its first variant's: "
            + ", ".join(f"{label} {c}" for label, c in each.items()))


def report(result: dict) -> str:
    reqa, od = result["reqa"], result["odqa"]
    compare = result.get("compare", "precision")
    title, _, _ = COMPARISONS[compare]
    column = "weights" if compare == "storage" else "precision"
    how = {"precision": "both precisions encode the same texts",
           "storage": "the float32 export and its float16 artifact "
                      f"({result.get('storage_note', '')}) encode the same texts in float32",
           "int8": "float32, bfloat16 and the document tower as dynamic-range int8 TFLite "
                   f"({result.get('int8_note', '')}; its queries float32) encode the same texts"
           }[compare]
    option = "" if compare == "precision" else f" --compare {compare}"
    lines = [f"# {title}", "",
             f"Model `{result['model']}`, batch {result['batch_size']}; {how} one after the "
             "other in one process, exact inner-product search. Generated by "
             f"`python -m benchmarks.precision_cost{option}` in {result['wall_min']} min.",
             "", f"## ReQA-SQuAD(dev): {reqa['questions']:,} questions against all "
             f"{reqa['candidates']:,} (sentence, passage) candidates", "",
             *_table(reqa, "candidates_per_s", "candidates/s", column), "",
             f"{_cosines(reqa, 'candidate')}.", "",
             f"## ODQA validation questions over the first {od['passages']:,} 100-word "
             f"Wikispeedia passages ({od['answerable']:,} of {od['questions']:,} answerable "
             "there)", "", *_table(od, "docs_per_s", "docs/s", column), "",
             f"{_cosines(od, 'passage')}; the same top passage as the first variant's for "
             + (", ".join(f"{label} {100 * v:.1f}%" for label, v in
                          od["same_top_passage_each"].items())
                if "same_top_passage_each" in od else f"{100 * od['same_top_passage']:.1f}%")
             + " of the questions.", "",
             "Recall in %. Documents/s: one timing per variant in this run; the side-by-side "
             "medians against sentence-transformers are in results/performance.md.", "",
             machine_line(result["machine"])]
    return "\n".join(lines) + "\n"


def _mib(folder) -> float:
    """The MiB of every file under `folder`."""
    return sum(f.stat().st_size for f in pathlib.Path(folder).rglob("*") if f.is_file()) / 2**20


@contextlib.contextmanager
def float16_copy(path):
    """The float16 artifact of the float32 export at `path`, loaded as `tt_zoo.load` loads a
    shipped one; the artifact and its materialised float32 copy are removed on exit. Yields
    ``(model, note)``."""
    import tt_zoo
    from tt_zoo.artifacts import float16_storage

    with tempfile.TemporaryDirectory(prefix="tt_zoo_float16_") as tmp:
        compact = pathlib.Path(tmp) / pathlib.Path(path).name
        compact.mkdir()
        meta = float16_storage.write_float16(path, compact)
        model = tt_zoo.load(compact)
        note = (f"{meta['storage']['arrays']} arrays cast; {_mib(compact):.1f} MiB against "
                f"{_mib(path):.1f} MiB")
        try:
            yield model, note
        finally:
            shutil.rmtree(model.path, ignore_errors=True)


def main(argv=None):
    args = parse_args(argv)
    import tt_zoo

    start = time.perf_counter()
    info = machine_info()
    model = tt_zoo.load(args.model)
    result = {"generator": "benchmarks/precision_cost.py", "model": model.name,
              "compare": args.compare, "batch_size": args.batch_size}
    with contextlib.ExitStack() as stack:
        if args.compare == "precision":
            variants = {p: AtPrecision(model, p, args.batch_size) for p in PRECISIONS}
        elif args.compare == "int8":
            int8 = TfliteInt8(model, args.batch_size)
            result["int8_note"] = int8.note
            variants = dict(zip(COMPARISONS["int8"][1], (
                AtPrecision(model, "float32", args.batch_size),
                AtPrecision(model, "bfloat16", args.batch_size), int8)))
        else:
            compact, result["storage_note"] = stack.enter_context(float16_copy(model.path))
            variants = dict(zip(COMPARISONS["storage"][1], (
                AtPrecision(m, "float32", args.batch_size) for m in (model, compact))))
        result["reqa"] = measure_reqa(variants, args.squad, args.batch_size,
                                      args.limit_questions)
        result["odqa"] = measure_odqa(variants, args.data_dir, args.passages)
    result["wall_min"] = round((time.perf_counter() - start) / 60, 1)
    return text_rows.finish(result, info, args.output, report)


if __name__ == "__main__":
    main()
