"""benchmarks/multi_task.py: its cells are `tt-zoo multitask` command lines, and the report
reads the cells' records (seconds, no training)."""

import pytest

from benchmarks import multi_task as bench
from conftest import data_file


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

    cells = bench.experiments(["main", "markers", "towers", "lexical", "positives", "short",
                               "loo", "remine", "fewshot", "decide"], [0])
    flat = list({bench.cell_key(c): c for group in cells.values() for c in group}.values())
    names = [c["name"] for c in flat]
    assert len(set(names)) == len(names)  # one cell a name and seed (decide repeats main's)
    shipped = bench.shipped_cells()  # each shipped name's cell is one the experiments run
    assert {bench.cell_key(c) for c in shipped.values()} <= {bench.cell_key(c) for c in flat}
    remined = cells["re-mined"][0]
    assert remined["remine_from"] == bench.cell_key(cells["multi-task"][0])
    for cell in flat:
        if cell["few_shot"] == 0:
            continue  # the starting model itself: nothing to train
        argv = bench.cell_argv(cell, bench.cell_key(cell))
        config = multitask_cli.parse_args(argv)
        assert config.training.steps == cell["steps"]
        assert config.tasks.markers == cell["markers"]
        assert config.tasks.query_towers == cell.get("query_towers", "shared")
    # The towers experiment (Sec. 4.3): the shipped pair of tasks, reqa a class of its own,
    # markers on, one shared query tower against one per class; the other cells keep their keys.
    shared, untied, per_class = cells["towers"]
    for cell, name, towers, untie in ((shared, "shared", "shared", False),
                                      (untied, "untied", "shared", True),
                                      (per_class, "per-class", "per-class", False)):
        assert (cell["name"], cell["tasks"], cell["markers"], cell["task_classes"]) == (
            f"qa-classes-{name}", ["webquestions", "reqa"], True, {"reqa": "sentence_qa"})
        config = multitask_cli.parse_args(bench.cell_argv(cell, bench.cell_key(cell)))
        assert config.tasks.task_class == ("reqa=sentence_qa",)
        assert (config.tasks.query_towers, config.tasks.untie_towers) == (towers, untie)
    assert "query_towers" not in shared and per_class["query_towers"] == "per-class"
    assert "untie_towers" not in shared and untied["untie_towers"] is True
    assert "task_classes" not in shipped[bench.SHIPPED_NAME]
    # The lexical experiment: BM25 as a teacher beside the two QA tasks, in the shipped recipe
    # (what ships as multitask_lexical_...) and in the marked, untied one.
    lexical, untied_lexical = cells["lexical"]
    assert lexical == shipped[bench.LEXICAL_SHIPPED_NAME]
    for cell in (lexical, untied_lexical):
        config = multitask_cli.parse_args(bench.cell_argv(cell, bench.cell_key(cell)))
        assert config.tasks.task == ("webquestions", "reqa", "lexical")
        assert config.tasks.weight == (f"lexical={bench.LEXICAL_WEIGHT:g}",)
    assert untied_lexical["untie_towers"] and untied_lexical["markers"]
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
    for towers, value in (("shared", 51.0), ("per-class", 52.0)):
        cell = bench.make_cell(f"qa-classes-{towers}", bench.BOW_BEST, ["webquestions", "reqa"],
                               markers=True, task_classes=bench.TOWERS_CLASSES,
                               query_towers=towers)
        records[bench.cell_key(cell)] = {"key": bench.cell_key(cell), "cell": cell,
                                         "scores": scores(value)}
    text = bench.report(records)
    assert "| multi-task: all three | 49.0 (48.0-50.0) |" in text
    shared_row = text.index("one shared query tower | 51.0 |")
    assert shared_row < text.index("one query tower per class (Sec. 4.3) | 52.0 |")
    assert "| BM25 | 56.4 |" in text
    assert text.count("–") >= 1  # BM25 has no fused column
    assert "| none_512 | 40.0 | 44.0 | – | 47.0 |" in text
    assert bench.few_shot_curves(records)["none_512"] == {
        0: [40.0], 128: [44.0], bench.WEBQUESTIONS_EXAMPLES: [47.0]}


def test_reqa_questions_of_a_towers_cell_are_encoded_as_their_class():
    class Encoder:
        def encode_queries(self, texts, task_class=None):
            return [(t, task_class) for t in texts]

        def encode_documents(self, texts, titles=None):
            return list(zip(texts, titles))

    encoder = Encoder()
    assert bench.as_task_class(encoder) is encoder
    reqa = bench.as_task_class(encoder, "sentence_qa")
    assert reqa.encode_queries(["q"]) == [("q", "sentence_qa")]
    assert reqa.encode_documents(["p"], titles=["s"]) == [("p", "s")]


@pytest.mark.parametrize("n, steps", [(1, 50), (640, 50), (641, 51), (1411, 111)])
def test_few_shot_steps_hand_worked(n, steps):
    assert bench.few_shot_steps(n, 128) == steps
