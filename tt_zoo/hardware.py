"""What this CPU's matrix units allow, read at run time, and the precision tt_zoo defaults to.

On a CPU with AMX (Intel Sapphire Rapids and later: `amx_bf16` and `amx_tile` in
/proc/cpuinfo), oneDNN runs bfloat16 matmuls on the tile units, about 5x the float32 rate
measured here (docs/speed.md); on a CPU with AVX512-BF16 but no AMX (AMD Zen 4 and later:
`avx512_bf16`), oneDNN's `avx512_core_bf16` matmuls run about 2x the float32 rate. On either,
tt_zoo encodes in bfloat16 by default (`tt_zoo.modeling.bert_inference.encode_sequence_bfloat16`)
and trains Transformer towers under Keras' ``mixed_bfloat16`` policy (float32 weights;
`training_dtype_policy`). Bag-of-words towers train in float32 unless asked: an embedding sum
gains little from the matrix units and lost ranking quality in bfloat16
(`tt_zoo.training.precision.bfloat16_pays`). Elsewhere nothing changes.

The switch back: ``TT_ZOO_PRECISION=float32`` in the environment (or ``precision="float32"``
in a call, ``--precision float32`` on a command); ``TT_ZOO_PRECISION=bfloat16`` asks for
bfloat16 on any CPU. TensorFlow started with ``TF_ENABLE_ONEDNN_OPTS=0`` has no oneDNN, hence no
AMX: the default is float32 there.
"""

from __future__ import annotations

import functools
import os
from typing import Dict, Optional

from tt_zoo.errors import TtZooError

PRECISION_VARIABLE = "TT_ZOO_PRECISION"
PRECISION_CHOICES = ("auto", "float32", "bfloat16")
_AMX_FLAGS = ("amx_bf16", "amx_tile")
_AVX512_BF16_FLAG = "avx512_bf16"


@functools.lru_cache(maxsize=None)
def cpu_flags() -> frozenset:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _onednn_on() -> bool:
    """False when TensorFlow runs without oneDNN (``TF_ENABLE_ONEDNN_OPTS=0``): no bfloat16
    kernels on the matrix units then."""
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower() not in ("0", "false")


def has_amx() -> bool:
    """True when the CPU has AMX bfloat16 tiles and TensorFlow's oneDNN kernels are on."""
    return _onednn_on() and all(flag in cpu_flags() for flag in _AMX_FLAGS)


def bfloat16_unit() -> Optional[str]:
    """The unit oneDNN runs bfloat16 matmuls on: "amx" (tiles), "avx512_bf16" (AVX512-BF16 dot
    products, no AMX), or None (no such unit, or oneDNN off)."""
    if has_amx():
        return "amx"
    return "avx512_bf16" if _onednn_on() and _AVX512_BF16_FLAG in cpu_flags() else None


def _chosen_precision() -> str:
    """``TT_ZOO_PRECISION`` ("auto" when unset), checked."""
    chosen = os.environ.get(PRECISION_VARIABLE, "").strip().lower() or "auto"
    if chosen not in PRECISION_CHOICES:
        raise TtZooError(f"{PRECISION_VARIABLE} must be one of {PRECISION_CHOICES} (got "
                         f"{os.environ[PRECISION_VARIABLE]!r}).")
    return chosen


def default_precision() -> str:
    """The encoders' default: "bfloat16" on a CPU with a bfloat16 unit (`bfloat16_unit`: AMX or
    AVX512-BF16), "float32" elsewhere, unless ``TT_ZOO_PRECISION`` says."""
    chosen = _chosen_precision()
    if chosen == "auto":
        return "bfloat16" if bfloat16_unit() else "float32"
    return chosen


def resolve_precision(precision: str) -> str:
    """`precision` ("auto", "float32" or "bfloat16") made concrete: "auto" is
    `default_precision()`."""
    if precision not in PRECISION_CHOICES:
        raise TtZooError(f"precision must be one of {PRECISION_CHOICES} (got {precision!r}).")
    return default_precision() if precision == "auto" else precision


def training_dtype_policy(precision: str = "auto", bfloat16_pays: bool = True) -> str:
    """The Keras dtype policy a training run uses for `precision`: "mixed_bfloat16" (float32
    weights, bfloat16 matmuls) or "float32". "auto" (and ``TT_ZOO_PRECISION`` unset or auto) is
    mixed_bfloat16 where the CPU has a bfloat16 unit (`bfloat16_unit`: AMX or AVX512-BF16) and
    the towers are of a family for which it pays (`bfloat16_pays`: False for bag-of-words
    towers, `tt_zoo.training.precision.bfloat16_pays`), float32 elsewhere; "bfloat16" asks for
    it on any CPU and tower."""
    if precision not in PRECISION_CHOICES:
        raise TtZooError(f"precision must be one of {PRECISION_CHOICES} (got {precision!r}).")
    if precision == "auto":
        precision = _chosen_precision()
    if precision == "auto":
        precision = "bfloat16" if bfloat16_pays and bfloat16_unit() else "float32"
    return "mixed_bfloat16" if precision == "bfloat16" else "float32"


def matrix_units() -> Dict[str, object]:
    """What a benchmark records of the CPU's matrix units: the AMX, AVX512-BF16 and VNNI flags,
    whether tt_zoo uses AMX, the unit its bfloat16 matmuls run on, and the encoders' default
    precision."""
    return {"flags": sorted(f for f in cpu_flags()
                            if f.startswith(("amx", "avx512_bf16", "avx512_vnni"))),
            "amx": has_amx(), "bfloat16_unit": bfloat16_unit(),
            "default_precision": default_precision()}
