"""One benchmark of one exported model, as JSON: the evaluation step of
`benchmarks/pretrain_tasks.py` (run in its own process so the grid's memory stays flat).

  python -m benchmarks.pretrain_tasks_eval odqa|reqa|open_domain_reqa EXPORT OUT.json
  python -m benchmarks.pretrain_tasks_eval bm25_reqa - OUT.json   # BM25's row of the ReQA column
"""

from __future__ import annotations

import sys

from tt_zoo.configs.multitask import ODQA_CACHE
from tt_zoo.reproduction.runner import Stopwatch  # no TensorFlow

from benchmarks import arguments

REPO = arguments.REPO
DATA = arguments.data_dir()
WORK = REPO / "runs" / "grid_cache"


def reqa_benchmark(model) -> dict:
    """ReQA-SQuAD(dev), all questions against all candidates, exact search (zero-shot)."""
    from tt_zoo.evaluation import metrics, reqa

    squad = reqa.build_reqa(DATA / "squad" / "dev-v1.1.json")
    out = metrics.evaluate_encoder(model, squad)
    return {"num_questions": out["num_queries"], "num_candidates": out["num_candidates"],
            **out["exact"]}


def bm25_reqa_benchmark(_) -> dict:
    """BM25 on the same ReQA-SQuAD(dev) setting as `reqa_benchmark` (all questions)."""
    from tt_zoo.evaluation import metrics, reqa

    squad = reqa.build_reqa(DATA / "squad" / "dev-v1.1.json")
    out = metrics.evaluate_bm25(squad)
    return {"num_questions": out["num_queries"], "num_candidates": out["num_candidates"],
            **out["exact"], "settings": out["settings"]}


def open_domain_reqa_benchmark(model) -> dict:
    """Open-domain ReQA: the same questions against ReQA's + Wikispeedia's candidates."""
    import numpy as np
    from tt_zoo.evaluation import metrics, reqa
    from tt_zoo.evaluation.open_domain import encode_candidates_to_file, open_domain_reqa

    squad = reqa.build_reqa(DATA / "squad" / "dev-v1.1.json")
    corpus, _ = open_domain_reqa(squad, DATA / "wikispeedia", progress=False)
    path = WORK / f"open_domain_{model.metadata['sha256'][:16]}.npy"
    embeddings = np.asarray(encode_candidates_to_file(model, corpus, path, progress=False))
    out = metrics.evaluate_encoder(model, corpus, candidate_embeddings=embeddings)
    for stale in (path, path.with_suffix(".json")):  # 1.2 GB a model: not kept
        stale.unlink(missing_ok=True)
    return {"num_questions": out["num_queries"], "num_candidates": out["num_candidates"],
            **out["exact"]}


def odqa_benchmark(model) -> dict:
    """Top-k answer recall on the ODQA validation questions over 100-word passages."""
    from tt_zoo.evaluation import odqa

    benchmark = odqa.validation_benchmark(DATA, cache_dir=REPO / ODQA_CACHE)
    path = WORK / f"odqa_{model.metadata['sha256'][:16]}.npy"
    sets = benchmark.score_model(model, cache_path=path)
    for stale in (path, path.with_suffix(".json")):
        stale.unlink(missing_ok=True)
    return {"sets": sets, **{k: v for k, v in benchmark.describe().items() if k != "sets"}}


def main(argv=None):
    bench, export, out = (argv or sys.argv[1:])
    import tt_zoo
    from tt_zoo.atomic_io import write_json

    WORK.mkdir(parents=True, exist_ok=True)
    model = None if bench == "bm25_reqa" else tt_zoo.load(export)
    watch = Stopwatch()
    result = {"reqa": reqa_benchmark, "odqa": odqa_benchmark, "bm25_reqa": bm25_reqa_benchmark,
              "open_domain_reqa": open_domain_reqa_benchmark}[bench](model)
    result["seconds"] = round(watch.seconds, 1)
    write_json(out, result)
    print(bench, result)


if __name__ == "__main__":
    main()
