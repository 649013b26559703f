"""benchmarks/odqa.py --record: this run's models' answer recall into their cards and the
shipped list, never over a richer table of the same measurement another benchmark recorded,
never into a multi-task model's card (not zero-shot), never into a model only kept from an
earlier run's rows."""

import json
import types

from test_fusion_benchmark import BENCHMARKS

PER_SET = {"all": {"num_questions": 4, "answerable": 2, "skipped": 0,
                   "R@1": 0.5, "R@5": 0.5, "R@20": 1.0, "R@100": 1.0}}
TITLE = ("ODQA answer recall zero-shot, validation (WebQuestions val + CuratedTREC train), "
         "2 answerable of 4 questions, 7 100-word Wikispeedia passages (%)")


def _export(folder, name, **fields):
    folder.mkdir()
    meta = {"name": name, "encoder": "bow_mlp", "pretraining": "ict", "metrics": {}, **fields}
    (folder / "metadata.json").write_text(json.dumps(meta))
    return types.SimpleNamespace(artifact_path=folder)


def _meta(folder):
    return json.loads((folder / "metadata.json").read_text())


def test_record_adds_what_the_cards_lack_and_nothing_else(tmp_path, monkeypatch):
    from benchmarks import odqa as odqa_benchmark
    from tt_zoo.zoo import registry

    assert odqa_benchmark.__file__.startswith(str(BENCHMARKS))
    richer = {"BM25": {"R@20": 75.0}, "fused": {"R@20": 80.0}, "richer": {"R@20": 100.0}}
    specs = {
        "plain": _export(tmp_path / "plain", "plain"),
        "richer": _export(tmp_path / "richer", "richer", metrics={TITLE: richer}),
        "multi": _export(tmp_path / "multi", "multi",
                         multi_task={"tasks": [{"name": "webquestions", "task_class": "qa"}]}),
        "earlier": _export(tmp_path / "earlier", "earlier")}
    shipped = tmp_path / "shipped_models.json"
    shipped.write_text(json.dumps({
        "plain": {"metrics": {"R@100 zero-shot 80%": 50.0}},
        "richer": {"metrics": {"ODQA validation R@20, richer": 100.0}},
        "multi": {"metrics": {"ODQA validation R@20": 90.0}}, "earlier": {}}))
    monkeypatch.setattr(registry, "REGISTRY", specs)
    monkeypatch.setattr(registry, "SHIPPED_FILE", shipped)
    out = {"benchmark": {"num_passages": 7},
           "results": {name: PER_SET for name in ("BM25", *specs)}}
    before = {name: _meta(spec.artifact_path) for name, spec in specs.items()}

    odqa_benchmark.record(out, ["plain", "richer", "multi", "not_shipped"])

    plain = _meta(tmp_path / "plain")
    assert plain["metrics"] == {TITLE: {"R@1": 50.0, "R@5": 50.0, "R@20": 100.0, "R@100": 100.0}}
    assert "2 answerable of 4 questions" in (tmp_path / "plain" / "MODEL_CARD.md").read_text()
    for name in ("richer", "multi", "earlier"):  # untouched: the same files as before
        assert _meta(specs[name].artifact_path) == before[name], name
    assert json.loads(shipped.read_text()) == {
        "plain": {"metrics": {"R@100 zero-shot 80%": 50.0, "ODQA validation R@20": 100.0}},
        "richer": {"metrics": {"ODQA validation R@20, richer": 100.0}},
        "multi": {"metrics": {"ODQA validation R@20": 90.0}}, "earlier": {}}
