"""`tt-zoo make-pairs` end to end on 20 real Wikispeedia articles."""

import json
import os
import subprocess
import sys

import pytest

from tt_zoo.data import features, pairs_io

from conftest import data_file
from helpers import load_recipe

COMMAND = [sys.executable, "-m", "tt_zoo.cli", "make-pairs"]  # as `tt-zoo make-pairs`


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([*COMMAND, *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # about 20 s alone: a fresh interpreter imports TensorFlow
def test_recipe_writes_batchable_shards(tmp_path, bert_vocab_file):
    source = data_file("wikispeedia")
    out = tmp_path / "pairs"
    proc = _run("--input", source, "--output", out, "--limit", 20, "--num-shards", 2,
                "--vocab", bert_vocab_file, "--seed", 1, "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Table 1" in proc.stdout and "pairs/s" in proc.stdout

    manifest = pairs_io.read_manifest(out, verify="sha256")
    stats = json.loads((out / "stats.json").read_text())
    assert stats["all"]["num_pairs"] == manifest["num_records"] > 20
    assert stats["read_report"]["kept"] == 20
    assert stats["token_unit"] == "wordpiece"
    assert set(stats["tasks"]) <= {"ict", "bfs", "wlp"} and "ict" in stats["tasks"]
    assert manifest["config"]["seed"] == 1 and manifest["config"]["limit"] == 20

    batch = next(iter(pairs_io.read_pairs(out).batch(8)))
    assert batch[features.QUERY].shape == (8,)
    assert batch[features.DOC_SAMPLING_PROB].dtype.name == "float32"
    probs = [float(r[features.DOC_SAMPLING_PROB])
             for r in pairs_io.read_pairs(out).as_numpy_iterator()]
    assert all(0 < p <= 1 for p in probs)


def test_recipe_main_in_process(tmp_path, bert_vocab_file, capsys):
    """The fast variant: the same CLI through ``main(argv)`` on 8 articles, Beam runner."""
    out = tmp_path / "pairs"
    recipe = load_recipe("make_pairs")
    assert recipe.main(["--input", str(data_file("wikispeedia")), "--output", str(out),
                        "--limit", "8", "--num-shards", "2", "--runner", "beam",
                        "--vocab", str(bert_vocab_file), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "runner beam:DirectRunner" in printed and "reader: kept 8 articles" in printed
    stats = json.loads((out / "stats.json").read_text())
    n = stats["all"]["num_pairs"]
    assert n == pairs_io.read_manifest(out)["num_records"] > 8
    assert f"{n} pairs in 2 shards" in printed
    sizes = [int(b[features.DOC_ID].shape[0]) for b in pairs_io.read_pairs(out).batch(4)]
    assert sum(sizes) == n and sizes[0] == 4


@pytest.mark.parametrize("argv, message", [
    (["--tasks", "ict,foo"], "--tasks must be a subset of ict,bfs,wlp,crop,span,qgen or 'mlm'"),
    (["--tasks", "mlm"], "--tasks mlm needs --vocab"),
    (["--num-shards", "0"], "argument --num-shards: must be a whole number from 1"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    recipe = load_recipe("make_pairs")
    with pytest.raises(SystemExit):
        recipe.parse_args(["--input", "x", "--output", "y", *argv])
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_recipe_mlm(tmp_path, bert_vocab_file):
    source = data_file("wikispeedia")
    out = tmp_path / "mlm"
    proc = _run("--input", source, "--output", out, "--limit", 3, "--tasks", "mlm",
                "--vocab", bert_vocab_file, "--max-doc-tokens", 64, "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    batch = next(iter(pairs_io.read_mlm_examples(out).batch(4)))
    assert batch["input_word_ids"].shape == (4, 64)
