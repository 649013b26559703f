"""Training: pretraining and fine-tuning (Chang et al. 2020, Sec. 5).

The runs, as notebooks, tests and the commands call them: `pretrain(config)`
(`pretrain_run`: a registered variant pretrained on pairs, resumable, then exported) and
`finetune(config)` (`finetune_run`: ReQA fine-tuning and evaluation), each with its typed config
(`PretrainConfig`, `FinetuneConfig`; `run_config`: the settings, as flags, a JSON file and the
artifact's record) and `RunError` for a setting that stops the run. Below them: `step_data`
(pairs tokenized on the host, served by step), `loop` (the paper's schedule, strategies, the
resumable one-`fit` loop), `mlm` (the MLM baseline), `finetuning` (ReQA), `multi_task` (one
retriever on several tasks, Maillard et al. 2021).
"""

from tt_zoo.training.finetune_run import FinetuneConfig, finetune
from tt_zoo.training.pretrain_run import PretrainConfig, PretrainResult, pretrain
from tt_zoo.training.run_config import RunError

__all__ = ["FinetuneConfig", "PretrainConfig", "PretrainResult", "RunError", "finetune",
           "pretrain"]
