"""A fine-tuning run: a two-tower model fine-tuned on a ReQA split and evaluated (Chang et al.
2020, Sec. 5); `finetune(config)` runs it (`tt-zoo finetune` parses its flags into the
`FinetuneConfig` and calls it).

The model is a zoo name or an export directory (``model.model``), or an untrained tower built
here (``model.init = "none"``: the paper's "no pretraining" rows). Training follows the paper's
fine-tuning (Adam, lr 5e-5, 2,000 steps, batch 512, all settable; `tt_zoo.training.finetuning`)
with early stopping on the split's validation part; ``output.eval`` scores the split's test
questions against all ReQA candidates, with BM25 beside it, and prints the Table 3 rows
(R@1/5/10/50/100, MRR, in %). The SQuAD file (``data.squad``) and the split (a new cold-start
``data.train_fraction``, or ``data.split_file``) are the config's; `tt-zoo finetune` fills the
default SQuAD path and checks the flags. Nothing here imports TensorFlow at import time.

    from tt_zoo.training import FinetuneConfig, finetune
    record = finetune(FinetuneConfig.from_dict({
        "model": {"model": "ict_bfs_wlp_512"},
        "data": {"squad": "dev-v1.1.json", "train_fraction": 0.05}, "output": {"eval": True}}))
"""

from __future__ import annotations

import time
from typing import Optional

from tt_zoo.configs.finetune import (DataArguments, FinetuneConfig,  # noqa: F401
                                     FinetuneNegativeArguments, ModelArguments,
                                     OutputArguments, TrainingArguments)
from tt_zoo.configs.run_config import RUN_CONFIG_KEY
from tt_zoo.evaluation.tables import COLUMNS, format_table
from tt_zoo.training.initial_models import build_untrained, load_pretrained, with_sizes


def limit_questions(reqa, n: int, seed: int):
    """A ReQA with a random, seeded subset of n questions (in their original order) and all the
    candidates."""
    import numpy as np
    from tt_zoo.evaluation import reqa as reqa_lib

    if n >= len(reqa.questions):
        return reqa
    keep = np.sort(np.random.default_rng(seed).choice(len(reqa.questions), n, replace=False))
    return reqa_lib.ReQA([reqa.questions[i] for i in keep], reqa.candidates, reqa.report,
                         source=f"{reqa.source} ({n} random questions, seed {seed})")




def reqa_and_split(data: DataArguments):
    """ReQA of --squad (or its --limit-questions subset) and the split: --split-file's, or a
    new cold-start split (saved to --split-out); with the split's description and training
    fraction."""
    from tt_zoo.evaluation import reqa as reqa_lib

    reqa = reqa_lib.build_reqa(data.squad)
    if data.limit_questions:
        reqa = limit_questions(reqa, data.limit_questions, data.seed)
    print(reqa.summary())
    if data.split_file:
        split, where = reqa_lib.load_split(data.split_file), f"split file {data.split_file}"
        reqa.questions_for(split.train + split.validation + split.test)  # ids must exist here
    else:
        split = reqa_lib.make_splits(reqa, data.train_fraction, seed=data.seed)
        where = f"{data.train_fraction:g} cold-start split, seed {data.seed}"
        if data.split_out:
            reqa_lib.save_split(split, data.split_out)
            print(f"Wrote the split to {data.split_out}")
    fraction = split.meta.get("train_fraction", data.train_fraction)
    print(f"Split ({where}): {len(split.train):,} training, {len(split.validation):,} "
          f"validation, {len(split.test):,} test questions.")
    return reqa, split, where, fraction


def model_to_finetune(config: FinetuneConfig):
    """(the zoo model or None for --init none, its Keras model, what the card says of it)."""
    if config.model.init == "none":
        zoo_model, (model, info) = None, build_untrained(config.model, config.lengths,
                                                         config.data.seed)
    else:
        zoo_model, model, info = load_pretrained(config.model.model, config.lengths,
                                                 config.model.name)
    return zoo_model, model, with_sizes(model, info)



def evaluate(model, info, reqa, split, where, fraction) -> list:
    """Table 3's rows for the split's test questions: the model's, then BM25's."""
    from tt_zoo.evaluation import metrics as retrieval_metrics

    t = time.perf_counter()
    m = retrieval_metrics.evaluate_encoder(model, reqa, split.test)
    base = {"encoder": f"{info['encoder']}-{info.get('tower_size')}"
            if info.get("tower_size") else info["encoder"],
            "pretraining": info["pretraining"], "train_fraction": fraction}
    rows = [{**base, "search": "exact", **{c: m["exact"][c] for c in COLUMNS}, "details": m}]
    b = retrieval_metrics.evaluate_bm25(reqa, split.test)
    rows.append({"encoder": "BM25", "pretraining": "-", "train_fraction": fraction,
                 "search": "exact", **{c: b["exact"][c] for c in COLUMNS}, "details": b})
    print(f"ReQA ({reqa.source}): {len(split.test):,} test questions of the {where}, "
          f"{len(reqa.candidates):,} candidates (evaluation {time.perf_counter() - t:.0f} s)")
    print(format_table(rows))
    return rows


def export_finetuned(config: FinetuneConfig, zoo_model, model, info, training: dict, result,
                     rows, where: str, training_data: str) -> None:
    """Exports to --output with the card's fields (`where`: the split's description); the
    export records the lineage itself (base model name, sha256, steps, date)."""
    from tt_zoo.artifacts import export as export_lib
    from tt_zoo.artifacts.model_card import FinetuneRun, ModelCard  # noqa: PLC0415

    # `info` holds card fields (name, encoder, sizes) and the base model as given
    # ("base_model", a name or path: the export's lineage names it with its sha256).
    card = ModelCard.from_dict({k: v for k, v in info.items() if k != "base_model"})
    run = card.training
    run.training_data, run.run_config = training_data, config.to_dict()
    run.train_steps, run.batch_size = result["steps_run"], result["batch_size"]
    run.learning_rate = config.training.learning_rate
    run.dtype_policy, run.matrix_units = result["dtype_policy"], result["matrix_units"]
    card.lineage.finetune = FinetuneRun.from_dict(training)
    card.result.train_wall_time_s = round(result["seconds"], 1)
    card.result.train_pairs_per_s = round(result["train_pairs_per_s"] or 0.0, 1)
    if rows:
        card.evaluation.metrics = {f"ReQA test questions, {where}":
                                   {c: round(100 * rows[0][c], 2) for c in COLUMNS}}
    metadata = card.to_dict()
    if zoo_model is not None:
        zoo_model.export(config.output.output, metadata)
    else:
        export_lib.export_saved_model(model, config.output.output, metadata)
    print(f"Exported the fine-tuned model to {config.output.output}")


def finetune(config: FinetuneConfig, argv: Optional[list] = None) -> dict:
    """Fine-tunes, evaluates (--eval) and exports (--output) as `config` says (Chang et al.
    2020, Sec. 5); returns (and writes to --json-out) the record of the run. `argv`: the
    command line, recorded (None: none)."""
    t_start = time.perf_counter()
    from tt_zoo.training import finetuning
    from tt_zoo.training.precision import card_record, training_copy, training_policy

    reqa, split, where, fraction = reqa_and_split(config.data)
    zoo_model, model, info = model_to_finetune(config)
    negatives = config.negatives
    miner = None
    if negatives.hard_negatives_from:
        from tt_zoo.zoo.loading import load  # noqa: PLC0415 (TensorFlow)
        miner = load(negatives.hard_negatives_from)
    train = config.training
    policy = training_policy(model, config.compute.precision)
    print(f"Precision: {policy} (--precision {config.compute.precision})")
    with training_copy(model, config.compute.precision) as trained:
        result = finetuning.finetune(
            trained, reqa, split, steps=train.steps, batch_size=train.batch_size,
            learning_rate=train.learning_rate, eval_every=train.eval_every, patience=train.patience,
            min_delta=train.min_delta, validation_metric=train.validation_metric,
            seed=config.data.seed, log_dir=train.log_dir, progress=not config.output.no_progress,
            hard_negatives=negatives.hard_negatives,
            hard_negatives_depth=negatives.hard_negatives_depth, hard_negatives_model=miner,
            skip_gold_passage=negatives.hard_negatives_other_passages,
            bm25_negatives=negatives.bm25_negatives)
    result.update(card_record(policy))
    rows = evaluate(model, info, reqa, split, where, fraction) if config.output.eval else []

    training = {k: result[k] for k in ("steps", "steps_run", "best_step", "best_value", "monitor",
                                       "batch_size", "requested_batch_size", "learning_rate",
                                       "seconds", "train_pairs_per_s")}
    if "hard_negatives" in result:
        training["hard_negatives"] = result["hard_negatives"]
    if config.output.output:
        export_finetuned(config, zoo_model, model, info, training, result, rows, where,
                         f"ReQA {reqa.source}: training part of the {where} "
                         f"({len(split.train)} questions)")

    wall = time.perf_counter() - t_start
    output = {"squad": reqa.source, "split": where, "train_fraction": fraction,
              "seed": config.data.seed, "limit_questions": config.data.limit_questions,
              "num_train": len(split.train), "num_validation": len(split.validation),
              "num_questions": len(split.test), "num_candidates": len(reqa.candidates),
              "model": info, "finetune": result, "rows": rows, "output": config.output.output,
              "argv": argv, RUN_CONFIG_KEY: config.to_dict(), "wall_seconds": wall}
    if config.output.json_out:
        from tt_zoo.atomic_io import write_json
        write_json(config.output.json_out, output)
        print(f"Wrote {config.output.json_out}")
    print(f"Wall time: {wall:.1f} s (fine-tuning {result['seconds']:.1f} s, "
          f"{result['steps_run']} steps of {result['batch_size']})")
    return output
