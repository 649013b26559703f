"""tt_zoo.reproduction.runner, the mechanics the three grids share: a step runs once and is
skipped when its output exists, a failed step returns False with its output in its log, a
result is computed once, cells keep their keys (seconds, no TensorFlow)."""

import json
import sys

from tt_zoo.reproduction import runner


def test_a_step_runs_once_then_is_skipped(tmp_path, capsys):
    done, log = tmp_path / "out" / "done.json", tmp_path / "logs" / "step.log"
    write = [sys.executable, "-c", "import pathlib, sys; print('working'); "
             f"pathlib.Path({str(done)!r}).parent.mkdir(); pathlib.Path({str(done)!r})"
             ".write_text('{}')"]
    assert runner.run_once("step", done, write, log)
    assert "working" in log.read_text() and "done in" in capsys.readouterr().out
    assert runner.run_once("step", done, [sys.executable, "-c", "raise SystemExit(3)"], log)
    assert f"step: {done} exists" in capsys.readouterr().out


def test_a_failed_step_returns_false_and_keeps_its_output(tmp_path, capsys):
    log = tmp_path / "fail.log"
    assert not runner.run_logged([sys.executable, "-c", "print('why'); raise SystemExit(3)"],
                                 log)
    assert "why" in log.read_text() and "FAILED (exit 3)" in capsys.readouterr().out


def test_a_result_is_computed_once_and_read_back(tmp_path):
    calls = []
    path = tmp_path / "cells" / "a.json"

    def compute():
        calls.append(1)
        return {"R@1": 0.5}

    assert runner.read_json(path) is None and runner.read_results(tmp_path / "cells") == {}
    assert runner.cached_json(path, compute) == runner.cached_json(path, compute) == {"R@1": 0.5}
    assert calls == [1]
    assert runner.read_results(tmp_path / "cells") == {"a": {"R@1": 0.5}}


def test_a_cells_key_is_its_name_and_a_hash_of_its_settings():
    spec = {"name": "multi", "seed": 0, "tasks": ["reqa"]}
    assert runner.spec_key("multi", spec) == runner.spec_key("multi", dict(reversed(
        list(spec.items()))))  # the order of the settings does not matter
    assert runner.spec_key("multi", spec).startswith("multi-")
    assert runner.spec_key("multi", {**spec, "seed": 1}) != runner.spec_key("multi", spec)


def test_the_report_writes_json_markdown_and_plot(tmp_path):
    drawn = []
    runner.write_report(tmp_path / "out" / "grid", {"cells": []}, "# grid\n", drawn.append)
    assert json.loads((tmp_path / "out" / "grid.json").read_text()) == {"cells": []}
    assert (tmp_path / "out" / "grid.md").read_text() == "# grid\n"
    assert drawn == [tmp_path / "out" / "grid.png"]
