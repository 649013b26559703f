"""The library entry points the commands call: `tt_zoo.training.pretrain(config)` on the tiny
pair set (a BoW-MLP variant, two steps, no command line), and `RunError` naming the setting that
stops a run before TensorFlow is needed."""

import json

import pytest

# The tiny pair set and vocabulary, and the randomness pretraining sets up (reset afterwards).
from test_grad_cache import checkpointable_randomness, pair_dir  # noqa: F401 (fixtures)
from tt_zoo import training
from tt_zoo.training import PretrainConfig, RunError
from tt_zoo.configs.run_config import RUN_CONFIG_KEY


def tiny_config(root, vocab, **groups) -> PretrainConfig:
    settings = {"model": {"variant": "bow_mlp_ict_bfs_wlp_512", "vocab": str(vocab)},
                "lengths": {"query_length": 16, "document_length": 24},
                "data": {"pairs": str(root / "pairs"), "token_cache": ""},
                "training": {"steps": 2, "batch_size": 8},
                "output": {"workdir": str(root / "run"), "checkpoint_every": 1,
                           "no_progress": True}}
    for group, values in groups.items():
        settings[group] = {**settings.get(group, {}), **values}
    return PretrainConfig.from_dict(settings)


def test_pretrain_is_a_library_call(pair_dir, checkpointable_randomness, capsys):
    root, vocab = pair_dir
    config = tiny_config(root, vocab, output={"export": str(root / "export")})
    run = training.pretrain(config)
    assert run.workdir == str(root / "run") and run.model.name
    assert run.summary["train_steps"] == 2 and run.summary[RUN_CONFIG_KEY] == config.to_dict()
    assert "command" not in run.summary or run.summary["command"] is None
    on_disk = json.loads((root / "run" / "train_summary.json").read_text())
    assert on_disk == run.summary
    metadata = json.loads((root / "export" / "metadata.json").read_text())
    assert run.export["sha256"] == metadata["sha256"]
    assert metadata[RUN_CONFIG_KEY] == config.to_dict()
    assert "trained to step 2" in capsys.readouterr().out
    again = training.pretrain(config)  # resumes from the work folder: nothing left to train
    assert again.summary["final_loss"] == run.summary["final_loss"]
    assert "already trained to step 2: nothing to do" in capsys.readouterr().out


def test_a_setting_that_stops_the_run_is_a_run_error(pair_dir):
    root, vocab = pair_dir
    with pytest.raises(RunError, match="pass --pairs DIR"):
        training.pretrain(tiny_config(root, vocab, data={"pairs": None}))
    with pytest.raises(RunError, match="vocabulary .* not found"):
        training.pretrain(tiny_config(root, vocab, model={"vocab": str(root / "nothing.txt")}))
    with pytest.raises(RunError, match="is not a tt_zoo model"):
        training.pretrain(tiny_config(root, vocab, model={"variant": "no_such_variant"}))
