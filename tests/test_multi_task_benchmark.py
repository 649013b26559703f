"""benchmarks/multi_task.py: its cells are `tt-zoo multitask` command lines, and the report
reads the cells' records (seconds, no training)."""

import pathlib
import sys

import pytest

from conftest import data_file

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import multi_task as bench  # noqa: E402


def scores(r20, fused=None):
    per_set = {f"R@{k}": r20 / 100 for k in (1, 5, 20, 100)}
    out = {name: {**per_set, "R-precision": 0.1}
           for name in ("webquestions-val", "curatedtrec-train", "all")}
    out["reqa"] = {f"R@{k}": 0.3 for k in bench.REQA_KS}
    if fused is not None:
        out["fused_with_bm25"] = {"bm25_weight": 0.5, "R@20": fused / 100}
    return out


def record(name, r20, seed=0, init=bench.BOW_BEST, few_shot=None, fused=None):
    cell = bench.make_cell(name, init, ["webquestions"], seed=seed, few_shot=few_shot)
    return {"key": bench.cell_key(cell), "cell": cell, "scores": scores(r20, fused)}


def test_every_cell_is_a_multitask_command_line_that_parses(tmp_path, monkeypatch):
    from tt_zoo.cli import multitask as multitask_cli

    for needed in ("odqa/webquestions/trainmodel.json", "wikispeedia", "squad/dev-v1.1.json"):
        data_file(needed)  # the command checks its tasks' files as it parses
    pairs = tmp_path / "ict_bfs_wlp_crop_span_qgen"  # (a clone has no runs/pairs)
    pairs.mkdir()
    monkeypatch.setattr(bench, "PAIRS", pairs)

    cells = bench.experiments(["main", "markers", "positives", "short", "loo", "remine",
                               "fewshot", "decide"], [0])
    flat = list({bench.cell_key(c): c for group in cells.values() for c in group}.values())
    names = [c["name"] for c in flat]
    assert len(set(names)) == len(names)  # one cell a name and seed (decide repeats main's)
    assert bench.cell_key(bench.shipped_cell()) in {bench.cell_key(c) for c in flat}
    remined = cells["re-mined"][0]
    assert remined["remine_from"] == bench.cell_key(cells["multi-task"][0])
    for cell in flat:
        if cell["few_shot"] == 0:
            continue  # the starting model itself: nothing to train
        argv = bench.cell_argv(cell, bench.cell_key(cell))
        config = multitask_cli.parse_args(argv)
        assert config.training.steps == cell["steps"]
        assert config.tasks.markers == cell["markers"]
    few = [c for c in cells["few-shot"] if c["init"] == "bow_mlp_none_512"]
    # 10 passes over n examples, at least 50 steps: 128 -> 50, 1,024 -> 80, all -> 111.
    assert [(c["few_shot"], c["steps"]) for c in few] == [(0, 50), (128, 50), (1024, 80),
                                                          (None, 111)]


def test_the_report_gives_medians_over_seeds_and_the_few_shot_table():
    records = {"bm25": {"key": "bm25", "cell": {"name": "BM25"}, "scores": scores(56.4)}}
    for seed, value in enumerate((50.0, 48.0, 49.0)):
        r = record("multi", value, seed=seed, fused=60.0 + seed)
        records[r["key"]] = r
    for n, value in ((0, 40.0), (128, 44.0), (None, 47.0)):
        r = record(f"fewshot-none_512-{'all' if n is None else n}", value, init="none_512",
                   few_shot=n)
        records[r["key"]] = r
    text = bench.report(records)
    assert "| multi-task: all three | 49.0 (48.0-50.0) |" in text
    assert "| BM25 | 56.4 |" in text
    assert text.count("–") >= 1  # BM25 has no fused column
    assert "| none_512 | 40.0 | 44.0 | – | 47.0 |" in text
    assert bench.few_shot_curves(records)["none_512"] == {
        0: [40.0], 128: [44.0], bench.WEBQUESTIONS_EXAMPLES: [47.0]}


@pytest.mark.parametrize("n, steps", [(1, 50), (640, 50), (641, 51), (1411, 111)])
def test_few_shot_steps_hand_worked(n, steps):
    assert bench.few_shot_steps(n, 128) == steps
