"""The numeric flags' ranges are `tt_zoo.numbers`'s (a run config's fields name them, below the
commands); this name is kept for the commands that still import it from here (multitask,
train-term-weights, odqa)."""

from tt_zoo.numbers import *  # noqa: F401,F403
