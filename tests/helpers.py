"""Shared checks for every layer and model (STYLE.md: one helper, used by every test)."""

import importlib
import json
import pathlib
import string

import numpy as np
import tensorflow as tf

RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a of in is who what where when was by discovered penicillin fleming alexander "
         "paris capital france city river seine flows through london england water boils at "
         "degrees").split()


def tiny_vocab():
    """A small WordPiece vocabulary: reserved tokens, a few words, all letters and ## letters."""
    letters = [c for c in string.ascii_lowercase + string.digits + "?.,!'-" if c not in WORDS]
    return RESERVED + WORDS + letters + ["##" + c for c in string.ascii_lowercase + string.digits]


def json_round_trip(config):
    """Passes a config through JSON text, as a saved artifact does."""
    return json.loads(json.dumps(config))


def assert_layer_round_trip(layer, inputs, cls=None):
    """get_config -> JSON -> from_config gives the same config, and with the weights copied,
    the same outputs (allclose)."""
    cls = cls or type(layer)
    expected = layer(inputs)
    clone = cls.from_config(json_round_trip(layer.get_config()))
    assert clone.get_config() == layer.get_config()
    clone(inputs)
    clone.set_weights(layer.get_weights())
    actual = clone(inputs)
    tf.nest.map_structure(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                          expected, actual)
    return clone


def load_recipe(name: str):
    """The command behind recipes/NAME.py (`tt_zoo.cli.NAME`), to call its main() in-process."""
    return importlib.import_module(f"tt_zoo.cli.{name}")


GOLDEN_DIR = pathlib.Path(__file__).resolve().parent / "golden"


def read_golden(name: str) -> dict:
    """tests/golden/NAME.json: fixed texts and a shipped model's pinned outputs for them."""
    path = GOLDEN_DIR / f"{name}.json"
    assert path.is_file(), f"no golden file for {name}: run tests/golden/regenerate.py"
    return json.loads(path.read_text())


def assert_matches_golden(golden: dict, query_embeddings, document_embeddings):
    """The embeddings of the golden texts equal the pinned ones (first 8 dims, all scores)."""
    q, d = np.asarray(query_embeddings), np.asarray(document_embeddings)
    np.testing.assert_allclose(q[:, :8], golden["query_embeddings_first8"], atol=1e-5)
    np.testing.assert_allclose(d[:, :8], golden["document_embeddings_first8"], atol=1e-5)
    np.testing.assert_allclose(q @ d.T, golden["scores"], atol=1e-5)
