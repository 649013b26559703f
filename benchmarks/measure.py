"""How the benchmarks measure: interleaved rounds, rates, recall, the machine line (one way to
time, for benchmarks/peers, beam_encode, precision_cost, text_rows and the others).

Everything here is plain Python and NumPy (no peer library; TensorFlow only to read its thread
settings), so the rules that decide the reported numbers can be tested with hand-worked values
(tests/test_peers_benchmark.py):

- `timed` / `stopwatch`: one call of a function, timed (the one way every benchmark times).
- `interleaved_rounds`: every contender runs once per round, in the same order each round
  (A B C A B C ...), so a noisy neighbour on a shared machine slows all of them alike; the
  report gives medians over rounds.
- `rates`: units per second of each round, summarised as median, min and max; `rate_row`
  the same as a result row's fields, `add_ratio` a row's speed over another's, `speed_cells`
  its Markdown cells.
- `recall_at_k`: the fraction of the exact top-k an approximate search returns.
- `walk_knob` / `fastest_reaching`: the sweep of an approximate index's main knob (ascending,
  stopped at the first value reaching the target recall, since larger values only cost more)
  and the choice of the fastest timed setting that reaches it.
- `min_cosine`: the smallest cosine between two sets of vectors, row by row.
- `machine_info`: CPU model, cores, load, library versions: the line every section records;
  `library_threads` the thread settings of TensorFlow and PyTorch.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.util
import os
import platform
import re
import statistics
import time
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tt_zoo import hardware

BENCH_INSTALL_HINT = "pip install -e .[bench]"
# Distribution names whose versions every section records (absent ones as "not installed").
VERSIONED = ("tt_zoo", "tensorflow", "tf-keras", "numpy", "scann", "torch", "transformers",
             "sentence-transformers", "tokenizers", "faiss-cpu")


def missing_modules(modules: Iterable[str]) -> List[str]:
    """The modules of `modules` that cannot be imported here (found by `importlib.util.find_spec`,
    without importing them)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def unavailable_reason(modules: Iterable[str]) -> Optional[str]:
    """Why a peer cannot run (its missing modules and how to install them), or None."""
    missing = missing_modules(modules)
    if not missing:
        return None
    return (f"not measured: {', '.join(missing)} not installed (the benchmark-only extra: "
            f"`{BENCH_INSTALL_HINT}`)")


def timed(work: Callable[[], object]) -> Tuple[object, float]:
    """Calls `work` once: (what it returned, the seconds it took)."""
    start = time.perf_counter()
    value = work()
    return value, time.perf_counter() - start


def stopwatch(work: Callable[[], object]) -> Callable[[], float]:
    """A runner for `interleaved_rounds` that times one call of `work` (seconds)."""
    return lambda: timed(work)[1]


def interleaved_rounds(runners: Mapping[str, Callable[[], float]], rounds: int,
                       log: Callable[[str], None] = lambda _: None) -> Dict[str, List[float]]:
    """Calls each runner once per round, in order, `rounds` times: A B C A B C ...

    Each runner does one unit of work and returns the seconds it measured (see `stopwatch`;
    a runner may time only part of its call, e.g. the training steps inside `model.fit`).
    Returns the seconds of every round, per runner.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1 (got {rounds}).")
    seconds: Dict[str, List[float]] = {name: [] for name in runners}
    for r in range(rounds):
        for name, run in runners.items():
            seconds[name].append(float(run()))
        log(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {s[-1]:.3g} s"
                                                    for n, s in seconds.items()))
    return seconds


def rates(seconds: Sequence[float], units: float) -> dict:
    """`units` of work per second in each round, summarised: median, min, max, rounds."""
    if not seconds or min(seconds) <= 0:
        raise ValueError(f"need positive round times (got {list(seconds)}).")
    per_round = [units / s for s in seconds]
    return {"median_per_s": statistics.median(per_round), "min_per_s": min(per_round),
            "max_per_s": max(per_round), "rounds": len(per_round)}


def rate_row(seconds: Sequence[float], units: float, unit: str = "per_s") -> dict:
    """`rates` as a result row's fields: ``median_UNIT``, ``min_UNIT``, ``max_UNIT`` (units per
    second; e.g. unit "docs_per_s", "qps"), ``rounds`` and every round's ``round_seconds``."""
    r = rates(seconds, units)
    return {f"median_{unit}": r["median_per_s"], f"min_{unit}": r["min_per_s"],
            f"max_{unit}": r["max_per_s"], "rounds": r["rounds"], "round_seconds": list(seconds)}


def add_ratio(rows: Sequence[dict], speed: str, name: str,
              base_of: Callable[[dict], Optional[dict]]) -> None:
    """Sets ``row[name]`` = row's `speed` over its base row's (`base_of(row)`; None: no ratio)."""
    for row in rows:
        base = base_of(row)
        if base is not None:
            row[name] = row[speed] / base[speed]


def speed_cells(row: Mapping, unit: str, digits: int) -> str:
    """Markdown cells ``median | min–max`` of a `rate_row` with `digits` decimals."""
    return (f"{row[f'median_{unit}']:,.{digits}f} | {row[f'min_{unit}']:,.{digits}f}–"
            f"{row[f'max_{unit}']:,.{digits}f}")


def recall_at_k(found_rows, exact_rows, k: int) -> float:
    """Mean over queries of |found top-k ∩ exact top-k| / k.

    Rows are candidate positions, best first, `[num_queries, >= k]`; FAISS's -1 (no result)
    matches nothing.
    """
    found, exact = np.asarray(found_rows), np.asarray(exact_rows)
    if found.shape[0] != exact.shape[0] or min(found.shape[1], exact.shape[1]) < k:
        raise ValueError(f"need [num_queries, >= {k}] rows for both (got {found.shape} and "
                         f"{exact.shape}).")
    hits = [len(set(f[:k].tolist()) & set(e[:k].tolist())) for f, e in zip(found, exact)]
    return float(np.mean(hits)) / k


def walk_knob(values: Sequence, recall_of: Callable[[object], float],
              target: float) -> List[tuple]:
    """Evaluates `recall_of` on `values` in ascending order, stopping at the first that reaches
    `target` (a larger value searches more and costs more). Returns [(value, recall), ...]."""
    walked = []
    for value in sorted(values):
        recall = float(recall_of(value))
        walked.append((value, recall))
        if recall >= target:
            break
    return walked


def fastest_reaching(rows: Sequence[dict], target: float, speed: str = "median_qps",
                     recall: str = "recall_at_10") -> Optional[dict]:
    """The row with the highest `speed` among those whose `recall` is at least `target`."""
    reaching = [r for r in rows if r.get(recall) is not None and r[recall] >= target]
    return max(reaching, key=lambda r: r[speed]) if reaching else None


def min_cosine(a, b) -> float:
    """The smallest cosine between the rows of `a` and `b` (row i with row i), in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def rss_bytes() -> int:
    """This process's resident memory (Linux /proc/self/status VmRSS), 0 where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cpu_ticks():
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]), idle


def busy_cores(seconds: float = 1.0) -> Optional[float]:
    """How many cores other processes kept busy over the next `seconds` (sampled from
    /proc/stat while this process waits), or None where /proc/stat is unreadable. The load
    average would count this process's own threads from a section just finished."""
    try:
        total0, idle0 = _cpu_ticks()
        time.sleep(seconds)
        total1, idle1 = _cpu_ticks()
    except (OSError, ValueError, IndexError):
        return None
    if total1 <= total0:
        return None
    return round((1 - (idle1 - idle0) / (total1 - total0)) * (os.cpu_count() or 1), 2)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions(names: Iterable[str] = VERSIONED) -> Dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def library_threads() -> dict:
    """TensorFlow's intra- and inter-op threads ("default" when unset) and PyTorch's, if
    installed."""
    import tensorflow as tf

    out = {"tensorflow intra-op": tf.config.threading.get_intra_op_parallelism_threads() or
           "default", "tensorflow inter-op":
           tf.config.threading.get_inter_op_parallelism_threads() or "default"}
    try:
        import torch
        out["torch"] = torch.get_num_threads()
    except ImportError:
        pass
    return out


def machine_info(threads: Optional[Mapping[str, object]] = None) -> dict:
    """CPU model, cores, load average now, Python and library versions, thread settings."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_1_5_15": [round(x, 2) for x in load],
            "other_busy_cores_at_start": busy_cores(),
            "python": platform.python_version(), "versions": versions(),
            "threads": dict(threads or {}), "matrix_units": hardware.matrix_units(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def is_busy(info: Mapping) -> bool:
    """Whether other processes kept more than half a core busy when a section started or
    ended."""
    return any((info.get(f"other_busy_cores_at_{when}") or 0) > 0.5 for when in ("start", "end"))


def _units_text(units: Mapping) -> str:
    """The machine line's note on the matrix units (`tt_zoo.hardware.matrix_units`)."""
    if units.get("amx"):
        return "AMX in use (bfloat16 by default)"
    if units.get("bfloat16_unit") == "avx512_bf16":
        return "no AMX, AVX512-BF16 in use (bfloat16 encoding by default)"
    return "no AMX (float32 by default)"


def machine_line(info: Mapping) -> str:
    """One Markdown line: the machine and library versions a section was measured with."""
    v = {k: x for k, x in info["versions"].items() if x != "not installed"}
    threads = ", ".join(f"{k} {x}" for k, x in info.get("threads", {}).items())
    busy = [info.get(f"other_busy_cores_at_{when}") for when in ("start", "end")]
    busy_text = " / ".join("?" if b is None else f"{b:.2f}" for b in busy)
    units = info.get("matrix_units") or {}
    amx = "" if not units else ", " + _units_text(units)
    return (f"Machine: {info['cpu']}, {info['cores']} cores{amx}, cores kept busy by other processes "
            f"at start / end {busy_text}; "
            f"Python {info['python']}; " + ", ".join(f"{k} {x}" for k, x in v.items())
            + (f"; threads: {threads}" if threads else "") + f"; {info['date']}.")


def onednn_kernels(log: Iterable[str]) -> Dict[str, int]:
    """Executions per oneDNN kernel in an ``ONEDNN_VERBOSE=1`` log, keyed
    "primitive kernel source-dtype" (e.g. "matmul brg_matmul:avx10_1_512_amx bf16": the AMX
    tiles; "inner_product x64:gemm:jit f32": the float32 fused MatMul + BiasAdd)."""
    counts: Dict[str, int] = {}
    for line in log:
        fields = line.strip().split(",")
        if len(fields) > 8 and fields[0] == "onednn_verbose" and fields[3] == "exec":
            dtype = re.match(r"src[:_]([a-z0-9]+)", fields[8])
            key = f"{fields[5]} {fields[6] or '-'} {dtype.group(1) if dtype else '?'}"
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def kernels_of(script: str, timeout: float = 900) -> Dict[str, int]:
    """The oneDNN kernels a Python `script` runs after it prints "=== measure" (the setup
    before it, loading and tracing, is not counted): `onednn_kernels` of its verbose log."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    env = dict(os.environ, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=timeout, check=True)
    return onednn_kernels(run.stdout.split("=== measure", 1)[-1].splitlines())

