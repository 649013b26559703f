"""Train HDCT term weights on pretraining pairs or labelled tasks, from a two-tower export's
encoder or a term-weight export.

Dai & Callan, WWW 2020 (HDCT): a BERT encoder and a linear head predict each document word's
weight in [0, 1], trained by MSE against targets: 1 when the word's BM25 term occurs in the
pair's query, else 0 (`tt_zoo.data.term_weight_targets`). The queries are the pretraining
pairs' (--pairs, no labels: HDCT's weak supervision) or the questions of labelled tasks
(--task, the forms of `tt-zoo multitask`: webquestions, curatedtrec, reqa, jsonl:PATH; each
question's first positive passage: DeepCT's supervision by relevant queries, Dai & Callan
2019, Sec. 3.2), or both. --init-from is a two-tower export with a BERT document tower (its
encoder starts the model, the head starts fresh) or a term-weight export (training continues,
e.g. from the shipped hdct_ model on the QA tasks). A tiny BERT trains in minutes.
Checkpoints every N steps in --workdir; a rerun resumes (with the same settings, or it stops
naming the difference). The export records the initialisation, the data, the steps, the
training CPU time and the pseudo-tf scale N.

  tt-zoo train-term-weights --pairs runs/pairs/ict_bfs_wlp_128 \\
      --init-from saved_models/ict_bfs_wlp_512 --steps 2000 --batch-size 64 \\
      --learning-rate 5e-4 --export runs/models/hdct_ict_bfs_wlp
  tt-zoo train-term-weights --task webquestions --task reqa --untitled reqa \\
      --init-from hdct_ict_bfs_wlp_crop_span_qgen --steps 500 --batch-size 64 \\
      --learning-rate 2e-4 --export runs/models/hdct_qa

A reqa task's documents are ReQA's candidates, (sentence, passage): the model reads them so,
as a ReQA index that weighs each candidate does (`benchmarks/term_weights.py --reqa-documents
candidate`); with --untitled reqa it reads the passage alone, as an index that weighs each
distinct passage once does (--reqa-documents passage).

--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `TermWeightConfig`); flags given with it override it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Optional, Tuple

from tt_zoo.atomic_io import check_replaceable, is_remote, write_json
from tt_zoo.cli import numbers, parsing
from tt_zoo.cli.common import PairArguments, TrainOutputArguments
from tt_zoo.cli.run_config import RunConfig, flag, option, recorded_command

COMMAND = "train-term-weights"


@dataclasses.dataclass(frozen=True)
class ModelArguments:
    """The two-tower export whose encoder starts the term-weight model, and the card's name."""

    init_from: Optional[str] = option(
        None, "a two-tower export (registered name or directory) whose document tower's BERT "
              "encoder starts the model, or a term-weight export to train on",
        metavar="NAME_OR_PATH")
    name: Optional[str] = option(
        None, "name in the metadata (default: the export folder's name)")


@dataclasses.dataclass(frozen=True)
class LabelledTaskArguments:
    """Labelled tasks whose questions are the queries of the targets (DeepCT's supervision)."""

    task: Tuple[str, ...] = option(
        (), "a labelled task, as tt-zoo multitask reads it: webquestions, curatedtrec, reqa or "
            "jsonl:PATH[:CLASS]", metavar="SPEC")
    untitled: Tuple[str, ...] = option(
        (), "a task (by name) whose documents are read without their titles (reqa: the "
            "passage without the candidate's sentence)", metavar="NAME")
    reqa_train_fraction: float = option(
        0.8, "the reqa task's share of the ReQA-SQuAD(dev) cold-start split (its training part)",
        number=numbers.SPLIT_FRACTION)
    split_seed: int = option(0, "seed of the ReQA split and of the tasks' confounders",
                             number=numbers.SEED)
    task_cache: Optional[str] = option(
        None, "where the built tasks are kept (default: WORKDIR/tasks; tt-zoo multitask's "
              "cache may be shared)")


@dataclasses.dataclass(frozen=True)
class TrainingArguments:
    """MSE against the query-term targets (HDCT, Dai & Callan 2020), Adam with a linear
    warm-up, then a linear decay to 0."""

    steps: Optional[int] = option(None, "optimizer steps", number=numbers.count())
    batch_size: int = option(64, "documents per step", number=numbers.count())
    learning_rate: float = option(
        5e-4, "peak Adam learning rate (linear warm-up, then linear decay to 0)",
        number=numbers.LEARNING_RATE)
    warmup_fraction: float = option(0.1, "fraction of the steps of linear warm-up",
                                    number=numbers.fraction(high_open=True))
    seed: int = option(0, "seed of initialisation and batches", number=numbers.SEED)


@dataclasses.dataclass(frozen=True)
class TermWeightConfig(RunConfig):
    """Every setting of a `tt-zoo train-term-weights` run; recorded whole in its summary and
    export (`RUN_CONFIG_KEY`)."""

    model: ModelArguments
    data: PairArguments
    tasks: LabelledTaskArguments
    training: TrainingArguments
    output: TrainOutputArguments

    REQUIRED = ("init_from", "steps", "export")


def add_arguments(p: argparse.ArgumentParser) -> None:
    TermWeightConfig.add_arguments(p)


def parse_args(argv=None) -> TermWeightConfig:
    parser = parsing.command_parser(COMMAND, __doc__, add_arguments)
    return TermWeightConfig.from_namespace(TermWeightConfig.parse(parser, argv))


def load_init(name_or_path):
    """The `TermWeightModel` that training starts from, and what the card records about its
    start (a `tt_zoo.serving.model_card.Origin`): a term-weight export as it is, or a new head
    on a two-tower export's document encoder."""
    import tt_zoo  # noqa: PLC0415
    from tt_zoo.modeling.kinds import TERM_WEIGHTS  # noqa: PLC0415
    from tt_zoo.modeling.term_weights import TermWeightModel  # noqa: PLC0415
    from tt_zoo.serving.model_card import ModelCard, Origin  # noqa: PLC0415
    from tt_zoo.serving.term_weight_export import is_term_weight_export  # noqa: PLC0415
    from tt_zoo.zoo.loading import find_artifact  # noqa: PLC0415

    path, spec = find_artifact(name_or_path)
    if (spec.kind == TERM_WEIGHTS) if spec else is_term_weight_export(path):
        model = tt_zoo.load_term_weighter(name_or_path).model
        card = ModelCard.from_dict(model.export_metadata)
        copied = "the whole term-weight model (encoder and head): training continues"
    else:
        source = tt_zoo.load(name_or_path)
        model, card = TermWeightModel.from_two_tower(source.keras_model), source.card
        copied = "the document tower's BERT encoder (the head starts fresh)"
    return model, Origin(
        source=str(name_or_path), name=card.name, sha256=card.provenance.sha256,
        pretraining=card.training.pretraining, train_steps=card.training.train_steps,
        copied=copied)


def check_settings(config: TermWeightConfig) -> None:
    """Exits naming the first setting that cannot train, or an --export that may not be
    replaced (before training, so a run never ends in a refused write)."""
    training = config.training
    if not config.data.pairs and not config.tasks.task:
        sys.exit("nothing to train on: give --pairs DIR, --task SPEC (repeatable) or both")
    for name, value in (("steps", training.steps), ("batch_size", training.batch_size),
                        ("checkpoint_every", config.output.checkpoint_every)):
        if value <= 0:
            sys.exit(f"{flag(name)} must be positive (got {value})")
    if training.learning_rate <= 0 or not 0 <= training.warmup_fraction < 1:
        sys.exit(f"--learning-rate must be > 0 and --warmup-fraction in [0, 1) (got "
                 f"{training.learning_rate}, {training.warmup_fraction})")
    from tt_zoo.serving.term_weight_export import is_term_weight_export  # noqa: PLC0415
    try:
        check_replaceable(config.output.export, is_replaceable=is_term_weight_export,
                          what="tt_zoo term-weight export")
    except FileExistsError as e:
        sys.exit(f"--export: {e}")


def load_labelled_tasks(args: LabelledTaskArguments, workdir: str, progress: bool):
    """The tasks of --task, built (and cached) as `tt-zoo multitask` builds them, and the names
    of the tasks read without titles (--untitled); exits naming a --task or --untitled value
    that cannot be read."""
    import pathlib  # noqa: PLC0415

    from tt_zoo.cli.multitask_tasks import (Sources, SpecError, load_task,  # noqa: PLC0415
                                            parse_task_specs)

    try:
        specs = parse_task_specs(args.task)
    except SpecError as e:
        sys.exit(str(e))
    for spec in specs:
        if spec.kind == "pairs":
            sys.exit(f"--task {spec.spec!r}: pretraining pairs are read with --pairs DIR "
                     "(--max-pairs N)")
    names = [s.name for s in specs]
    for name in args.untitled:
        if name not in names:
            sys.exit(f"--untitled {name!r}: no task of that name (the tasks: "
                     f"{', '.join(names) or 'none'})")
    sources = Sources(specs, args, progress)
    cache = pathlib.Path(args.task_cache or os.path.join(workdir, "tasks"))
    tasks = [load_task(spec, sources, cache, command=COMMAND) for spec in specs]
    return tasks, frozenset(args.untitled)


def term_weight_metadata(config: TermWeightConfig, name: str, init, trained: dict,
                         terms, tasks, untitled, command: str, summary_path: str) -> dict:
    """The run's record (train_summary.json, and the export's metadata: a
    `tt_zoo.serving.model_card.ModelCard`), the whole config under `RUN_CONFIG_KEY`; `init`:
    `load_init`'s record; `trained`: `train_term_weights`' report; `tasks`, `untitled`:
    `load_labelled_tasks`'. A rerun of a finished run keeps the first run's final loss."""
    from tt_zoo.data.pairs_io import read_manifest  # noqa: PLC0415
    from tt_zoo.retrieval.term_weighting import COMBINE  # noqa: PLC0415
    from tt_zoo.serving.model_card import (WEIGHTS_LICENSE, Lineage,  # noqa: PLC0415
                                           ModelCard, MultiTaskRun, PairSet, TaskRecord,
                                           TermWeighting)

    data, training = config.data, config.training
    card = ModelCard.from_dict(trained)  # the steps, and what training measured
    card.name, card.license = name, WEIGHTS_LICENSE
    card.lineage = Lineage(init=init)
    run = card.training
    sources = []
    if data.pairs:
        manifest = read_manifest(data.pairs, verify="none")
        sources.append(f"pairs from {data.pairs}")
        run.pairs = PairSet(num_pairs=manifest["num_records"], max_pairs=data.max_pairs,
                            make_pairs_config=manifest.get("config", {}))
    if tasks:
        sources.append("the questions of " + ", ".join(
            f"{t.name} ({len(t):,}{', untitled' if t.name in untitled else ''})"
            for t in tasks))
        total = sum(len(t) for t in tasks)
        run.multi_task = MultiTaskRun(tasks=[TaskRecord(
            name=t.name, task_class=t.task_class, examples=len(t), weight=len(t) / total,
            knowledge_source=t.knowledge_source or None, validation=list(t.validation),
            stats=dict(t.stats)) for t in tasks])
    run.training_data = "; ".join(sources)
    run.batch_size, run.learning_rate = training.batch_size, training.learning_rate
    run.warmup_fraction, run.seed = training.warmup_fraction, training.seed
    run.command, run.run_config = command, config.to_dict()
    card.term_weighting = TermWeighting(
        targets="1 if the word's BM25 term occurs in the pair's query (a task's question), "
                "else 0; stop words 0 (HDCT's content-based weak supervision with query "
                "terms; DeepCT's relevant queries for tasks)",
        term_space=terms.settings(),
        weighting={"word_weight": "first piece", "term_weight": "max over occurrences",
                   "windows": COMBINE})
    if card.result.final_loss is None and os.path.exists(summary_path):
        import json  # noqa: PLC0415
        with open(summary_path, encoding="utf-8") as f:  # a rerun of a finished run
            card.result.final_loss = ModelCard.from_dict(json.load(f)).result.final_loss
    return card.to_dict()


def main(argv=None):
    return run(parse_args(argv), recorded_command(COMMAND, argv))


def run(config: TermWeightConfig, command: str) -> int:
    """Trains (resuming from WORKDIR) and exports the term-weight model of `config`;
    `command` is the command line the metadata records."""
    check_settings(config)
    data, training, output = config.data, config.training, config.output
    name = config.model.name or os.path.basename(os.path.normpath(output.export))
    workdir = output.workdir or os.path.join("runs", "term_weights", name)

    from tt_zoo.data.terms import TermSpace  # noqa: PLC0415 (TensorFlow after argparse)
    from tt_zoo.errors import TtZooError  # noqa: PLC0415
    from tt_zoo.serving.term_weight_export import export_term_weight_model  # noqa: PLC0415
    from tt_zoo.training import loop  # noqa: PLC0415
    from tt_zoo.training.term_weights import (cached_term_weight_arrays,  # noqa: PLC0415
                                              train_term_weights)

    loop.enable_checkpointable_randomness(training.seed)
    try:
        model, init = load_init(config.model.init_from)
    except (TtZooError, KeyError, FileNotFoundError, TypeError) as e:
        sys.exit(f"--init-from {config.model.init_from}: {e}")
    tasks, untitled = load_labelled_tasks(config.tasks, workdir, not output.no_progress)
    terms = TermSpace()
    try:
        arrays = cached_term_weight_arrays(model, data.pairs, terms, data.token_cache or None,
                                           max_pairs=data.max_pairs, tasks=tasks,
                                           untitled=untitled)
    except TtZooError as e:
        sys.exit(f"--pairs {data.pairs}: {e}")
    num_pairs = len(arrays["input_word_ids"])
    if training.batch_size > num_pairs:
        sys.exit(f"--batch-size {training.batch_size} exceeds the {num_pairs} pairs")
    pairs = data.pairs and (data.pairs if is_remote(data.pairs) else os.path.abspath(data.pairs))
    task_settings = {k: list(v) if isinstance(v, tuple) else v  # as the checkpoint's JSON
                     for k, v in dataclasses.asdict(config.tasks).items()
                     if k != "task_cache"}  # where tasks are kept, not what they are
    settings = {"kind": "term_weights", "pairs": pairs, "max_pairs": data.max_pairs,
                **({"tasks": task_settings} if tasks else {}),
                "init_sha256": init.sha256, "steps": training.steps,
                "batch_size": training.batch_size, "learning_rate": training.learning_rate,
                "warmup_fraction": training.warmup_fraction, "seed": training.seed,
                "terms": terms.settings(), "model": model.artifact_config()["config"]["tower"]}
    print(f"{name}: term weights on {num_pairs:,} pairs (documents with a query), "
          f"{training.steps} steps "
          f"x batch {training.batch_size}, from {config.model.init_from}")
    try:
        trained = train_term_weights(
            model, arrays, steps=training.steps, batch_size=training.batch_size,
            learning_rate=training.learning_rate, warmup_fraction=training.warmup_fraction,
            workdir=workdir, checkpoint_every=output.checkpoint_every, seed=training.seed,
            settings=settings, progress=not output.no_progress)
    except TtZooError as e:  # settings that differ from the checkpoint's
        sys.exit(str(e))
    print(f"trained to step {trained['train_steps']} (resumed from {trained['resumed_from']}) "
          f"in {trained['train_wall_time_s']:.0f} s ({trained['train_steps_per_s_last_100']} "
          f"steps/s over the last 100); {trained['train_cpu_seconds']:.0f} CPU s in all runs; "
          f"final loss {trained['final_loss']}")

    summary_path = os.path.join(workdir, "train_summary.json")
    metadata = term_weight_metadata(config, name, init, trained, terms, tasks, untitled,
                                    command, summary_path)
    write_json(summary_path, metadata, indent=2)
    meta = export_term_weight_model(model, output.export, metadata)
    print(f"exported to {output.export} (sha256 {meta['sha256']})")
    return 0

if __name__ == "__main__":
    sys.exit(main())
