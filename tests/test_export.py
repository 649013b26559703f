"""Serving export: SavedModel signatures with raw strings, fresh-process reload, saved_model_cli."""

import json
import subprocess
import sys

import numpy as np

from helpers import PAIRS, assert_model_round_trip
from tt_zoo.data import features as F
from tt_zoo.artifacts.card_rendering import render_card
from tt_zoo.artifacts.export import MANIFEST_EXCLUDES, SIGNATURES, verify_export
from tt_zoo.artifacts.model_card import ModelCard
from tt_zoo.manifest import describe_files, manifest_digest

QUERIES = PAIRS[F.QUERY]
SENTENCES = PAIRS[F.DOC_TITLE]
PASSAGES = PAIRS[F.DOC_TEXT]


def test_export_files_and_metadata(exported):
    model, path, meta = exported
    for name in ("saved_model.pb", "config.json", "metadata.json", "MODEL_CARD.md"):
        assert (path / name).is_file(), name
    files = describe_files(path, skip=MANIFEST_EXCLUDES)
    assert meta["files"] == files and "variables/variables.index" in files
    assert meta["sha256"] == manifest_digest(files)
    assert verify_export(path) == meta
    assert json.loads((path / "metadata.json").read_text())["embedding_dim"] == 8
    assert "tiny_test" in (path / "MODEL_CARD.md").read_text()
    assert not list(path.parent.glob(".*staging*"))  # nothing half-written left


def test_export_holds_our_signatures_not_keras_layer_traces(exported):
    """Keras' per-layer call traces doubled saved_model.pb and served nothing (issue 9)."""
    from tensorflow.core.protobuf import saved_model_pb2

    _, path, _ = exported
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((path / "saved_model.pb").read_bytes())
    names = [f.signature.name for f in proto.meta_graphs[0].graph_def.library.function]
    assert any("encode_query" in n for n in names)
    assert not [n for n in names if "call_and_return_conditional_losses" in n]


def test_keras_model_rebuilds_from_export(exported):
    # The shared case on the module's export (conftest's `exported`): config through JSON,
    # load_keras_model gives the same query and document embeddings, one fit step.
    model, path, _ = exported
    assert_model_round_trip(model, path, exported=True)


def test_fresh_process_reload_matches_keras(exported, tmp_path):
    model, path, _ = exported
    expected = {
        "query": model.encode_queries(QUERIES),
        "document": model.encode_documents(PASSAGES, titles=SENTENCES),
    }
    script = f"""
import os, json, numpy as np
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf, tensorflow_text  # tensorflow_text registers the tokenizer ops
from tt_zoo.artifacts.export import serialize_reqa_examples
loaded = tf.saved_model.load({str(path)!r})
q = loaded.signatures["encode_query"](query=tf.constant({QUERIES!r}))["embedding"].numpy()
d = loaded.signatures["encode_document"](title=tf.constant({SENTENCES!r}),
                                         passage=tf.constant({PASSAGES!r}))["embedding"].numpy()
qe = loaded.signatures["query_encoder"](examples=tf.constant(
    serialize_reqa_examples({QUERIES!r}, [""] * 4, "inp")))["outputs"].numpy()
re = loaded.signatures["response_encoder"](examples=tf.constant(
    serialize_reqa_examples({SENTENCES!r}, {PASSAGES!r}, "res")))["outputs"].numpy()
np.savez({str(tmp_path / 'out.npz')!r}, q=q, d=d, qe=qe, re=re)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(out["q"], expected["query"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["d"], expected["document"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["qe"], expected["query"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["re"], expected["document"], rtol=1e-5, atol=1e-5)


def saved_model_cli(*args):
    """Runs TF's saved_model_cli with tensorflow-text's ops registered (as TF Serving has them)."""
    code = ("import sys, tensorflow_text; from tensorflow.python.tools import saved_model_cli; "
            "sys.argv = ['saved_model_cli'] + sys.argv[1:]; saved_model_cli.main()")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300)


def test_saved_model_cli_show_lists_every_signature_with_string_inputs(exported):
    _, path, _ = exported
    result = saved_model_cli("show", "--dir", str(path), "--all")
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    for name in SIGNATURES:
        assert f"signature_def['{name}']" in out, name
    block = out.split("signature_def['encode_document']")[1].split("signature_def[")[0]
    assert "inputs['passage'] tensor_info:\n        dtype: DT_STRING" in block
    assert "inputs['title'] tensor_info:\n        dtype: DT_STRING" in block
    for name in ("query_encoder", "response_encoder"):
        block = out.split(f"signature_def['{name}']")[1].split("signature_def[")[0]
        assert "inputs['examples'] tensor_info:\n        dtype: DT_STRING" in block
        assert "outputs['outputs']" in block


def test_saved_model_cli_run(exported):
    model, path, _ = exported
    result = saved_model_cli("run", "--dir", str(path), "--tag_set", "serve", "--signature_def",
                             "encode_query", "--input_exprs",
                             "query=['who discovered penicillin?']")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "embedding" in result.stdout
    values = result.stdout.split("[[")[1].split("]]")[0].split()
    np.testing.assert_allclose(np.array(values, dtype=np.float32),
                               model.encode_queries(["who discovered penicillin?"])[0],
                               rtol=1e-4, atol=1e-4)


def test_card_shows_the_more_signal_settings_a_run_recorded():
    card = render_card(ModelCard.from_dict({
        "name": "m", "batch_size": 512, "grad_cache_chunk": 128,
        "clustered_batches": {"every": 250, "clusters": 62},
        "hard_negatives": {"num_negatives": 1, "miner_version": 2}}))
    assert "| grad_cache_chunk | 128 |" in card
    assert "| clustered_batches | {'every': 250, 'clusters': 62} |" in card
    assert "'miner_version': 2" in card
    assert "grad_cache_chunk" not in render_card(ModelCard.from_dict({"name": "m",
                                                                      "batch_size": 128}))


# ------------------------------------------------------------------ format version, re-export

def test_every_export_records_the_format_version_its_loader_compares(exported, tmp_path):
    """Two-tower and ColBERT exports (one writer) and term-weight exports record
    `FORMAT_VERSION`, which `verify_export` (every loader's first step) compares."""
    from helpers import tiny_model
    from tt_zoo.modeling.term_weights import TermWeightModel
    from tt_zoo.artifacts.export import FORMAT_VERSION
    from tt_zoo.artifacts.term_weight_export import export_term_weight_model
    assert FORMAT_VERSION == 1
    _, path, meta = exported
    assert meta["format_version"] == FORMAT_VERSION
    assert json.loads((path / "metadata.json").read_text())["format_version"] == FORMAT_VERSION
    two_tower = tiny_model()
    two_tower.build_by_calling()
    term_meta = export_term_weight_model(TermWeightModel.from_two_tower(two_tower),
                                         tmp_path / "hdct", {"name": "hdct_test"})
    assert term_meta["format_version"] == FORMAT_VERSION


def test_retrieve_model_records_its_format_and_needs_only_scann_ops_beyond_core_and_text(
        exported, tmp_path):
    """The `retrieve` SavedModel: brute force needs TensorFlow core and tensorflow-text ops only
    (the stock ModelServer's); ScaNN adds ScaNN's ops and no other (a ScaNN-enabled image).
    A newer format in its settings is refused, naming both versions."""
    import pytest
    from helpers import registered_op_layers, saved_model_graph
    from tt_zoo.errors import ArtifactError
    from tt_zoo.artifacts.export import QueryEncoder
    from tt_zoo.serving.retrieve import (RETRIEVAL_CONFIG_FILE, RETRIEVE_FORMAT_VERSION,
                                         export_retrieval_model, load_retrieval_model)
    model, _, _ = exported
    documents = model.encode_documents(PASSAGES, titles=SENTENCES)
    ids = [f"d{i}" for i in range(len(PASSAGES))]
    layers = registered_op_layers()
    for backend in ("brute_force", "scann"):
        path = export_retrieval_model(QueryEncoder(model), documents, ids, tmp_path / backend,
                                      k=2, backend=backend)
        used, signatures = saved_model_graph(path)
        assert "serving_default" in signatures and used & layers["text"]
        extra = used - layers["core"] - layers["text"]
        if backend == "scann":
            assert extra and extra <= layers["scann"], extra
        else:
            assert extra == set(), extra
    settings_path = tmp_path / "brute_force" / RETRIEVAL_CONFIG_FILE
    settings = json.loads(settings_path.read_text())
    assert settings["format_version"] == RETRIEVE_FORMAT_VERSION == 1
    settings["format_version"] = 2
    settings_path.write_text(json.dumps(settings))
    with pytest.raises(ArtifactError, match="format 2; this tt_zoo .* reads up to format 1: "
                                            "upgrade tt_zoo"):
        load_retrieval_model(tmp_path / "brute_force")


def test_reexport_keeps_the_weights_and_the_card_and_records_why(exported, tmp_path):
    """`shipping.reexport`: today's exporter over an export's own weights (how the three shipped
    exports made before serving_default got it); the card, its measured tables and the command
    stay, the note says when and why, the file manifest and sha256 are the new files'."""
    import shutil
    from helpers import saved_model_graph
    from tt_zoo.artifacts import export
    from tt_zoo.zoo import shipping
    _, path, _ = exported
    old = tmp_path / "old"
    shutil.copytree(path, old)
    before = export.update_metadata(old, metrics={"ReQA": {"R@1": 1.0}}, command="python x.py")
    messages = []
    meta = shipping.reexport(old, "to add serving_default", log=messages.append)
    assert meta == export.verify_export(old)
    assert (meta["metrics"], meta["command"], meta["name"]) == (
        before["metrics"], "python x.py", "tiny_test")
    note = meta["reexported"][-1]
    assert note["reason"] == "to add serving_default" and note["weights"] == "unchanged"
    assert (note["previous_sha256"], note["previous_exported"]) == (before["sha256"],
                                                                    before["exported"])
    assert meta["format_version"] == export.FORMAT_VERSION
    assert "serving_default" in saved_model_graph(old)[1]
    card = (old / "MODEL_CARD.md").read_text()
    assert "Re-exported" in card and "to add serving_default" in card and "R@1" in card
    reloaded = export.load_keras_model(old)
    for ours, theirs in zip(reloaded.get_weights(), exported.model.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    assert any("weights unchanged" in m for m in messages), messages


def test_card_tables_read_recall_by_k_whatever_order_the_json_keeps():
    """metadata.json keeps each table with sorted keys (MRR, R@1, R@10, R@100, R@5); the card
    prints R@k by k, then MRR."""
    card = render_card(ModelCard.from_dict({"name": "m", "metrics": {"ReQA (%)": {
        "MRR": 3.0, "R@1": 1.0, "R@10": 10.0, "R@100": 100.0, "R@5": 5.0}}}))
    assert "| R@1 | R@5 | R@10 | R@100 | MRR |\n" in card
    assert "| 1 | 5 | 10 | 100 | 3 |" in card
