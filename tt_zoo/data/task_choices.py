"""The choices of multi-task training's flags, with no imports: what `tt_zoo.configs.multitask`
declares (the registry imports it when `tt_zoo` loads, so this must stay light) and what
`tt_zoo.data.tasks` and `tt_zoo.data.distill_task` use."""

# How multi-task training draws batches (`tt_zoo.training.multi_task.TaskMixtureOrder`): from the
# union by task weight, or one task a batch.
BATCHING = ("mixed", "homogeneous")
# The query side of multi-task training (Maillard et al. 2021, Sec. 4.3): one query tower for
# every task, or one per task class routed by the marker word
# (`tt_zoo.training.multi_task.with_task_query_towers`).
QUERY_TOWERS = ("shared", "per-class")
# The losses of `tt_zoo.modeling.distillation`: RocketQAv2's listwise KL, Hofstätter et al.'s
# Margin-MSE.
DISTILL_LOSSES = ("kl", "margin_mse")
