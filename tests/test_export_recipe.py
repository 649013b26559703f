"""`tt-zoo export`: model export plus a saved index and a `retrieve` SavedModel."""

import json
import subprocess
import sys

import numpy as np
import tensorflow as tf

from helpers import PAIRS, run_as_a_user
from tt_zoo.data import features as F


def test_export_index_and_brute_force_retrieve_model(exported, tmp_path):
    model, path, _ = exported
    corpus = tmp_path / "corpus.jsonl"
    with open(corpus, "w") as f:
        for i, (title, text) in enumerate(zip(PAIRS[F.DOC_TITLE], PAIRS[F.DOC_TEXT])):
            f.write(json.dumps({"id": f"doc{i}", "title": title, "text": text}) + "\n")
    # As a user runs it (none of the test run's TF_* settings): it must also be quiet. It
    # printed six to eight WARNING:tensorflow lines (TFRS's top-k layers have no config; the
    # loss layers are not built) before its own.
    result = run_as_a_user(
        ["-m", "tt_zoo.cli", "export", "--model", str(path),
         "--output", str(tmp_path / "model"), "--corpus", str(corpus),
         "--index-output", str(tmp_path / "index"), "--retrieve-output",
         str(tmp_path / "retrieve"), "--backend", "brute_force", "--k", "2", "--no-progress"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == "", result.stderr[-3000:]  # no WARNING:tensorflow, no C++ line
    assert "exported retrieve SavedModel (brute_force, k=2)" in result.stdout
    assert (tmp_path / "model" / "saved_model.pb").is_file()
    assert (tmp_path / "index" / "embeddings" / "ids.txt").read_text().split() == [
        f"doc{i}" for i in range(4)]
    assert not list((tmp_path / "index").rglob("*.pkl"))  # never a pickle

    retrieve = tf.saved_model.load(str(tmp_path / "retrieve"))
    out = retrieve.signatures["serving_default"](queries=tf.constant(["paris"]))
    q = model.encode_queries(["paris"])
    d = model.encode_documents(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE])
    best = np.argsort(-(q @ d.T)[0])[:2]
    assert [x.decode() for x in out["ids"].numpy()[0]] == [f"doc{i}" for i in best]


def test_bad_corpus_line_is_named(exported, tmp_path):
    path = exported.path
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"id": "a", "text": "x"}\n{"title": "no id"}\n')
    result = subprocess.run(
        [sys.executable, "-m", "tt_zoo.cli", "export", "--model", str(path), "--corpus",
         str(corpus), "--index-output", str(tmp_path / "i")], capture_output=True, text=True,
        timeout=300)
    assert result.returncode != 0 and "bad.jsonl:2" in result.stderr
