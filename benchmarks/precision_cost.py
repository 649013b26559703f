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
                           ("float32 weights", "float16 weights"), "float16_storage")}
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
    out["smallest_cosine"] = round(min_cosine(*vectors.values()), 6)
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
    out["smallest_cosine"] = round(min_cosine(*vectors.values()), 6)
    first, second = tops.values()
    out["same_top_passage"] = round(float(np.mean(first == second)), 4)
    return out


def _table(section: dict, speed_key: str, speed_label: str, column: str) -> list:
    rows = section["rows"]
    base, variant = rows
    metrics = [k for k in rows[base] if k != speed_key]
    lines = [f"| {column} | " + " | ".join(metrics) + f" | {speed_label} |",
             "|---|" + "---|" * (len(metrics) + 1)]
    for label, r in rows.items():
        lines.append(f"| {label} | " + " | ".join(f"{r[m]:.1f}" for m in metrics)
                     + f" | {r[speed_key]:.1f} |")
    cost = {m: round(rows[variant][m] - rows[base][m], 2) for m in metrics}
    lines.append(f"| {variant} - {base} | " + " | ".join(f"{v:+.1f}" for v in cost.values())
                 + " | |")
    return lines


def report(result: dict) -> str:
    reqa, od = result["reqa"], result["odqa"]
    compare = result.get("compare", "precision")
    title, _, _ = COMPARISONS[compare]
    column = "precision" if compare == "precision" else "weights"
    how = ("both precisions encode the same texts" if compare == "precision" else
           f"the float32 export and its float16 artifact ({result.get('storage_note', '')}) "
           "encode the same texts in float32")
    option = "" if compare == "precision" else f" --compare {compare}"
    lines = [f"# {title}", "",
             f"Model `{result['model']}`, batch {result['batch_size']}; {how} one after the "
             "other in one process, exact inner-product search. Generated by "
             f"`python -m benchmarks.precision_cost{option}` in {result['wall_min']} min.",
             "", f"## ReQA-SQuAD(dev): {reqa['questions']:,} questions against all "
             f"{reqa['candidates']:,} (sentence, passage) candidates", "",
             *_table(reqa, "candidates_per_s", "candidates/s", column), "",
             f"Smallest cosine between a candidate's two vectors: {reqa['smallest_cosine']}.", "",
             f"## ODQA validation questions over the first {od['passages']:,} 100-word "
             f"Wikispeedia passages ({od['answerable']:,} of {od['questions']:,} answerable "
             "there)", "", *_table(od, "docs_per_s", "docs/s", column), "",
             f"Smallest cosine between a passage's two vectors: {od['smallest_cosine']}; the "
             f"same top passage for {100 * od['same_top_passage']:.1f}% of the questions.", "",
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
