"""Type checks of the public API's path arguments: a wrong type is a TypeError that names the
argument and what it takes, not Python's message about ``NoneType``. (Texts are checked by
`tt_zoo.modeling.models.as_string_list`.)"""

from __future__ import annotations

import os
import pathlib


def as_path(value, name: str) -> pathlib.Path:
    """`value` (a str or an os.PathLike) as a Path; anything else raises TypeError naming
    `name`."""
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (a str or pathlib.Path), got "
                        f"{type(value).__name__}: {value!r:.80}.")
    return pathlib.Path(value)
