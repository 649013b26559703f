"""The pretraining-task grid of issue 22: the paper's ICT+BFS+WLP against its successors
(Contriever crops, Spider recurring spans, ProQA generated questions) and their mixtures, each
cell trained on the same tower and schedule, then scored on three benchmarks:

* ODQA: top-k answer recall on the open-domain validation questions (WebQuestions val +
  CuratedTREC train) over Wikispeedia cut into 100-word passages with titles
  (`tt_zoo.evaluation.odqa`);
* ReQA-SQuAD(dev): R@k of all 10,570 questions against all 10,255 candidates, zero-shot;
* open-domain ReQA: the same questions against 578K candidates (ReQA's + Wikispeedia's;
  `tt_zoo.evaluation.open_domain`), for the cells named by `--open-domain` (4-5 min a BoW-MLP,
  ~23 min a tiny BERT on 2 cores).

A cell is ``TOWER:TASKS:STEPSxBATCH`` (e.g. ``bow_mlp:crop_span:1150x512``; TOWER ``bow_mlp`` or
``bert``), optionally ``:warm=CELL`` to continue from another cell's export with its own schedule
(runs/grid/CELL/export, or when runs/ is gone the shipped model that cell exported, saved_models/),
``:vocab=PATH`` for a vocabulary other than the shipped 8K one, and pair-set options
(`PAIR_OPTIONS`, each its own pair set): ``:doc_words=N`` for passages of at most N words
instead of 96, ``:crop_words=N`` for crops of N-word windows of the article instead of one
passage (Contriever crops 256-token chunks: ``bert:crop:3500x128:crop_words=256``).
Each cell trains with `tt-zoo pretrain` in its own process (checkpointed: a rerun resumes,
a finished cell is not retrained), on pairs made once by `tt-zoo make-pairs` (128 a page,
passages of at most 96 words, as the shipped models'; Table 1 counted in whitespace words, as
WordPiece counts of 0.5M pairs cost ~10 min a set). Training CPU time is the pretraining
process's own (all threads, evaluations excluded: `training.loop.ZeroShotReqaCurve`), so cells
compare at equal CPU time even when other jobs share the machine. Results per cell land in
runs/grid/CELL/; the report in results/pretrain_tasks.{md,json,png}, where the cells of earlier
runs keep their rows (a cell run again replaces its own). The steps, their logs and resuming
are the shared grid runner's (`tt_zoo.reproduction.runner`).

  python -m benchmarks.pretrain_tasks --cell bow_mlp:ict_bfs_wlp:1150x512 --cell bow_mlp:crop:1150x512
"""

from __future__ import annotations

import json
import pathlib
import sys

from tt_zoo.cli.common import PROJECT_VOCAB  # no TensorFlow
from tt_zoo.reproduction import runner  # the grid's mechanics; no TensorFlow
from tt_zoo.reproduction.runner import with_earlier_rows
from tt_zoo.zoo.registry import SAVED_MODELS_DIR  # the clone's saved_models/; no TensorFlow

from benchmarks import arguments

REPO = arguments.REPO
DATA = arguments.data_dir()
PAIRS_PER_ARTICLE, MAX_DOC_WORDS, LEARNING_RATE, DOCUMENT_LENGTH = 128, 96, 1e-3, 128
PREFIX = {"bow_mlp": "bow_mlp_", "bert": ""}
# Passed to every cell (the project's vocabulary, `tt_zoo.cli.common.PROJECT_VOCAB`):
# `tt-zoo pretrain`'s own default depends on running from a git clone (outside one, e.g. from
# a copy of the code, it is the 30K BERT vocabulary of $TT_ZOO_DATA).
SHIPPED_VOCAB = PROJECT_VOCAB
# A cell's pair-set options: name -> (`tt-zoo make-pairs` flag, the grid's value, the tag of
# the pair set's folder and the cell's, the label's words).
PAIR_OPTIONS = {"doc_words": ("--max-doc-tokens", MAX_DOC_WORDS, "doc", "passages of ≤ {} words"),
                "crop_words": ("--crop-source-words", 0, "cropwin", "crops of {}-word windows")}


class Cell:
    """One grid cell, parsed from
    ``TOWER:TASKS:STEPSxBATCH[:vocab=PATH][:OPTION=N...][:warm=CELL]`` (OPTION of
    `PAIR_OPTIONS`)."""

    def __init__(self, text: str):
        head, _, warm = text.partition(":warm=")  # the warm cell, itself with colons, is last
        parts = head.split(":")
        try:
            self.tower, self.tasks, schedule = parts[:3]
            steps, batch = schedule.split("x")
            self.steps, self.batch = int(steps), int(batch)
            options = dict(p.split("=", 1) for p in parts[3:])
            if warm:
                options["warm"] = warm
        except ValueError:
            raise SystemExit(f"--cell {text!r}: expected "
                             "TOWER:TASKS:STEPSxBATCH[:vocab=PATH][:OPTION=N...][:warm=CELL]")
        if self.tower not in PREFIX:
            raise SystemExit(f"--cell {text!r}: TOWER must be one of {sorted(PREFIX)}")
        self.warm = options.pop("warm", None)
        self.vocab = options.pop("vocab", None)  # a vocab.txt other than saved_models/vocab's
        self.pair_options = {}  # the options that differ from the grid's pair sets
        for name in [n for n in PAIR_OPTIONS if n in options]:
            value = options.pop(name)
            if not value.isdigit() or int(value) < 1:
                raise SystemExit(f"--cell {text!r}: {name} must be a positive integer")
            if int(value) != PAIR_OPTIONS[name][1]:
                self.pair_options[name] = int(value)
        if options:
            raise SystemExit(f"--cell {text!r}: unknown options {sorted(options)}")
        self.text = text
        self.name = f"{self.tower}_{self.tasks}_{self.steps}x{self.batch}" + (
            f"_from_{Cell(self.warm).name}" if self.warm else "") + (
            f"_vocab_{pathlib.Path(self.vocab).parent.name}" if self.vocab else "") + (
            pair_options_tag(self.pair_options))
        self.variant = f"{PREFIX[self.tower]}{self.tasks}_512"

    @property
    def label(self) -> str:
        from tt_zoo.reproduction.report import label  # the tables' names of a mix; no TF

        tasks = label(self.tasks)
        return tasks + (f" ({pathlib.Path(self.vocab).parent.name} vocabulary)" if self.vocab
                        else "") + self._pair_options_note

    @property
    def pair_set(self) -> str:
        """The report's name of the cell's pair set."""
        return self.tasks + self._pair_options_note

    @property
    def _pair_options_note(self) -> str:
        notes = [PAIR_OPTIONS[n][3].format(v) for n, v in self.pair_options.items()]
        return f" ({', '.join(notes)})" if notes else ""


def run(what: str, command, log, done):
    """One step (`what`) from the clone's root, skipped when the file `done` exists
    (`runner.run_once`); a failed step stops the grid, naming its log."""
    if not runner.run_once(what, done, command, log, cwd=REPO):
        raise SystemExit(f"{what} failed; see {log} (a rerun resumes)")


def pair_options_tag(options: dict) -> str:
    """The folder-name tag of pair-set options that differ from the grid's ("_doc256")."""
    return "".join(f"_{PAIR_OPTIONS[n][2]}{v}" for n, v in sorted(options.items()))


def pairs_path(tasks: str, options: dict = None) -> pathlib.Path:
    """Where the pair set of `tasks` with the pair-set `options` lives (made or not)."""
    return REPO / "runs" / "pairs" / (f"{tasks}_{PAIRS_PER_ARTICLE}"
                                      + pair_options_tag(options or {}))


def pairs_dir(tasks: str, options: dict = None) -> pathlib.Path:
    """The cell's pair set, made once (`tt-zoo make-pairs`)."""
    out = pairs_path(tasks, options)
    values = {n: default for n, (_, default, _, _) in PAIR_OPTIONS.items()}
    values.update(options or {})
    flags = [x for n, v in values.items() for x in (PAIR_OPTIONS[n][0], v)]
    run(f"pairs {out.name}", runner.tt_zoo_command(
        "make-pairs", "--input", DATA / "wikispeedia", "--tasks", tasks.replace("_", ","),
        "--pairs-per-article", PAIRS_PER_ARTICLE, *flags, "--output", out, "--no-progress"),
        out.with_suffix(".log"), out / "stats.json")
    return out


def train_command(cell: Cell, work: pathlib.Path, pairs: pathlib.Path) -> list:
    """`tt-zoo pretrain`'s command for the cell, its vocabulary always named."""
    command = runner.tt_zoo_command(
        "pretrain", "--variant", cell.variant, "--pairs", pairs, "--steps", cell.steps,
        "--batch-size", cell.batch, "--learning-rate", LEARNING_RATE,
        "--document-length", DOCUMENT_LENGTH, "--eval-every", max(1, cell.steps // 5),
        "--eval-questions", 2000, "--checkpoint-every", max(1, cell.steps // 5),
        "--workdir", work / "train", "--export", work / "export", "--no-progress",
        "--vocab", cell.vocab or SHIPPED_VOCAB)
    if cell.warm:
        command += ["--init-from", str(warm_export(cell.warm))]
    return command


def warm_export(warm: str) -> pathlib.Path:
    """The export a warm start continues from: the grid cell's (runs/grid/CELL/export) or, when
    runs/ no longer holds it, the shipped model whose recorded training command wrote that
    cell's folder (saved_models/VARIANT), so a run continues from what is committed."""
    cell = Cell(warm)
    grid = REPO / "runs" / "grid" / cell.name / "export"
    if (grid / "metadata.json").is_file():
        return grid
    shipped = SAVED_MODELS_DIR / cell.variant
    if (shipped / "metadata.json").is_file():
        command = str(json.loads((shipped / "metadata.json").read_text()).get("command"))
        if f"/grid/{cell.name}/" in command:
            return shipped
    raise SystemExit(f"warm={warm!r}: no export in {grid.parent}, and {shipped} is not that "
                     "cell's (its recorded training command names another folder)")


def train(cell: Cell, work: pathlib.Path) -> pathlib.Path:
    """The cell's export, trained unless it is there (its pair set made first if need be)."""
    export = work / "export"
    if not (export / "metadata.json").is_file():  # (else its pair set is not needed)
        pairs = pairs_dir(cell.tasks, cell.pair_options)
        run(f"pretrain {cell.name}", train_command(cell, work, pairs), work / "train.log",
            export / "metadata.json")
    return export


def curve(work: pathlib.Path) -> list:
    path = work / "train" / "curve.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def evaluate(cell: Cell, export: pathlib.Path, work: pathlib.Path, open_domain: bool) -> dict:
    """The benchmarks, each cached in the cell's folder; open-domain ReQA (4-5 min a BoW-MLP,
    ~23 min a tiny BERT here) only when asked for or already measured."""
    out = {}
    for bench in ("odqa", "reqa", "open_domain_reqa"):
        path = work / f"{bench}.json"
        if bench == "open_domain_reqa" and not open_domain and not path.is_file():
            continue
        run(f"{bench} {cell.name}", eval_command(bench, export, path), work / "eval.log", path)
        out[bench] = runner.read_json(path)
    return out


def eval_command(bench: str, export, out: pathlib.Path) -> list:
    """`benchmarks/pretrain_tasks_eval.py`'s command: one benchmark of an export (or of BM25,
    `export` "-") into `out`, in its own process so the grid's memory stays flat."""
    return [sys.executable, "-u", "-m", "benchmarks.pretrain_tasks_eval", bench, str(export),
            str(out)]


def main(argv=None):
    p = arguments.parser(__doc__)
    p.add_argument("--cell", action="append", required=True,
                   help="TOWER:TASKS:STEPSxBATCH[:vocab=PATH][:OPTION=N...][:warm=CELL] "
                        f"(OPTION: {', '.join(PAIR_OPTIONS)}), repeatable")
    p.add_argument("--open-domain", action="append", default=[], metavar="CELL",
                   help="also score this cell on open-domain ReQA (repeatable; slow)")
    p.add_argument("--train-only", action="store_true",
                   help="train the cells, evaluate nothing")
    p.add_argument("--report-only", action="store_true",
                   help="write the report from the cells already run")
    arguments.add_output(p, REPO / "results" / "pretrain_tasks")
    args = p.parse_args(argv)
    from benchmarks.pretrain_tasks_report import pair_stats_of, write_report

    cells = [Cell(c) for c in args.cell]
    bm25 = REPO / "runs" / "grid" / "bm25_reqa.json"
    if not args.train_only:
        run("bm25_reqa", eval_command("bm25_reqa", "-", bm25), bm25.with_suffix(".log"), bm25)
    rows = []
    for cell in cells:
        work = REPO / "runs" / "grid" / cell.name
        work.mkdir(parents=True, exist_ok=True)
        if args.report_only and not (work / "export" / "metadata.json").is_file():
            continue
        watch = runner.Stopwatch()
        export = train(cell, work)
        if args.train_only:
            continue
        points = curve(work)
        results = evaluate(cell, export, work, cell.text in args.open_domain)
        rows.append({"cell": cell.text, "name": cell.name, "tower": cell.tower,
                     "tasks": cell.tasks, "label": cell.label, "steps": cell.steps,
                     "batch": cell.batch, "warm_start": cell.warm,
                     "pair_options": cell.pair_options, "pair_set": cell.pair_set,
                     "train_cpu_minutes": round(points[-1]["train_cpu_seconds"] / 60, 1),
                     "pair_stats": pair_stats_of(pairs_path(cell.tasks, cell.pair_options)),
                     "curve": points,
                     **results})
        print(f"{cell.name}: done in {watch}", file=sys.stderr)
    if not args.train_only:
        write_report(with_earlier_rows(rows, args.output.with_suffix(".json")), args.output)


if __name__ == "__main__":
    main()
