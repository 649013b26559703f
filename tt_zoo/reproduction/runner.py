"""The mechanics every grid of runs shares: cells keyed by name or spec, their steps run as
`tt-zoo` processes with a log and skipped once done, their results kept as JSON, the report
written with the rows of earlier runs kept.

Three grids use it: `tt-zoo reproduce` (Chang et al. 2020, Tables 3 and 5: `grid`, `evaluate`,
`report` of this package), ``benchmarks/pretrain_tasks.py`` (the pretraining tasks past the
paper's, Sec. 3) and ``benchmarks/multi_task.py`` (Maillard et al. 2021). Each defines its cells
and its report; what a cell's work is made of lives here:

- `tt_zoo_command`: a `tt-zoo` step's command line in this interpreter;
- `run_logged`: one step as its own process, its output appended to a log (a failure returns
  False: the other cells go on, a rerun retries it); `run_once`: the same, skipped when the file
  the step makes exists, so a grid resumes where it stopped;
- `spec_key`: the folder and file name of a cell given by a dict of settings;
- `read_json` (`tt_zoo.atomic_io`'s), `cached_json`, `read_results`: a result file, a result
  computed once and kept, every result of a folder of cells;
- `with_earlier_rows`: a report's rows with those of earlier runs kept in place;
- `write_report`, `save_figure`: the report's JSON, Markdown and plot, each written atomically;
- `Stopwatch`: a step's wall-clock seconds (a pretraining's CPU seconds are its curve's,
  `tt_zoo.training.loop`).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shlex
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from tt_zoo.atomic_io import open_for_replace, read_json, write_json, write_text


class Stopwatch:
    """Wall-clock seconds since it was made (`time.perf_counter`); ``str()``: "12 s"."""

    def __init__(self):
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def __str__(self) -> str:
        return f"{self.seconds:.0f} s"


# -- the steps ------------------------------------------------------------------------------

def tt_zoo_command(command: str, *args: Any) -> List[str]:
    """``python -u -m tt_zoo.cli COMMAND ARGS...`` in this interpreter, each argument a string
    (unbuffered, so a step's log is current while it runs)."""
    return [sys.executable, "-u", "-m", "tt_zoo.cli", command, *(str(a) for a in args)]


def run_logged(command: Sequence[Any], log: pathlib.Path,
               cwd: Optional[pathlib.Path] = None) -> bool:
    """Runs one step of a grid as its own process (in `cwd`), its output appended to `log`;
    returns whether it succeeded (a failed cell does not stop the others: rerun to retry it)."""
    command = [str(c) for c in command]
    log = pathlib.Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  $ {shlex.join(command)}\n    (log: {log})", flush=True)
    watch = Stopwatch()
    with open(log, "a") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    if code:
        print(f"    FAILED (exit {code}) after {watch}; see {log}", flush=True)
        return False
    print(f"    done in {watch}", flush=True)
    return True


def run_once(what: str, done: pathlib.Path, command: Sequence[Any], log: pathlib.Path,
             cwd: Optional[pathlib.Path] = None) -> bool:
    """`run_logged`, unless the file `done` (what the step writes last) exists: then the step
    is not run again. `what` names the step in the lines printed. Returns whether `done` is
    there or the step succeeded."""
    if pathlib.Path(done).is_file():
        print(f"{what}: {done} exists", flush=True)
        return True
    print(what, flush=True)
    return run_logged(command, log, cwd)


# -- the cells' results ---------------------------------------------------------------------

def spec_key(name: str, spec: Dict[str, Any]) -> str:
    """The key of a cell given by a JSON-ready dict of settings: its name and a hash of them
    ("multi-1a2b3c4d5e"), so a changed setting is a new cell and an unchanged one is found."""
    text = json.dumps(spec, sort_keys=True)
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def cached_json(path: pathlib.Path, compute: Callable[[], Any]):
    """The JSON at `path`, or `compute()`'s, written there first (a cell's result is computed
    once: a rerun finds it)."""
    found = read_json(path)
    if found is not None:
        return found
    value = compute()
    write_json(path, value)
    return value


def read_results(folder: pathlib.Path) -> Dict[str, Any]:
    """{file stem: JSON} of every ``*.json`` in `folder`, by name ({} before there is one)."""
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def with_earlier_rows(rows: List[dict], previous: pathlib.Path, field: str = "cells",
                      key: str = "name") -> List[dict]:
    """The rows (`field`) of the report at `previous` (its JSON), each row run again (same
    `key`) replaced in place by its new one, then the new rows: rows of earlier runs stay in
    the report, though their work folders may be gone from runs/."""
    earlier = read_json(previous)
    if earlier is None:
        return list(rows)
    new = {row[key]: row for row in rows}
    kept = [new.pop(row[key], row) for row in earlier[field]]
    return kept + [row for row in rows if row[key] in new]


# -- the report -----------------------------------------------------------------------------

def write_report(stem: pathlib.Path, data: Any, markdown: Optional[str] = None,
                 plot: Optional[Callable[[pathlib.Path], None]] = None) -> None:
    """STEM.json (`data`), STEM.md (`markdown`, when given) and STEM.png (`plot(path)`, when
    given), each replaced atomically."""
    stem = pathlib.Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    write_json(stem.with_suffix(".json"), data)
    if markdown is not None:
        write_text(stem.with_suffix(".md"), markdown)
    if plot is not None:
        plot(stem.with_suffix(".png"))


def save_figure(fig, path: pathlib.Path, dpi: int) -> None:
    """A matplotlib figure as the PNG at `path` (replaced atomically), then closed."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 (the report's plots only)

    with open_for_replace(path, "wb") as f:
        fig.savefig(f, format="png", dpi=dpi)
    plt.close(fig)
