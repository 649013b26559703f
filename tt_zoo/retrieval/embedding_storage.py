"""How candidate embeddings are kept on disk: float32, float16, or int8 with a scale.

Chang et al., ICLR 2020, Section 2 ("Inference"): the candidate embeddings psi(d) are computed
once, offline, and kept for maximum inner product search; at corpus scale the bytes they take
are the index's cost. `EmbeddingStorage` says how they are stored and turns float32 embeddings
into the stored arrays and back:

- ``float32``: as computed (4 bytes a value);
- ``float16``: IEEE half precision (2 bytes), round to nearest: a value x comes back within
  ``|x| * 2**-11`` (within ``2**-25`` below float16's smallest normal, 6.1e-5);
- ``int8``: q = round(x / s) in [-127, 127] (1 byte) with one float32 scale s = max |x| / 127
  per row (``scale="row"``, the default) or per dimension (``scale="dimension"``); x comes back
  as q * s, within s / 2. A row (or dimension) of zeros gets s = 1.

What the stored arrays cost in retrieval quality is measured by `benchmarks/beam_encode.py`.

Example:
>>> storage = EmbeddingStorage("int8")
>>> values, scales = storage.encode(np.array([[0.5, -1.27]], "float32"))
>>> values, scales
(array([[  50, -127]], dtype=int8), array([0.01], dtype=float32))
>>> storage.decode(values, scales)
array([[ 0.5 , -1.27]], dtype=float32)
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import numpy as np

from tt_zoo.errors import TtZooError

DTYPES = ("float32", "float16", "int8")
SCALES = ("row", "dimension")  # what one int8 scale covers
INT8_MAX = 127  # symmetric: -127..127, so q and -q both exist


@dataclasses.dataclass(frozen=True)
class EmbeddingStorage:
    """How embeddings are stored (see the module docstring).

    Args:
      dtype: "float32", "float16" or "int8".
      scale: for int8, "row" (one scale a row, the default) or "dimension" (one a column);
        None for the float types.
    """

    dtype: str = "float32"
    scale: Optional[str] = None

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise TtZooError(f"embedding dtype must be one of {', '.join(DTYPES)} "
                             f"(got {self.dtype!r}).")
        if self.dtype == "int8":
            if self.scale is None:
                object.__setattr__(self, "scale", "row")
            elif self.scale not in SCALES:
                raise TtZooError(f"int8 scale must be one of {', '.join(SCALES)} "
                                 f"(got {self.scale!r}).")
        elif self.scale is not None:
            raise TtZooError(f"scale is for int8 storage only (got scale={self.scale!r} with "
                             f"dtype {self.dtype!r}).")

    def __str__(self) -> str:
        return f"int8 (per-{self.scale} scale)" if self.dtype == "int8" else self.dtype

    def encode(self, embeddings) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """float `[n, dim]` embeddings -> ``(values, scales)``: values of `dtype` `[n, dim]`;
        for int8 the float32 scales, `[n]` (per row) or `[dim]` (per dimension), else None."""
        x = np.asarray(embeddings, dtype=np.float32)
        if x.ndim != 2:
            raise TtZooError(f"embeddings to store must be 2D [n, dim] (got shape {x.shape}).")
        if not np.isfinite(x).all():
            raise TtZooError("embeddings to store hold NaN or inf.")
        if self.dtype == "float32":
            return x, None
        if self.dtype == "float16":
            with np.errstate(over="ignore"):  # checked just below
                values = x.astype(np.float16)
            if not np.isfinite(values).all():
                raise TtZooError("embeddings exceed float16's range (65504); store them as "
                                 "float32 or int8.")
            return values, None
        axis = 1 if self.scale == "row" else 0
        peak = (np.abs(x).max(axis=axis) if x.shape[axis] and x.shape[1 - axis]
                else np.zeros(x.shape[1 - axis], np.float32))
        scales = np.where(peak > 0, peak / INT8_MAX, 1.0).astype(np.float32)
        broadcast = scales[:, None] if axis == 1 else scales[None, :]
        values = np.clip(np.rint(x / broadcast), -INT8_MAX, INT8_MAX).astype(np.int8)
        return values, scales

    def decode(self, values, scales: Optional[np.ndarray] = None) -> np.ndarray:
        """The stored ``(values, scales)`` back as float32 `[n, dim]`."""
        values = np.asarray(values)
        if values.dtype != np.dtype(self.dtype) or values.ndim != 2:
            raise TtZooError(f"stored embeddings must be {self.dtype} [n, dim] (got "
                             f"{values.dtype} {values.shape}).")
        if self.dtype != "int8":
            return values.astype(np.float32)
        n, dim = values.shape
        expected = (n,) if self.scale == "row" else (dim,)
        scales = None if scales is None else np.asarray(scales, dtype=np.float32)
        if scales is None or scales.shape != expected:
            raise TtZooError(f"int8 embeddings [{n}, {dim}] with a per-{self.scale} scale need "
                             f"float32 scales of shape {expected} (got "
                             f"{None if scales is None else scales.shape}).")
        broadcast = scales[:, None] if self.scale == "row" else scales[None, :]
        return values.astype(np.float32) * broadcast

    def bytes_per_row(self, dim: int, num_rows: int) -> float:
        """Bytes a stored row of `dim` values takes, its share of the scales included (a
        per-dimension scale is shared by the `num_rows` rows)."""
        scales = {"row": 4, "dimension": 4 * dim / max(num_rows, 1)}.get(self.scale, 0)
        return np.dtype(self.dtype).itemsize * dim + scales

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, config: dict) -> "EmbeddingStorage":
        if not isinstance(config, dict) or set(config) - {"dtype", "scale"}:
            raise TtZooError(f"embedding storage must be {{'dtype', 'scale'}} (got {config!r}).")
        return cls(**config)


# The storages smaller than float32, as the benchmarks weigh their recall cost.
SMALLER = (EmbeddingStorage("float16"), EmbeddingStorage("int8", "row"),
           EmbeddingStorage("int8", "dimension"))
