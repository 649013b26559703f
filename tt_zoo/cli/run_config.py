"""The typed run configs are `tt_zoo.training.run_config`'s (the library runs them:
`tt_zoo.training.pretrain`, `tt_zoo.training.finetune`); this name is kept for the commands
that still import it from here (multitask, train-term-weights)."""

from tt_zoo.training.run_config import (CONFIG_FLAG, RUN_CONFIG_KEY, RunConfig,  # noqa: F401
                                        RunConfigError, flag, option, recorded_command)
