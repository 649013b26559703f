"""results/odqa.{md,json}: open-domain QA answer recall of BM25 and shipped models on the
validation questions (WebQuestions val + CuratedTREC train) over Wikispeedia's 100-word passages.

One `tt-zoo odqa` run (`tt_zoo.cli.odqa`); the report adds the settings and the question counts.
Encoding the 130K passages takes about a minute for a BoW-MLP and ten for the tiny BERT here.

  python -m benchmarks.odqa                                  # BM25 + every shipped model
  python -m benchmarks.odqa --model bow_mlp_crop_512 --model ict_bfs_wlp_512
"""

from __future__ import annotations

import json
import pathlib
import sys

from tt_zoo.configs.multitask import ODQA_CACHE

from benchmarks import arguments

REPO = arguments.REPO
KS = (1, 5, 20, 100)


def report(out: dict) -> str:
    b = out["benchmark"]
    sets = list(b["sets"])
    names = sets + (["all"] if len(sets) > 1 else [])
    lines = ["# Open-domain QA answer recall (validation questions)", "",
             f"{b['num_passages']:,} passages: {pathlib.Path(b['source']).name} (all articles) "
             "cut into disjoint "
             f"{b['passage_words']}-word blocks with titles (DPR's format). A question is "
             "answered at k when one of its top-k passages holds an answer (DPR's "
             "normalisation for WebQuestions' strings, the regular expression for "
             "CuratedTREC's); recall is over the questions whose answer occurs in the "
             "collection. These are validation questions: settings were chosen on them and no "
             "model trained on them. Exact inner-product search. Every dense model is "
             "zero-shot on open-domain QA except the `multitask_` ones, which trained on "
             "WebQuestions trainmodel (never on its val split or on CuratedTREC). Generated "
             "by `python -m benchmarks.odqa`.", "",
             "| question set | questions | answerable | bad regex skipped |", "|---|---|---|---|"]
    for name in sets:
        s = b["sets"][name]
        lines.append(f"| {name} | {s['num_questions']:,} | {s['answerable']:,} | "
                     f"{len(s['skipped'])} |")
    lines += ["", "Top-k answer recall (%), all = both sets together (944 questions):", "",
              "| retriever | all R@1 | all R@5 | all R@20 | all R@100 | "
              + " | ".join(f"{n} R@{k}" for n in sets for k in (1, 20, 100)) + " |",
              "|---|" + "---|" * (4 + 3 * len(sets))]
    for retriever, per_set in out["results"].items():
        cells = [f"{100 * per_set[names[-1]][f'R@{k}']:.1f}" for k in KS] + [
            f"{100 * per_set[n][f'R@{k}']:.1f}" for n in sets for k in (1, 20, 100)]
        lines.append(f"| {retriever} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = arguments.parser(__doc__, summary="line")
    arguments.add_model(p, repeat=True,
                        help="models to score (default: every shipped two-tower model)")
    arguments.add_output(p, REPO / "results" / "odqa")
    p.add_argument("--record", action="store_true",
                   help="write each shipped model's numbers into its card and its top-20 into "
                        "tt_zoo/zoo/shipped_models.json (the README's model list)")
    args = p.parse_args(argv)
    from tt_zoo.atomic_io import write_json, write_text
    from tt_zoo.cli import odqa as odqa_cli
    from tt_zoo.zoo.registry import list_models

    models = (args.model if args.model is not None
              else list_models(shipped_only=True, kind="two_tower"))
    argv = ["--bm25", "--no-progress", "--cache-dir", str(REPO / ODQA_CACHE)]
    for m in models:
        argv += ["--model", m]
    out = odqa_cli.run(odqa_cli.parse_args(argv))
    previous = args.output.with_suffix(".json")
    if previous.is_file():  # models scored by an earlier run stay in the report
        earlier = json.loads(previous.read_text())
        if earlier.get("benchmark", {}).get("num_passages") == out["benchmark"]["num_passages"]:
            out["results"] = {**earlier["results"], **out["results"]}  # rows keep their places
            out["seconds"] = {**earlier.get("seconds", {}), **out["seconds"]}
    out["bm25"] = out["results"]["BM25"]
    write_json(previous, out)
    write_text(args.output.with_suffix(".md"), report(out))
    print(report(out))
    if args.record:
        record(out, models)
    return out


def record(out: dict, models) -> None:
    """The answer recall of each of `models` (this run's; not rows kept from earlier runs) into
    its card, beside its other numbers (the weights' manifest is unchanged), and its top-20
    into the shipped-model list (the README's column).

    Only what the card lacks: a table of the same title recorded by another benchmark (e.g.
    `benchmarks/fusion.py --record`, with BM25 and fusion rows) is the same measurement and
    stays. A model trained on ODQA questions (`tt-zoo multitask`) is not zero-shot, the
    regime these tables name, and is left to `benchmarks/multi_task.py --record`."""
    from tt_zoo.atomic_io import write_json
    from tt_zoo.reproduction.ship import ODQA_HEADLINE
    from tt_zoo.evaluation import odqa
    from tt_zoo.artifacts.export import update_metadata
    from tt_zoo.artifacts.model_card import ModelCard
    from tt_zoo.zoo.registry import REGISTRY, SHIPPED_FILE

    shipped = json.loads(SHIPPED_FILE.read_text())
    for name in models:
        if name not in shipped or not REGISTRY[name].artifact_path.is_dir():
            print(f"{name}: not a shipped model here; nothing recorded")
            continue
        path = REGISTRY[name].artifact_path
        meta = json.loads((path / "metadata.json").read_text())
        training = ModelCard.from_dict(meta).training
        if training is not None and training.multi_task is not None:
            print(f"{name}: trained on tasks (tt-zoo multitask), not zero-shot; its ODQA "
                  "tables are benchmarks/multi_task.py's")
            continue
        per_set = out["results"][name]
        tables = odqa.card_tables(per_set, out["benchmark"]["num_passages"])
        missing = {t: v for t, v in tables.items() if t not in meta.get("metrics", {})}
        if missing:
            update_metadata(path, metrics={**meta.get("metrics", {}), **missing})
            print(f"recorded {len(missing)} table(s) in {path / 'MODEL_CARD.md'}")
        metrics = shipped[name].setdefault("metrics", {})
        if not any(k.startswith(ODQA_HEADLINE) for k in metrics):  # e.g. ", NAME" (--record)
            metrics[ODQA_HEADLINE] = round(100 * per_set["all"]["R@20"], 2)
    write_json(SHIPPED_FILE, shipped, indent=2, sort_keys=True)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
