"""Typed run configs (tt_zoo.configs.run_config): flags -> config, a JSON file -> config, flags over
the file, bad files refused naming the file and the key, and the whole config recorded in a tiny
pretrain run's summary and export."""

import argparse
import dataclasses
import json

import pytest

from helpers import load_recipe, tiny_vocab
# The tiny pair set and vocabulary, and the randomness pretraining sets up (reset afterwards).
from test_grad_cache import checkpointable_randomness, pair_dir  # noqa: F401 (fixtures)
from tt_zoo.configs import run_config
from tt_zoo.training import pretrain_run
from tt_zoo.configs.run_config import RUN_CONFIG_KEY, RunConfig, RunConfigError, option

pretrain = load_recipe("pretrain")
finetune = load_recipe("finetune")
term_weights = load_recipe("train_term_weights")


def write_json(path, obj):
    path.write_text(json.dumps(obj), encoding="utf-8")
    return str(path)


def refused(parse, argv, capsys) -> str:
    """What a command's parser prints when it refuses `argv` (exit status 2)."""
    with pytest.raises(SystemExit) as stop:
        parse(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


# ------------------------------------------------------------------ flags -> config

def test_flags_fill_the_typed_groups():
    config = pretrain.parse_args([
        "--variant", "ict_bfs_wlp_128", "--steps", "5", "--learning-rate", "1e-3",
        "--query-length", "16", "--pooling", "cls", "--hard-negatives", "2",
        "--cluster-every", "4", "--eval-every", "2", "--workdir", "w", "--no-progress"])
    assert isinstance(config, pretrain.PretrainConfig)
    assert config.model.variant == "ict_bfs_wlp_128" and config.model.pooling == "cls"
    assert config.training.steps == 5 and config.training.learning_rate == 1e-3
    assert config.training.batch_size is None  # the registry's, resolved when the run starts
    assert config.lengths == run_config.SequenceLengthArguments(query_length=16)
    assert config.negatives.hard_negatives == 2 and config.clustering.cluster_every == 4
    assert config.evaluation.eval_every == 2
    assert config.output.workdir == "w" and config.output.no_progress
    assert config.model.vocab  # the default vocabulary, resolved by parse_args
    assert list(config.to_dict()) == ["model", "lengths", "data", "training", "compute",
                                      "negatives", "clustering", "evaluation", "output"]
    assert config.compute.precision == "auto" and config.model.dtype_policy is None


def test_shared_groups_are_defined_once():
    """--hard-negatives and the token budgets: one field, one help, in pretrain and finetune;
    pairs and the output group in pretrain and train-term-weights."""
    def actions(module, name):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        return next(a for a in parser._actions if name in a.option_strings)

    for name in ("--hard-negatives", "--hard-negatives-depth", "--query-length",
                 "--document-length"):
        a, b = actions(pretrain, name), actions(finetune, name)
        assert (a.help, a.default, a.type) == (b.help, b.default, b.type), name
    for name in ("--pairs", "--max-pairs", "--token-cache", "--workdir", "--checkpoint-every",
                 "--export", "--no-progress"):
        a, b = actions(pretrain, name), actions(term_weights, name)
        assert (a.help, a.default) == (b.help.replace(" (required)", ""), b.default), name
    # --precision: one group in every command that trains a two-tower model
    from tt_zoo.training.shipped_recipes import RUN_CONFIGS
    for command in ("pretrain", "finetune", "multitask", "adapt-queries"):
        assert RUN_CONFIGS[command].groups()["compute"] is run_config.ComputeArguments, command
    assert issubclass(pretrain_run.NegativeArguments, run_config.HardNegativeArguments)
    assert issubclass(finetune.FinetuneConfig.groups()["negatives"],
                      run_config.HardNegativeArguments)  # + finetune's --hard-negatives-from


# ------------------------------------------------------------------ JSON file -> config

def test_a_json_file_gives_the_settings(tmp_path):
    path = write_json(tmp_path / "run.json", {
        "model": {"variant": "ict_bfs_wlp_128", "pooling": "mean"},
        "training": {"steps": 7, "learning_rate": 1},  # an int for a float field: 1.0
        "negatives": {"hard_negatives": 3, "hard_negatives_depth": None}})
    config = pretrain.parse_args(["--config", path])
    assert config.model.variant == "ict_bfs_wlp_128" and config.model.pooling == "mean"
    assert config.training.steps == 7
    assert config.training.learning_rate == 1.0 and isinstance(config.training.learning_rate,
                                                                float)
    assert config.negatives.hard_negatives == 3
    assert config.output.checkpoint_every == 100  # not in the file: the default


def test_flags_override_the_file(tmp_path):
    path = write_json(tmp_path / "run.json", {
        "model": {"variant": "ict_bfs_wlp_128"}, "training": {"steps": 7, "batch_size": 16},
        "output": {"no_progress": True}})
    config = pretrain.parse_args(["--config", path, "--steps", "3",
                                  "--variant", "ict_bfs_wlp_512"])
    assert config.training.steps == 3 and config.model.variant == "ict_bfs_wlp_512"
    assert config.training.batch_size == 16 and config.output.no_progress  # the file's


def test_a_flag_of_a_one_of_replaces_the_files_choice(tmp_path):
    """finetune's --model / --init: a flag given replaces the file's choice between them."""
    squad = tmp_path / "squad.json"
    squad.write_text("{}")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    path = write_json(tmp_path / "run.json", {"model": {"model": "ict_bfs_wlp_512"},
                                              "data": {"squad": str(squad),
                                                       "train_fraction": 0.05}})
    assert finetune.parse_args(["--config", path]).model.model == "ict_bfs_wlp_512"
    config = finetune.parse_args(["--config", path, "--init", "none", "--vocab", str(vocab)])
    assert (config.model.model, config.model.init) == (None, "none")
    assert config.data.train_fraction == 0.05


def test_the_recorded_dict_reads_back_as_the_same_config(tmp_path):
    config = finetune.parse_args(["--model", "ict_bfs_wlp_512", "--train-fraction", "0.05",
                                  "--steps", "3", "--quiet"])
    assert finetune.FinetuneConfig.from_dict(config.to_dict()) == config
    path = write_json(tmp_path / "run.json", config.to_dict())
    assert finetune.parse_args(["--config", path]) == config
    # train-term-weights: its four required settings from the file
    ttw = term_weights.parse_args(["--pairs", "p", "--init-from", "x", "--steps", "4",
                                   "--export", "e"])
    path = write_json(tmp_path / "ttw.json", ttw.to_dict())
    assert term_weights.parse_args(["--config", path]) == ttw


# ------------------------------------------------------------------ bad files

@pytest.mark.parametrize("content, message", [
    ({"training": {"stepz": 3}},
     "unknown key 'training.stepz' (did you mean 'training.steps'?)"),
    ({"steps": 3}, "unknown key 'steps' (did you mean 'training.steps'?)"),
    ({"model": {"steps": 3}}, "unknown key 'model.steps' (did you mean 'training.steps'?)"),
    ({"trainin": {}}, "unknown key 'trainin' (did you mean 'training'?)"),
    ({"training": {"steps": "7"}}, "'training.steps' must be an integer or null (got \"7\")"),
    ({"training": {"steps": True}}, "'training.steps' must be an integer or null (got true)"),
    ({"model": {"pooling": "max"}},
     "'model.pooling' must be one of \"cls\", \"mean\" or null (got \"max\")"),
    ({"training": 5}, "'training' must be an object of settings (got int)"),
    ([1], "expected a JSON object of groups (model, lengths, data"),
])
def test_a_bad_file_is_refused_naming_the_file_and_the_key(tmp_path, capsys, content, message):
    path = write_json(tmp_path / "run.json", content)
    err = refused(pretrain.parse_args, ["--variant", "ict_bfs_wlp_128", "--config", path],
                  capsys)
    assert f"tt-zoo pretrain: error: --config {path}: " in err and message in err, err


def test_a_missing_or_broken_file_and_a_missing_required_setting(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    err = refused(pretrain.parse_args, ["--config", str(missing)], capsys)
    assert f"--config {missing}: cannot be read (No such file or directory)" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{\"model\": ")
    assert f"--config {broken}: not valid JSON" in refused(
        pretrain.parse_args, ["--config", str(broken)], capsys)
    # Without the file, the required settings give argparse's own messages.
    err = refused(pretrain.parse_args, ["--steps", "3"], capsys)
    assert "the following arguments are required: --variant" in err
    err = refused(finetune.parse_args, ["--train-fraction", "0.05"], capsys)
    assert "one of the arguments --model --init is required" in err
    both = write_json(tmp_path / "both.json", {"model": {"model": "x", "init": "none"}})
    err = refused(finetune.parse_args, ["--config", both], capsys)
    assert f"--config {both}: 'model' and 'init' exclude each other" in err


def test_finetune_mining_choices_need_hard_negatives(capsys):
    """--hard-negatives-from and --hard-negatives-other-passages say how negatives are mined;
    without --hard-negatives H none are, so the run is refused rather than silently ignored."""
    base = ["--model", "ict_bfs_wlp_512", "--train-fraction", "0.05"]
    for extra in (["--hard-negatives-from", "reqa_model"], ["--hard-negatives-other-passages"]):
        err = refused(finetune.parse_args, base + extra, capsys)
        assert "give --hard-negatives H (H >= 1) too" in err
    config = finetune.parse_args(base + ["--hard-negatives", "1", "--hard-negatives-from",
                                         "reqa_model", "--hard-negatives-other-passages"])
    assert config.negatives.hard_negatives_from == "reqa_model"
    assert config.negatives.hard_negatives_other_passages is True
    err = refused(finetune.parse_args, base + ["--hard-negatives", "1", "--bm25-negatives", "1"],
                  capsys)
    assert "--bm25-negatives K adds BM25 negatives to those --hard-negatives-from MODEL" in err


def test_from_dict_names_its_source():
    with pytest.raises(RunConfigError, match=r"^recorded: unknown key 'data.pair'"):
        pretrain.PretrainConfig.from_dict({"data": {"pair": "x"}}, source="recorded")


def test_a_config_field_must_be_a_scalar_and_in_one_group():
    @dataclasses.dataclass(frozen=True)
    class Listy:
        """A list-valued field."""
        names: list = option(None, "names")

    @dataclasses.dataclass(frozen=True)
    class Bad(RunConfig):
        group: Listy

    with pytest.raises(TypeError, match="must be bool, int, float or str"):
        Bad.settings()

    @dataclasses.dataclass(frozen=True)
    class Twice(RunConfig):
        a: run_config.SequenceLengthArguments
        b: run_config.SequenceLengthArguments

    with pytest.raises(TypeError, match="'query_length' is in groups 'a' and 'b'"):
        Twice.settings()


# ------------------------------------------------------------------ recorded in the artifact

def test_a_tiny_pretrain_run_records_its_whole_config(pair_dir, checkpointable_randomness):
    root, vocab = pair_dir
    settings = write_json(root / "run.json", {
        "model": {"variant": "bow_mlp_ict_bfs_wlp_512", "vocab": str(vocab)},
        "lengths": {"query_length": 16, "document_length": 24},
        "training": {"steps": 1, "batch_size": 8}})
    argv = ["--config", settings, "--pairs", str(root / "pairs"), "--token-cache", "",
            "--workdir", str(root / "run"), "--export", str(root / "export"), "--no-progress"]
    assert pretrain.main(argv) == 0
    expected = pretrain.parse_args(argv).to_dict()
    assert expected["training"]["steps"] == 1 and expected["data"]["pairs"] == str(root / "pairs")
    summary = json.loads((root / "run" / "train_summary.json").read_text())
    metadata = json.loads((root / "export" / "metadata.json").read_text())
    assert summary[RUN_CONFIG_KEY] == expected and metadata[RUN_CONFIG_KEY] == expected
    assert metadata["train_steps"] == 1 and metadata["batch_size"] == 8  # the card's own keys
    assert metadata["command"].startswith(f"tt-zoo pretrain --config {settings} --pairs")
    # The recorded config, as a file, is the same run again.
    again = write_json(root / "again.json", metadata[RUN_CONFIG_KEY])
    assert pretrain.parse_args(["--config", again]).to_dict() == expected
