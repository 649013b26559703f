"""`tt-zoo reproduce`: the grid's commands, its budget flags, and one small grid end to end."""

import json

import pytest

from conftest import data_file
from helpers import load_recipe, tiny_vocab
import tt_zoo
from tt_zoo.evaluation.tables import COLUMNS
from tt_zoo.reproduction import grid, report, ship
from tt_zoo.artifacts import download


from tt_zoo.zoo import registry


@pytest.fixture(scope="module")
def recipe():
    return load_recipe("reproduce")


def test_every_cell_gets_the_same_pretraining_budget(recipe, tmp_path):
    args = recipe.parse_args(["--runs", str(tmp_path), "--stages", "pretrain"])
    commands = {cell: grid.pretrain_command(cell, args) for cell in grid.CELLS}
    trained = {cell: c for cell, c in commands.items() if "none" not in cell}
    for cell, command in trained.items():
        flags = dict(zip(command, command[1:]))
        assert flags["--steps"] == "800" and flags["--batch-size"] == "128", cell
        assert flags["--learning-rate"] == "0.001" and flags["--document-length"] == "128"
        assert flags["--export"] == str(tmp_path / "reproduce" / cell / "model")
    assert dict(zip(commands["ict_512"], commands["ict_512"][1:]))["--pairs"] == str(
        tmp_path / "pairs" / "ict_128")
    assert "--mlm-examples" in commands["mlm_512"]
    assert dict(zip(commands["none_512"], commands["none_512"][1:]))["--steps"] == "0"


def test_budget_and_bad_flags(recipe, capsys):
    args = recipe.parse_args(["--stages", "pretrain", "--budget", "steps=5",
                              "--budget", "finetune_learning_rate=1e-3"])
    assert args.budget.steps == 5 and args.budget.finetune_learning_rate == 1e-3
    assert args.budget.batch_size == grid.GRID.batch_size
    # The grid's budget is the registry's CPU-scale pretraining run, every unshipped CPU-scale
    # name's (issue 66: one run config, no parallel recipe type), and its fine-tuning run.
    schedule = registry.get_spec("mlm_128").run.training
    assert schedule == registry.CPU_PRETRAIN.training
    assert (grid.GRID.steps, grid.GRID.batch_size, grid.GRID.learning_rate) == (
        schedule.steps, schedule.batch_size, schedule.learning_rate) == (800, 128, 1e-3)
    assert (grid.GRID.pairs_per_article, grid.GRID.max_doc_tokens,
            grid.GRID.document_length) == (128, 96, 128)
    assert (grid.GRID.finetune_steps, grid.GRID.finetune_batch_size,
            grid.GRID.finetune_learning_rate, grid.GRID.finetune_eval_every) == (100, 64, 2e-4, 20)
    for bad, message in ((["--budget", "stpes=5"], "--budget: expected FIELD=VALUE"),
                         (["--budget", "vocab_size=5"], "--budget: expected FIELD=VALUE"),
                         (["--cells", "ict_1024"], "--cells: unknown ict_1024"),
                         (["--stages", "train"], "--stages: unknown train"),
                         (["--splits", "0.01,1.5"], "--splits: every fraction")):
        with pytest.raises(SystemExit):
            recipe.parse_args(["--stages", "pretrain", *bad])
        assert message in capsys.readouterr().err


def test_successor_variants_are_cells_with_labels_and_odqa_in_cards(recipe):
    args = recipe.parse_args(["--stages", "evaluate", "--cells", "ict_512,bow_mlp_span_512"])
    assert args.cells == ("ict_512", "bow_mlp_span_512")  # the grid's first, then others
    args = recipe.parse_args(["--stages", "evaluate", "--cells", "bow_mlp_512.span,ict_512"])
    assert args.cells == ("ict_512", "bow_mlp_span_512")  # an ARCH.TAG: the name it spells
    assert report.label("ict_bfs_wlp_span") == "ICT+BFS+WLP+span"
    assert report.label("ict_bfs_wlp") == "ICT+BFS+WLP" and report.label("crop") == "crop"
    metrics = {c: 0.5 for c in COLUMNS} | {"num_queries": 10}
    row = {"zero_shot": {"1%": metrics}, "finetuned": {},
           "odqa": {"num_passages": 130638, "sets": {
               "all": {"num_questions": 1185, "answerable": 944, "R@1": 0.1, "R@20": 0.4567}}}}
    tables = ship.card_metrics(row, {"1%": metrics})
    odqa = [k for k in tables if k.startswith("ODQA")]
    assert len(odqa) == 1 and "944 answerable" in odqa[0]
    assert tables[odqa[0]] == {"R@1": 10.0, "R@20": 45.67}


def small_squad(path, articles=2, paragraphs=3):
    """The first paragraphs of the first SQuAD dev articles, as a SQuAD file."""
    squad = json.loads(data_file("squad/dev-v1.1.json").read_text())
    squad["data"] = [dict(a, paragraphs=a["paragraphs"][:paragraphs])
                     for a in squad["data"][:articles]]
    path.write_text(json.dumps(squad))
    return path


def test_small_grid_end_to_end_and_resumes(recipe, tmp_path, capsys, monkeypatch):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    argv = ["--cells", "none_512,bow_mlp_none_512", "--runs", str(tmp_path / "runs"),
            "--results", str(tmp_path / "results"), "--vocab", str(vocab),
            "--squad", str(small_squad(tmp_path / "squad.json")), "--splits", "0.5",
            "--budget", "finetune_steps=2", "--budget", "finetune_batch_size=4",
            "--budget", "finetune_eval_every=1"]
    assert recipe.main(argv) == 0
    grid = json.loads((tmp_path / "results" / "reproduce.json").read_text())
    assert grid["splits"] == ["50%"] and grid["budget"]["finetune_steps"] == 2
    for name in ("none_512", "bow_mlp_none_512"):
        row = grid["models"][name]
        assert set(row["zero_shot"]) == {"50%"} == set(row["finetuned"])
        assert 0.0 <= row["finetuned"]["50%"]["R@100"] <= 1.0
        assert row["finetuned"]["50%"]["steps_run"] <= 2
    assert set(grid["bm25"]) == {"50%"}
    table3 = (tmp_path / "results" / "table3.md").read_text()
    bow_line = next(line for line in table3.splitlines() if line.startswith("| BoW-MLP, none"))
    assert "–" not in bow_line.split("|")[2]  # its zero-shot R@100 was measured
    assert (tmp_path / "results" / "reproduce.png").stat().st_size > 10_000
    capsys.readouterr()

    recipe.main(argv)  # a second run finds every output and redoes nothing
    out = capsys.readouterr().out
    assert "none_512: " in out and "exists" in out
    assert "fine-tuned" not in out and "zero-shot in" not in out

    shipped = tmp_path / "shipped_models.json"
    # shipping registers what it ships in this process: a copy, so other tests see the real list
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    recipe.main(argv + ["--stages", "ship", "--saved-models", str(tmp_path / "saved_models"),
                        "--shipped", str(shipped)])
    entries = registry.read_shipped(shipped)
    assert set(entries) == {"none_512", "bow_mlp_none_512"}
    assert entries["none_512"]["url"] == download.release_url("none_512")
    # its recipe is the run config its export records (recipes/ beside the shipped list), its
    # headline numbers its card's headline
    recipe = json.loads((tmp_path / "recipes" / "pretrain" / "none_512.json").read_text())
    assert recipe["model"]["variant"] == "none_512" and recipe["training"]["steps"] == 0
    headline = dict(entries["none_512"]["metrics"])
    assert set(headline) == {f"R@100 {kind} {split}" for kind in ("zero-shot", "fine-tuned")
                             for split in ("50%",)}
    measured = grid["models"]["none_512"]["zero_shot"]["50%"]["R@100"]
    assert headline["R@100 zero-shot 50%"] == round(100 * measured, 2)
    model = tt_zoo.load(tmp_path / "saved_models" / "bow_mlp_none_512")
    assert model.metadata["sha256"] == entries["bow_mlp_none_512"]["sha256"]
    tables = model.metadata["metrics"]
    assert any(t.startswith("ReQA-SQuAD(dev) fine-tuned on the 50% split") for t in tables)
    assert "## Measured quality" in (model.path / "MODEL_CARD.md").read_text()


def test_a_committed_model_at_the_grid_budget_is_not_retrained(recipe, tmp_path):
    saved = tmp_path / "saved_models"
    args = recipe.parse_args(["--stages", "pretrain", "--saved-models", str(saved),
                              "--shipped", str(tmp_path / "shipped_models.json")])
    budget = args.budget
    for name, steps in (("ict_512", budget.steps), ("bfs_512", 50), ("ict_bfs_wlp_512", 800)):
        (saved / name).mkdir(parents=True)
        (saved / name / "metadata.json").write_text(json.dumps(
            {"name": name, "train_steps": steps, "batch_size": budget.batch_size,
             "learning_rate": budget.learning_rate}))
    assert grid.committed_pretrained("ict_512", args) == saved / "ict_512"
    assert grid.committed_pretrained("bfs_512", args) is None  # another budget
    assert grid.committed_pretrained("ict_bfs_wlp_512", args) is None  # the flagship's name
    assert grid.committed_pretrained("wlp_512", args) is None  # nothing committed
