"""results/precision_cost.{json,md}: what encoding in bfloat16 instead of float32 costs in recall,
on ReQA-SQuAD(dev) and on the ODQA validation questions over the first N Wikispeedia passages.

`encode_documents(precision="bfloat16")` runs the tower's matrix products in bfloat16 (its layer
norms, GELU and softmax stay float32; `tt_zoo.modeling.inference`); the vectors come back as
float32. Both precisions encode the same texts with the same model, one after the other in this
process, and are searched exactly (`ExactSearcher`, Chang et al. 2020, Sec. 4: inner product over
every candidate):

- ReQA: every question (or the first --limit-questions) against all (sentence, passage)
  candidates (`tt_zoo.evaluation.metrics.evaluate_encoder`); R@1/5/10/100 and MRR.
- ODQA: the validation questions (WebQuestions val + CuratedTREC train) answerable in the first
  --passages 100-word passages with titles (`word_passages`, DPR's blocks); answer recall
  R@1/5/20/100 (`tt_zoo.evaluation.odqa.answer_recall`).

Beside them: the smallest cosine between a text's two vectors, the share of questions whose top
candidate is the same, and each precision's documents/s in this run (one timing each; the
side-by-side medians are results/performance.md's).

  python -m benchmarks.precision_cost --model minilm_l6_384            # ~15 min here
  python -m benchmarks.precision_cost --model minilm_l6_384 --limit-questions 50 --passages 200 \\
      --output /tmp/precision_cost                                     # smoke
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import arguments, text_rows
from benchmarks.beam_encode import first_passages
from benchmarks.measure import machine_info, machine_line, min_cosine

PRECISIONS = ("float32", "bfloat16")
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
    arguments.add_output(p, arguments.RESULTS / "precision_cost",
                         help="writes OUTPUT.json and OUTPUT.md")
    return p.parse_args(argv)


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


def measure_reqa(model, squad_path, batch_size: int, limit_questions=None) -> dict:
    from tt_zoo.evaluation.metrics import encode_candidates, evaluate_encoder
    from tt_zoo.evaluation.reqa import build_reqa

    reqa = build_reqa(squad_path)
    ids = reqa.question_ids[:limit_questions]
    out = {"questions": len(ids), "candidates": len(reqa.candidates), "rows": {}}
    vectors = {}
    for precision in PRECISIONS:
        encoder = AtPrecision(model, precision, batch_size)
        start = time.perf_counter()
        vectors[precision] = encode_candidates(encoder, reqa, batch_size=batch_size)
        seconds = time.perf_counter() - start
        result = evaluate_encoder(encoder, reqa, ids, REQA_KS, batch_size=batch_size,
                                  candidate_embeddings=vectors[precision])
        out["rows"][precision] = {**_percent(result["exact"]),
                                  "candidates_per_s": round(len(reqa.candidates) / seconds, 1)}
    out["smallest_cosine"] = round(min_cosine(*vectors.values()), 6)
    return out


def measure_odqa(model, data_dir, n_passages: int, batch_size: int) -> dict:
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
    for precision in PRECISIONS:
        encoder = AtPrecision(model, precision, batch_size)
        start = time.perf_counter()
        vectors[precision] = encoder.encode_documents([p.text for p in passages],
                                                      [p.title for p in passages])
        seconds = time.perf_counter() - start
        rows = ExactSearcher(vectors[precision]).search(encoder.encode_queries(texts),
                                                        max(ks)).rows
        tops[precision] = rows[:, 0]
        recall = odqa.answer_recall(rows, [gold[i] for i in answerable], ks=ks)
        out["rows"][precision] = {**_percent(recall),
                                  "docs_per_s": round(len(passages) / seconds, 1)}
    out["smallest_cosine"] = round(min_cosine(*vectors.values()), 6)
    out["same_top_passage"] = round(float(np.mean(tops["float32"] == tops["bfloat16"])), 4)
    return out


def _table(section: dict, speed_key: str, speed_label: str) -> list:
    rows = section["rows"]
    metrics = [k for k in rows["float32"] if k != speed_key]
    lines = ["| precision | " + " | ".join(metrics) + f" | {speed_label} |",
             "|---|" + "---|" * (len(metrics) + 1)]
    for precision, r in rows.items():
        lines.append(f"| {precision} | " + " | ".join(f"{r[m]:.1f}" for m in metrics)
                     + f" | {r[speed_key]:.1f} |")
    cost = {m: round(rows["bfloat16"][m] - rows["float32"][m], 2) for m in metrics}
    lines.append("| bfloat16 - float32 | " + " | ".join(f"{v:+.1f}" for v in cost.values())
                 + " | |")
    return lines


def report(result: dict) -> str:
    reqa, od = result["reqa"], result["odqa"]
    lines = ["# What bfloat16 encoding costs in recall", "",
             f"Model `{result['model']}`, batch {result['batch_size']}; both precisions encode "
             "the same texts one after the other in one process, exact inner-product search. "
             f"Generated by `python -m benchmarks.precision_cost` in {result['wall_min']} min.",
             "", f"## ReQA-SQuAD(dev): {reqa['questions']:,} questions against all "
             f"{reqa['candidates']:,} (sentence, passage) candidates", "",
             *_table(reqa, "candidates_per_s", "candidates/s"), "",
             f"Smallest cosine between a candidate's two vectors: {reqa['smallest_cosine']}.", "",
             f"## ODQA validation questions over the first {od['passages']:,} 100-word "
             f"Wikispeedia passages ({od['answerable']:,} of {od['questions']:,} answerable "
             "there)", "", *_table(od, "docs_per_s", "docs/s"), "",
             f"Smallest cosine between a passage's two vectors: {od['smallest_cosine']}; the "
             f"same top passage for {100 * od['same_top_passage']:.1f}% of the questions.", "",
             "Recall in %. Documents/s: one timing per precision in this run; the side-by-side "
             "medians against sentence-transformers are in results/performance.md.", "",
             machine_line(result["machine"])]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    import tt_zoo

    start = time.perf_counter()
    info = machine_info()
    model = tt_zoo.load(args.model)
    result = {"generator": "benchmarks/precision_cost.py", "model": model.name,
              "batch_size": args.batch_size,
              "reqa": measure_reqa(model, args.squad, args.batch_size, args.limit_questions),
              "odqa": measure_odqa(model, args.data_dir, args.passages, args.batch_size)}
    result["wall_min"] = round((time.perf_counter() - start) / 60, 1)
    return text_rows.finish(result, info, args.output, report)


if __name__ == "__main__":
    main()
