"""Training: pretraining and fine-tuning (Chang et al. 2020, Sec. 5).

`step_data` (pairs tokenized on the host, served by step), `loop` (the paper's schedule,
strategies, the resumable one-`fit` loop), `mlm` (the MLM baseline), `finetuning` (ReQA),
`multi_task` (one retriever on several tasks, Maillard et al. 2021), `multi_task_tasks` (its
tasks: specs, building, caching, re-mining), `initial_models` (the model a run starts from).

`multitask(config)` (`multitask_run`) is a whole ``tt-zoo multitask`` run as a library call
(tasks, model, training, evaluation, export and record), `train_term_weighter(config)`
(`term_weight_run`) a whole ``tt-zoo train-term-weights`` run. Importing this package loads no
TensorFlow.
"""

from tt_zoo.training.multitask_run import MultitaskError, multitask
from tt_zoo.training.term_weight_run import TermWeightRunError, train_term_weighter

__all__ = ["MultitaskError", "TermWeightRunError", "multitask", "train_term_weighter"]
