"""The evaluate stage of `tt-zoo reproduce`: zero-shot and fine-tuned ReQA scores of every model
of the grid, and BM25's, on each cold-start split's test questions against all candidates.

ReQA-SQuAD(dev) (Ahmad et al. 2019) as Chang et al. 2020, Sec. 5 use it: each split trains on
1% / 5% / 80% of the questions (10% of that part held out for validation, early stopping on
its loss) and scores the rest; a hit is the gold (sentence, passage) pair. Each model's scores go
to its result files (`grid.result_file`), each skipped when it exists (the stage resumes).
"""

from __future__ import annotations

import functools

from tt_zoo.reproduction.grid import (bm25_file, evaluated_models, is_exported, result_file,
                                      split_key)
from tt_zoo.reproduction.runner import Stopwatch, cached_json


def _flat_bm25(metrics: dict) -> dict:
    """`evaluate_bm25`'s dict as runs/reproduce/bm25.json keeps it (written before the one
    evaluation shape, so earlier runs still read): R@k and MRR beside the counts and settings."""
    return {**metrics["exact"], **{k: v for k, v in metrics.items() if k not in ("exact", "index")}}


def _zero_shot(name: str, model_dir, reqa, splits: dict) -> dict:
    """A model's zero-shot scores on each split's test questions (candidates encoded once)."""
    import tt_zoo
    from tt_zoo.evaluation import metrics as retrieval_metrics

    watch = Stopwatch()
    model = tt_zoo.load(model_dir)
    candidates = retrieval_metrics.encode_candidates(model, reqa)
    scores = {split_key(f): retrieval_metrics.evaluate_encoder(
        model, reqa, s.test, candidate_embeddings=candidates) for f, s in splits.items()}
    print(f"evaluate {name}: zero-shot in {watch}", flush=True)
    return scores


def _finetuned(name: str, model_dir, reqa, fraction: float, split, budget) -> dict:
    """A model fine-tuned on one split's training part (a fresh copy of its weights), scored
    on its test questions, with the fine-tuning's history."""
    import tensorflow as tf
    import tt_zoo
    from tt_zoo.evaluation import metrics as retrieval_metrics
    from tt_zoo.training import finetuning

    watch = Stopwatch()
    tf.keras.backend.clear_session()
    model = tt_zoo.load(model_dir)
    history = finetuning.finetune(
        model.keras_model, reqa, split, steps=budget.finetune_steps,
        batch_size=budget.finetune_batch_size, learning_rate=budget.finetune_learning_rate,
        eval_every=budget.finetune_eval_every, seed=budget.seed, progress=False)
    metrics = retrieval_metrics.evaluate_encoder(model, reqa, split.test)
    print(f"evaluate {name}: fine-tuned on {split_key(fraction)} in {watch}: R@100 "
          f"{100 * metrics['exact']['R@100']:.1f}", flush=True)
    return {"split": split_key(fraction), "num_train": len(split.train),
            "num_validation": len(split.validation), "metrics": metrics, "finetune": history}


def stage_evaluate(config) -> None:
    """Zero-shot and fine-tuned ReQA scores of each model on each split's test questions,
    each computed once (`runner.cached_json`)."""
    from tt_zoo.evaluation import reqa as reqa_lib, metrics as retrieval_metrics

    budget = config.budget
    reqa = reqa_lib.build_reqa(config.squad)
    splits = {f: reqa_lib.make_splits(reqa, f, seed=budget.seed) for f in config.splits}
    cached_json(bm25_file(config.runs), lambda: {
        split_key(f): _flat_bm25(retrieval_metrics.evaluate_bm25(reqa, s.test))
        for f, s in splits.items()})
    for name, model_dir, out_dir in evaluated_models(config.cells, config.runs):
        if not is_exported(model_dir):
            print(f"evaluate {name}: no model at {model_dir} yet (pretrain stage)")
            continue
        cached_json(result_file(out_dir),
                    functools.partial(_zero_shot, name, model_dir, reqa, splits))
        for fraction, split in splits.items():
            cached_json(result_file(out_dir, fraction), functools.partial(
                _finetuned, name, model_dir, reqa, fraction, split, budget))
