"""One multi-task run (Maillard et al. 2021, Sec. 3-4), from its settings to the record:
`multitask(config)` builds or reads the tasks (`tt_zoo.training.multi_task_tasks`), the model
(loaded or built, with task markers, untied towers or one query tower per task class, query-token
weights), trains it resumably (`tt_zoo.training.multi_task.train_multi_task`), evaluates it on
the ODQA validation sets, exports it with its card and writes WORKDIR/summary.json.

The settings are ``tt-zoo multitask``'s typed run config (`tt_zoo.configs.multitask.MultitaskConfig`,
e.g. ``MultitaskConfig.from_dict({"model": {...}, "tasks": {...}})``; any object with its groups
``model``, ``lengths``, ``tasks``, ``training``, ``output`` and their fields will do). The command
checks the flags before it calls `multitask`; a setting that cannot run here raises
`MultitaskError` (a `tt_zoo.training.RunError`) naming the flag, and nothing calls ``sys.exit``.

Example (a notebook; tasks from task files need no data folder)::

    from tt_zoo.training import MultitaskConfig, multitask
    config = MultitaskConfig.from_dict({
        "model": {"init": "none", "encoder": "bow_mlp", "embedding_dim": 64, "vocab": "vocab.txt"},
        "tasks": {"task": ["jsonl:a.jsonl"]}, "training": {"steps": 50, "batch_size": 16}})
    record = multitask(config)
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from tt_zoo.errors import TtZooError
from tt_zoo.training import initial_models
from tt_zoo.training.multi_task_tasks import (ODQA_CACHE, WIKI_QA, Sources, TaskFileError,
                                              class_overrides, load_task, remine, task_key,
                                              task_plan)
from tt_zoo.configs.run_config import RUN_CONFIG_KEY, RunError, recorded_command

COMMAND = "multitask"  # the command whose run this is (its recorded command line)


class MultitaskError(RunError):
    """A multi-task run that cannot go on: an initial model that cannot be loaded or reshaped
    as the settings ask, a checkpoint of other settings in the workdir, a malformed task file;
    the message names the flag (``tt-zoo multitask`` prefixes its name)."""


# -- names and places ------------------------------------------------------------------------

def initial_model(config) -> Optional[str]:
    """The name or path of the model training starts from; None for --init none."""
    given = config.model
    return given.model or (None if given.init == "none" else given.init)


def run_name(config) -> str:
    """--name, else the initial model's name (its last path part) + _multitask."""
    given = config.model
    if given.name:
        return given.name
    source = initial_model(config)
    if source is None:
        return f"none_{given.embedding_dim}_multitask"
    return f"{os.path.basename(source.rstrip('/')) or source}_multitask"


def workdir_of(config) -> str:
    return config.output.workdir or os.path.join("runs", "multitask", run_name(config))


def default_class(task_classes: List[str], markers: Dict[str, str]) -> str:
    """The class a query gets when none is named (the card's ``default_task_class``), of the
    tasks' classes in task order: the first QA class ("qa"), else the first task's class."""
    classes = [c for c in task_classes if c in markers]
    return "qa" if "qa" in classes else classes[0]


# -- the tasks --------------------------------------------------------------------------------

def prepare_tasks(config, workdir: pathlib.Path, data_dir, log=print):
    """The tasks of the settings: built or read, few-shot subsampled, re-mined; with the
    sampling weights ({name: W} times the union's) and what re-mined them (None, or its
    `Origin`)."""
    specs, weights, few_shot = task_plan(config.tasks)
    progress = not config.output.no_progress
    sources = Sources(specs, config.tasks, progress, log, data_dir=data_dir)
    cache = pathlib.Path(config.tasks.task_cache or workdir / "tasks")
    if any(s.kind == "curatedtrec" for s in specs):
        bar = "!" * 78
        print(f"{bar}\nWARNING: --task curatedtrec trains on CuratedTREC train, one of the two "
              "ODQA validation sets\n(tt_zoo.evaluation.odqa.VALIDATION): this model's scores "
              "on it are no longer held out,\nand settings chosen on them are chosen on "
              f"training data.\n{bar}", file=sys.stderr)
    tasks = []
    for spec in specs:
        try:
            task = load_task(spec, sources, cache, log)
        except TaskFileError as e:
            raise MultitaskError(str(e)) from None
        if spec.name in few_shot:
            task = task.subsample(few_shot[spec.name], seed=config.training.seed)
            log(f"Task {spec.name}: few-shot, {len(task):,} examples (seed "
                f"{config.training.seed})")
        tasks.append(task)
    origin = None
    if config.tasks.remine_with:
        from tt_zoo.artifacts.model_card import Origin  # noqa: PLC0415

        miner = _load_miner(config.tasks.remine_with)
        origin = Origin(source=config.tasks.remine_with, name=miner.name,
                        sha256=miner.metadata.get("sha256"))
        for i, spec in enumerate(specs):
            if spec.kind in WIKI_QA:
                key = {"task": task_key(spec, sources), "few_shot": few_shot.get(spec.name),
                       "few_shot_seed": config.training.seed,
                       "remined_with": {"source": config.tasks.remine_with,
                                        "sha256": origin.sha256}}
                tasks[i] = remine(tasks[i], spec, sources, miner, cache, key, log)
    if config.tasks.positives > 1:
        tasks = [t.one_example_per_positive(config.tasks.positives) for t in tasks]
        log(f"One example per positive (up to {config.tasks.positives}): " + ", ".join(
            f"{t.name} {len(t):,}" for t in tasks))
    # Last, so the cached tasks (and re-mined ones) keep the class they were built with.
    overrides = class_overrides(config.tasks, specs)
    for i, task in enumerate(tasks):
        given = overrides.get(specs[i].name)
        if given is not None and given != task.task_class:
            log(f"Task {task.name}: class {given} (--task-class; built as {task.task_class})")
            tasks[i] = dataclasses.replace(task, task_class=given, stats={
                **task.stats, "task_class": f"{given} (--task-class; built as "
                                            f"{task.task_class})"})
    sizes = [len(t) for t in tasks]
    relative = None
    if weights:
        relative = [size * weights.get(t.name, 1.0) for size, t in zip(sizes, tasks)]
    return tasks, relative, origin


def _loaded(load, name_or_path: str, flag: str = ""):
    """``load(name_or_path)``; its error (an unknown name with close matches, a damaged
    export, a failed download) as a `MultitaskError`, after ``flag name_or_path:`` if given."""
    try:
        return load(name_or_path)
    except (KeyError, FileNotFoundError, TtZooError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise MultitaskError(f"{flag} {name_or_path}: {message}" if flag else str(message)) \
            from None


def _load_miner(name_or_path: str):
    """`tt_zoo.load(name_or_path)`, its error a `MultitaskError`."""
    from tt_zoo.zoo.loading import load  # noqa: PLC0415 (TensorFlow)

    return _loaded(load, name_or_path)


# -- the model --------------------------------------------------------------------------------

def model_to_train(config, log=print):
    """(the loaded zoo model or None for --init none, its Keras model, what the card says of
    it)."""
    given = dataclasses.replace(config.model, name=run_name(config))
    source = initial_model(config)
    if source is None:
        model, info = initial_models.build_untrained(given, config.lengths,
                                                     config.training.seed)
        return None, model, info
    return _loaded(lambda name: initial_models.load_pretrained(name, config.lengths, given.name),
                   source, "--init")


def weigh_query_tokens(config, model, data_dir, log=print) -> dict:
    """--query-idf: the model's query-token weights, idf ** ALPHA over the Wikispeedia passages
    (the corpus the shipped models were pretrained on; `tt_zoo.modeling.query_token_weights`),
    the [MASK] tokens --query-mask-weight's. Raises `MultitaskError` for a single-vector
    model, before reading the passages."""
    from tt_zoo.modeling import query_token_weights as qtw  # noqa: PLC0415
    from tt_zoo.data.passage_collection import passage_collection  # noqa: PLC0415

    try:
        qtw.require_query_token_weights(model)
    except TypeError as e:
        raise MultitaskError(str(e)) from None
    corpus = pathlib.Path(data_dir) / "wikispeedia"
    collection = passage_collection(corpus, progress=not config.output.no_progress)
    return qtw.weigh_queries_over_documents(
        model, collection.titles, collection.texts, alpha=config.model.query_idf,
        mask_weight=config.model.query_mask_weight, corpus=f"{corpus} (100-word passages)",
        log=log)

def shaped_model(config, model, task_classes: List[str], log=print):
    """The model to train and its markers ({class: word} or None): with --markers' words in the
    vocabulary, untied towers (--untie-towers), and one query tower per task class
    (--query-towers per-class, `multi_task.with_task_query_towers`; an initial model already
    split so is kept), or the shared tower, refusing an initial model whose query towers are
    per class. Raises `MultitaskError` naming the flag for a model that cannot be so."""
    from tt_zoo.training import multi_task  # noqa: PLC0415

    markers = None
    if config.tasks.markers:
        try:
            model, markers = multi_task.add_task_markers(model, task_classes)
        except ValueError as e:  # e.g. an initial model whose query towers are per class
            raise MultitaskError(f"--markers: {e}") from None
        log(f"Task markers: {markers}")
    if config.tasks.untie_towers and model.share_towers:
        try:
            model = multi_task.untie_towers(model)
        except ValueError as e:  # a late-interaction model
            raise MultitaskError(f"--untie-towers: {e}") from None
        log("Towers untied: the document side has its own copy of the shared tower")
    if config.tasks.query_towers == "shared":
        routes = multi_task.query_tower_routes(model)
        if routes is not None:
            raise MultitaskError(
                f"--init {initial_model(config)} has one query tower per task class "
                f"({', '.join(sorted(routes))}); train it with --query-towers per-class "
                "--markers")
        return model, markers
    default = default_class(task_classes, markers)
    try:
        split = multi_task.with_task_query_towers(model, markers, default)
    except ValueError as e:
        raise MultitaskError(f"--query-towers per-class: {e}") from None
    if split is not model:
        log(f"Query towers: one per task class ({', '.join(sorted(markers))}), copies of the "
            f"initial query tower; unmarked queries go to the {default} tower"
            + ("; the shared tower's weights stay on the document side as its own"
               if model.share_towers else ""))
    return split, markers


def distillation_loss(config, model):
    """The `DistillationLoss` of the settings (``distillation`` group) for `model`: the
    student's scores divided by its own loss temperature (a cosine model's 0.05, else 1), the
    teacher's by --distill-temperature (default: the same)."""
    from tt_zoo.modeling.distillation import DistillationLoss  # noqa: PLC0415
    from tt_zoo.training.query_adaptation_run import default_temperature  # noqa: PLC0415

    given = config.distillation
    student = default_temperature(model)
    return DistillationLoss(given.distill_loss, given.distill_temperature or student, student)


# -- the card and the evaluation ----------------------------------------------------------------

def make_card(config, zoo_model, info: dict, summary: dict, markers, origin, command: str,
              share_towers: bool):
    """The export's card (`tt_zoo.artifacts.model_card.ModelCard`): the model, the run's tasks
    (`MultiTaskRun`), markers and training; for a loaded model, its lineage, whose
    ``model_options`` keep the loaded model's but for `share_towers`, the trained model's (untied
    or split from a shared tower: false). `command`: the command line it records."""
    from tt_zoo.artifacts.model_card import (ModelCard, MultiTaskRun,  # noqa: PLC0415
                                           TaskRecord)

    card = ModelCard.from_dict({k: v for k, v in info.items() if k != "base_model"})
    if zoo_model is not None:  # the lineage: the export training started from
        lineage = zoo_model.card.fine_tuned(
            name=card.name, base_name=zoo_model.name,
            base_path=str(zoo_model.path) if zoo_model.path else None,
            steps=summary["steps_done"],
            finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        card.lineage = lineage.lineage
        options = lineage.architecture.model_options
        card.architecture.model_options = (None if options is None
                                           else {**options, "share_towers": share_towers})
        card.license = lineage.license
    settings = summary["settings"]
    records = [TaskRecord(name=t["name"], task_class=t["task_class"], examples=t["examples"],
                          weight=t["weight"], knowledge_source=t["knowledge_source"] or None,
                          validation=list(t["validation"]),
                          negatives=str(t["stats"].get("negatives") or
                                        "as given (an example without one borrows another "
                                        "example's positive)"),
                          stats=t["stats"]) for t in summary["tasks"]]
    run = card.training
    run.multi_task = MultiTaskRun(tasks=records, markers=markers, batching=settings["batching"],
                                  query_towers=config.tasks.query_towers,
                                  negatives_borrowed=summary["negatives_borrowed"],
                                  remined_with=origin,
                                  distillation=distillation_record(summary),
                                  read_nulls=frozenset() if markers else frozenset({"markers"}))
    if markers:
        card.architecture.task_markers = dict(markers)
        card.architecture.default_task_class = default_class(
            [t["task_class"] for t in summary["tasks"]], markers)
    run.training_data = "multi-task (Maillard et al. 2021): " + " + ".join(
        f"{t.name} ({t.examples:,} examples)" for t in records)
    run.train_steps, run.batch_size = summary["steps_done"], settings["batch_size"]
    run.learning_rate, run.warmup_fraction = settings["learning_rate"], settings["warmup_fraction"]
    run.seed = settings["seed"]
    run.dtype_policy, run.matrix_units = summary.get("dtype_policy"), summary.get("matrix_units")
    run.command, run.run_config = command, config.to_dict()
    result = card.result
    result.resumed_from = summary["resumed_from"] or None
    result.train_wall_time_s = summary["train_wall_time_s"]
    result.train_pairs_per_s = summary["pairs_per_s"]
    result.final_loss = summary["final_loss"]
    return card


def distillation_record(summary: dict):
    """The card's ``multi_task.distillation`` of a run with distillation tasks (None without):
    the loss, K, the temperatures and, per task, the teacher and the teacher-scores file."""
    from tt_zoo.artifacts.model_card import Distillation  # noqa: PLC0415

    setting = summary["settings"].get("distillation")
    if setting is None:
        return None
    files = [{"task": t["name"], "teacher": t["stats"]["teacher"],
              "student": t["stats"]["student"], "scores_file": t["stats"]["scores_file"]}
             for t in summary["tasks"] if "scores_file" in t["stats"]]
    return Distillation(loss=setting["loss"], candidates=setting["candidates"],
                        temperature=setting.get("temperature"),
                        student_temperature=setting.get("student_temperature"),
                        teachers=sorted({f["teacher"]["name"] for f in files}), files=files)


def evaluate(zoo_model, name: str, trained_on: List[str], data_dir, progress: bool,
             log=print) -> Tuple[dict, dict]:
    """ODQA validation answer recall (`odqa.validation_benchmark`) of `zoo_model` (its
    encode_queries adds the default task marker) and of BM25: (results, card tables)."""
    from tt_zoo.evaluation import odqa  # noqa: PLC0415

    t = time.perf_counter()
    benchmark = odqa.validation_benchmark(pathlib.Path(data_dir), progress=progress,
                                          cache_dir=ODQA_CACHE)
    results = {name: benchmark.score_model(zoo_model, progress=progress),
               "BM25": benchmark.score(odqa.bm25_searcher(benchmark.collection))}
    log(odqa.format_table(results, odqa.KS))
    passages = len(benchmark.collection)
    tables = {}
    for set_name, recall in results[name].items():
        if "answerable" not in recall or not recall["answerable"]:
            continue
        about = odqa.SET_DESCRIPTIONS.get(set_name, set_name)
        note = " (trained on)" if set_name in trained_on else ""
        tables[f"ODQA answer recall after multi-task training, {about}{note}, "
               f"{recall['answerable']:,} answerable of {recall['num_questions']:,} questions, "
               f"{passages:,} 100-word Wikispeedia passages (%)"] = {
            row: {k: round(100 * v, 2) for k, v in results[row][set_name].items()
                  if k.startswith("R@")} for row in (name, "BM25")}
    print(f"ODQA evaluation: {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return results, tables


# -- the run ------------------------------------------------------------------------------------

def multitask(config, *, data_dir=None, argv: Sequence[str] = (), log=print) -> dict:
    """Builds the tasks, trains (resuming in the workdir), evaluates (``output.eval``) and
    exports (``output.export``) as `config` says (module docstring); returns (and writes to
    WORKDIR/summary.json and ``output.json_out``) the record of the run.

    `data_dir`: the shared data folder (``$TT_ZOO_DATA``; ``tt-zoo`` passes its default), which
    the named tasks, ``output.eval`` and ``model.query_idf`` read; `argv`: the command line
    (``tt-zoo multitask``'s arguments), recorded; `log`: where progress lines go. Raises
    `MultitaskError` (or `tt_zoo.training.multi_task_tasks.SpecError` for a bad task setting).
    """
    t_start = time.perf_counter()
    argv = list(argv)
    if data_dir is None and (config.output.eval or config.model.query_idf is not None or any(
            s.kind not in ("pairs", "jsonl") for s in task_plan(config.tasks)[0])):
        raise MultitaskError("data_dir: the named tasks, distillation tasks, --eval and "
                             "--query-idf read the shared data folder ($TT_ZOO_DATA); pass it")
    workdir = pathlib.Path(workdir_of(config))
    tasks, weights, origin = prepare_tasks(config, workdir, data_dir, log)

    from tt_zoo.training import loop, multi_task  # noqa: PLC0415 (TensorFlow from here on)
    from tt_zoo.training.precision import (card_record, training_copy,  # noqa: PLC0415
                                           training_policy)
    from tt_zoo.zoo.loading import ZooModel  # noqa: PLC0415

    # Before the model is built: its dropout layers then draw from generators the checkpoints
    # hold, so a resumed run is exact (and finds the objects it saved).
    loop.enable_checkpointable_randomness(config.training.seed)
    zoo_model, model, info = model_to_train(config, log)
    model, markers = shaped_model(config, model, [t.task_class for t in tasks], log)
    if config.model.query_idf is not None:  # on the model trained (markers change its vocabulary)
        weigh_query_tokens(config, model, data_dir, log)
    info = initial_models.with_sizes(model, info, log)
    train = config.training
    try:
        policy = training_policy(model, config.compute.precision)
        log(f"Precision: {policy} (--precision {config.compute.precision})")
        with training_copy(model, config.compute.precision) as trained_model:
            summary = multi_task.train_multi_task(
                trained_model, tasks, steps=train.steps, batch_size=train.batch_size,
                learning_rate=train.learning_rate, workdir=str(workdir), weights=weights,
                batching=config.tasks.batching, markers=markers,
                warmup_fraction=train.warmup_fraction, seed=train.seed,
                checkpoint_every=config.output.checkpoint_every,
                progress=not config.output.no_progress,
                distillation=distillation_loss(config, model),
                distill_candidates=config.distillation.distill_candidates, log=log)
    except TtZooError as e:  # a checkpoint of other settings in the workdir; TT_ZOO_PRECISION;
        raise MultitaskError(str(e)) from None  # a model or a task distillation cannot train
    summary.update(card_record(policy))
    card = make_card(config, zoo_model, info, summary, markers, origin,
                     recorded_command(COMMAND, argv),
                     share_towers=bool(model.share_towers))
    trained = ZooModel(model, metadata=card.to_dict())  # encode_queries adds the marker
    scores = None
    if config.output.eval:
        trained_on = [WIKI_QA[s.kind][0] for s in task_plan(config.tasks)[0]
                      if s.kind in WIKI_QA]
        scores, tables = evaluate(trained, card.name, trained_on, data_dir,
                                  not config.output.no_progress, log)
        card.evaluation.metrics = tables
    if config.output.export:
        from tt_zoo.artifacts.export import export_saved_model  # noqa: PLC0415
        export_saved_model(model, config.output.export, card.to_dict())
        log(f"Exported the multi-task model to {config.output.export}")

    wall = time.perf_counter() - t_start
    output = {"name": card.name, "workdir": str(workdir), "model": info,
              "tasks": summary["tasks"], "markers": markers,
              "default_task_class": card.architecture.default_task_class,
              "query_towers": config.tasks.query_towers,
              "task_classes": {t.name: t.task_class for t in tasks},
              "train": summary, "odqa": scores, "export": config.output.export, "argv": argv,
              RUN_CONFIG_KEY: config.to_dict(), "wall_seconds": round(wall, 1)}
    from tt_zoo.atomic_io import write_json  # noqa: PLC0415
    write_json(workdir / "summary.json", output)
    if config.output.json_out:
        write_json(config.output.json_out, output)
        log(f"Wrote {config.output.json_out}")
    log(f"Wall time: {wall:.1f} s ({summary['steps_done']} steps of {train.batch_size}, "
        f"{len(tasks)} tasks: " + ", ".join(f"{t.name} {len(t):,}" for t in tasks) + ")")
    return output
