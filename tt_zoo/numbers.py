"""Numeric flags checked when they are parsed: finite, a whole number where one is meant, and in
the flag's range.

Every int or float flag of every command has a `Number` as its argparse ``type`` (a run config's
through `tt_zoo.configs.run_config.option`'s ``number``), so ``--learning-rate nan``,
``--batch-size 0``, ``--steps -5`` or ``--warmup-fraction 5`` end at once in argparse's usage
error naming the flag, before any data is read or TensorFlow loads; a ``--config`` file's value
is checked by the same range. A value the range allows is taken as given: 0 is a number, never
"not given" (a flag's default is its own None).

Example:
>>> count = Number(int, low=1)
>>> count("8")
8
>>> count("0")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be a whole number from 1 to 2147483647 (got '0')
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Optional, Union

# The largest whole number a flag takes: TensorFlow's int32 (step counters, shapes, seeds).
MAX_INT = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Number:
    """A flag's numeric type and range: ``low <= x <= high`` (``low < x`` with `low_open`,
    ``x < high`` with `high_open`). An int flag's `high` defaults to `MAX_INT`; a float flag
    names its own (a float is always finite too)."""

    kind: type = int
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False

    def __post_init__(self):
        if self.kind not in (int, float):
            raise TypeError(f"Number.kind must be int or float (got {self.kind!r})")
        if self.kind is int and self.high is None:
            object.__setattr__(self, "high", MAX_INT)
        if self.high is None:
            raise TypeError("a float Number needs a finite `high`")

    def _text(self, bound: float) -> str:
        return str(int(bound)) if self.kind is int else f"{bound:g}"

    def describe(self) -> str:
        """The range in words, as the error says it."""
        low, high = (None if self.low is None else self._text(self.low)), self._text(self.high)
        if self.kind is int and not self.low_open and not self.high_open and low is not None:
            return f"a whole number from {low} to {high}"
        what = "a whole number" if self.kind is int else "a finite number"
        if low is None:
            return f"{what} {'<' if self.high_open else '<='} {high}"
        return (f"{what} in {'(' if self.low_open else '['}{low}, {high}"
                f"{')' if self.high_open else ']'}")

    def problem(self, value) -> Optional[str]:
        """Why `value` (already a number) is out of this range, or None."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be {self.describe()} (got {value!r})"
        if self.kind is int and not float(value).is_integer():
            return f"must be {self.describe()} (got {value!r})"
        if not math.isfinite(value):
            return f"must be {self.describe()} (got {value!r})"
        low_fails = self.low is not None and (value <= self.low if self.low_open
                                              else value < self.low)
        high_fails = value >= self.high if self.high_open else value > self.high
        if low_fails or high_fails:
            return f"must be {self.describe()} (got {value!r})"
        return None

    def __call__(self, text: str) -> Union[int, float]:
        """Parses a flag's text; raises `argparse.ArgumentTypeError` (argparse adds the flag's
        name and the usage)."""
        try:
            value = int(text, 10) if self.kind is int else float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {self.describe()} (got {text!r})") from None
        problem = self.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem.replace(f"(got {value!r})",
                                                             f"(got {text!r})"))
        return value


def count(low: int = 1, high: int = MAX_INT) -> Number:
    """A whole number from `low` (default 1: a batch, a number of steps or pairs) to `high`."""
    return Number(int, low=low, high=high)


def fraction(*, high_open: bool = False, low_open: bool = False) -> Number:
    """A number in [0, 1] (`high_open`: below 1; `low_open`: above 0)."""
    return Number(float, low=0.0, high=1.0, low_open=low_open, high_open=high_open)


def positive(high: float) -> Number:
    """A number above 0 and at most `high` (a learning rate, a temperature)."""
    return Number(float, low=0.0, high=high, low_open=True)


def non_negative(high: float) -> Number:
    """A number from 0 to `high` (an exponent, a weight)."""
    return Number(float, low=0.0, high=high)


# The ranges several commands share.
SEED = count(low=0)
SPLIT_FRACTION = fraction(low_open=True, high_open=True)  # a train/test split: both non-empty
QUERY_WEIGHT = non_negative(100.0)  # --query-idf's exponent and --query-mask-weight
TOKEN_BUDGET = count(low=3, high=8192)  # [CLS], one token, [SEP]; BERT's positions stop at 512
LEARNING_RATE = positive(1.0)  # Adam's rates are far below 1; above, training diverges
