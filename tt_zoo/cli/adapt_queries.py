"""Adapt a trained two-tower model's query tower to a collection it has indexed (ADORE, Zhan et
al., SIGIR 2021).

Only the query tower trains, against the model's own embeddings of every passage: each training
question's softmax runs over the whole index, with every passage holding one of its answers a
positive, so the passages the model wrongly ranks first are always its negatives. The passages
are not encoded again, and the export's document side is the base model's (its cached passage
embeddings serve it). The token embeddings stay frozen unless --train-token-embeddings.

Questions are a named set under $TT_ZOO_DATA/odqa (default webquestions-trainmodel: never one of
the validation sets, webquestions-val and curatedtrec-train) or a WebQuestions JSON, CuratedTREC
TSV or JSONL file; passages are --articles (default $TT_ZOO_DATA/wikispeedia) cut into 100-word
blocks with titles. Give --passage-embeddings (the .npy `tt-zoo odqa --cache-dir` writes for the
model) to skip encoding the passages; every row must be finite and not zero, and 64 rows are
encoded again and checked against the model.

Examples:
  tt-zoo adapt-queries --model multitask_minilm_l6_384 \\
      --passage-embeddings runs/odqa_cache/passages-c2cba18bfc5821bc-130638.npy \\
      --epochs 10 --export runs/exports/adapted_multitask_minilm_l6_384
  tt-zoo odqa --model runs/exports/adapted_multitask_minilm_l6_384 --bm25

--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `AdaptQueriesConfig`); flags given with it override it.
"""

from __future__ import annotations

import pathlib
import sys

from tt_zoo.cli import parsing
from tt_zoo.cli.common import check_model_export_target, default_data_dir, run_training
from tt_zoo.training.query_adaptation_run import COMMAND, AdaptQueriesConfig


add_arguments = AdaptQueriesConfig.add_arguments  # (the flags of its run config)


def parse_args(argv=None) -> AdaptQueriesConfig:
    p, args = parsing.parse_run_config(AdaptQueriesConfig, __doc__, argv)
    if not args.model:
        p.error("give --model NAME_OR_PATH: the trained two-tower model to adapt")
    articles = pathlib.Path(args.articles) if args.articles else default_data_dir() / "wikispeedia"
    if not articles.exists():
        parsing.exit_missing(p, f"--articles: {articles} does not exist (set TT_ZOO_DATA or "
                                "pass --articles PATH)")
    if args.export:
        check_model_export_target(p, args.export, "--export")
    return AdaptQueriesConfig.from_namespace(args)


def main(argv=None) -> dict:
    return run(parse_args(argv), sys.argv[1:] if argv is None else list(argv))


def run(config: AdaptQueriesConfig, argv: list) -> dict:
    """`tt_zoo.training.query_adaptation_run.adapt_queries` of `config` over the data folder;
    exits with its `RunError` in one line naming the command."""
    from tt_zoo.configs.run_config import RunError  # noqa: PLC0415
    from tt_zoo.training.query_adaptation_run import adapt_queries  # noqa: PLC0415

    return run_training(COMMAND, adapt_queries, config, argv, RunError)


if __name__ == "__main__":
    main()
