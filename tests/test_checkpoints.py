"""Checkpoint import (`tt_zoo.modeling.checkpoints`): tiny random checkpoints in both formats
reproduce an independent NumPy BERT forward; bad folders are refused with the file named."""

import json
import shutil

import numpy as np
import pytest

from bert_reference import (numpy_bert_sentence_vectors, write_google_folder,
                            write_hf_folder)
from tt_zoo.errors import ArtifactError

TEXTS = ["who discovered penicillin?", "the capital of france is paris.",
         "water boils at degrees", "a", "london england city river seine flows through",
         "Fleming, Alexander!"]


def _reference(model, weights, texts, **options):
    packed = model.query_preprocessor(np.array(texts))
    ids, mask = packed["input_word_ids"].numpy(), packed["input_mask"].numpy()
    return numpy_bert_sentence_vectors(weights, ids, mask, heads=4, **options)


def _cosines(a, b):
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return (a * b).sum(-1)


@pytest.mark.parametrize("tokenizer_json", [False, True])
def test_sentence_transformers_folder_matches_numpy_forward(tmp_path, tokenizer_json):
    from tt_zoo.modeling.checkpoints import import_checkpoint

    folder, weights, vocab = write_hf_folder(tmp_path / "st", tokenizer_json=tokenizer_json)
    model, origin = import_checkpoint(folder, query_length=16)
    assert model.query_preprocessor.vocabulary == vocab
    assert model.document_preprocessor.seq_length == 32  # sentence_bert_config's max_seq_length
    assert model.normalize_embeddings and model.query_tower.pooling == "mean"
    assert origin["new"] == [] and origin["sha256"].startswith("model.safetensors=")
    got = model.encode_queries(TEXTS)
    want = _reference(model, weights, TEXTS)  # mean pooling, exact GELU, normalised
    assert got.shape == (len(TEXTS), 16)
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert _cosines(got, want).min() >= 0.9999
    # The plain-matmul inference forward and the Model Garden layers agree too.
    layers = model.encode_queries(TEXTS, plain_inference=False)
    np.testing.assert_allclose(layers, want, atol=2e-5)


def test_google_checkpoint_matches_numpy_forward(tmp_path):
    from tt_zoo.modeling.checkpoints import import_checkpoint

    folder, weights, _ = write_google_folder(tmp_path / "google")
    model, _ = import_checkpoint(folder, query_length=16, document_length=40)
    assert not model.normalize_embeddings and model.query_tower.pooling == "cls"
    assert model.query_tower.inner_activation == "gelu_approximate"  # Google's tanh GELU
    got = model.encode_queries(TEXTS)
    want = _reference(model, weights, TEXTS, pooling="cls", normalize=False,
                      approximate_gelu=True)
    np.testing.assert_allclose(got, want, atol=5e-5, rtol=1e-4)
    assert _cosines(got, want).min() >= 0.9999


def test_hidden_act_gelu_is_exact_for_hugging_face(tmp_path):
    """The two GELUs differ enough that a wrong one fails the forward check."""
    from tt_zoo.modeling.checkpoints import import_checkpoint

    folder, weights, _ = write_hf_folder(tmp_path / "st")
    model, _ = import_checkpoint(folder, query_length=16)
    wrong = _reference(model, weights, TEXTS, approximate_gelu=True)
    assert np.abs(model.encode_queries(TEXTS) - wrong).max() > 2e-5


def test_new_projection_is_recorded_as_new(tmp_path):
    from tt_zoo.modeling.checkpoints import NEW_PROJECTION, import_checkpoint

    folder, weights, _ = write_hf_folder(tmp_path / "st")
    model, origin = import_checkpoint(folder, query_length=16, embedding_dim=8)
    assert origin["new"] == [NEW_PROJECTION]
    assert model.encode_queries(TEXTS).shape == (len(TEXTS), 8)


def test_imported_model_round_trips_through_an_export(tmp_path):
    """imported -> exported SavedModel -> tt_zoo.load -> the same vectors; the serving
    signature gives them too; the reloaded model fine-tunes (the shared round-trip case)."""
    import tensorflow as tf

    import tt_zoo
    from helpers import assert_model_round_trip
    from tt_zoo.modeling.checkpoints import import_checkpoint
    from tt_zoo.artifacts.export import export_saved_model

    folder, _, _ = write_hf_folder(tmp_path / "st")
    model, origin = import_checkpoint(folder, query_length=16)
    export_saved_model(model, tmp_path / "export", {"name": "tiny_import",
                                                    "base_model": origin})
    assert_model_round_trip(model, tmp_path / "export", exported=True)
    loaded = tt_zoo.load(tmp_path / "export")
    np.testing.assert_allclose(loaded.encode_queries(TEXTS), model.encode_queries(TEXTS),
                               atol=1e-6)
    assert loaded.card.lineage.base_model.copied.startswith("every encoder weight")
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["encode_query"](
        tf.constant(TEXTS))
    np.testing.assert_allclose(list(served.values())[0].numpy(), model.encode_queries(TEXTS),
                               atol=1e-5)


# -- bad input ------------------------------------------------------------------------------

def _error(path, **kwargs):
    from tt_zoo.modeling.checkpoints import read_checkpoint
    with pytest.raises(ArtifactError) as e:
        read_checkpoint(path, **kwargs)
    return str(e.value)


def test_a_folder_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    assert "is not a BERT checkpoint" in _error(tmp_path)
    assert "is not a folder" in _error(tmp_path / "notes.txt")


def test_missing_and_corrupt_weight_files(tmp_path):
    folder, _, _ = write_hf_folder(tmp_path / "st")
    message = _error(folder, expected_sha256="0" * 64)
    assert "model.safetensors" in message and "does not match" in message
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage")
    message = _error(folder)
    assert "model.safetensors" in message and "not a readable safetensors" in message
    (folder / "model.safetensors").unlink()
    assert "model.safetensors is missing" in _error(folder)


def test_a_weight_of_the_wrong_shape(tmp_path):
    from bert_reference import random_bert_weights
    from helpers import tiny_vocab

    weights = random_bert_weights(len(tiny_vocab()), hidden=16, inner=32)
    weights["encoder.layer.1.intermediate.dense.weight"] = weights[
        "encoder.layer.1.intermediate.dense.weight"][:, :8]
    folder, _, _ = write_hf_folder(tmp_path / "st", weights=weights)
    message = _error(folder)
    assert "encoder.layer.1.intermediate.dense.weight" in message and "(32, 8)" in message


def test_a_vocabulary_that_does_not_match_the_embedding_table(tmp_path):
    from helpers import tiny_vocab

    folder, _, _ = write_hf_folder(tmp_path / "st")
    (folder / "vocab.txt").write_text("\n".join(tiny_vocab() + ["extra"]) + "\n")
    message = _error(folder)
    assert str(folder) in message and "vocabulary has" in message and "rows" in message


@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_an_unsupported_architecture(tmp_path, model_type):
    folder, _, _ = write_hf_folder(tmp_path / "st", config_overrides={"model_type": model_type})
    message = _error(folder)
    assert "config.json" in message and model_type in message and "not supported" in message


def test_a_truncated_google_checkpoint(tmp_path):
    folder, _, _ = write_google_folder(tmp_path / "google")
    data = next(folder.glob("bert_model.ckpt.data-*"))
    data.write_bytes(data.read_bytes()[:100])
    message = _error(folder)
    assert "bert_model.ckpt" in message and "cannot be read" in message
    shutil.rmtree(folder)
    folder, _, _ = write_google_folder(tmp_path / "google")
    (folder / "bert_model.ckpt.index").unlink()
    assert "bert_model.ckpt.index is missing" in _error(folder)


def test_a_malformed_config(tmp_path):
    folder, _, _ = write_hf_folder(tmp_path / "st")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, num_attention_heads=5)))
    assert "not divisible" in _error(folder)
    (folder / "config.json").write_text("{not json")
    assert "config.json is not valid JSON" in _error(folder)
