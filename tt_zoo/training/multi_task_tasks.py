"""The tasks of a multi-task run (Maillard et al. 2021, Sec. 3-4): reading a task spec
(`parse_task_spec`; ``tt-zoo multitask --task``) and the per-task settings (`task_plan`,
`class_overrides`), building the named tasks from the shared data folder (`Sources`,
`build_named_task`: WebQuestions / CuratedTREC over Wikispeedia's 100-word passages, a ReQA
cold-start split), reading pair sets and task files (`load_task`), caching built tasks keyed by
their inputs (`cached_task`), re-mining their confounders with a trained model (`remine`,
Sec. 4.4) and reading teacher-scored candidates as a distillation task (``distill:FILE``,
`tt_zoo.data.distill_task`). The run itself (model, training, card) is `tt_zoo.training.multitask_run`; the
command's flags are `tt-zoo multitask`'s and `tt-zoo train-term-weights`'s.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import re
import time
from typing import Dict, List, Optional

from tt_zoo.configs.multitask import ODQA_CACHE, SPEC_FORMS  # noqa: F401 (the --task forms)
from tt_zoo.errors import TtZooError

WIKI_QA = {"webquestions": ("webquestions-trainmodel", ("webquestions-val",)),
           "curatedtrec": ("curatedtrec-train", ())}  # task -> (question set, validated on)
NAMED_TASKS = (*WIKI_QA, "reqa", "lexical")
LEXICAL_QUERIES = 100_000  # queries of the lexical task unless its spec says (lexical:N)
PASSAGE_WORDS = 100  # DPR's passages (Karpukhin et al. 2020, Sec. 4.1)
TASK_CACHE_VERSION = 1  # bump when a task source builds other examples from the same inputs
# SQuAD v1.1 dev in the data folder (the reqa task's source; the commands' --squad default).
SQUAD_DEV = pathlib.Path("squad") / "dev-v1.1.json"
_TASK_FILE_SUFFIX = re.compile(r"(\.jsonl|\.json|\.npz)?(\.gz|\.bz2)?$", re.IGNORECASE)
FILE_KINDS = ("pairs", "jsonl", "distill")  # the tasks read from a path the spec gives


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One --task: its kind (a named task, "pairs", "jsonl" or "distill"), name and
    source."""

    spec: str
    kind: str
    name: str
    path: Optional[str] = None
    max_pairs: Optional[int] = None
    task_class: str = "qa"
    num_queries: Optional[int] = None  # lexical[:N]


class SpecError(ValueError):
    """A --task, --weight, --few-shot or --task-class value that cannot be read; the message
    says why."""


class TaskFileError(TtZooError):
    """A task file (--task jsonl:PATH) that cannot be read; the message names the --task value,
    the file and the line."""


def task_file_name(path: str) -> str:
    """A task file's name: its file name without .jsonl/.json/.npz and .gz/.bz2."""
    base = os.path.basename(path.rstrip("/"))
    return _TASK_FILE_SUFFIX.sub("", base) or base


def parse_task_spec(spec: str) -> TaskSpec:
    """A --task value (`SPEC_FORMS`) as a `TaskSpec`; raises `SpecError` saying what is wrong."""
    if spec in NAMED_TASKS:
        return TaskSpec(spec, spec, spec,
                        num_queries=LEXICAL_QUERIES if spec == "lexical" else None)
    kind, colon, rest = spec.partition(":")
    if kind == "lexical":
        if not rest.isdigit() or int(rest) < 1:
            raise SpecError(f"lexical:N needs N, a positive number of queries (got {rest!r})")
        return TaskSpec(spec, kind, kind, num_queries=int(rest))
    if not colon or kind not in FILE_KINDS or not rest:
        raise SpecError(f"expected {SPEC_FORMS}")
    if kind == "distill":  # a teacher-scores file (tt-zoo teacher-scores) of QA questions
        return TaskSpec(spec, kind, task_file_name(rest), rest)
    head, colon, tail = rest.rpartition(":")
    if kind == "pairs":
        path, max_pairs = rest, None
        if colon and tail.isdigit():
            path, max_pairs = head, int(tail)
            if max_pairs < 1:
                raise SpecError(f"MAX must be a positive number of pairs (got {tail})")
        elif colon and tail and not os.path.exists(rest):
            raise SpecError(f"MAX must be a positive number of pairs (got {tail!r})")
        return TaskSpec(spec, kind, os.path.basename(path.rstrip("/")) or path, path,
                        max_pairs=max_pairs, task_class="self_supervised")
    path, task_class = rest, "qa"
    if colon and head and not os.path.exists(rest):
        from tt_zoo.data.tasks import check_task_class  # noqa: PLC0415 (numpy only)
        try:
            path, task_class = head, check_task_class(tail)
        except ValueError as e:
            raise SpecError(f"CLASS: {e}") from None
    return TaskSpec(spec, kind, task_file_name(path), path, task_class=task_class)


def parse_task_specs(values) -> List[TaskSpec]:
    """The `TaskSpec`s of the --task values; raises `SpecError` naming the flag and value of
    the first that cannot be read, or of a second task with the same name."""
    specs = []
    for value in values:
        try:
            spec = parse_task_spec(value)
        except SpecError as e:
            raise SpecError(f"--task {value!r}: {e}") from None
        if any(s.name == spec.name for s in specs):
            raise SpecError(f"--task {value!r}: another --task is also named {spec.name!r}; "
                            "task names must be unique (rename a file or directory)")
        specs.append(spec)
    return specs


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


def task_plan(tasks):
    """(the `TaskSpec`s, {name: weight}, {name: few-shot N}) of a run's task settings (`tasks`:
    ``task``, ``weight`` and ``few_shot``, as ``tt-zoo multitask``'s flags give them); raises
    `SpecError` naming the flag and value of the first bad one."""
    specs = parse_task_specs(tasks.task)
    names = [s.name for s in specs]
    weights = parse_assignments(tasks.weight, "--weight", names, _weight,
                                "W, W a positive number")
    few_shot = parse_assignments(tasks.few_shot, "--few-shot", names, _count,
                                 "N, N a positive number of examples")
    return specs, weights, few_shot


def class_overrides(tasks, specs: List[TaskSpec]) -> Dict[str, str]:
    """{task name: class} of the ``task_class`` settings (--task-class NAME=CLASS,
    `tt_zoo.data.tasks.check_task_class`); raises `SpecError` naming the flag and value of a
    bad one."""
    from tt_zoo.data.tasks import check_task_class  # noqa: PLC0415 (numpy only)

    return parse_assignments(tasks.task_class, "--task-class", [s.name for s in specs],
                             check_task_class, "CLASS, CLASS a lower-case word such as qa or "
                                               "sentence_qa")


def needed_files(spec: TaskSpec, data_dir) -> List[pathlib.Path]:
    """The files of the data folder a named task is built from (none for a pair set or a task
    file; the passages a distillation file's rows refer to), so that a run can refuse a missing
    one before it starts."""
    data = pathlib.Path(data_dir)
    if spec.kind == "distill":
        return [data / "wikispeedia"]
    if spec.kind in WIKI_QA:
        from tt_zoo.data.question_sets import NAMED_SETS  # noqa: PLC0415
        return [data / "odqa" / NAMED_SETS[WIKI_QA[spec.kind][0]], data / "wikispeedia"]
    if spec.kind == "reqa":
        return [data / SQUAD_DEV]
    if spec.kind == "lexical":
        return [data / "wikispeedia"]
    return []


# -- building them --------------------------------------------------------------------------------

class Sources:
    """What the named tasks are built from, each built on first use: the Wikispeedia passages
    with the answer rows of the QA training sets (`tt_zoo.data.answer_passages`, answers cached
    in runs/odqa_cache), their BM25 index, ReQA-SQuAD(dev) and its split."""

    def __init__(self, specs: List[TaskSpec], tasks, progress: bool, log=print, *,
                 data_dir):
        """`tasks`: the run's task settings (``split_seed``, ``reqa_train_fraction``: a
        ``tt-zoo multitask`` or ``train-term-weights`` config's group); `data_dir`: the shared
        data folder (``$TT_ZOO_DATA``), which the named tasks are built from (None: pair sets
        and task files only)."""
        self.data = None if data_dir is None else pathlib.Path(data_dir)
        self.squad = None if data_dir is None else str(self.data / SQUAD_DEV)
        self.wiki_sets = [WIKI_QA[s.kind][0] for s in specs if s.kind in WIKI_QA]
        self.tasks, self.progress, self.log = tasks, progress, log
        self._benchmark = self._bm25 = self._reqa = self._collection = None

    @property
    def collection(self):
        """Wikispeedia's 100-word passages (the benchmark's, when it is built)."""
        from tt_zoo.data.passage_collection import passage_collection  # noqa: PLC0415

        if self._benchmark is not None:
            return self._benchmark.collection
        if self._collection is None:
            t = time.perf_counter()
            self._collection = passage_collection(self.data / "wikispeedia", PASSAGE_WORDS,
                                                  progress=self.progress)
            self.log(f"Wikispeedia: {len(self._collection):,} passages of {PASSAGE_WORDS} "
                     f"words ({time.perf_counter() - t:.0f} s)")
        return self._collection

    @property
    def benchmark(self):
        """Wikispeedia's 100-word passages and the answerable questions of the QA sets
        (`tt_zoo.data.answer_passages.AnsweredPassages`)."""
        from tt_zoo.data.answer_passages import answered_passages  # noqa: PLC0415
        from tt_zoo.data.question_sets import load_question_set  # noqa: PLC0415

        if self._benchmark is None:
            t = time.perf_counter()
            sets = [load_question_set(name, self.data) for name in self.wiki_sets]
            self._benchmark = answered_passages(
                self.data / "wikispeedia", sets, PASSAGE_WORDS, progress=self.progress,
                cache_dir=ODQA_CACHE)
            self.log(f"Wikispeedia: {len(self._benchmark.collection):,} passages of "
                     f"{PASSAGE_WORDS} words ({time.perf_counter() - t:.0f} s)")
        return self._benchmark

    def answer_sets(self, kind: str):
        name = WIKI_QA[kind][0]
        return next(s for s in self.benchmark.sets if s.name == name)

    @property
    def bm25(self):
        from tt_zoo.evaluation import odqa  # noqa: PLC0415

        if self._bm25 is None:
            self._bm25 = odqa.bm25_searcher(self.benchmark.collection)
        return self._bm25

    @property
    def reqa(self):
        """(ReQA-SQuAD(dev), its cold-start split, the split's description)."""
        if self._reqa is None:
            from tt_zoo.evaluation import reqa as reqa_lib  # noqa: PLC0415

            reqa = reqa_lib.build_reqa(self.squad)
            fraction, seed = self.tasks.reqa_train_fraction, self.tasks.split_seed
            split = reqa_lib.make_splits(reqa, fraction, seed=seed)
            self._reqa = reqa, split, f"ReQA-SQuAD(dev) {fraction:g} cold-start split, seed {seed}"
        return self._reqa


def _file_key(path) -> dict:
    from tt_zoo.manifest import describe_file  # noqa: PLC0415

    return {"path": str(path), **describe_file(path)}


def _articles_key(folder: pathlib.Path) -> dict:
    """The article source by its files' names and sizes (hashing it would take as long as
    building a task)."""
    return {"path": str(folder), "passage_words": PASSAGE_WORDS,
            "files": {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}}


def task_key(spec: TaskSpec, sources: Sources) -> dict:
    """What defines a named task: its source files, settings and the code's version."""
    from tt_zoo.data.question_sets import NAMED_SETS  # noqa: PLC0415

    key = {"version": TASK_CACHE_VERSION, "task": spec.kind, "seed": sources.tasks.split_seed}
    if spec.kind in WIKI_QA:
        key.update(questions=_file_key(sources.data / "odqa" /
                                       NAMED_SETS[WIKI_QA[spec.kind][0]]),
                   articles=_articles_key(sources.data / "wikispeedia"))
    elif spec.kind == "lexical":
        key.update(queries=spec.num_queries, articles=_articles_key(sources.data / "wikispeedia"))
    else:
        key.update(squad=_file_key(sources.squad),
                   train_fraction=sources.tasks.reqa_train_fraction)
    return key


def cached_task(directory: pathlib.Path, name: str, key: dict, build, log=print):
    """The task stored as ``directory/NAME.jsonl`` when ``NAME.json`` beside it records the same
    `key` and the file's sha256; else ``build()``'s, stored there (the JSONL first, the sidecar
    last, each written to a temp file and renamed: a cut-off write is built again)."""
    from tt_zoo.atomic_io import write_json  # noqa: PLC0415
    from tt_zoo.data.tasks import read_task_jsonl, write_task_jsonl  # noqa: PLC0415
    from tt_zoo.manifest import describe_file  # noqa: PLC0415

    path, sidecar = directory / f"{name}.jsonl", directory / f"{name}.json"
    if path.is_file() and sidecar.is_file():
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        if meta.get("key") == key and meta.get("file") == describe_file(path):
            task = read_task_jsonl(path, name=meta["name"], task_class=meta["task_class"],
                                   knowledge_source=meta["knowledge_source"],
                                   validation=meta["validation"])
            log(f"Task {name}: {len(task):,} examples, read from {path}")
            return dataclasses.replace(task, stats=meta["stats"])
        log(f"Task {name}: {path} was built from other inputs or settings; building it anew")
    t = time.perf_counter()
    task = build()
    directory.mkdir(parents=True, exist_ok=True)
    write_task_jsonl(task, path)
    described = task.describe()
    write_json(sidecar, {"key": key, "file": describe_file(path),
                         **{k: described[k] for k in ("name", "task_class", "examples",
                                                      "knowledge_source", "validation",
                                                      "stats")}})
    log(f"Task {name}: {len(task):,} examples built in {time.perf_counter() - t:.0f} s, "
        f"stored in {path}")
    return task


def build_named_task(spec: TaskSpec, sources: Sources):
    """A webquestions / curatedtrec / reqa / lexical task (`tt_zoo.mining.task_sources`)."""
    from tt_zoo.data.question_sets import QuestionSet  # noqa: PLC0415
    from tt_zoo.mining import task_sources  # noqa: PLC0415

    seed = sources.tasks.split_seed
    if spec.kind == "reqa":
        reqa, split, where = sources.reqa
        return task_sources.reqa_task(spec.name, reqa, split.train, seed=seed,
                                      validation=(f"{where}: test part",))
    if spec.kind == "lexical":
        collection = sources.benchmark.collection
        task = task_sources.lexical_task(spec.name, collection, spec.num_queries,
                                         bm25=sources.bm25, seed=seed,
                                         progress=sources.progress)
        return dataclasses.replace(task, knowledge_source=_wikispeedia_passages(collection))
    found = sources.answer_sets(spec.kind)  # the questions with an answer in the collection
    collection = sources.benchmark.collection
    task = task_sources.qa_task(
        spec.name, QuestionSet(found.name, found.questions, found.skipped), collection,
        answer_rows=found.rows, bm25=sources.bm25, seed=seed,
        validation=WIKI_QA[spec.kind][1], progress=sources.progress)
    return dataclasses.replace(
        task, knowledge_source=_wikispeedia_passages(collection),
        stats={**task.stats, "question_set": found.name, "questions": found.num_questions})


def _wikispeedia_passages(collection) -> str:
    return (f"Wikispeedia cut into {PASSAGE_WORDS}-word passages with titles: "
            f"{len(collection):,} passages")


def load_task(spec: TaskSpec, sources: Sources, cache: pathlib.Path, log=print):
    """The task of one --task; a malformed task file raises `TaskFileError` naming the flag,
    file and line; a teacher-scores file of another collection, naming the flag and both."""
    from tt_zoo.data.tasks import TaskFormatError, read_task_jsonl  # noqa: PLC0415
    from tt_zoo.mining import task_sources  # noqa: PLC0415

    if spec.kind == "distill":
        from tt_zoo.data.distill_task import distill_task  # noqa: PLC0415
        from tt_zoo.data.teacher_scores import TeacherScoresError  # noqa: PLC0415
        try:
            task = distill_task(spec.name, spec.path, sources.collection,
                                task_class=spec.task_class)
        except TeacherScoresError as e:
            raise TaskFileError(f"--task {spec.spec!r}: {e}") from None
        log(f"Task {spec.name}: {len(task):,} questions with candidates scored by "
            f"{task.stats['teacher']['name']} from {spec.path}")
        return task
    if spec.kind == "jsonl":
        try:
            task = read_task_jsonl(spec.path, name=spec.name, task_class=spec.task_class)
        except TaskFormatError as e:
            raise TaskFileError(f"--task {spec.spec!r}: {e}") from None
        log(f"Task {spec.name}: {len(task):,} examples of class {spec.task_class} from "
            f"{spec.path}")
        return task
    if spec.kind == "pairs":
        return task_sources.pair_task(spec.name, spec.path, max_pairs=spec.max_pairs,
                                      seed=sources.tasks.split_seed, progress=sources.progress,
                                      log=log)
    return cached_task(cache, spec.name, task_key(spec, sources),
                       lambda: build_named_task(spec, sources), log)


def remine(task, spec: TaskSpec, sources: Sources, miner, cache: pathlib.Path, key: dict,
           log=print):
    """`task` with its confounders re-mined by `miner` (a `ZooModel`), cached as
    NAME.remined.jsonl in the task cache (Maillard et al. 2021, Sec. 4.4): the first passage of
    the model's top 100 that holds no answer and is no positive."""
    from tt_zoo.mining import task_sources  # noqa: PLC0415

    def build():
        collection = sources.benchmark.collection
        found = sources.answer_sets(spec.kind)
        rows_of = {(q.text, tuple(q.answers), q.answer_regex): rows
                   for q, rows in zip(found.questions, found.rows)}
        answer_rows = [rows_of[(e.query, tuple(e.answers), e.answer_regex)]
                       for e in task.examples]
        documents = task_sources.documents_of(collection)
        sha = miner.metadata.get("sha256")
        cache = (pathlib.Path(ODQA_CACHE) / f"passages-{sha[:16]}-{len(collection)}.npy"
                 if sha else None)  # the passage embeddings of `tt-zoo odqa --model`
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
        rank = task_sources.dense_rank(miner, documents, cache_path=cache,
                                       progress=sources.progress)
        excluded = task_sources.qa_excluded_rows(task, collection, answer_rows)
        return task_sources.remine_confounders(task, rank, documents, excluded,
                                               depth=task_sources.QA_DEPTH,
                                               seed=sources.tasks.split_seed,
                                               progress=sources.progress)

    return cached_task(cache, f"{task.name}.remined", key, build, log)
