"""Train HDCT term weights on pretraining pairs or labelled tasks, from a two-tower export's
encoder or a term-weight export.

Dai & Callan, WWW 2020 (HDCT): a BERT encoder and a linear head predict each document word's
weight in [0, 1], trained by MSE against targets: 1 when the word's BM25 term occurs in the
pair's query, else 0 (`tt_zoo.data.term_weight_targets`). The queries are the pretraining
pairs' (--pairs, no labels: HDCT's weak supervision) or the questions of labelled tasks
(--task, the forms of `tt-zoo multitask`: webquestions, curatedtrec, reqa, jsonl:PATH; each
question's first positive passage: DeepCT's supervision by relevant queries, Dai & Callan
2019, Sec. 3.2), or both. --init-from is a two-tower export with a BERT document tower (its
encoder starts the model, the head starts fresh) or a term-weight export (training continues,
e.g. from the shipped hdct_ model on the QA tasks). A tiny BERT trains in minutes.
Checkpoints every N steps in --workdir; a rerun resumes (with the same settings, or it stops
naming the difference). The export records the initialisation, the data, the steps, the
training CPU time and the pseudo-tf scale N.

  tt-zoo train-term-weights --pairs runs/pairs/ict_bfs_wlp_128 \\
      --init-from saved_models/ict_bfs_wlp_512 --steps 2000 --batch-size 64 \\
      --learning-rate 5e-4 --export runs/models/hdct_ict_bfs_wlp
  tt-zoo train-term-weights --task webquestions --task reqa --untitled reqa \\
      --init-from hdct_ict_bfs_wlp_crop_span_qgen --steps 500 --batch-size 64 \\
      --learning-rate 2e-4 --export runs/models/hdct_qa

A reqa task's documents are ReQA's candidates, (sentence, passage): the model reads them so,
as a ReQA index that weighs each candidate does (`benchmarks/term_weights.py --reqa-documents
candidate`); with --untitled reqa it reads the passage alone, as an index that weighs each
distinct passage once does (--reqa-documents passage).

--config run.json reads the settings from a JSON file ({"group": {"setting": value}}, as the
export records them under "run_config", `TermWeightConfig`); flags given with it override it.
"""

from __future__ import annotations

import sys

from tt_zoo.atomic_io import check_replaceable
from tt_zoo.cli import parsing
from tt_zoo.cli.common import default_data_dir
from tt_zoo.configs.run_config import flag, recorded_command
from tt_zoo.configs.term_weights import TermWeightConfig

COMMAND = "train-term-weights"


add_arguments = TermWeightConfig.add_arguments  # (the flags of its run config)


def parse_args(argv=None) -> TermWeightConfig:
    return TermWeightConfig.from_namespace(
        parsing.parse_run_config(TermWeightConfig, __doc__, argv)[1])


def check_settings(config: TermWeightConfig) -> None:
    """Exits naming the first setting that cannot train, or an --export that may not be
    replaced (before training, so a run never ends in a refused write)."""
    training = config.training
    if not config.data.pairs and not config.tasks.task:
        sys.exit("nothing to train on: give --pairs DIR, --task SPEC (repeatable) or both")
    for name, value in (("steps", training.steps), ("batch_size", training.batch_size),
                        ("checkpoint_every", config.output.checkpoint_every)):
        if value <= 0:
            sys.exit(f"{flag(name)} must be positive (got {value})")
    if training.learning_rate <= 0 or not 0 <= training.warmup_fraction < 1:
        sys.exit(f"--learning-rate must be > 0 and --warmup-fraction in [0, 1) (got "
                 f"{training.learning_rate}, {training.warmup_fraction})")
    from tt_zoo.artifacts.term_weight_export import is_term_weight_export  # noqa: PLC0415
    try:
        check_replaceable(config.output.export, is_replaceable=is_term_weight_export,
                          what="tt_zoo term-weight export")
    except FileExistsError as e:
        sys.exit(f"--export: {e}")


def main(argv=None):
    return run(parse_args(argv), recorded_command(COMMAND, argv))


def run(config: TermWeightConfig, command: str) -> int:
    """Checks `config` (`check_settings`), then trains (resuming from WORKDIR) and exports its
    term-weight model (`tt_zoo.training.term_weight_run.train_term_weighter`) over the data
    folder (`default_data_dir`); exits with its error in one line. `command` is the command line
    the metadata records."""
    check_settings(config)
    from tt_zoo.training.multi_task_tasks import TaskFileError  # noqa: PLC0415
    from tt_zoo.training.term_weight_run import (TermWeightRunError,  # noqa: PLC0415
                                                 train_term_weighter)

    try:
        train_term_weighter(config, command=command, data_dir=default_data_dir())
    except TaskFileError as e:
        sys.exit(f"tt-zoo {COMMAND}: {e}")
    except TermWeightRunError as e:
        sys.exit(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
