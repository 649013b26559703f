"""One HDCT term-weight training run (Dai & Callan, WWW 2020), from its settings to the export:
`train_term_weighter(config)` loads the initial model (`load_init`: a term-weight export, or a
new head on a two-tower export's BERT document encoder), reads the labelled tasks
(`load_labelled_tasks`, built and cached as a multi-task run builds them) beside the pretraining
pairs, trains resumably (`tt_zoo.training.term_weights.train_term_weights`) and exports the
model with its card (`term_weight_metadata`), also written to WORKDIR/train_summary.json.

The settings are ``tt-zoo train-term-weights``' typed run config
(`tt_zoo.configs.term_weights.TermWeightConfig`, or any object with its groups ``model``,
``data``, ``tasks``, ``training``, ``output``); the command checks them before the call. A run
that cannot go on raises `TermWeightRunError` naming the flag (a task file that cannot be read:
`tt_zoo.training.multi_task_tasks.TaskFileError`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib

from tt_zoo.errors import TtZooError
from tt_zoo.configs.run_config import RunError


class TermWeightRunError(RunError):
    """A term-weight run that cannot go on: an initial model that does not load, a pair set or a
    task setting that cannot be read, a checkpoint of other settings; the message names the
    flag."""


def load_init(name_or_path):
    """The `TermWeightModel` that training starts from, and what the card records about its
    start (a `tt_zoo.artifacts.model_card.Origin`): a term-weight export as it is, or a new head
    on a two-tower export's document encoder."""
    from tt_zoo.modeling.kinds import TERM_WEIGHTS  # noqa: PLC0415
    from tt_zoo.modeling.term_weights import TermWeightModel  # noqa: PLC0415
    from tt_zoo.artifacts.model_card import ModelCard, Origin  # noqa: PLC0415
    from tt_zoo.artifacts.term_weight_export import is_term_weight_export  # noqa: PLC0415
    from tt_zoo.zoo.loading import find_artifact, load, load_term_weighter  # noqa: PLC0415

    path, spec = find_artifact(name_or_path)
    if (spec.kind == TERM_WEIGHTS) if spec else is_term_weight_export(path):
        model = load_term_weighter(name_or_path).model
        card = ModelCard.from_dict(model.export_metadata)
        copied = "the whole term-weight model (encoder and head): training continues"
    else:
        source = load(name_or_path)
        model, card = TermWeightModel.from_two_tower(source.keras_model), source.card
        copied = "the document tower's BERT encoder (the head starts fresh)"
    return model, Origin(
        source=str(name_or_path), name=card.name, sha256=card.provenance.sha256,
        pretraining=card.training.pretraining, train_steps=card.training.train_steps,
        copied=copied)


def load_labelled_tasks(args, workdir: str, progress: bool, data_dir):
    """The tasks of ``args.task`` (the labelled-task settings), built (and cached) as a
    multi-task run builds them, and the names of the tasks read without titles
    (``args.untitled``); raises `TermWeightRunError` naming a --task or --untitled value that
    cannot be read."""
    from tt_zoo.training.multi_task_tasks import (Sources, SpecError,  # noqa: PLC0415
                                                  load_task, parse_task_specs)

    try:
        specs = parse_task_specs(args.task)
    except SpecError as e:
        raise TermWeightRunError(str(e)) from None
    for spec in specs:
        if spec.kind == "pairs":
            raise TermWeightRunError(f"--task {spec.spec!r}: pretraining pairs are read with "
                                     "--pairs DIR (--max-pairs N)")
    names = [s.name for s in specs]
    for name in args.untitled:
        if name not in names:
            raise TermWeightRunError(f"--untitled {name!r}: no task of that name (the tasks: "
                                     f"{', '.join(names) or 'none'})")
    sources = Sources(specs, args, progress, data_dir=data_dir)
    cache = pathlib.Path(args.task_cache or os.path.join(workdir, "tasks"))
    tasks = [load_task(spec, sources, cache) for spec in specs]
    return tasks, frozenset(args.untitled)


def term_weight_metadata(config, name: str, init, trained: dict, terms, tasks, untitled,
                         command: str, summary_path: str) -> dict:
    """The run's record (train_summary.json, and the export's metadata: a
    `tt_zoo.artifacts.model_card.ModelCard`), the whole config under ``run_config``; `init`:
    `load_init`'s record; `trained`: `train_term_weights`' report; `tasks`, `untitled`:
    `load_labelled_tasks`'. A rerun of a finished run keeps the first run's final loss."""
    from tt_zoo.data.pairs_io import read_manifest  # noqa: PLC0415
    from tt_zoo.retrieval.term_weighting import COMBINE  # noqa: PLC0415
    from tt_zoo.artifacts.model_card import (WEIGHTS_LICENSE, Lineage,  # noqa: PLC0415
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
        with open(summary_path, encoding="utf-8") as f:  # a rerun of a finished run
            card.result.final_loss = ModelCard.from_dict(json.load(f)).result.final_loss
    return card.to_dict()


def train_term_weighter(config, *, command: str, data_dir=None, log=print) -> dict:
    """Trains (resuming from WORKDIR) and exports the term-weight model of `config` (module
    docstring); returns the export's metadata. `command`: the command line the metadata
    records; `data_dir`: the shared data folder (``$TT_ZOO_DATA``) the named tasks are built
    from."""
    from tt_zoo.atomic_io import is_remote, write_json  # noqa: PLC0415
    from tt_zoo.data.terms import TermSpace  # noqa: PLC0415 (TensorFlow from here on)
    from tt_zoo.artifacts.term_weight_export import export_term_weight_model  # noqa: PLC0415
    from tt_zoo.training import loop  # noqa: PLC0415
    from tt_zoo.training.term_weights import (cached_term_weight_arrays,  # noqa: PLC0415
                                              train_term_weights)

    data, training, output = config.data, config.training, config.output
    name = config.model.name or os.path.basename(os.path.normpath(output.export))
    workdir = output.workdir or os.path.join("runs", "term_weights", name)
    loop.enable_checkpointable_randomness(training.seed)
    try:
        model, init = load_init(config.model.init_from)
    except (TtZooError, KeyError, FileNotFoundError, TypeError) as e:
        raise TermWeightRunError(f"--init-from {config.model.init_from}: {e}") from None
    tasks, untitled = load_labelled_tasks(config.tasks, workdir, not output.no_progress,
                                          data_dir)
    terms = TermSpace()
    try:
        arrays = cached_term_weight_arrays(model, data.pairs, terms, data.token_cache or None,
                                           max_pairs=data.max_pairs, tasks=tasks,
                                           untitled=untitled)
    except TtZooError as e:
        raise TermWeightRunError(f"--pairs {data.pairs}: {e}") from None
    num_pairs = len(arrays["input_word_ids"])
    if training.batch_size > num_pairs:
        raise TermWeightRunError(f"--batch-size {training.batch_size} exceeds the {num_pairs} "
                                 "pairs")
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
    log(f"{name}: term weights on {num_pairs:,} pairs (documents with a query), "
        f"{training.steps} steps x batch {training.batch_size}, from {config.model.init_from}")
    try:
        trained = train_term_weights(
            model, arrays, steps=training.steps, batch_size=training.batch_size,
            learning_rate=training.learning_rate, warmup_fraction=training.warmup_fraction,
            workdir=workdir, checkpoint_every=output.checkpoint_every, seed=training.seed,
            settings=settings, progress=not output.no_progress)
    except TtZooError as e:  # settings that differ from the checkpoint's
        raise TermWeightRunError(str(e)) from None
    log(f"trained to step {trained['train_steps']} (resumed from {trained['resumed_from']}) "
        f"in {trained['train_wall_time_s']:.0f} s ({trained['train_steps_per_s_last_100']} "
        f"steps/s over the last 100); {trained['train_cpu_seconds']:.0f} CPU s in all runs; "
        f"final loss {trained['final_loss']}")

    summary_path = os.path.join(workdir, "train_summary.json")
    metadata = term_weight_metadata(config, name, init, trained, terms, tasks, untitled,
                                    command, summary_path)
    write_json(summary_path, metadata, indent=2)
    meta = export_term_weight_model(model, output.export, metadata)
    log(f"exported to {output.export} (sha256 {meta['sha256']})")
    return meta
