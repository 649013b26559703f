"""The run configs of the commands that train a model, one module a command (`pretrain`,
`finetune`, `multitask`, `term_weights`, `adapt_queries`) over the shared argument groups and
their machinery (`run_config`: flags, ``--config`` files, the artifact's record, the command
line); `commands.RUN_CONFIGS` names them by command. A registered model's recipe is one of them
(`tt_zoo.zoo.registry.ModelSpec.run`). Nothing here imports TensorFlow."""
