"""results/multi_task.{md,json,png}: Maillard et al. 2021's experiments at our scale (issue 24).

One retriever trained on several tasks at once (`tt_zoo.training.multi_task`), against
task-specific models, left-one-out (zero-shot on the task left out), with and without task
markers, one shared query tower against one per task class (Sec. 4.3: the "towers"
experiment, reqa made a class of its own, ``sentence_qa``, whose ReQA test questions are then
encoded with its marker), with confounders re-mined by the trained model (Sec. 4.4), and
few-shot curves on WebQuestions from several starting points, BM25 beside every table.

Tasks (`tt_zoo.mining.task_sources`):

* ``webquestions``: WebQuestions trainmodel over Wikispeedia cut into 100-word passages with
  titles; positives = answer-holding passages of BM25's top 100 (DPR's rule), one BM25
  confounder holding no answer.
* ``reqa``: the training part of ReQA-SQuAD(dev)'s 0.8 cold-start split (seed 0), gold
  (sentence, passage) candidates, one BM25 confounder.
* ``lexical``: BM25 as the teacher (SPAR's lexical model, Chen et al. 2021): 100,000 word spans
  of random Wikispeedia passages as queries, BM25's top passages as positives, a passage it ranks
  8th-19th as the confounder (`task_sources.lexical_task`); no question set is read. Drawn at
  LEXICAL_WEIGHT times its share by size (the "lexical" experiment).
* ``selfsup``: the first 10,000 pairs of the six-source pair set (ICT, BFS, WLP, crop, span,
  qgen; `runs/pairs/ict_bfs_wlp_crop_span_qgen`, made by the starting model's recipe), one
  stored BM25 confounder.

Evaluation, never trained on: the ODQA validation questions (WebQuestions val + CuratedTREC
train, answer recall over the same 100-word passages, and R-precision) and ReQA: the split's
test questions against all 10,255 candidates. WebQuestions devtest (held out of trainmodel)
picks nothing here.

Every cell is cached in ``runs/multi_task/cells/KEY.json`` (a rerun only trains what is
missing) and trains resumably in ``runs/multi_task/work/KEY``; the keys, the cache and the
report's files are the shared grid runner's (`tt_zoo.reproduction.runner`).

  python -m benchmarks.multi_task --experiments main,markers,positives,loo,remine --seeds 0
  python -m benchmarks.multi_task --experiments decide --seeds 1,2   # what decides the ship
  python -m benchmarks.multi_task --experiments towers --seeds 0,1,2  # shared vs per-class
  python -m benchmarks.multi_task --experiments short --seeds 0,1,2
  python -m benchmarks.multi_task --experiments lexical --seeds 0,1,2  # + BM25 as a teacher
  python -m benchmarks.multi_task --experiments fewshot --seeds 0
  python -m benchmarks.multi_task --report-only
"""

from __future__ import annotations

import functools
import math
import os
import pathlib
import sys
import types

from tt_zoo.configs.multitask import ODQA_CACHE
from tt_zoo.reproduction import runner  # the grid's mechanics; no TensorFlow
from tt_zoo.zoo.registry import MULTITASK_LEXICAL_RUN, MULTITASK_RUN

from benchmarks import arguments

REPO = arguments.REPO
RUNS = REPO / "runs" / "multi_task"
KS = (1, 5, 20, 100)
REQA_KS = (1, 10, 20, 100)
BOW_BEST = "bow_mlp_ict_bfs_wlp_crop_span_qgen_512"
ALL_TASKS = ("webquestions", "reqa", "selfsup")
SHIPPED_NAME = f"multitask_{BOW_BEST}"
LEXICAL_SHIPPED_NAME = f"multitask_lexical_{BOW_BEST}"
# The schedule of every cell: the BoW-MLP's is the shipped name's recipe (chosen on the
# validation questions, see the report); the tiny BERT's for the few-shot curves.
SCHEDULE = {"bow_mlp": {"steps": MULTITASK_RUN.training.steps,
                        "batch_size": MULTITASK_RUN.training.batch_size,
                        "learning_rate": MULTITASK_RUN.training.learning_rate},
            "bert": {"steps": 400, "batch_size": 64, "learning_rate": 1e-4}}
SELFSUP_PAIRS = 10_000  # the selfsup task: the pair set's first pairs
POSITIVES = 5  # the "positives" experiment: each question's first 5 positives as examples
# The "towers" experiment: reqa's sentence-level questions as a class of their own, so the two QA
# tasks get two markers and, with --query-towers per-class, two query towers.
TOWERS_CLASSES = {"reqa": "sentence_qa"}
# The "lexical" experiment: the lexical task (100,000 examples) at the shipped recipe's weight
# (0.3) times its share by size, about 3/4 of each batch beside the 9,021 examples of the two QA
# tasks (0.1 and 0.3 scored alike on the validation questions, as did 800 and 2,400 steps).
LEXICAL_WEIGHT = float(dict(w.split("=") for w in MULTITASK_LEXICAL_RUN.tasks.weight)["lexical"])
# The pair set the starting model's recipe makes (`tt-zoo list` prints its command).
PAIRS = REPO / "runs" / "pairs" / "ict_bfs_wlp_crop_span_qgen"
# n = 0 (the starting model), 128, 1,024, all (None); the tiny BERT's cells cost ~10x more.
FEW_SHOT = {"bow_mlp": (0, 128, 1024, None), "bert": (0, 128, None)}
FEW_SHOT_EPOCHS, FEW_SHOT_MIN_STEPS = 10, 50
WEBQUESTIONS_EXAMPLES = 1411  # trainmodel questions with a positive in BM25's top 100
FEW_SHOT_INITS = {"bow_mlp": ("bow_mlp_none_512", "bow_mlp_ict_bfs_wlp_512", BOW_BEST),
                  "bert": ("none_512", "mlm_512", "ict_bfs_wlp_512")}


# -- the shared data ----------------------------------------------------------------------------

class World:
    """What the scores need, loaded once: the ODQA validation benchmark (its answer rows
    cached in runs/odqa_cache), ReQA-SQuAD(dev) and its 0.8 cold-start split, BM25."""

    def __init__(self, log=print):
        from tt_zoo.evaluation import odqa, reqa as reqa_lib

        watch = runner.Stopwatch()
        d = arguments.data_dir()
        self.bench = odqa.validation_benchmark(d, cache_dir=REPO / ODQA_CACHE)
        self.collection = self.bench.collection
        self.reqa = reqa_lib.build_reqa(d / "squad" / "dev-v1.1.json")
        self.split = reqa_lib.make_splits(self.reqa, 0.8, seed=0)  # the reqa task's split
        self.bm25 = odqa.bm25_searcher(self.collection)
        # Held out of trainmodel, never trained on: it picks the fusion weight.
        self.devtest = odqa.Benchmark.build(
            d / "wikispeedia", [odqa.load_question_set("webquestions-devtest", d)],
            cache_dir=REPO / ODQA_CACHE).sets[0]
        log(f"data ready in {watch}: {len(self.collection):,} passages, "
            f"{len(self.split.test):,} ReQA test questions")


# -- scoring ------------------------------------------------------------------------------------

def odqa_scores(world: World, searcher) -> dict:
    """Answer recall and R-precision of a text-query searcher per validation set and all."""
    import numpy as np
    from tt_zoo.evaluation import odqa

    out, all_rows, all_gold = {}, [], []
    for s in world.bench.sets:
        result = searcher.search([q.text for q in s.questions], max(KS))
        rows = np.full((len(s.questions), max(KS)), -1, np.int64)
        rows[:, :result.rows.shape[1]] = result.rows
        out[s.name] = {**odqa.answer_recall(rows, s.rows, KS),
                       "R-precision": odqa.r_precision(rows, s.rows)}
        all_rows.append(rows)
        all_gold.extend(s.rows)
    rows = np.concatenate(all_rows)
    out["all"] = {**odqa.answer_recall(rows, all_gold, KS),
                  "R-precision": odqa.r_precision(rows, all_gold)}
    return out


def as_task_class(encoder, task_class=None):
    """`encoder` (a `ZooModel`) with its queries encoded as `task_class`'s (its marker first, so
    a per-class model's tower of that class: `ZooModel.encode_queries(task_class=...)`);
    `encoder` itself for None."""
    if task_class is None:
        return encoder
    return types.SimpleNamespace(
        encode_queries=functools.partial(encoder.encode_queries, task_class=task_class),
        encode_documents=encoder.encode_documents)


def score(world: World, encoder=None, reqa_task_class=None) -> dict:
    """ODQA (`odqa_scores`) and ReQA test R@k of a model (BM25's when `encoder` is None), and
    the model fused with BM25: a convex combination of normalised scores
    (`tt_zoo.retrieval.fusion`), its weight chosen on WebQuestions devtest's R@20.
    `reqa_task_class`: the ReQA questions are encoded as this task class's (its marker, and its
    query tower; `ZooModel.encode_queries(task_class=...)`); None: the model's default class."""
    import numpy as np
    from tt_zoo.retrieval import fusion
    from tt_zoo.evaluation import metrics as retrieval_metrics, odqa
    from tt_zoo.retrieval.search import ExactSearcher, QueryEncodingSearcher

    watch = runner.Stopwatch()
    if encoder is None:
        out = odqa_scores(world, world.bm25)
        reqa = retrieval_metrics.evaluate_bm25(world.reqa, world.split.test, ks=REQA_KS)["exact"]
    else:
        embeddings = encoder.encode_documents(world.collection.texts,
                                              titles=world.collection.titles)
        dense = QueryEncodingSearcher(encoder.encode_queries, ExactSearcher(
            np.asarray(embeddings), world.collection.ids))
        out = odqa_scores(world, dense)
        reqa = retrieval_metrics.evaluate_encoder(as_task_class(encoder, reqa_task_class),
                                                  world.reqa, world.split.test,
                                                  ks=REQA_KS)["exact"]
        if reqa_task_class is not None:
            out["reqa_task_class"] = reqa_task_class
        devtest = world.devtest
        choice = fusion.choose_fusion_weight(
            world.bm25, dense, [q.text for q in devtest.questions],
            lambda rows: odqa.answer_recall(rows, devtest.rows, (20,))["R@20"], k=max(KS))
        fused = fusion.FusionSearcher(world.bm25, dense, method="convex", weight=choice.weight)
        out["fused_with_bm25"] = {"bm25_weight": choice.weight,
                                  **odqa_scores(world, fused)["all"]}
    out["reqa"] = {f"R@{k}": reqa[f"R@{k}"] for k in REQA_KS}
    out["seconds"] = round(watch.seconds, 1)
    return out


# -- cells ----------------------------------------------------------------------------------------

def encoder_family(init: str) -> str:
    return "bow_mlp" if init.startswith("bow_mlp") else "bert"


def cell_key(cell: dict) -> str:
    """A cell's file name: its name and a hash of all its settings (`runner.spec_key`)."""
    return runner.spec_key(cell["name"], cell)


def make_cell(name, init, tasks, *, seed=0, markers=False, few_shot=None, remine_from=None,
              weights=None, positives=1, task_classes=None, query_towers="shared",
              untie_towers=False,
              **schedule) -> dict:
    cell = {"name": name, "init": init, "tasks": list(tasks), "seed": seed, "markers": markers,
            "few_shot": few_shot, "remine_from": remine_from, "weights": weights,
            **{**SCHEDULE[encoder_family(init)], **schedule}}
    # (Each absent at its default: the cells recorded before the option keep their keys.)
    if positives > 1:
        cell["positives"] = positives
    if task_classes:  # {task: class}, `tt-zoo multitask --task-class`
        cell["task_classes"] = dict(task_classes)
    if query_towers != "shared":
        cell["query_towers"] = query_towers
    if untie_towers:
        cell["untie_towers"] = True
    return cell


def task_spec(name: str) -> str:
    """The `tt-zoo multitask --task` of a task of this benchmark."""
    return f"pairs:{PAIRS}:{SELFSUP_PAIRS}" if name == "selfsup" else name


def cell_argv(cell: dict, key: str) -> list:
    """The `tt-zoo multitask` command line of a cell."""
    argv = ["--init", cell["init"], "--steps", str(cell["steps"]),
            "--batch-size", str(cell["batch_size"]),
            "--learning-rate", str(cell["learning_rate"]), "--seed", str(cell["seed"]),
            "--workdir", str(RUNS / "work" / key), "--export", str(RUNS / "exports" / key),
            "--task-cache", str(RUNS / "tasks"), "--checkpoint-every", "200", "--no-progress"]
    for name in cell["tasks"]:
        argv += ["--task", task_spec(name)]
    if cell["few_shot"]:
        argv += ["--few-shot", f"webquestions={cell['few_shot']}"]
    if cell["markers"]:
        argv.append("--markers")
    if cell.get("positives", 1) > 1:
        argv += ["--positives", str(cell["positives"])]
    if cell["remine_from"]:
        argv += ["--remine-with", str(RUNS / "exports" / cell["remine_from"])]
    for name, weight in (cell["weights"] or {}).items():
        argv += ["--weight", f"{PAIRS.name if name == 'selfsup' else name}={weight}"]
    for name, task_class in cell.get("task_classes", {}).items():
        argv += ["--task-class", f"{PAIRS.name if name == 'selfsup' else name}={task_class}"]
    if cell.get("query_towers", "shared") != "shared":
        argv += ["--query-towers", cell["query_towers"]]
    if cell.get("untie_towers"):
        argv.append("--untie-towers")
    return argv


def run_cell(world: World, cell: dict, log=print) -> dict:
    """Trains (unless cached) with `tt-zoo multitask` and scores one cell; returns its record.
    A cell with ``few_shot == 0`` is its starting model, scored as it is."""
    key = cell_key(cell)
    return runner.cached_json(RUNS / "cells" / f"{key}.json",
                              functools.partial(_train_and_score, world, cell, key, log))


def _train_and_score(world: World, cell: dict, key: str, log) -> dict:
    """`run_cell`'s record of a cell not scored yet."""
    import tt_zoo
    from tt_zoo.cli import multitask as multitask_cli

    log(f"== {key}: {cell}")
    run = None
    if cell["few_shot"] == 0:
        model = tt_zoo.load(cell["init"])
    else:
        argv = cell_argv(cell, key)
        run = multitask_cli.run(multitask_cli.parse_args(argv), argv)
        model = tt_zoo.load(run["export"])  # its encode_queries adds the task marker, if any
    reqa_class = cell.get("task_classes", {}).get("reqa") if cell["markers"] else None
    record = {"key": key, "cell": cell, "scores": score(world, model, reqa_class),
              "train": run and {k: run[k] for k in ("tasks", "markers", "train", "argv")}}
    s = record["scores"]
    log(f"   ODQA all R@20 {100 * s['all']['R@20']:.1f} (fused with BM25 "
        f"{100 * s['fused_with_bm25']['R@20']:.1f}), WQ val R@20 "
        f"{100 * s['webquestions-val']['R@20']:.1f}, TREC R@20 "
        f"{100 * s['curatedtrec-train']['R@20']:.1f}, ReQA R@1 {100 * s['reqa']['R@1']:.1f}")
    return record


def few_shot_steps(n: int, batch_size: int) -> int:
    """FEW_SHOT_EPOCHS passes over n examples, at least FEW_SHOT_MIN_STEPS steps."""
    return max(FEW_SHOT_MIN_STEPS, math.ceil(FEW_SHOT_EPOCHS * n / batch_size))


# -- experiments ----------------------------------------------------------------------------------

def experiments(names, seeds, init=BOW_BEST):
    """The cells of each experiment, in run order."""
    if "decide" in names:  # the cells that decide what ships, for more seeds
        names = [*names, "markers", "positives", "remine"]
    cells = {}
    for seed in seeds:
        if "decide" in names:
            for name, tasks in (("only-webquestions", ["webquestions"]), ("multi", ALL_TASKS),
                                ("without-selfsup", ["webquestions", "reqa"])):
                cells.setdefault("decide", []).append(make_cell(name, init, tasks, seed=seed))
        if "main" in names:
            for task in ALL_TASKS:
                cells.setdefault("task-specific", []).append(
                    make_cell(f"only-{task}", init, [task], seed=seed))
            cells.setdefault("multi-task", []).append(
                make_cell("multi", init, ALL_TASKS, seed=seed))
        if "markers" in names:
            cells.setdefault("markers", []).append(
                make_cell("multi-markers", init, ALL_TASKS, seed=seed, markers=True))
        if "towers" in names:  # Sec. 4.3: the shipped pair of tasks as two classes
            # per-class also unties the BoW-MLP's shared tower: "untied" is the same without
            # routing, so the two effects show apart
            for towers, untie in (("shared", False), ("shared", True), ("per-class", False)):
                cells.setdefault("towers", []).append(
                    make_cell(f"qa-classes-{'untied' if untie else towers}", init,
                              ["webquestions", "reqa"], seed=seed, markers=True,
                              task_classes=TOWERS_CLASSES, query_towers=towers,
                              untie_towers=untie))
        if "untie" in names:  # the shipped recipe with the document tower untied, nothing else
            cells.setdefault("untie", []).append(
                make_cell("without-selfsup-untied", init, ["webquestions", "reqa"], seed=seed,
                          untie_towers=True))
        if "lexical" in names:  # BM25 as a teacher beside the QA tasks, in two recipes
            for name, classes, untie in (("without-selfsup-lexical", None, False),
                                         ("qa-classes-untied-lexical", TOWERS_CLASSES, True)):
                cells.setdefault("lexical", []).append(
                    make_cell(name, init, ["webquestions", "reqa", "lexical"], seed=seed,
                              markers=bool(classes), task_classes=classes, untie_towers=untie,
                              weights={"lexical": LEXICAL_WEIGHT}))
        if "loo" in names:
            for left in ALL_TASKS:
                cells.setdefault("leave-one-out", []).append(
                    make_cell(f"without-{left}", init, [t for t in ALL_TASKS if t != left],
                              seed=seed))
        if "positives" in names:
            cells.setdefault("positives", []).append(
                make_cell(f"multi-positives{POSITIVES}", init, ALL_TASKS, seed=seed,
                          positives=POSITIVES))
        if "short" in names:  # the shipped pair of tasks at a quarter of the steps
            cells.setdefault("short", []).append(
                make_cell("without-selfsup-200", init, ["webquestions", "reqa"], seed=seed,
                          steps=200))
        if "remine" in names:
            first = make_cell("multi", init, ALL_TASKS, seed=seed)
            cells.setdefault("re-mined", []).append(
                make_cell("multi-remined", init, ALL_TASKS, seed=seed,
                          remine_from=cell_key(first)))
        if "fewshot" in names:
            for family in ("bow_mlp", "bert"):
                batch = SCHEDULE[family]["batch_size"]
                for start in FEW_SHOT_INITS[family]:
                    for n in FEW_SHOT[family]:
                        steps = few_shot_steps(WEBQUESTIONS_EXAMPLES if n is None else n, batch)
                        cells.setdefault("few-shot", []).append(
                            make_cell(f"fewshot-{start}-{'all' if n is None else n}", start,
                                      ["webquestions"], seed=seed, few_shot=n, steps=steps))
    return cells


def main(argv=None):
    p = arguments.parser(__doc__, summary="line")
    p.add_argument("--experiments",
                   default="main,markers,towers,untie,lexical,positives,short,loo,remine,"
                           "fewshot",
                   help="comma-separated: main, markers, towers (shared vs per-class query "
                        "towers), untie (the shipped recipe, towers untied), lexical (BM25 as a "
                        "teacher), positives, short, loo, remine, "
                        "fewshot, and decide (the cells that choose what ships: "
                        "only-webquestions, multi, without-selfsup, markers, positives, remine)")
    p.add_argument("--seeds", default="0")
    p.add_argument("--report-only", action="store_true")
    arguments.add_output(p, REPO / "results" / "multi_task")
    p.add_argument("--record", action="store_true",
                   help=f"write the measured tables of the shipped {SHIPPED_NAME} and "
                        f"{LEXICAL_SHIPPED_NAME} into their cards and their ODQA top-20 into "
                        "tt_zoo/zoo/shipped_models.json")
    args = p.parse_args(argv)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    log = lambda *a: print(*a, flush=True)  # noqa: E731
    if not args.report_only:
        world = World(log)
        runner.cached_json(RUNS / "cells" / "bm25.json", lambda: {
            "key": "bm25", "cell": {"name": "BM25"}, "scores": score(world)})
        cells = experiments(args.experiments.split(","), [int(s) for s in args.seeds.split(",")])
        for group in cells.values():
            for cell in group:
                run_cell(world, cell, log)
    write_report(args.output)
    if args.record:
        records = done_records()
        for name, cell in shipped_cells().items():
            record(records, name, cell)
    return 0


def shipped_cells() -> dict:
    """{shipped name: the cell whose export (seed 0) ships as it}: `SHIPPED_NAME`, the recipe's
    run (`MULTITASK_RUN`), and `LEXICAL_SHIPPED_NAME`, the same with the lexical task
    (`MULTITASK_LEXICAL_RUN`, the "lexical" experiment's shared-tower cell)."""
    return {SHIPPED_NAME: make_cell("without-selfsup", BOW_BEST,
                                    list(MULTITASK_RUN.tasks.task), seed=0),
            LEXICAL_SHIPPED_NAME: make_cell(
                "without-selfsup-lexical", BOW_BEST, list(MULTITASK_LEXICAL_RUN.tasks.task),
                seed=0, weights={"lexical": LEXICAL_WEIGHT})}


def reqa_table(name: str) -> dict:
    """The shipped model's and BM25's R@k and MRR (%) on the 0.8 split's test questions, every
    metric of a card's ReQA table (`tt_zoo.evaluation.metrics.DEFAULT_KS`)."""
    import tt_zoo
    from tt_zoo.evaluation import metrics as retrieval_metrics, reqa as reqa_lib

    reqa = reqa_lib.build_reqa(arguments.squad_path())
    test = reqa_lib.make_splits(reqa, 0.8, seed=0).test  # the reqa task's split
    rows = {name: retrieval_metrics.evaluate_encoder(tt_zoo.load(name), reqa, test)["exact"],
            "BM25": retrieval_metrics.evaluate_bm25(reqa, test)["exact"]}
    return {row: {k: round(100 * v, 2) for k, v in m.items()} for row, m in rows.items()}


def record(records: dict, name: str, cell: dict) -> None:
    """A shipped model's measured tables (its cell's scores, BM25 beside them) into its card,
    and its ODQA validation R@20 into the shipped list (the README's model table)."""
    from tt_zoo.zoo import shipping

    s, b = records[cell_key(cell)]["scores"], records["bm25"]["scores"]
    fused = s["fused_with_bm25"]
    odqa = {name: {f"R@{k}": round(100 * s["all"][f"R@{k}"], 2) for k in KS},
            "BM25": {f"R@{k}": round(100 * b["all"][f"R@{k}"], 2) for k in KS},
            f"convex(BM25 {fused['bm25_weight']:g}, {name})": {
                f"R@{k}": round(100 * fused[f"R@{k}"], 2) for k in KS}}
    reqa = reqa_table(name)
    tables = {
        "ODQA answer recall after multi-task training, validation (WebQuestions val + "
        "CuratedTREC train; CuratedTREC never trained on), 944 answerable of 1,185 questions, "
        "130,638 100-word Wikispeedia passages; BM25's fusion weight chosen on WebQuestions "
        "devtest (%)": odqa,
        "ReQA-SQuAD(dev) after multi-task training, the 0.8 cold-start split's 2,114 test "
        "questions (its training part was a task) against all 10,255 candidates (%)": reqa}
    shipping.record_tables(name, tables, source="benchmarks/multi_task.py",
                           results="results/multi_task.json",
                           summary={"ODQA validation R@20": round(100 * s["all"]["R@20"], 2)})


def done_records() -> dict:
    """{key: record} of every cell scored so far (and BM25's, "bm25")."""
    return runner.read_results(RUNS / "cells")


def write_report(output: pathlib.Path) -> None:
    """OUTPUT.json (every cell's record), OUTPUT.md and OUTPUT.png (the few-shot curves)."""
    records = done_records()
    runner.write_report(output, records, report(records), functools.partial(plot, records))
    print(report(records))


def few_shot_curves(records: dict) -> dict:
    """{starting model: {n: [ODQA R@20 of each seed]}} of the few-shot cells (n = the
    examples trained on: 0, 128, 1,024, or all of webquestions')."""
    curves = {}
    for record in records.values():
        cell = record["cell"]
        if cell.get("name", "").startswith("fewshot-"):
            n = WEBQUESTIONS_EXAMPLES if cell["few_shot"] is None else cell["few_shot"]
            curves.setdefault(cell["init"], {}).setdefault(n, []).append(
                _columns(record["scores"])["ODQA R@20"])
    return curves


def plot(records: dict, path: pathlib.Path) -> None:
    """The few-shot curves (ODQA validation R@20 against WebQuestions examples), BM25 dashed."""
    import statistics

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = few_shot_curves(records)
    if not curves:
        return
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    sizes = sorted({n for by_n in curves.values() for n in by_n})  # evenly spaced on x
    for init, by_n in sorted(curves.items()):
        ns = sorted(by_n)
        ax.plot([sizes.index(n) for n in ns], [statistics.median(by_n[n]) for n in ns],
                marker="o", label=init)
    if "bm25" in records:
        ax.axhline(_columns(records["bm25"]["scores"])["ODQA R@20"], color="k", ls="--",
                   label="BM25")
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"all ({n:,})" if n == WEBQUESTIONS_EXAMPLES else f"{n:,}"
                        for n in sizes])
    ax.set_xlabel("WebQuestions training examples")
    ax.set_ylabel("ODQA validation top-20 answer recall (%)")
    ax.set_title("Few-shot fine-tuning from each starting model")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    runner.save_figure(fig, path, dpi=120)


ROW_ORDER = ("base", "only-webquestions", "only-reqa", "only-selfsup", "multi",
             "without-selfsup", "multi-markers", "qa-classes-shared", "qa-classes-untied",
             "qa-classes-per-class", "without-selfsup-untied", "without-selfsup-lexical",
             "qa-classes-untied-lexical", f"multi-positives{POSITIVES}", "multi-remined",
             "without-selfsup-200", "without-webquestions", "without-reqa")
ROW_NAMES = {"base": "no fine-tuning (the starting model, zero-shot)",
             "only-webquestions": "task-specific: webquestions",
             "only-reqa": "task-specific: reqa", "only-selfsup": "task-specific: selfsup",
             "multi": "multi-task: all three", "multi-markers": "multi-task + task markers",
             "qa-classes-shared": "the two QA tasks as two classes (reqa: sentence_qa; its "
                                  "ReQA questions marked so), task markers, one shared query "
                                  "tower",
             "qa-classes-untied": "the two QA tasks as two classes, task markers, one query "
                                  "tower, the document side untied from it (--untie-towers)",
             "without-selfsup-untied": "the two QA tasks (the shipped recipe), the document "
                                       "tower untied from the query tower (--untie-towers)",
             "qa-classes-per-class": "the two QA tasks as two classes, task markers, one query "
                                     "tower per class (Sec. 4.3)",
             "without-selfsup-lexical": "the two QA tasks (the shipped recipe) + lexical (BM25 "
                                        f"as the teacher, weight {LEXICAL_WEIGHT:g}); seed 0 "
                                        f"ships as `{LEXICAL_SHIPPED_NAME}`",
             "qa-classes-untied-lexical": "the two QA tasks as two classes, task markers, the "
                                          "document tower untied (--untie-towers) + lexical "
                                          f"(BM25 as the teacher, weight {LEXICAL_WEIGHT:g})",
             f"multi-positives{POSITIVES}": f"multi-task, each question's first {POSITIVES} "
                                            "positives as examples",
             "multi-remined": "multi-task, confounders re-mined by round 1 (Sec. 4.4)",
             "without-selfsup-200": "the two QA tasks, 200 steps (a quarter of the schedule)",
             "without-webquestions": "leave-one-out: without webquestions",
             "without-reqa": "leave-one-out: without reqa",
             "without-selfsup": f"multi-task: the two QA tasks (leave-one-out: without "
                                f"selfsup); seed 0 ships as `{SHIPPED_NAME}`"}


def _columns(scores: dict) -> dict:
    """The report's numbers (%) of one cell's scores."""
    cols = {"ODQA R@1": scores["all"]["R@1"], "ODQA R@5": scores["all"]["R@5"],
            "ODQA R@20": scores["all"]["R@20"], "ODQA R@100": scores["all"]["R@100"],
            "ODQA R-prec": scores["all"]["R-precision"],
            "WQ val R@20": scores["webquestions-val"]["R@20"],
            "TREC R@20": scores["curatedtrec-train"]["R@20"],
            "ReQA R@1": scores["reqa"]["R@1"], "ReQA R@20": scores["reqa"]["R@20"],
            "ReQA R@100": scores["reqa"]["R@100"]}
    cols["avg R@20"] = (cols["WQ val R@20"] + cols["TREC R@20"] + cols["ReQA R@20"]) / 3
    fused = scores.get("fused_with_bm25")
    cols["ODQA R@20 fused with BM25"] = fused["R@20"] if fused else float("nan")
    return {k: 100 * v for k, v in cols.items()}


def _cell(values) -> str:
    import statistics
    if any(v != v for v in values):  # NaN: not measured
        return "–"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def _grouped(records: dict, init: str) -> dict:
    """Row name -> list of column dicts (one per seed) for cells starting from `init`."""
    rows = {}
    for record in records.values():
        cell = record["cell"]
        if cell.get("init") != init:
            continue
        name = cell["name"]
        if name == f"fewshot-{init}-0":
            name = "base"
        elif name.startswith("fewshot-"):
            continue
        rows.setdefault(name, []).append(_columns(record["scores"]))
    return rows


def report(records: dict) -> str:
    bm25 = records.get("bm25")
    lines = ["# Multi-task retrieval (Maillard et al. 2021) at our scale", "",
             "Written by `python -m benchmarks.multi_task` from the cells in "
             "`runs/multi_task/cells` (each cell's JSON is in `results/multi_task.json`).", ""]
    main_rows = _grouped(records, BOW_BEST)
    if main_rows:
        seeds = sorted({r["cell"]["seed"] for r in records.values()
                        if r["cell"].get("init") == BOW_BEST and "seed" in r["cell"]})
        head = list(_columns(bm25["scores"]) if bm25 else [])
        lines += [f"## One model on three tasks vs one model per task ({BOW_BEST}, BoW-MLP)",
                  "", f"Seeds {seeds}: median (min-max) where a row has several. ODQA = the "
                  "validation questions (WebQuestions val + CuratedTREC train, 944 answerable), "
                  "answer recall over 130,638 100-word Wikispeedia passages; R-prec = "
                  "R-precision; ReQA = the 0.8 cold-start split's test questions against all "
                  "10,255 candidates; avg R@20 = mean of WQ val, TREC and ReQA R@20; "
                  "fused with BM25 = a convex combination of BM25's and the model's "
                  "normalised scores (`tt_zoo.retrieval.fusion`), BM25's weight chosen on "
                  "WebQuestions devtest (questions held out of trainmodel, never trained on). "
                  "CuratedTREC is never trained on (zero-shot for every row). Every cell (unless "
                  "its row says otherwise): 800 steps of 128 examples, Adam 5e-4 with 10% warm-up and linear decay, "
                  "one confounder each, batches drawn from the union by size (chosen on the "
                  "validation questions with the webquestions-only cell: learning rates 2e-4, "
                  "5e-4 and 1e-3 and 110, 300 or 800 steps all scored within 0.7 points of "
                  "ODQA R@20 of each other).", "",
                  "| model | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
        if bm25:
            lines.append("| BM25 | " + " | ".join(_cell([v]) for v in
                                                    _columns(bm25["scores"]).values()) + " |")
        for name in ROW_ORDER:
            if name in main_rows:
                cols = main_rows[name]
                lines.append(f"| {ROW_NAMES[name]} | " + " | ".join(
                    _cell([c[h] for c in cols]) for h in head) + " |")
        lines.append("")
    fewshot = {}
    for record in records.values():
        cell = record["cell"]
        if cell.get("name", "").startswith("fewshot-"):
            n = cell["few_shot"]
            fewshot.setdefault(cell["init"], {}).setdefault(
                "all" if n is None else n, []).append(_columns(record["scores"]))
    if fewshot:
        sizes = [0, 128, 1024, "all"]
        lines += ["## Few-shot: WebQuestions training questions from several starting points", "",
                  "ODQA validation R@20 (%) after fine-tuning on n WebQuestions trainmodel "
                  "questions that have a BM25 positive (seeded subsample; all = every one, "
                  f"{WEBQUESTIONS_EXAMPLES:,}), alone: {FEW_SHOT_EPOCHS} passes over the n "
                  f"examples, at least {FEW_SHOT_MIN_STEPS} steps; BoW-MLP batch "
                  f"{SCHEDULE['bow_mlp']['batch_size']} at Adam "
                  f"{SCHEDULE['bow_mlp']['learning_rate']:g}, tiny BERT batch "
                  f"{SCHEDULE['bert']['batch_size']} at {SCHEDULE['bert']['learning_rate']:g}; "
                  "10% warm-up, linear decay. Plot: `results/multi_task.png`.", "",
                  "| starting model | " + " | ".join(f"n = {n}" for n in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        if bm25:
            lines.append("| BM25 | " + " | ".join(
                f"{_columns(bm25['scores'])['ODQA R@20']:.1f}" for _ in sizes) + " |")
        for init, by_n in fewshot.items():
            lines.append(f"| {init} | " + " | ".join(
                _cell([c["ODQA R@20"] for c in by_n[n]]) if n in by_n else "–"
                for n in sizes) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
