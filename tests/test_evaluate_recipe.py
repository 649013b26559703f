"""`tt-zoo evaluate` end to end, as a subprocess, with --bm25."""

import json
import os
import subprocess
import sys

import pytest

from helpers import LookupEncoder, hand_made_squad, load_recipe, tiny_model, write_squad

from conftest import data_file
from tt_zoo.retrieval import bm25

COMMAND = [sys.executable, "-m", "tt_zoo.cli", "evaluate"]  # as `tt-zoo evaluate`


@pytest.fixture(scope="module")
def recipe():
    """The recipe as a module, to run ``main(argv)`` in-process (no second TensorFlow start)."""
    return load_recipe("evaluate")


def run_recipe(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([*COMMAND, *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300)
    return proc


def test_recipe_bm25_on_hand_made_file_with_a_split(tmp_path, recipe):
    squad = write_squad(tmp_path, hand_made_squad())
    out, split_out = tmp_path / "table.json", tmp_path / "split.json"
    proc = run_recipe("--squad", squad, "--bm25", "--train-fraction", "0.5", "--seed", "1",
                      "--split-out", split_out, "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    assert "encoder" in proc.stdout and "BM25" in proc.stdout and "R@100" in proc.stdout
    result = json.loads(out.read_text())
    split = json.loads(split_out.read_text())
    # 6 questions: 3 for training (round(0.1 * 3) = 0 held out for validation), 3 test.
    assert (len(split["train"]), len(split["validation"]), len(split["test"])) == (3, 0, 3)
    assert result["num_questions"] == 3 and result["num_candidates"] == 5
    row = result["rows"][0]
    assert row["encoder"] == "BM25" and row["search"] == "exact"
    assert 0.0 <= row["R@1"] <= row["R@5"] <= row["R@100"] <= 1.0
    # The same split file reproduces the same numbers.
    again = recipe.main(["--squad", str(squad), "--bm25", "--split-file", str(split_out)])
    assert again["num_questions"] == 3 and again["rows"][0]["R@1"] == row["R@1"]


def test_recipe_bm25_on_squad_dev_slice(tmp_path, recipe):
    squad = data_file("squad/dev-v1.1.json")
    out = tmp_path / "table.json"
    recipe.main(["--squad", str(squad), "--bm25", "--train-fraction", "0.8", "--seed", "0",
                 "--limit-questions", "300", "--json-out", str(out)])
    result = json.loads(out.read_text())
    assert result["num_questions"] == 300 and result["num_candidates"] == 10255
    row = result["rows"][0]
    # BM25 on all 10,570 dev questions: R@1 67.4, R@100 97.6. A random 300 of the test part
    # measured R@1 64.7, R@100 96.7 (the first 200 questions in file order, all on one
    # article about Super Bowl 50 with many near-identical passages, give only R@1 41.5).
    assert 0.55 < row["R@1"] < 0.8 and row["R@100"] > 0.92


def test_recipe_argument_errors(recipe, capsys):
    for argv, message in ((["--squad", "x.json"], "nothing to evaluate"),
                          (["--bm25", "--split-file", "s.json", "--train-fraction", "0.1"],
                           "either --split-file or --train-fraction"),
                          (["--bm25", "--limit-questions", "0"],
                           "argument --limit-questions: must be a whole number from 1")):
        with pytest.raises(SystemExit) as info:
            recipe.main(argv)
        assert info.value.code == 2 and message in capsys.readouterr().err
    assert recipe.BM25_FIELDS == bm25.FIELDS


def test_recipe_models_and_scann_rows(tmp_path, recipe, monkeypatch):
    """--model goes through tt_zoo.load (replaced here by a one-hot lookup model) and --scann
    adds a row searched through tt_zoo.retrieval.index.EmbeddingIndex."""
    pytest.importorskip("tt_zoo.retrieval.index")
    import tt_zoo
    from tt_zoo.evaluation import reqa as reqa_lib

    squad = write_squad(tmp_path, hand_made_squad())
    built = reqa_lib.build_reqa(squad)

    def fake_load(name):
        assert name == "oracle_8"
        model = LookupEncoder(built, {q.text: q.gold_index for q in built.questions})
        model.encoder_name, model.pretraining = "Lookup", "none"
        return model

    monkeypatch.setattr(tt_zoo, "load", fake_load, raising=False)
    from tt_zoo.cli import parsing  # the fake name is not registered: skip the name check
    monkeypatch.setattr(parsing, "model_name_or_path", str)
    result = recipe.main(["--squad", str(squad), "--model", "oracle_8", "--bm25", "--scann"])
    rows = {(r["encoder"], r["search"]): r for r in result["rows"]}
    assert set(rows) == {("BM25", "exact"), ("Lookup", "exact"), ("Lookup", "ScaNN")}
    assert rows[("Lookup", "exact")]["R@1"] == rows[("Lookup", "ScaNN")]["R@1"] == 1.0
    assert rows[("Lookup", "exact")]["pretraining"] == "none"


def test_record_card_writes_the_measured_numbers_into_the_export(tmp_path, recipe):
    from tt_zoo.artifacts.export import export_saved_model, verify_export
    model = tiny_model()
    model.build_by_calling()
    path = tmp_path / "model"
    digest = export_saved_model(model, path, {"name": "tiny_card"})["sha256"]
    squad = write_squad(tmp_path, hand_made_squad())
    result = recipe.main(["--squad", str(squad), "--model", str(path), "--bm25",
                          "--record-card"])
    row = next(r for r in result["rows"] if r["encoder"] != "BM25")
    meta = json.loads((path / "metadata.json").read_text())
    [table] = [t for name, t in meta["metrics"].items() if name.startswith("ReQA-SQuAD(dev)")]
    assert table["R@1"] == round(100 * row["R@1"], 2) and set(table) >= {"R@100", "MRR"}
    assert "BM25 on the same questions (%)" in meta["metrics"]
    assert "## Measured quality" in (path / "MODEL_CARD.md").read_text()
    assert verify_export(path)["sha256"] == digest  # the card changed; the weights did not
    with pytest.raises(SystemExit):
        recipe.main(["--squad", str(squad), "--model", "ict_bfs_wlp_512", "--record-card"])
