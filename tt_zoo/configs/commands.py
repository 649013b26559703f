"""The run config of every `tt-zoo` command that trains a model, by command name
(``tt_zoo/zoo/recipes/COMMAND/NAME.json`` names its command by its folder)."""

from __future__ import annotations

from typing import Dict, Type

from tt_zoo.configs.adapt_queries import AdaptQueriesConfig
from tt_zoo.configs.finetune import FinetuneConfig
from tt_zoo.configs.multitask import MultitaskConfig
from tt_zoo.configs.pretrain import PretrainConfig
from tt_zoo.configs.run_config import RunConfig
from tt_zoo.configs.term_weights import TermWeightConfig

RUN_CONFIGS: Dict[str, Type[RunConfig]] = {
    config.COMMAND: config for config in (PretrainConfig, FinetuneConfig, MultitaskConfig,
                                          TermWeightConfig, AdaptQueriesConfig)}
