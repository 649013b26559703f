"""What results/fusion, results/term_weights and results/late_interaction share: the
arguments, the three benchmarks of `tt_zoo.evaluation.text_benchmarks` (ReQA-SQuAD(dev),
open-domain ReQA, ODQA answer recall), the rows every one of them has (BM25 and the
single-vector flagships, exact search), where dense embeddings are cached, the run itself
(`run`), the machine line and the Markdown tables.

A script adds its own rows with one function, called once per benchmark with a `Context` that
holds the benchmark and its BM25 and dense searchers (each a `ReusedSearcher`: rows built on
them reuse their searches). A row is any text-query `Searcher` over ``ctx.bench.candidates``:

    def my_rows(ctx):
        searcher, build_s = text_benchmarks.searcher_seconds(lambda: MY_SEARCHER(ctx.bench))
        return {"my row": score_row(ctx.bench, "my row", searcher, build_s, {...settings})}

    out = run(args, "my_name", my_rows, render)     # render(out) -> the Markdown report

With --limit-questions / --limit-articles a run is a smoke run: outputs and caches go under
runs/<name>_small, never over results/ or the full runs' caches.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import re
import sys
import time
from typing import Callable, Dict, Iterator, Optional, Sequence

from benchmarks import arguments
from benchmarks.arguments import REPO

BENCHMARKS = ("reqa", "open_domain_reqa", "odqa")
TITLES = {"reqa": "ReQA-SQuAD(dev)", "open_domain_reqa": "Open-domain ReQA",
          "odqa": "ODQA answer recall"}
VERSIONED = ("tt_zoo", "tensorflow", "tf-keras", "numpy", "bm25s", "scann")
FLAGSHIPS = ("ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_crop_span_qgen_512")
# The single-vector flagship that a script's own kind of model is paired with (--partner).
PARTNER = FLAGSHIPS[1]


def add_record_argument(p: argparse.ArgumentParser, model_flag: str) -> None:
    """--record: write the measured tables into the card of the export `model_flag` names."""
    p.add_argument("--record", action="store_true",
                   help="after the run, write the model's measured tables into the card of "
                        f"the export {model_flag} names (a shipped one's entry too): "
                        "tt_zoo.zoo.shipping.record_results")


def add_partner(p: argparse.ArgumentParser, help: str) -> None:
    """--partner: the single-vector model (one of --model) that the script's own model is
    paired with (default `PARTNER`)."""
    p.add_argument("--partner", default=PARTNER, help=help)


def add_depth(p: argparse.ArgumentParser,
              help: str = "candidates of each searcher fused per query (default: %(default)s)"
              ) -> None:
    """--depth: how deep each query's candidates go (fused, or re-ranked)."""
    p.add_argument("--depth", type=int, default=100, help=help)


def require_reqa_with_open_domain(p: argparse.ArgumentParser, benchmarks: Sequence[str],
                                  flag: str, what: str) -> None:
    """Open-domain ReQA reuses what was chosen on ReQA's validation questions (`what`): it
    cannot run without ReQA."""
    if "open_domain_reqa" in benchmarks and "reqa" not in benchmarks:
        p.error(f"{flag}: open_domain_reqa takes ReQA's chosen {what}; add reqa")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tt_zoo.evaluation import odqa, text_benchmarks

    arguments.add_model(p, repeat=True,
                        help=f"dense models, each a row (default: {', '.join(FLAGSHIPS)})")
    p.add_argument("--benchmarks", default=",".join(BENCHMARKS),
                   help="comma-separated, of %(default)s")
    p.add_argument("--skip", action="append", default=[], metavar="MODEL@BENCHMARK",
                   help="leave one model's rows out of one benchmark's tables (e.g. the tiny BERT's "
                        "578K open-domain ReQA encoding, ~50 min on 2 cores)")
    arguments.add_data_dir(p, help="the shared data (default: $TT_ZOO_DATA)")
    arguments.add_squad(p, default=None, help="SQuAD v1.1 JSON (default: DATA/squad/dev-v1.1.json)")
    p.add_argument("--articles", default=None,
                   help="article source of open-domain ReQA and ODQA (default: DATA/wikispeedia)")
    p.add_argument("--odqa-questions", action="append", default=None, metavar="SET_OR_FILE",
                   help=f"reported ODQA question sets (default: {' + '.join(odqa.VALIDATION)})")
    p.add_argument("--odqa-validation", default=text_benchmarks.ODQA_VALIDATION_SET,
                   metavar="SET_OR_FILE",
                   help="ODQA questions that settings are chosen on (default: %(default)s)")
    p.add_argument("--split-fraction", type=float, default=0.05,
                   help="ReQA cold-start split: its training questions choose settings, its "
                        "test questions are reported beside all (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the split's seed (default: %(default)s)")
    p.add_argument("--reqa-choose-on", default="train", choices=text_benchmarks.REQA_CHOOSE_ON,
                   help="the split's questions that choose ReQA's settings: its training part, "
                        "or its held-out validation part (for a model trained on the training "
                        "part, e.g. tt-zoo multitask --task reqa) (default: %(default)s)")
    p.add_argument("--reqa-metric", default="MRR",
                   help="ReQA's validation metric, MRR or R@k (default: %(default)s)")
    p.add_argument("--odqa-metric", default="R@20",
                   help="ODQA's validation metric, R@k (default: %(default)s)")
    p.add_argument("--limit-questions", type=int, default=None, metavar="N",
                   help="smoke run: the first N questions of each set")
    p.add_argument("--limit-articles", type=int, default=None, metavar="N",
                   help="smoke run: the first N articles for open-domain ReQA and ODQA")
    p.add_argument("--work", type=pathlib.Path, default=None,
                   help="caches: embeddings, ODQA answer rows (default: runs/, shared with "
                        "benchmarks/open_domain.py and odqa.py; smoke runs: runs/NAME_small)")
    arguments.add_output(p, help="writes OUTPUT.md and OUTPUT.json (default: results/NAME; "
                                 "smoke runs: runs/NAME_small/NAME)")
    p.add_argument("--no-progress", action="store_true")


def finish_arguments(p: argparse.ArgumentParser, args, name: str):
    """Checks the shared arguments and fills in the defaults that depend on a smoke run."""
    args.benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    unknown = sorted(set(args.benchmarks) - set(BENCHMARKS))
    if unknown or not args.benchmarks:
        p.error(f"--benchmarks: choose among {', '.join(BENCHMARKS)} (got {unknown or 'none'})")
    for what in ("limit_questions", "limit_articles"):
        value = getattr(args, what)
        if value is not None and value < 1:
            p.error(f"--{what.replace('_', '-')} must be at least 1 (got {value})")
    for what, allowed in (("reqa_metric", r"MRR|R@[1-9]\d*"), ("odqa_metric", r"R@[1-9]\d*")):
        value = getattr(args, what)
        if not re.fullmatch(allowed, value):
            p.error(f"--{what.replace('_', '-')} must match {allowed} (got {value!r})")
    if not 0 < args.split_fraction < 1:
        p.error(f"--split-fraction must be in (0, 1) (got {args.split_fraction})")
    args.squad = args.squad or args.data_dir / "squad" / "dev-v1.1.json"
    args.articles = args.articles or str(args.data_dir / "wikispeedia")
    for what, path in (("--squad", args.squad), ("--articles", args.articles)):
        if not pathlib.Path(path).exists():
            p.error(f"{what}: {path} does not exist (set TT_ZOO_DATA or pass a path)")
    pairs = [item.rsplit("@", 1) for item in args.skip]
    bad = [item for item, pair in zip(args.skip, pairs) if len(pair) != 2 or pair[1] not in BENCHMARKS]
    if bad:
        p.error(f"--skip: MODEL@BENCHMARK with a benchmark of {', '.join(BENCHMARKS)} (got {bad})")
    args.skip = sorted(tuple(pair) for pair in pairs)  # a list: recorded in the JSON settings
    args.odqa_questions = args.odqa_questions or None
    args.model = args.model or list(FLAGSHIPS)
    args.smoke = args.limit_questions is not None or args.limit_articles is not None
    small = REPO / "runs" / f"{name}_small"
    args.work = args.work or (small if args.smoke else REPO / "runs")
    args.output = args.output or (small / name if args.smoke else REPO / "results" / name)
    return args


def benchmarks(args) -> Iterator:
    """The benchmarks of ``args.benchmarks``, built one after the other (open-domain ReQA from
    ReQA's questions and split)."""
    from tt_zoo.evaluation import odqa, text_benchmarks as tb

    progress = not args.no_progress
    reqa = None
    if {"reqa", "open_domain_reqa"} & set(args.benchmarks):
        reqa = tb.reqa_benchmark(args.squad, split_fraction=args.split_fraction, seed=args.seed,
                                 limit_questions=args.limit_questions,
                                 validation_metric=args.reqa_metric,
                                 choose_on=args.reqa_choose_on)
        if "reqa" in args.benchmarks:
            yield reqa
    if "open_domain_reqa" in args.benchmarks:
        yield tb.open_domain_benchmark(reqa, args.articles, limit_articles=args.limit_articles,
                                       progress=progress)
    if "odqa" in args.benchmarks:
        yield tb.odqa_benchmark(args.data_dir, articles=args.articles,
                                question_sets=args.odqa_questions or odqa.VALIDATION,
                                validation_set=args.odqa_validation,
                                limit_articles=args.limit_articles,
                                limit_questions=args.limit_questions,
                                cache_dir=args.work / "odqa_cache",
                                validation_metric=args.odqa_metric, progress=progress)


CACHE_DIRS = {"reqa": "text_benchmarks", "open_domain_reqa": "open_domain", "odqa": "odqa_cache"}


def embedding_cache(args, bench, model) -> pathlib.Path:
    """Where a model's candidate embeddings of `bench` are kept (`embedding_cache_path` in
    runs/text_benchmarks, runs/open_domain or runs/odqa_cache)."""
    from tt_zoo.evaluation.text_benchmarks import embedding_cache_path

    return embedding_cache_path(bench, model, args.work / CACHE_DIRS[bench.name])


def score_row(bench, label: str, searcher, build_seconds: float,
              settings: Optional[dict] = None) -> dict:
    """`bench.score(searcher)` with the build seconds and the settings, printed as it lands."""
    row = {**bench.score(searcher), "build_seconds": build_seconds, "settings": settings or {}}
    shown = {k: v for k, v in main_set(row).items() if k in ("R@1", "R@20", "R@100", "MRR")}
    print(f"  {bench.name} | {label}: " + " ".join(f"{k} {100 * v:.1f}" for k, v in shown.items())
          + f", {row['queries_per_s'] or 0:,.0f} q/s", file=sys.stderr)
    return row


def model_name(ctx, given: str) -> str:
    """The name `ctx.dense` and `ctx.models` key a --model by, for the value given (a registered
    name or an export path), from the models `run` loaded (not loaded again)."""
    for name, model in ctx.models.items():
        if given == name or (model.path is not None
                             and pathlib.Path(given).resolve() == model.path.resolve()):
            return name
    raise KeyError(f"{given!r} is not one of the --model models ({', '.join(ctx.models)})")


@dataclasses.dataclass
class Context:
    """What a script's rows are built from, per benchmark.

    Attributes:
      args: the parsed arguments.
      bench: the benchmark (`ReqaBenchmark` or `OdqaBenchmark`).
      bm25: BM25 over its candidates (a `ReusedSearcher`), built in `build_seconds["BM25"]`.
      dense: model name -> its exact searcher (a `ReusedSearcher` of question strings).
      models: model name -> the loaded `ZooModel`.
      build_seconds: row name -> seconds to build its searcher (encoding included).
      out: the whole result so far (e.g. ``out["weights"]`` of an earlier benchmark).
    """

    args: argparse.Namespace
    bench: object
    bm25: object
    dense: Dict[str, object]
    models: Dict[str, object]
    build_seconds: Dict[str, float]
    out: dict


def run(args, name: str, add_rows: Callable[[Context], Dict[str, dict]],
        render: Callable[[dict], str]) -> dict:
    """Scores BM25, each ``args.model`` and the rows of ``add_rows(ctx)`` on every benchmark of
    ``args.benchmarks``; writes ``args.output`` .json and .md (`render`) when all are done, and
    ``partial_output(args.output)`` after each benchmark (removed at the end), so a run stopped
    part of the way shows what it measured and never replaces a complete report with less.

    Returns ``{"generator", "machine", "settings", "ks", "benchmarks": {bench: described},
    "results": {bench: {row: scored}}, "weights": {}, "wall_s"}`` (``weights`` for scripts
    that choose settings on validation queries).
    """
    import tt_zoo
    from tt_zoo.evaluation import text_benchmarks as tb
    from tt_zoo.evaluation.tables import row_labels

    t0 = time.perf_counter()
    machine = machine_start()
    loaded = [tt_zoo.load(given) for given in args.model]
    models = dict(zip(row_labels([(given, m.name) for given, m in zip(args.model, loaded)]),
                      loaded))
    out = {"generator": f"benchmarks/{name}.py", "machine": machine,
           "settings": {k: str(v) if isinstance(v, pathlib.Path) else v
                        for k, v in vars(args).items()},
           "ks": list(tb.KS), "benchmarks": {}, "results": {}, "weights": {}}
    if "odqa" in args.benchmarks:
        given = validation_set_name(args.odqa_validation, args.data_dir)
        leaning = {n: given for n, m in models.items() if given in trained_question_sets(m)}
        if leaning:
            out["validation_trained_on"] = leaning
            print(f"warning: {', '.join(leaning)} trained on {args.odqa_validation}, the ODQA "
                  "validation questions: settings chosen on them lean to that model",
                  file=sys.stderr)
    progress = not args.no_progress
    for bench in benchmarks(args):
        print(f"{bench.name}: {len(bench.candidates):,} candidates", file=sys.stderr)
        out["benchmarks"][bench.name] = bench.describe()
        rows = out["results"][bench.name] = {}
        ctx = Context(args, bench, None, {}, models, {}, out)
        ctx.bm25, ctx.build_seconds["BM25"] = tb.searcher_seconds(
            lambda: tb.ReusedSearcher(tb.bm25_searcher(bench)))
        rows["BM25"] = score_row(bench, "BM25", ctx.bm25, ctx.build_seconds["BM25"],
                                 {"search": "bm25s, the package's defaults"})
        for model_name, model in models.items():
            if (model_name, bench.name) in args.skip:
                continue
            ctx.dense[model_name], ctx.build_seconds[model_name] = tb.searcher_seconds(
                lambda: warmed_up(tb.ReusedSearcher(tb.dense_searcher(
                    model, bench, embedding_cache(args, bench, model), progress))))
            rows[model_name] = score_row(bench, model_name, ctx.dense[model_name],
                                         ctx.build_seconds[model_name], {"search": "exact"})
        rows.update(add_rows(ctx))
        del ctx
        out["wall_s"] = time.perf_counter() - t0
        write(out, partial_output(args.output), render)  # each benchmark as soon as it is done
    out["machine"] = machine_end(machine)
    write(out, args.output, render)
    for suffix in (".json", ".md"):
        partial_output(args.output).with_suffix(suffix).unlink(missing_ok=True)
    return out


def validation_set_name(given, data_dir) -> str:
    """The named ODQA set (`odqa.NAMED_SETS`) that --odqa-validation gives, by name or by its
    file under `data_dir`; else the value as given."""
    from tt_zoo.evaluation.odqa import NAMED_SETS

    if str(given) in NAMED_SETS:
        return str(given)
    path = pathlib.Path(str(given)).resolve()
    return next((name for name, file in NAMED_SETS.items()
                 if (pathlib.Path(data_dir) / "odqa" / file).resolve() == path), str(given))


def trained_question_sets(model) -> set:
    """The ODQA question sets `model` trained on, from its card (`tt-zoo multitask`'s QA tasks
    record theirs; a model's base is not looked at)."""
    run = model.card.training.multi_task
    tasks = (run.tasks or []) if run else []
    return {t.stats["question_set"] for t in tasks if (t.stats or {}).get("question_set")}


def warmed_up(searcher):
    """`searcher` after one search of one question, so the timed searches do not include
    TensorFlow tracing the query tower (counted in the build seconds instead)."""
    searcher.search(["warm up"], 1)  # different queries: no result kept by a ReusedSearcher
    return searcher


def partial_output(output: pathlib.Path) -> pathlib.Path:
    """Where `run` writes the benchmarks done so far: OUTPUT_partial.json and .md."""
    stem = output.with_suffix("")  # as `write` names OUTPUT.json: any suffix given is replaced
    return stem.with_name(stem.name + "_partial")


def write(out: dict, output: pathlib.Path, render: Callable[[dict], str]) -> None:
    from tt_zoo.atomic_io import write_json, write_text

    write_json(output.with_suffix(".json"), out)
    write_text(output.with_suffix(".md"), render(out))


def finish(out: dict, info: dict, output: pathlib.Path, render: Callable[[dict], str]) -> dict:
    """A one-shot benchmark's end: the machine's state at the end (`machine_end` of `info`) into
    ``out["machine"]``, OUTPUT.json and OUTPUT.md written (`write`), the report printed."""
    out["machine"] = machine_end(info)
    write(out, output, render)
    print(render(out))
    return out


def main_set(row: dict) -> dict:
    """A scored row's headline set: "all", or its one question set."""
    sets = row["sets"]
    return sets["all"] if "all" in sets else next(iter(sets.values()))


# -- the machine --------------------------------------------------------------------------------

def machine_start() -> dict:
    """CPU, cores, other processes' load, Python and library versions, the date
    (benchmarks/measure.py's)."""
    from benchmarks.measure import machine_info, versions

    info = machine_info()
    info["versions"] = versions(VERSIONED)
    return info


def machine_end(info: dict) -> dict:
    from benchmarks.measure import busy_cores

    return {**info, "other_busy_cores_at_end": busy_cores()}


def report_head(out: dict, name: str, title: str, about: str) -> list:
    """A report's first lines: the title, `about` with how it was generated (and the warnings:
    a smoke run, ODQA settings chosen on a model's training questions), the machine line."""
    s = out["settings"]
    warnings = (f" **Smoke run** (--limit-questions {s['limit_questions']}, --limit-articles "
                f"{s['limit_articles']}): not the benchmark's numbers." if s["smoke"] else "")
    leaning = out.get("validation_trained_on")
    if leaning:
        who = "it" if len(leaning) == 1 else "they"
        warnings += (f" **The ODQA settings lean to {', '.join(leaning)}**: they were chosen on "
                     f"{next(iter(leaning.values()))}, which {who} trained on; choose them on "
                     "questions no model trained on (e.g. --odqa-validation "
                     "webquestions-devtest).")
    return [f"# {title}", "", f"{about} Generated by `python -m benchmarks.{name}` in "
            f"{out.get('wall_s', 0) / 60:.0f} min.{warnings}", "", machine_line(out["machine"]),
            ""]


def chosen_on_text(s: dict) -> str:
    """Which questions chose a run's settings, from its recorded arguments: "ReQA: the 5%
    cold-start split's training questions, by MRR; ODQA: webquestions-trainmodel, by R@20;
    open-domain ReQA takes ReQA's" for the defaults. With --reqa-choose-on validation (a model
    trained on the split's training questions) it says so, and where to read ReQA."""
    part = s.get("reqa_choose_on", "train")
    text = (f"ReQA: the {100 * s['split_fraction']:g}% cold-start split's "
            f"{'training' if part == 'train' else 'held-out validation'} questions, by "
            f"{s['reqa_metric']}; ODQA: {pathlib.Path(str(s['odqa_validation'])).name}, by "
            f"{s['odqa_metric']}; open-domain ReQA takes ReQA's")
    if part == "validation":
        text += ("; a model trained on the split's training questions is read on the "
                 "split's test questions: \"All questions\" holds the questions it trained on")
    return text


def machine_line(info: dict) -> str:
    from benchmarks.measure import machine_line as line

    return line(info)


# -- the report ---------------------------------------------------------------------------------

def _cell(values: dict, key: str) -> str:
    return f"{100 * values[key]:.1f}" if key in values else "–"


def _rate(row: dict) -> str:
    return f"{row['queries_per_s']:,.0f}" if row.get("queries_per_s") else "–"


def tables(described: Dict[str, dict], results: Dict[str, Dict[str, dict]],
           ks: Sequence[int]) -> list:
    """Markdown lines: per benchmark, one table per question set (all first), R@k (+ MRR for
    ReQA), queries/s of the search and the build seconds on the first."""
    lines = []
    for name, rows in results.items():
        if not rows:
            continue
        d = described[name]
        columns = [f"R@{k}" for k in ks] + (["MRR"] if name != "odqa" else [])
        lines += [f"## {TITLES[name]}", "", _about(name, d), ""]
        sets = list(next(iter(rows.values()))["sets"])
        sets = (["all"] if "all" in sets else []) + [s for s in sets if s != "all"]
        for i, set_name in enumerate(sets):
            first = next(iter(rows.values()))["sets"][set_name]
            count = first.get("answerable", first.get("num_questions"))
            lines += [f"{_set_title(name, set_name)} ({count:,} questions):", "",
                      "| retriever | " + " | ".join(columns)
                      + (" | queries/s | build s |" if i == 0 else " |"),
                      "|---|" + "---|" * (len(columns) + (2 if i == 0 else 0))]
            for row_name, row in rows.items():
                cells = [_cell(row["sets"][set_name], c) for c in columns]
                if i == 0:
                    cells += [_rate(row), f"{row['build_seconds']:,.0f}"]
                lines.append(f"| {row_name} | " + " | ".join(cells) + " |")
            lines.append("")
    return lines


def _set_title(bench: str, set_name: str) -> str:
    if set_name == "all":
        return ("All questions" if bench != "odqa"
                else "All validation questions (WebQuestions val + CuratedTREC train), answerable")
    if bench == "odqa":
        return f"{set_name}, answerable"
    from tt_zoo.evaluation.text_benchmarks import split_label, split_part

    part = split_part(set_name)
    return (f"The {part} questions of the {split_label(set_name)} cold-start split"
            + (" (the fused rows' weights were chosen on them)" if part == "validation" else ""))


def _about(name: str, d: dict) -> str:
    if name == "odqa":
        return (f"{d['num_passages']:,} {d['passage_words']}-word passages of "
                f"{pathlib.Path(d['source']).name} with titles; a question is answered at k when "
                "a top-k passage holds an answer; recall over the answerable questions.")
    return (f"{d['subsets']['all']:,} questions against {d['num_candidates']:,} (sentence, "
            f"passage) candidates ({d['source']}); a hit is the gold candidate only.")
