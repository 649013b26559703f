"""benchmarks/fusion.py end to end on tiny data: a tiny exported model, the hand-made SQuAD
file, three Wikispeedia articles and a few ODQA questions; every row, the chosen weights and
the report, in seconds."""

import json
import pathlib

import pytest

from conftest import DATA_DIR, data_file
from helpers import hand_made_squad, write_squad

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


def test_the_smoke_run_scores_every_row_and_records_the_weights(exported, tmp_path,
                                                                monkeypatch):
    data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz")
    from benchmarks import fusion
    from benchmarks import measure

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    reported = _jsonl(tmp_path / "reported.jsonl", [
        {"question": "Who founded the Persian Empire?", "answers": ["Cyrus"]},
        {"question": "What is the capital of Ethiopia?", "answer_regex": "Addis Ababa"},
        {"question": "Who is nobody?", "answers": ["Zzyzx Qwertyuiop"]}])
    held = _jsonl(tmp_path / "held.jsonl", [
        {"question": "Which country borders Ethiopia to the west?", "answers": ["Sudan"]},
        {"question": "Who said Cyrus was named after the sun?", "answers": ["Ctesias"]}])
    argv = ["--model", str(exported.path), "--squad", str(write_squad(tmp_path, hand_made_squad())),
            "--split-fraction", "0.5", "--limit-articles", "3", "--odqa-questions", reported,
            "--odqa-validation", held, "--data-dir", str(DATA_DIR), "--no-progress",
            "--work", str(tmp_path / "work"), "--output", str(tmp_path / "out" / "fusion")]
    out = fusion.main(argv)
    assert json.loads((tmp_path / "out" / "fusion.json").read_text())["results"] == out["results"]
    name = "tiny_test"
    rows = ["BM25", name, f"RRF(BM25, {name})", f"convex(BM25, {name})"]
    assert list(out["results"]) == ["reqa", "open_domain_reqa", "odqa"]
    for bench, per_row in out["results"].items():
        assert list(per_row) == rows, bench
        for row in per_row.values():
            recalls = [v for k, v in fusion.text_rows.main_set(row).items() if k.startswith("R@")]
            assert recalls == sorted(recalls) and all(0 <= v <= 1 for v in recalls)
            assert row["queries_per_s"] > 0
    # ReQA has 5 candidates: every dense or fused list holds all of them, the gold included.
    for row in rows[1:]:
        assert out["results"]["reqa"][row]["sets"]["all"]["R@5"] == 1.0
    assert out["results"]["odqa"]["BM25"]["sets"]["reported"]["answerable"] == 2
    reqa_choice = out["weights"]["reqa"][name]
    assert len(reqa_choice["grid"]) == 21 and reqa_choice["metric"] == "MRR"
    assert reqa_choice["num_queries"] == 3  # the split's training half of the 6 questions
    assert out["weights"]["odqa"][name]["metric"] == "R@20"
    assert "open_domain_reqa" not in out["weights"]  # it takes ReQA's weight:
    settings = out["results"]["open_domain_reqa"][f"convex(BM25, {name})"]["settings"]
    assert settings == {"method": "convex", "weight": reqa_choice["weight"], "depth": 100,
                        "rrf_k": None, "weight_chosen_on": "reqa"}
    report = (tmp_path / "out" / "fusion.md").read_text()
    assert "**Smoke run**" in report and f"| convex(BM25, {name}) |" in report
    assert "## The chosen weights" in report and "Machine: " in report
    # The split's test part is named as one: not "the 50% test questions".
    assert "The test questions of the 50% cold-start split (3 questions):" in report
    # The dense embeddings are cached, named as `tt-zoo odqa` names its passages'.
    assert list((tmp_path / "work" / "odqa_cache").glob("passages-*-98.npy"))


def test_fuse_with_adds_a_three_way_row_its_weight_chosen_on_validation(exported, tmp_path,
                                                                       monkeypatch):
    """--fuse-with B: convex(convex(BM25, A), B) beside each pair, its second weight chosen on
    ReQA's validation questions as the first, taken by open-domain ReQA."""
    from benchmarks import fusion
    from benchmarks import measure
    from helpers import tiny_model
    from tt_zoo.artifacts.export import export_saved_model

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    partner = tmp_path / "bow"
    export_saved_model(tiny_model("bow_mlp"), partner,
                       {"name": "tiny_bow", "encoder": "bow_mlp", "pretraining": "none"})
    out = fusion.main([
        "--model", str(exported.path), "--model", str(partner), "--fuse-with", str(partner),
        "--squad", str(write_squad(tmp_path, hand_made_squad())), "--benchmarks",
        "reqa,open_domain_reqa", "--split-fraction", "0.5", "--limit-articles", "2",
        "--data-dir", str(DATA_DIR), "--no-progress", "--work", str(tmp_path / "work"),
        "--output", str(tmp_path / "out" / "fusion")])
    three = "convex(convex(BM25, tiny_test), tiny_bow)"
    assert list(out["results"]["reqa"])[-1] == three  # none for the partner with itself
    assert "convex(convex(BM25, tiny_bow), tiny_bow)" not in out["results"]["reqa"]
    choice = out["weights"]["reqa"][three]
    assert len(choice["grid"]) == 21 and choice["num_queries"] == 3
    for bench in ("reqa", "open_domain_reqa"):
        settings = out["results"][bench][three]["settings"]
        assert settings["method"] == "convex" and settings["weight"] == choice["weight"]
    assert out["results"]["reqa"][three]["sets"]["all"]["R@5"] == 1.0
    with pytest.raises(SystemExit):
        fusion.parse_args(["--model", str(partner), "--fuse-with", "not_a_model"])


def test_fill_depth_fuses_with_filled_scores_and_says_so(exported, tmp_path, monkeypatch):
    from benchmarks import fusion
    from benchmarks import measure

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    out = fusion.main([
        "--model", str(exported.path), "--squad", str(write_squad(tmp_path, hand_made_squad())),
        "--benchmarks", "reqa", "--split-fraction", "0.5", "--depth", "2", "--fill-depth", "4",
        "--no-progress", "--work", str(tmp_path / "work"),
        "--output", str(tmp_path / "out" / "fusion")])
    rows = out["results"]["reqa"]
    assert list(rows) == ["BM25", "tiny_test", "RRF(BM25, tiny_test)", "convex(BM25, tiny_test)",
                          "RRF(BM25, tiny_test) filled@4", "convex(BM25, tiny_test) filled@4"]
    for row in ("RRF(BM25, tiny_test)", "convex(BM25, tiny_test)"):  # side by side
        assert rows[row]["settings"]["depth"] == 2 and "fill_depth" not in rows[row]["settings"]
        filled = rows[f"{row} filled@4"]["settings"]
        assert filled["depth"] == 2 and filled["fill_depth"] == 4
    assert set(out["weights"]["reqa"]) == {"tiny_test", "tiny_test filled@4"}
    report = (tmp_path / "out" / "fusion.md").read_text()
    assert "own score from its top 4 instead of the floor 0 (filled scores)" in report
    assert "| convex(BM25, tiny_test) filled@4 |" in report
    from benchmarks import checkpoints

    for parse in (fusion.parse_args, checkpoints.parse_args):  # both take the fusion settings
        assert parse(["--depth", "5", "--fill-depth", "50"]).fill_depth == 50
        for bad in (["--fill-depth", "100"], ["--depth", "5", "--fill-depth", "3"]):
            with pytest.raises(SystemExit):
                parse(bad)


def test_a_validation_set_a_model_trained_on_is_named_in_the_report(tmp_path, monkeypatch):
    """Weights chosen on questions a model trained on lean to it: the report says so."""
    import types

    from benchmarks import text_rows
    from tt_zoo.artifacts.model_card import ModelCard

    card = ModelCard.from_dict({"name": "m", "multi_task": {"tasks": [
        {"name": "webquestions", "stats": {"question_set": "webquestions-trainmodel"}},
        {"name": "reqa", "stats": {"questions": 7610}}]}})
    model = types.SimpleNamespace(card=card)
    assert text_rows.trained_question_sets(model) == {"webquestions-trainmodel"}
    assert text_rows.trained_question_sets(types.SimpleNamespace(card=ModelCard.from_dict(
        {"name": "plain"}))) == set()
    (tmp_path / "odqa" / "webquestions").mkdir(parents=True)
    file = tmp_path / "odqa" / "webquestions" / "trainmodel.json"
    file.write_text("[]")
    for given in ("webquestions-trainmodel", str(file)):
        assert text_rows.validation_set_name(given, tmp_path) == "webquestions-trainmodel"
    assert text_rows.validation_set_name("webquestions-devtest", tmp_path) == \
        "webquestions-devtest"
    out = {"settings": {"smoke": False}, "machine": {}, "wall_s": 60,
           "validation_trained_on": {"m": "webquestions-trainmodel"}}
    monkeypatch.setattr(text_rows, "machine_line", lambda info: "Machine: -")
    head = "\n".join(text_rows.report_head(out, "fusion", "T", "About."))
    assert ("**The ODQA settings lean to m**: they were chosen on webquestions-trainmodel, which "
            "it trained on; choose them on questions no model trained on") in head


def test_a_smoke_run_never_writes_over_the_results(monkeypatch):
    from benchmarks import fusion

    args = fusion.parse_args(["--limit-questions", "10"])
    assert args.smoke and args.output == fusion.text_rows.REPO / "runs" / "fusion_small" / "fusion"
    assert args.work == fusion.text_rows.REPO / "runs" / "fusion_small"
    full = fusion.parse_args([])
    assert full.output == fusion.text_rows.REPO / "results" / "fusion"
    assert full.model == list(fusion.FLAGSHIPS)
    with pytest.raises(SystemExit):
        fusion.parse_args(["--benchmarks", "open_domain_reqa"])  # needs ReQA's weight
    with pytest.raises(SystemExit):
        fusion.parse_args(["--odqa-metric", "MRR"])  # answer recall has no MRR


def test_a_stopped_run_leaves_the_last_complete_report_alone(exported, tmp_path, monkeypatch):
    """A run stopped after its first benchmark writes what it measured beside the output
    (OUTPUT_partial), never over the complete report; a finished run removes the partial."""
    from benchmarks import fusion
    from benchmarks import measure

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    output = tmp_path / "out" / "fusion"
    output.parent.mkdir()
    for suffix, text in ((".json", '{"complete": true}'), (".md", "complete report\n")):
        output.with_suffix(suffix).write_text(text)
    args = fusion.parse_args([
        "--model", str(exported.path), "--squad", str(write_squad(tmp_path, hand_made_squad())),
        "--benchmarks", "reqa,open_domain_reqa", "--limit-articles", "2", "--split-fraction",
        "0.5", "--data-dir", str(DATA_DIR), "--no-progress", "--work", str(tmp_path / "work"),
        "--output", str(output) + ".md"])  # a suffix given: replaced, as for the report

    def stop_on_the_second(ctx):
        if ctx.bench.name == "open_domain_reqa":
            raise KeyboardInterrupt
        return {}

    with pytest.raises(KeyboardInterrupt):
        fusion.text_rows.run(args, "fusion", stop_on_the_second, fusion.report)
    assert output.with_suffix(".json").read_text() == '{"complete": true}'
    assert output.with_suffix(".md").read_text() == "complete report\n"
    partial = json.loads((tmp_path / "out" / "fusion_partial.json").read_text())
    assert list(partial["results"]) == ["reqa"]
    assert "| BM25 |" in (tmp_path / "out" / "fusion_partial.md").read_text()

    out = fusion.text_rows.run(args, "fusion", lambda ctx: {}, fusion.report)
    assert json.loads(output.with_suffix(".json").read_text())["results"] == out["results"]
    assert list(out["results"]) == ["reqa", "open_domain_reqa"]
    assert sorted(p.name for p in output.parent.iterdir()) == ["fusion.json", "fusion.md"]
