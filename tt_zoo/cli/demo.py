"""The README's main command: load shipped models, index ReQA-SQuAD(dev), answer, and score.

Loads shipped models (by default the best fast one, a static model distilled from
all-MiniLM-L6-v2 and trained on the two QA tasks, and the paper's flagship ict_bfs_wlp_512),
builds a ScaNN index of each over every (sentence, passage) candidate of ReQA-SQuAD(dev), prints
the first model's top hits for a few questions, then R@1/10/100 of each over all questions next
to BM25 on the same questions. SQuAD dev is read from --squad, else
$TT_ZOO_DATA/squad/dev-v1.1.json, else through Hugging Face `datasets` (squad, validation) when
it can be reached.

  tt-zoo demo
  tt-zoo demo --model bow_mlp_ict_bfs_wlp_512 --backend brute_force --questions 5
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
import time

from tt_zoo import numbers
from tt_zoo.cli import parsing
from tt_zoo.cli.common import FLAGSHIP, MissingDataError, load_model, load_reqa, progress_bar
from tt_zoo.evaluation.tables import format_scores


# The best shipped retriever that encodes ReQA's candidates in seconds (a static model distilled
# from all-MiniLM-L6-v2), and the paper's flagship. The best one, multitask_minilm_l6_384, takes
# minutes on a CPU: `tt-zoo demo --model multitask_minilm_l6_384`.
DEMO_MODELS = ("multitask_static_minilm_l6_384", FLAGSHIP)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", action="append", default=None, metavar="NAME_OR_PATH",
                   type=parsing.model_name_or_path,
                   help="a registered model name (tt-zoo list --shipped) or an export directory "
                        f"(repeatable; default: {', '.join(DEMO_MODELS)})")
    p.add_argument("--squad", help="SQuAD-format JSON (default: $TT_ZOO_DATA/squad/"
                                   "dev-v1.1.json, else SQuAD validation from Hugging Face)")
    p.add_argument("--backend", default="scann", choices=("scann", "brute_force"),
                   help="the index: ScaNN (approximate, fast) or brute force (exact)")
    p.add_argument("--questions", type=numbers.count(low=0, high=10_000), default=3, help="questions to show with their hits")
    p.add_argument("--seed", type=numbers.SEED, default=1, help="seed of the questions shown")
    parsing.add_no_progress(p)


def parse_args(argv=None):
    p = parsing.command_parser("demo", __doc__, add_arguments)
    args = p.parse_args(argv)
    args.model = args.model or list(DEMO_MODELS)
    if args.squad and not pathlib.Path(args.squad).is_file():
        p.error(f"--squad: {args.squad} does not exist")
    return args


def main(argv=None):
    args = parse_args(argv)
    from tt_zoo.evaluation import metrics as retrieval_metrics  # noqa: PLC0415

    start = time.perf_counter()
    try:
        reqa = load_reqa(args.squad)
    except MissingDataError as e:
        sys.exit(f"tt-zoo demo: {e}")
    print(f"ReQA-SQuAD(dev): {len(reqa.questions):,} questions, "
          f"{len(reqa.candidates):,} (sentence, passage) candidates")
    queries = [q.text for q in reqa.questions]
    gold = [q.gold_index for q in reqa.questions]
    scores, trained_on_reqa = {}, False
    for n, name in enumerate(args.model):
        model = load_model(name, "demo")
        print(f"\nloaded {model}")
        t = time.perf_counter()
        index = model.index([c.passage for c in reqa.candidates],
                            titles=[c.sentence for c in reqa.candidates], backend=args.backend,
                            show_progress_bar=progress_bar(args.no_progress))
        print(f"encoded and indexed the candidates with {args.backend} in "
              f"{time.perf_counter() - t:.0f} s")
        if n == 0:
            show_hits(index, reqa, random.Random(args.seed).sample(
                reqa.questions, min(args.questions, len(reqa.questions))))
        seen = "reqa" in trained_tasks(model)
        trained_on_reqa = trained_on_reqa or seen
        scores[f"{name} ({args.backend}){' †' if seen else ''}"] = retrieval_metrics.evaluate(
            index.embedding_index, model.encode_queries(queries), gold)["exact"]
    scores["BM25"] = retrieval_metrics.evaluate_bm25(reqa)["exact"]
    print(f"\nAll {len(queries):,} questions (* = the gold (sentence, passage) pair):")
    print(format_scores(scores, ("R@1", "R@10", "R@100")))
    if trained_on_reqa:
        print("† trained on the 80% cold-start split's training questions, which these include: "
              "its held-out numbers are in results/checkpoints.md")
    print(f"\ndone in {time.perf_counter() - start:.0f} s")


def trained_tasks(model) -> list:
    """The names of the tasks a model's card says it trained on (multi-task runs)."""
    run = model.card.training.multi_task
    return [t.name for t in (run.tasks or [])] if run is not None else []


def show_hits(index, reqa, questions) -> None:
    """Each question's top 3 (sentence, passage) hits, the gold one starred."""
    for question in questions:
        print(f"\nQ: {question.text}")
        for rank, hit in enumerate(index.search([question.text], k=3)[0], 1):
            mark = "*" if int(hit.id) == question.gold_index else " "
            print(f"  {rank}.{mark} [{hit.score:6.2f}] {hit.title[:110]}")
        print(f"  gold: {reqa.candidates[question.gold_index].sentence[:110]}")


if __name__ == "__main__":
    main()
