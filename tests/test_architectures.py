"""The architecture registry (`tt_zoo.modeling.architectures`): every family registered once; a
toy architecture added by one new module (a tower, a tokenizer mapping, a checkpoint converter)
builds, encodes, exports and loads like the others, and its Hugging Face checkpoint imports
through the one import path; unknown encoders and Hugging Face model types are named in the
error with what is known."""

import sys
import textwrap

import numpy as np
import pytest

from helpers import PAIRS, tiny_vocab
from tt_zoo.data import features as F

TOY_MODULE = '''
"""A toy family: the mean of a token table, doubled; it packs with [CLS]/[SEP] as BERT does
but joins a pair with two separators; its Hugging Face checkpoint (model_type "toy") holds the
table as embeddings.table.weight."""
import dataclasses

import tensorflow as tf

from tt_zoo.data.text import SpecialTokens
from tt_zoo.modeling import architectures
from tt_zoo.modeling.towers import masked_mean


@tf.keras.utils.register_keras_serializable(package="tt_zoo_test")
class ToyTower(tf.keras.layers.Layer):
    def __init__(self, vocab_size, embedding_dim, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.embedding_dim = vocab_size, embedding_dim
        self.table = tf.keras.layers.Embedding(vocab_size, embedding_dim, name="table")

    def call(self, inputs, training=None):
        return 2.0 * masked_mean(self.table(inputs["input_word_ids"]), inputs["input_mask"])

    def get_config(self):
        return dict(super().get_config(), vocab_size=self.vocab_size,
                    embedding_dim=self.embedding_dim)


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    vocab_size: int
    hidden_size: int
    max_length: int
    num_layers: int = 0


def set_weights(tower, checkpoint):
    tower.table.set_weights([checkpoint.weights["embeddings.table.weight"]])


architectures.register(architectures.Architecture(
    name="toy", special_tokens=SpecialTokens(pair_separators=2),
    build_tower=lambda s, name: ToyTower(s.vocab_size, s.embedding_dim, name=name),
    converter=architectures.CheckpointConverter(
        model_types=("toy",),
        read_config=lambda c, path: ToyConfig(c["vocab_size"], c["hidden_size"],
                                              c["max_position_embeddings"]),
        weight_names=dict,
        expected_shapes=lambda c: {"embeddings.table.weight": (c.vocab_size, c.hidden_size)},
        tower_settings=lambda c: {}, set_weights=set_weights, copied="the token table")))
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy family's module, written and imported: the one step that adds it."""
    import importlib

    from tt_zoo.modeling import architectures

    architectures.get("bert")  # the shipped families first
    monkeypatch.setattr(architectures, "ARCHITECTURES", dict(architectures.ARCHITECTURES))
    (tmp_path / "toy_family.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_family")
    yield module
    sys.modules.pop("toy_family", None)  # (the next test's import runs the module again)


def test_the_shipped_families_are_registered():
    from tt_zoo.modeling import architectures

    architectures.get("bert")
    assert {"bert", "bow_mlp", "mpnet"} <= set(architectures.ARCHITECTURES)
    assert architectures.get("mpnet").special_tokens.cls == "<s>"
    assert architectures.get("bert").special_tokens.cls == "[CLS]"
    assert architectures.get("bow_mlp").converter is None
    assert architectures.for_model_type("mpnet", "config.json").name == "mpnet"


def test_a_toy_architecture_is_one_new_module(toy, tmp_path):
    import tensorflow as tf

    import tt_zoo
    from tt_zoo.modeling.models import build_two_tower_model
    from tt_zoo.artifacts.export import export_saved_model

    model = build_two_tower_model(tiny_vocab(), encoder="toy", embedding_dim=8, query_length=16,
                                  document_length=24, share_towers=True)
    assert isinstance(model.query_tower, toy.ToyTower)
    packed = model.document_preprocessor((tf.constant(["paris"]), tf.constant(["the seine"])))
    vocab = tiny_vocab()
    real = packed["input_word_ids"].numpy()[0][packed["input_mask"].numpy()[0] == 1]
    assert [vocab[i] for i in real] == ["[CLS]", "paris", "[SEP]", "[SEP]", "the", "seine",
                                        "[SEP]"]  # its own mapping: two separators
    texts, titles = PAIRS[F.DOC_TEXT], PAIRS[F.DOC_TITLE]
    expected = model.encode_documents(texts, titles=titles)
    export_saved_model(model, tmp_path / "export")
    reloaded = tt_zoo.load(tmp_path / "export")
    np.testing.assert_allclose(reloaded.encode_documents(texts, titles=titles), expected,
                               rtol=1e-5, atol=1e-6)


def test_a_toy_checkpoint_imports_through_its_converter(toy, tmp_path):
    """A Hugging Face folder of model_type "toy" is read, checked, built and filled by the toy
    module's converter through `import_checkpoint`, as BERT's and MPNet's are; the model
    computes the table's doubled mean and exports and loads like any other."""
    import json

    from safetensors.numpy import save_file

    import tt_zoo
    from tt_zoo.errors import ArtifactError
    from tt_zoo.modeling.checkpoints import import_checkpoint
    from tt_zoo.artifacts.export import export_saved_model

    vocab = tiny_vocab()
    table = np.random.default_rng(0).normal(size=(len(vocab), 8)).astype("float32")
    folder = tmp_path / "toy_checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "toy", "vocab_size": len(vocab), "hidden_size": 8,
         "max_position_embeddings": 64}))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    save_file({"embeddings.table.weight": table}, str(folder / "model.safetensors"))
    model, origin = import_checkpoint(folder, document_length=24)
    assert isinstance(model.query_tower, toy.ToyTower)
    assert origin["copied"] == "the token table" and origin["new"] == []
    # "[CLS] paris [SEP]": 2 * the mean of those three rows of the checkpoint's table
    ids = [vocab.index(t) for t in ("[CLS]", "paris", "[SEP]")]
    np.testing.assert_allclose(model.encode_queries(["Paris"]), [2 * table[ids].mean(axis=0)],
                               rtol=1e-5, atol=1e-6)
    export_saved_model(model, tmp_path / "export")
    reloaded = tt_zoo.load(tmp_path / "export")
    np.testing.assert_allclose(reloaded.encode_queries(["Paris"]), model.encode_queries(["Paris"]),
                               rtol=1e-5, atol=1e-6)
    # ... and checked as the others are: a table of another shape is named.
    save_file({"embeddings.table.weight": table[:, :4]}, str(folder / "model.safetensors"))
    with pytest.raises(ArtifactError, match=r"'embeddings.table.weight' has shape \(\d+, 4\)"):
        import_checkpoint(folder)


def test_a_second_registration_of_a_name_is_refused(toy):
    from tt_zoo.modeling import architectures

    with pytest.raises(ValueError, match="'toy' is already registered"):
        architectures.register(architectures.Architecture(name="toy", build_tower=print))


def test_unknown_encoders_and_model_types_name_what_is_known(tmp_path):
    from tt_zoo.errors import ArtifactError
    from tt_zoo.modeling import architectures
    from tt_zoo.modeling.models import build_two_tower_model

    with pytest.raises(ValueError, match=r"Unknown encoder 'bart'; expected one of 'bert', "
                                         r"'bow_mlp', 'mpnet'"):
        build_two_tower_model(tiny_vocab(), encoder="bart")
    with pytest.raises(ArtifactError, match=r"x/config.json: model_type 'roberta' is not "
                                            r"supported; tt_zoo imports checkpoints of "
                                            r"model_type bert, mpnet"):
        architectures.for_model_type("roberta", "x/config.json")
