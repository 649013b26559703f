"""Training: pretraining and fine-tuning (Chang et al. 2020, Sec. 5).

The runs, as notebooks, tests and the commands call them: `pretrain(config)`
(`pretrain_run`: a registered variant pretrained on pairs, resumable, then exported),
`finetune(config)` (`finetune_run`: ReQA fine-tuning and evaluation), `multitask(config)`
(`multitask_run`: one retriever on several tasks, Maillard et al. 2021: tasks, model, training,
evaluation, export and record) and `train_term_weighter(config)` (`term_weight_run`: HDCT term
weights), each with its typed config (`run_config`: the settings, as flags, a JSON file and the
artifact's record) and an error for a setting that stops the run; `shipped_recipes` writes
each shipped model's run config to tt_zoo/zoo/recipes/ as a ``--config`` file. Below them: `step_data`
(pairs tokenized on the host, served by step), `loop` (the paper's schedule, strategies, the
resumable one-`fit` loop), `mlm` (the MLM baseline), `finetuning` (ReQA), `multi_task` and
`multi_task_tasks` (its tasks: specs, building, caching, re-mining), `precision` (every run's
``--precision``: bfloat16 for Transformer towers on AMX or AVX512-BF16; `training_copy` for a
loop of one's own). Importing this package loads no TensorFlow.
"""

from tt_zoo.training.finetune_run import FinetuneConfig, finetune
from tt_zoo.configs.multitask import MultitaskConfig
from tt_zoo.training.multitask_run import MultitaskError, multitask
from tt_zoo.training.precision import training_copy
from tt_zoo.training.pretrain_run import PretrainConfig, PretrainResult, pretrain
from tt_zoo.configs.run_config import RunError
from tt_zoo.training.term_weight_run import TermWeightRunError, train_term_weighter

__all__ = ["FinetuneConfig", "MultitaskConfig", "MultitaskError", "PretrainConfig",
           "PretrainResult", "RunError", "TermWeightRunError", "finetune", "multitask", "pretrain",
           "train_term_weighter", "training_copy"]
