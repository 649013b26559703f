"""Train one retriever on several tasks at once (Maillard et al. 2021), resumable, and export it.

Multi-task DPR (Maillard et al. 2021, *Multi-task Retrieval for Knowledge-Intensive Tasks*,
Sec. 3-4) trains one query and one passage encoder on the union of several tasks' training
sets, each example a (query, positive passage, one BM25 "hard confounder") triple
(`tt_zoo.training.multi_task`); optionally with one marker word per task class prepended to the
queries (--markers, Sec. 4.3), with one query tower per task class picked by that marker
(--query-towers per-class, Sec. 4.3's task-specific query encoders; `TaskRoutedTower`) and with
confounders re-mined by a trained model (--remine-with, Sec. 4.4, "adversarial confounder
selection"). The tasks (--task SPEC, repeatable):

  webquestions        WebQuestions trainmodel over Wikispeedia cut into 100-word passages
                      ($TT_ZOO_DATA): positives = the answer-holding passages of BM25's top 100
                      (DPR's rule), one BM25 confounder holding no answer
  curatedtrec         CuratedTREC train, built the same way. It is one of the two ODQA
                      validation sets: a model trained on it is not validated on it any more
  reqa                the training part of a ReQA-SQuAD(dev) cold-start split
                      (--reqa-train-fraction, --split-seed): gold candidate + BM25 confounder
  lexical[:N]         BM25 as the teacher (SPAR's lexical model, Chen et al. 2021): N (100,000)
                      word spans of random Wikispeedia passages as queries, BM25's top 3
                      passages as positives, its passage at a rank in [8, 20) as confounder;
                      no question set is read
  pairs:DIR[:MAX]     a pair directory (tt-zoo make-pairs), its first MAX pairs, with its
                      stored BM25 negative (mined and stored beside the pairs the first time)
  jsonl:PATH[:CLASS]  any task file: one {"query", "positives", "negatives"?, "answers"?} a
                      line (tt_zoo.data.tasks.read_task_jsonl); CLASS (default qa) is its task
                      class, e.g. self_supervised

A task's NAME (for --weight, --few-shot and --task-class) is the spec's word, the pair
directory's name, or the task file's name without .jsonl. A task's class (one marker, and with
--query-towers per-class one query tower, per class) is qa for the named tasks,
self_supervised for pairs, CLASS for a task file, or --task-class NAME=CLASS's. Tasks built
from a collection (webquestions, curatedtrec, reqa, lexical, and any re-mined task) are cached in
WORKDIR/tasks/NAME.jsonl (or --task-cache), with NAME.json beside it recording what defines the
task; a rerun reads them back. --positives N makes each of an example's first N positives an
example of its own. Training checkpoints in WORKDIR/checkpoints: the same command resumes a
killed run exactly.

Examples:
  tt-zoo multitask --init bow_mlp_ict_bfs_wlp_512 --task webquestions --task reqa \\
      --steps 800 --batch-size 128 --learning-rate 5e-4 --eval --export runs/models/mt
  tt-zoo multitask --init none --encoder bow_mlp --embedding-dim 128 --task jsonl:a.jsonl \\
      --task jsonl:b.jsonl:self_supervised --markers --weight b=2 --few-shot a=128 --steps 200
  tt-zoo multitask --init bow_mlp_ict_bfs_wlp_512 --task webquestions --task reqa \\
      --task-class reqa=sentence_qa --markers --query-towers per-class --steps 800

--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `MultitaskConfig`); flags given with it override it.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import pathlib
import sys
import time
from typing import Dict, List, Optional, Tuple

from tt_zoo.cli import finetune, numbers, parsing
from tt_zoo.cli.common import (SequenceLengthArguments, TrainOutputArguments, check_init_vocab,
                               check_model_export_target, check_query_weight_flags,
                               default_data_dir, default_squad_path,
                               weigh_colbert_queries)
from tt_zoo.cli.multitask_tasks import (COMMAND, ODQA_CACHE, SPEC_FORMS, WIKI_QA, Sources,
                                        SpecError, TaskSpec, load_task, parse_task_specs,
                                        remine, task_key)
from tt_zoo.cli.run_config import RUN_CONFIG_KEY, RunConfig, option, recorded_command
from tt_zoo.data.tasks import BATCHING, QUERY_TOWERS
from tt_zoo.errors import TtZooError


@dataclasses.dataclass(frozen=True)
class ModelArguments(finetune.ModelArguments):
    """The model to train: --init NAME_OR_PATH (a registered model or an export), or --init none
    (towers at their random initialisation, shaped by the flags below, as tt-zoo finetune)."""

    model: Optional[str] = option(
        None, "the same as --init NAME_OR_PATH (tt-zoo finetune's spelling)",
        metavar="NAME_OR_PATH")
    init: Optional[str] = option(
        None, "a registered model name or an export directory (tt_zoo.load), or 'none': towers "
              "at their random initialisation, built here", metavar="NAME_OR_PATH|none")
    name: Optional[str] = option(
        None, "model name written to the export's metadata (default: the initial model's name "
              "+ _multitask; none_DIM_multitask for --init none)")
    query_idf: Optional[float] = option(
        None, "a ColBERT model only: weigh each query token's MaxSim by its idf ** ALPHA over "
              "the Wikispeedia passages ($TT_ZOO_DATA), the [MASK] tokens by "
              "--query-mask-weight (BERTScore's importance weighting, "
              "tt_zoo.modeling.query_token_weights); trained with and kept in the export",
        metavar="ALPHA", number=numbers.QUERY_WEIGHT)
    query_mask_weight: float = option(
        0.0, "with --query-idf: the weight of the query augmentation's [MASK] tokens (1: "
             "ColBERT's)", number=numbers.QUERY_WEIGHT)


@dataclasses.dataclass(frozen=True)
class TaskArguments:
    """The tasks trained on together (Maillard et al. 2021, Sec. 3-4; the forms are listed
    below)."""

    task: Tuple[str, ...] = option((), f"a task: {SPEC_FORMS}", metavar="SPEC")
    weight: Tuple[str, ...] = option(
        (), "W times the task's share of the batches (default 1: the shuffled union, "
            "each task in proportion to its size)", metavar="NAME=W")
    few_shot: Tuple[str, ...] = option(
        (), "train on N of the task's examples, drawn with --seed (Maillard et al.: "
            "128 and 1,024)", metavar="NAME=N")
    markers: bool = option(
        False, "one marker word per task class, added to the vocabulary and prepended to the "
               "queries (Sec. 4.3); recorded in the export, whose encode_queries adds them")
    query_towers: str = option(
        "shared", "shared: one query tower for every task; per-class: one query tower per task "
                  "class, each a copy of the initial one, picked by the query's marker word in "
                  "the graph (Sec. 4.3; needs --markers and tasks of two classes or more); one "
                  "document tower either way", choices=QUERY_TOWERS)
    untie_towers: bool = option(
        False, "a model whose queries and documents share one tower (the CPU-scale BoW-MLP and "
               "tiny BERT) gets a document tower of its own, a copy, so the sides train apart "
               "(multi-task DPR's two encoders; --query-towers per-class unties too)")
    task_class: Tuple[str, ...] = option(
        (), "the task's class instead of its own (e.g. reqa=sentence_qa: the two QA tasks get "
            "two markers, and two towers with --query-towers per-class)", metavar="NAME=CLASS")
    batching: str = option(
        "mixed", "mixed: every batch draws from the tasks by weight (the shuffled union); "
                 "homogeneous: one task fills a batch", choices=BATCHING)
    remine_with: Optional[str] = option(
        None, "re-mine the confounders of the tasks over Wikispeedia (webquestions, "
              "curatedtrec) with this model: its first top passage holding no answer "
              "(Sec. 4.4)", metavar="NAME_OR_PATH")
    reqa_train_fraction: float = option(
        0.8, "the reqa task: training fraction of the ReQA-SQuAD(dev) cold-start split",
        number=numbers.SPLIT_FRACTION)
    split_seed: int = option(
        0, "seed of the ReQA split and of the confounders' random fallback (tasks are data: "
           "--seed varies the training)", number=numbers.SEED)
    positives: int = option(
        1, "each example's first N positives (answer-holding passages of a QA task) as "
           "examples of their own (1: DPR's rule, the first only)", metavar="N",
        number=numbers.count())
    task_cache: Optional[str] = option(
        None, "where built tasks are kept, keyed by their inputs, for later runs (default: "
              "WORKDIR/tasks; share one across runs to build each task once)")


@dataclasses.dataclass(frozen=True)
class TrainingArguments:
    """Adam with warm-up and linear decay, one confounder per example (Maillard et al. 2021:
    batch 128, learning rate 2e-5)."""

    steps: int = option(1000, "optimizer steps", number=numbers.count())
    batch_size: int = option(128, "examples a step", number=numbers.count())
    learning_rate: float = option(
        2e-5, "Adam peak learning rate (Maillard et al.'s BERT; the BoW-MLP towers take ~5e-4)",
        number=numbers.LEARNING_RATE)
    warmup_fraction: float = option(0.1, "share of the steps spent warming up",
                                    number=numbers.fraction(high_open=True))
    seed: int = option(0, "seed of the batches, of --few-shot and of --init none's weights",
                       number=numbers.SEED)


@dataclasses.dataclass(frozen=True)
class OutputArguments(TrainOutputArguments):
    """Checkpoints (a killed or finished run resumes), the export, the evaluation."""

    workdir: Optional[str] = option(
        None, "checkpoints, cached tasks and summary.json (default: runs/multitask/NAME)")
    eval: bool = option(
        False, "ODQA validation answer recall (WebQuestions val + CuratedTREC train over "
               f"Wikispeedia; answers cached in {ODQA_CACHE}) of the trained model, BM25 "
               "beside it")
    json_out: Optional[str] = option(None, "write settings, tasks, training and scores as JSON")


@dataclasses.dataclass(frozen=True)
class MultitaskConfig(RunConfig):
    """Every setting of a `tt-zoo multitask` run; recorded whole in its export and --json-out
    (`RUN_CONFIG_KEY`)."""

    model: ModelArguments
    lengths: SequenceLengthArguments
    tasks: TaskArguments
    training: TrainingArguments
    output: OutputArguments

    ONE_OF = (("model", "init"),)


def add_arguments(p: argparse.ArgumentParser) -> None:
    MultitaskConfig.add_arguments(p)


# -- reading the flags ------------------------------------------------------------------------

def parse_assignments(values, flag: str, names, convert, expected: str) -> Dict[str, object]:
    """{task name: value} of NAME=VALUE flags; raises `SpecError` naming the flag and value
    for a malformed one, a name that is no --task's, or a name given twice."""
    out = {}
    for value in values:
        name, eq, text = value.partition("=")
        if not eq or not name:
            raise SpecError(f"{flag} {value!r}: expected NAME={expected}")
        if name not in names:
            raise SpecError(f"{flag} {value!r}: no task named {name!r} (the tasks given with "
                            f"--task: {', '.join(names)})")
        if name in out:
            raise SpecError(f"{flag} {value!r}: task {name!r} is given twice")
        try:
            out[name] = convert(text)
        except ValueError:
            raise SpecError(f"{flag} {value!r}: expected NAME={expected}") from None
    return out


def _weight(text: str) -> float:
    w = float(text)
    if not math.isfinite(w) or w <= 0:
        raise ValueError(text)
    return w


def _count(text: str) -> int:
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def task_plan(tasks: TaskArguments):
    """(the `TaskSpec`s, {name: weight}, {name: few-shot N}) of the task flags; raises
    `SpecError` naming the flag and value of the first bad one."""
    specs = parse_task_specs(tasks.task)
    names = [s.name for s in specs]
    weights = parse_assignments(tasks.weight, "--weight", names, _weight,
                                "W, W a positive number")
    few_shot = parse_assignments(tasks.few_shot, "--few-shot", names, _count,
                                 "N, N a positive number of examples")
    return specs, weights, few_shot


def class_overrides(tasks: TaskArguments, specs: List[TaskSpec]) -> Dict[str, str]:
    """{task name: class} of the --task-class flags (`tt_zoo.data.tasks.check_task_class`);
    raises `SpecError` naming the flag and value of a bad one."""
    from tt_zoo.data.tasks import check_task_class  # noqa: PLC0415 (numpy only)

    return parse_assignments(tasks.task_class, "--task-class", [s.name for s in specs],
                             check_task_class, "CLASS, CLASS a lower-case word such as qa or "
                                               "sentence_qa")


def run_name(config: MultitaskConfig) -> str:
    """--name, else the initial model's name (its last path part) + _multitask."""
    given = config.model
    if given.name:
        return given.name
    source = initial_model(config)
    if source is None:
        return f"none_{given.embedding_dim}_multitask"
    return f"{os.path.basename(source.rstrip('/')) or source}_multitask"


def initial_model(config: MultitaskConfig) -> Optional[str]:
    """The name or path of the model training starts from; None for --init none."""
    given = config.model
    return given.model or (None if given.init == "none" else given.init)


def workdir_of(config: MultitaskConfig) -> str:
    return config.output.workdir or os.path.join("runs", "multitask", run_name(config))


def parse_args(argv=None) -> MultitaskConfig:
    p = parsing.command_parser(COMMAND, __doc__, add_arguments)
    args = MultitaskConfig.parse(p, argv)
    if not args.task:
        p.error(f"give at least one --task SPEC ({SPEC_FORMS})")
    try:
        tasks = MultitaskConfig.from_namespace(args).tasks
        specs, _, _ = task_plan(tasks)
        overrides = class_overrides(tasks, specs)
    except SpecError as e:
        p.error(str(e))
    if args.query_towers == "per-class":
        if not args.markers:
            p.error("--query-towers per-class picks each query's tower by its task class's "
                    "marker word: give --markers too")
        classes = sorted({overrides.get(s.name, s.task_class) for s in specs})
        if len(classes) < 2:
            p.error(f"--query-towers per-class: every task is of class {classes[0]!r}, and one "
                    "query tower for one class is the shared tower (--query-towers shared); "
                    "give tasks of two classes, e.g. --task-class reqa=sentence_qa")
    data = default_data_dir()
    for s in specs:
        needed = []
        if s.kind in WIKI_QA:
            from tt_zoo.evaluation.odqa import NAMED_SETS  # noqa: PLC0415 (numpy only)
            needed = [data / "odqa" / NAMED_SETS[WIKI_QA[s.kind][0]], data / "wikispeedia"]
        elif s.kind == "reqa":
            needed = [pathlib.Path(default_squad_path())]
        elif s.kind == "lexical":
            needed = [data / "wikispeedia"]
        for path in needed:
            if not path.exists():
                parsing.exit_missing(p, f"--task {s.spec}: {path} does not exist (set "
                                        "TT_ZOO_DATA to the shared data folder)")
        if s.kind in ("pairs", "jsonl") and not os.path.exists(s.path):
            p.error(f"--task {s.spec!r}: {s.path} does not exist")
    if args.remine_with and not any(s.kind in WIKI_QA for s in specs):
        p.error(f"--remine-with re-mines the confounders of the tasks over Wikispeedia "
                f"({', '.join(WIKI_QA)}); no --task is one of them")
    if args.query_idf is not None:
        check_query_weight_flags(p, args)
        if not (data / "wikispeedia").exists():
            parsing.exit_missing(p, f"--query-idf: {data / 'wikispeedia'} does not exist (set "
                                    "TT_ZOO_DATA to the shared data folder)")
    check_init_vocab(p, args)
    if args.export:
        check_model_export_target(p, args.export, "--export")
    return MultitaskConfig.from_namespace(args)


def prepare_tasks(config: MultitaskConfig, workdir: pathlib.Path, log=print):
    """The tasks of the flags: built or read, few-shot subsampled, re-mined; with the sampling
    weights ({name: W} times the union's) and what re-mined them (None, or its `Origin`)."""
    specs, weights, few_shot = task_plan(config.tasks)
    progress = not config.output.no_progress
    sources = Sources(specs, config.tasks, progress, log)
    cache = pathlib.Path(config.tasks.task_cache or workdir / "tasks")
    if any(s.kind == "curatedtrec" for s in specs):
        bar = "!" * 78
        print(f"{bar}\nWARNING: --task curatedtrec trains on CuratedTREC train, one of the two "
              "ODQA validation sets\n(tt_zoo.evaluation.odqa.VALIDATION): this model's scores "
              "on it are no longer held out,\nand settings chosen on them are chosen on "
              f"training data.\n{bar}", file=sys.stderr)
    tasks = []
    for spec in specs:
        task = load_task(spec, sources, cache, log)
        if spec.name in few_shot:
            task = task.subsample(few_shot[spec.name], seed=config.training.seed)
            log(f"Task {spec.name}: few-shot, {len(task):,} examples (seed "
                f"{config.training.seed})")
        tasks.append(task)
    origin = None
    if config.tasks.remine_with:
        from tt_zoo.cli.common import load_model  # noqa: PLC0415
        from tt_zoo.serving.model_card import Origin  # noqa: PLC0415

        miner = load_model(config.tasks.remine_with, COMMAND)
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


# -- the model, the card, the evaluation -------------------------------------------------------

def model_to_train(config: MultitaskConfig):
    """(the loaded zoo model or None for --init none, its Keras model, what the card says of
    it), by tt-zoo finetune's functions."""
    given = dataclasses.replace(config.model, name=run_name(config))
    source = initial_model(config)
    if source is None:
        zoo_model, (model, info) = None, finetune.build_untrained(
            given, config.lengths, config.training.seed)
    else:
        try:
            zoo_model, model, info = finetune.load_pretrained(source, config.lengths,
                                                              given.name)
        except KeyError as e:  # an unknown name, with close matches
            sys.exit(f"tt-zoo {COMMAND}: --init {source}: {e.args[0] if e.args else e}")
        except (FileNotFoundError, TtZooError) as e:
            sys.exit(f"tt-zoo {COMMAND}: --init {source}: {e}")
    return zoo_model, model, info


def weigh_query_tokens(config: MultitaskConfig, model) -> None:
    """--query-idf: the model's query-token weights, idf ** ALPHA over the Wikispeedia passages
    (the corpus the shipped models were pretrained on; `common.weigh_colbert_queries`)."""
    from tt_zoo.evaluation.odqa import passage_collection  # noqa: PLC0415

    corpus = default_data_dir() / "wikispeedia"
    collection = passage_collection(corpus, progress=not config.output.no_progress)
    weigh_colbert_queries(COMMAND, model, collection.titles, collection.texts,
                          alpha=config.model.query_idf,
                          mask_weight=config.model.query_mask_weight,
                          corpus=f"{corpus} (100-word passages)")


def query_towers_of(config: MultitaskConfig, model, markers, task_classes: List[str],
                    log=print):
    """The model to train with --query-towers: per-class splits the query tower into one per
    task class (`multi_task.with_task_query_towers`; an initial model already split so is kept);
    shared keeps it, and refuses an initial model whose query towers are per class. Exits
    naming the flag when the model cannot be split (a late-interaction model)."""
    from tt_zoo.training import multi_task  # noqa: PLC0415

    if config.tasks.query_towers == "shared":
        routes = multi_task.query_tower_routes(model)
        if routes is not None:
            sys.exit(f"tt-zoo {COMMAND}: --init {initial_model(config)} has one query tower per "
                     f"task class ({', '.join(sorted(routes))}); train it with "
                     "--query-towers per-class --markers")
        return model
    default = default_class(task_classes, markers)
    try:
        split = multi_task.with_task_query_towers(model, markers, default)
    except ValueError as e:
        sys.exit(f"tt-zoo {COMMAND}: --query-towers per-class: {e}")
    if split is not model:
        log(f"Query towers: one per task class ({', '.join(sorted(markers))}), copies of the "
            f"initial query tower; unmarked queries go to the {default} tower"
            + ("; the shared tower's weights stay on the document side as its own"
               if model.share_towers else ""))
    return split


def make_card(config: MultitaskConfig, zoo_model, info: dict, summary: dict, markers,
              origin, argv, share_towers: bool):
    """The export's card (`tt_zoo.serving.model_card.ModelCard`): the model, the run's tasks
    (`MultiTaskRun`), markers and training; for a loaded model, its lineage, whose
    ``model_options`` keep the loaded model's but for `share_towers`, the trained model's (untied
    or split from a shared tower: false)."""
    import datetime  # noqa: PLC0415

    from tt_zoo.serving.model_card import (ModelCard, MultiTaskRun,  # noqa: PLC0415
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
    run.command, run.run_config = recorded_command(COMMAND, argv), config.to_dict()
    result = card.result
    result.resumed_from = summary["resumed_from"] or None
    result.train_wall_time_s = summary["train_wall_time_s"]
    result.train_pairs_per_s = summary["pairs_per_s"]
    result.final_loss = summary["final_loss"]
    return card


def default_class(task_classes: List[str], markers: Dict[str, str]) -> str:
    """The class a query gets when none is named (the card's ``default_task_class``), of the
    tasks' classes in task order: the first QA class ("qa"), else the first task's class."""
    classes = [c for c in task_classes if c in markers]
    return "qa" if "qa" in classes else classes[0]


def evaluate(zoo_model, name: str, trained_on: List[str], progress: bool) -> Tuple[dict, dict]:
    """ODQA validation answer recall (`odqa.validation_benchmark`) of `zoo_model` (its
    encode_queries adds the default task marker) and of BM25: (results, card tables)."""
    from tt_zoo.cli.odqa import format_table  # noqa: PLC0415
    from tt_zoo.evaluation import odqa  # noqa: PLC0415

    t = time.perf_counter()
    benchmark = odqa.validation_benchmark(default_data_dir(), progress=progress,
                                          cache_dir=ODQA_CACHE)
    results = {name: benchmark.score_model(zoo_model, progress=progress),
               "BM25": benchmark.score(odqa.bm25_searcher(benchmark.collection))}
    print(format_table(results, odqa.KS))
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


# -- the command ------------------------------------------------------------------------------

def main(argv=None) -> dict:
    return run(parse_args(argv), sys.argv[1:] if argv is None else list(argv))


def run(config: MultitaskConfig, argv: list) -> dict:
    """Builds the tasks, trains (resuming in the workdir), evaluates (--eval) and exports
    (--export) as `config` says; returns (and writes to WORKDIR/summary.json and --json-out)
    the record of the run. `argv`: the command line, recorded."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    t_start = time.perf_counter()
    workdir = pathlib.Path(workdir_of(config))
    log = print
    tasks, weights, origin = prepare_tasks(config, workdir, log)

    from tt_zoo.training import loop, multi_task  # noqa: PLC0415 (TensorFlow from here on)
    from tt_zoo.zoo.loading import ZooModel  # noqa: PLC0415

    # Before the model is built: its dropout layers then draw from generators the checkpoints
    # hold, so a resumed run is exact (and finds the objects it saved).
    loop.enable_checkpointable_randomness(config.training.seed)
    zoo_model, model, info = model_to_train(config)
    markers = None
    if config.tasks.markers:
        try:
            model, markers = multi_task.add_task_markers(model, [t.task_class for t in tasks])
        except ValueError as e:  # e.g. an initial model whose query towers are per class
            sys.exit(f"tt-zoo {COMMAND}: --markers: {e}")
        log(f"Task markers: {markers}")
    if config.tasks.untie_towers and model.share_towers:
        try:
            model = multi_task.untie_towers(model)
        except ValueError as e:  # a late-interaction model
            sys.exit(f"tt-zoo {COMMAND}: --untie-towers: {e}")
        log("Towers untied: the document side has its own copy of the shared tower")
    model = query_towers_of(config, model, markers, [t.task_class for t in tasks], log)
    if config.model.query_idf is not None:  # on the model trained (markers change its vocabulary)
        weigh_query_tokens(config, model)
    info = finetune.with_sizes(model, info)
    train = config.training
    try:
        summary = multi_task.train_multi_task(
            model, tasks, steps=train.steps, batch_size=train.batch_size,
            learning_rate=train.learning_rate, workdir=str(workdir), weights=weights,
            batching=config.tasks.batching, markers=markers,
            warmup_fraction=train.warmup_fraction, seed=train.seed,
            checkpoint_every=config.output.checkpoint_every,
            progress=not config.output.no_progress, log=log)
    except TtZooError as e:  # a checkpoint of other settings in the workdir
        sys.exit(f"tt-zoo {COMMAND}: {e}")
    card = make_card(config, zoo_model, info, summary, markers, origin, argv,
                     share_towers=bool(model.share_towers))
    trained = ZooModel(model, metadata=card.to_dict())  # encode_queries adds the marker
    scores = None
    if config.output.eval:
        trained_on = [WIKI_QA[s.kind][0] for s in task_plan(config.tasks)[0]
                      if s.kind in WIKI_QA]
        scores, tables = evaluate(trained, card.name, trained_on,
                                  not config.output.no_progress)
        card.evaluation.metrics = tables
    if config.output.export:
        from tt_zoo.serving.export import export_saved_model  # noqa: PLC0415
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


if __name__ == "__main__":
    main()
