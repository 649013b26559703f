"""benchmarks/pretrain_tasks.py keeps the cells of earlier runs in its report: a cell run again
replaces its own row in place, a new cell is added after them."""

import json

from test_fusion_benchmark import BENCHMARKS  # importing it puts benchmarks/ on sys.path


def test_earlier_cells_stay_and_a_cell_run_again_replaces_its_row(tmp_path):
    import pretrain_tasks

    assert pretrain_tasks.__file__.startswith(str(BENCHMARKS))  # the script, not a namesake
    previous = tmp_path / "pretrain_tasks.json"
    assert pretrain_tasks.with_earlier_rows([{"name": "a"}], previous) == [{"name": "a"}]
    previous.write_text(json.dumps({"cells": [{"name": "a", "R": 1}, {"name": "b", "R": 2}],
                                    "baselines": {}}))
    rows = [{"name": "c", "R": 5}, {"name": "a", "R": 3}]
    assert pretrain_tasks.with_earlier_rows(rows, previous) == [
        {"name": "a", "R": 3}, {"name": "b", "R": 2}, {"name": "c", "R": 5}]
