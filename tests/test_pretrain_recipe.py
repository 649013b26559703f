"""recipes/pretrain.py: a real process kill mid-run, then resume to the same final weights."""

import json
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from helpers import kill_at_first_checkpoint, tiny_vocab
from tt_zoo.data.pairs_io import write_pair_shards
from tt_zoo.data.pretraining_tasks import Pair

REPO = pathlib.Path(__file__).resolve().parents[1]
STEPS, EVERY = 40, 8


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    words = "the a of in is who what paris france river water london city".split()
    rng = np.random.default_rng(0)
    pairs = [Pair(query=" ".join(rng.choice(words, 6)), doc_title=str(rng.choice(words)),
                  doc_text=" ".join(rng.choice(words, 12)), doc_id=f"d{i % 40}",
                  task=("ict", "bfs", "wlp")[i % 3]) for i in range(96)]
    write_pair_shards(pairs, str(root / "pairs"), num_shards=2)
    return root, vocab


def command(root, vocab, workdir, extra=()):
    return [sys.executable, str(REPO / "recipes" / "pretrain.py"), "--variant",
            "ict_bfs_wlp_128", "--pairs", str(root / "pairs"), "--vocab", str(vocab),
            "--steps", str(STEPS), "--batch-size", "8", "--checkpoint-every", str(EVERY),
            "--tower-shape", "1,16,2", "--query-length", "16", "--document-length", "24",
            "--workdir", str(workdir), "--token-cache", str(root / "token_cache"),
            "--no-progress", *extra]


def final_weights(workdir):
    reader = tf.train.load_checkpoint(str(workdir / "checkpoints"))
    # Tower weights and the optimizer's state; Keras metric accumulators reset every fit call.
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
            if "metrics" not in k and k.endswith(".ATTRIBUTES/VARIABLE_VALUE")}


@pytest.fixture(scope="module")
def straight(inputs):
    """One uninterrupted run with its export: the reference of the kill-and-resume test and the
    finished run the rerun test starts from (trained once for both)."""
    root, vocab = inputs
    run = subprocess.run(command(root, vocab, root / "straight", ["--export", str(root / "export")]),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return root / "straight", run.stdout


def test_kill_and_resume_matches_uninterrupted_run(inputs, straight):
    root, vocab = inputs
    straight_dir, printed = straight
    assert "no checkpoint in" in printed  # a missing checkpoint dir starts fresh, and says so
    import tt_zoo
    exported = tt_zoo.load(root / "export")  # the export at the end of pretraining loads
    assert exported.metadata["train_steps"] == STEPS and exported.pretraining == "ict_bfs_wlp"

    workdir = root / "killed"
    checkpoints = workdir / "checkpoints"
    returncode = kill_at_first_checkpoint(command(root, vocab, workdir), checkpoints)
    assert returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (workdir / "train_summary.json").exists()
    killed_at = tf.train.latest_checkpoint(str(checkpoints))
    assert killed_at is not None and int(killed_at.rsplit("-", 1)[1]) < STEPS

    resumed = subprocess.run(command(root, vocab, workdir), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout
    assert f"trained to step {STEPS}" in resumed.stdout

    expected, actual = final_weights(straight_dir), final_weights(workdir)
    assert expected.keys() == actual.keys() and len(expected) > 10
    assert any("query_tower" in name for name in expected)
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def in_process(argv, capsys):
    """The recipe's `main` in this process (TensorFlow is already loaded here: no second
    interpreter start-up); its exit message (or None) and what it printed."""
    from tt_zoo.cli import pretrain
    try:
        pretrain.main(argv[2:])  # past the interpreter and the script
        message = None
    except SystemExit as stop:
        message = str(stop.code)
    return message, capsys.readouterr()


def test_rerun_of_a_finished_run_and_resume_with_other_settings(inputs, straight, capsys):
    root, vocab = inputs
    workdir = root / "rerun"
    shutil.copytree(straight[0], workdir)  # a finished run (checkpoint paths are relative)
    summary = json.loads((workdir / "train_summary.json").read_text())
    message, again = in_process(command(root, vocab, workdir), capsys)
    assert message is None, again.err[-3000:]
    assert f"already trained to step {STEPS}: nothing to do" in again.out
    assert "read 96 tokenized pairs" in again.out  # the token cache served the rerun
    assert f"vocabulary: {vocab} (" in again.out  # which vocabulary, said before training
    rerun_summary = json.loads((workdir / "train_summary.json").read_text())  # valid JSON
    assert rerun_summary["final_loss"] == summary["final_loss"]
    assert rerun_summary["train_wall_time_s"] == summary["train_wall_time_s"]

    other = command(root, vocab, workdir)
    other[other.index("--batch-size") + 1] = "4"
    other[other.index("--steps") + 1] = str(2 * STEPS)
    refused, _ = in_process(other, capsys)
    assert "batch_size: checkpoint 8, now 4" in refused
    assert f"steps: checkpoint {STEPS}, now {2 * STEPS}" in refused
    pooled, _ = in_process(command(root, vocab, workdir, ["--pooling", "cls"]), capsys)
    assert pooled is not None and "query_tower" in pooled


def test_unknown_variant_and_missing_pairs_are_clear(inputs):
    root, vocab = inputs
    bad = subprocess.run([sys.executable, str(REPO / "recipes" / "pretrain.py"), "--variant",
                          "ict_bfs_wlp_999"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "ict_bfs_wlp_512" in bad.stderr  # close matches listed
    no_pairs = subprocess.run([sys.executable, str(REPO / "recipes" / "pretrain.py"),
                               "--variant", "ict_512", "--vocab", str(vocab), "--steps", "5"],
                              capture_output=True, text=True, timeout=300)
    assert no_pairs.returncode != 0 and "--pairs" in no_pairs.stderr


def test_command_line_overrides_the_registry_options():
    from helpers import load_recipe
    from tt_zoo.training.pretrain_run import model_options
    from tt_zoo.zoo import registry
    recipe = load_recipe("pretrain")
    spec = registry.get_spec("bow_mlp_ict_bfs_wlp_512")
    assert model_options(spec, recipe.parse_args(["--variant", spec.name])) == spec.options
    paper = model_options(spec, recipe.parse_args([
        "--variant", spec.name, "--pooling", "cls", "--share-towers", "no", "--normalize", "no",
        "--temperature", "0", "--bow-output-activation", "tanh"]))
    assert paper == registry.PAPER
    linear = model_options(registry.get_spec("bert_base_ict_512"), recipe.parse_args(
        ["--variant", "bert_base_ict_512", "--bow-output-activation", "linear",
         "--temperature", "0.1"]))
    assert linear.bow_output_activation is None and linear.temperature == 0.1


@pytest.mark.slow  # ~26 s: two pretraining runs in a subprocess on ram://
def test_every_file_goes_through_gfile(inputs, tmp_path):
    """Pairs, token cache, checkpoints, logs, settings, summary and export on `ram://` (the
    in-memory filesystem behind the same tf.io.gfile API as gs://); the export, copied back,
    loads and passes its sha256 check."""
    root, vocab = inputs
    script = REPO / "tests" / "scripts" / "pretrain_ram_filesystem_check.py"
    result = subprocess.run([sys.executable, str(script), str(root / "pairs"), str(vocab),
                             str(tmp_path / "export")], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    written = report["written"]
    for expected in ("ram://run/checkpoints/run_settings.json", "ram://run/checkpoints/checkpoint",
                     "ram://run/train_summary.json", "ram://export/metadata.json",
                     "ram://export/saved_model.pb", "ram://export/config.json"):
        assert expected in written, (expected, written)
    # The vocabulary travels in config.json and the graph: no plain copy beside them.
    assert "ram://export/assets/vocab.txt" not in written
    assert any(p.startswith("ram://run/logs/") and ".tfevents." in p for p in written)
    assert any(p.startswith("ram://cache/tokens-") and p.endswith(".npz") for p in written)
    first, second = report["printed"]
    assert "trained to step 6" in first and "exported to ram://export" in first
    assert "read 96 tokenized pairs from ram://cache/" in second
    assert "already trained to step 6: nothing to do" in second
    import tt_zoo
    model = tt_zoo.load(tmp_path / "export")  # verifies every file against the sha256
    assert model.encode_queries(["who is in paris"]).shape == (1, 128)


@pytest.mark.slow  # ~23 s: a pretraining run and export in a subprocess
def test_mixed_bfloat16_trains_and_exports_a_bfloat16_tower(inputs):
    # The towers compute in bfloat16; the loss, and the layers TFRS makes inside it at call
    # time, stay float32 (a global mixed policy during fit once broke the accidental-hit mask).
    root, vocab = inputs
    workdir = root / "bf16"
    extra = ["--dtype-policy", "mixed_bfloat16", "--export", str(root / "bf16_model")]
    run = subprocess.run(command(root, vocab, workdir, extra), capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads((workdir / "train_summary.json").read_text())
    assert summary["dtype_policy"] == "mixed_bfloat16" and np.isfinite(summary["final_loss"])
    config = json.loads((root / "bf16_model" / "config.json").read_text())
    assert '"mixed_bfloat16"' in json.dumps(config["config"]["query_tower"])
