"""Type checks of the public API's path and text arguments: a wrong type is a TypeError that
names the argument and what it takes, not Python's message about ``NoneType``. No TensorFlow:
BM25 and the NumPy query towers check their texts here too."""

from __future__ import annotations

import os
import pathlib
from typing import Tuple


def as_path(value, name: str) -> pathlib.Path:
    """`value` (a str or an os.PathLike) as a Path; anything else raises TypeError naming
    `name`."""
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (a str or pathlib.Path), got "
                        f"{type(value).__name__}: {value!r:.80}.")
    return pathlib.Path(value)


def as_string_list(values, name: str) -> list:
    """`values` as a list of strings; a bare string (a sequence of characters) or a non-string
    item raises TypeError naming `name`. Every API that takes texts checks them here."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of strings, not a single string ({values!r}).")
    if values is None or isinstance(values, (dict, set)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a string or a sequence of strings (got "
                        f"{type(values).__name__}: {values!r:.80}).")
    values = list(values)
    for i, v in enumerate(values):
        if not isinstance(v, (str, bytes)):
            raise TypeError(f"{name}[{i}] must be a string (got {type(v).__name__}: {v!r}).")
    return values


def decoded(values: list, name: str) -> list:
    """`values` (strings, as `as_string_list` gives them) with each bytes item decoded as
    UTF-8, for what keeps text as text (an index's passages, saved as JSON). Bytes that are not
    UTF-8 raise ValueError naming ``name[i]``."""
    out = []
    for i, value in enumerate(values):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{name}[{i}] is bytes that are not UTF-8 ({e.reason} at byte "
                                 f"{e.start}: {value[:40]!r}); give str, or UTF-8 bytes.") from None
        out.append(value)
    return out


def as_texts(values, name: str) -> Tuple[list, bool]:
    """``(texts, single)``: a single string as one text (single True), else `as_string_list`."""
    if isinstance(values, (str, bytes)):
        return [values], True
    return as_string_list(values, name), False


def as_documents(texts, titles) -> Tuple[list, list, bool]:
    """``(texts, titles, single)`` of the `encode_documents` arguments: `texts` one string or
    a sequence of them; `titles` None (all ""), or one string for one text, or a sequence as
    long as `texts`. Raises TypeError or ValueError naming the bad argument."""
    texts, single = as_texts(texts, "texts")
    if titles is None:
        return texts, [""] * len(texts), single
    if single:
        if not isinstance(titles, (str, bytes)):
            raise TypeError("titles must be one string when texts is one string (got "
                            f"{type(titles).__name__}: {titles!r}).")
        return texts, [titles], True
    titles = as_string_list(titles, "titles")
    if len(titles) != len(texts):
        raise ValueError(f"titles and texts differ in length ({len(titles)} vs {len(texts)}).")
    return texts, titles, False
