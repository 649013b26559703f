"""Faster encoding (tt_zoo.modeling.inference): length bucketing gives the padded embeddings in
the caller's order; bfloat16 and XLA stay close to float32."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import tiny_model
from tt_zoo.errors import TtZooError
from tt_zoo.modeling import inference
from tt_zoo.modeling.inference import (bucket_length, cut_to_longest, padded_row_count,
                                       plan_batches)

# Mixed lengths for the tiny model (query length 16, document length 24): the long one is cut
# to the full length, the others are a few tokens.
LONG = "paris is the capital of france and the seine flows through paris " * 3
TEXTS = ["who", LONG, "", "what river flows through paris?", "a b c d e f g h", "water",
         "who discovered penicillin? alexander fleming did"]
TITLES = ["seine", "", "paris", LONG, "penicillin", "", "fleming"]


def test_bucket_length_rounds_up_to_sixteen_within_the_sequence_length():
    assert [bucket_length(n, 128) for n in (2, 16, 17, 33, 120, 128)] == [16, 16, 32, 48, 128,
                                                                          128]
    assert bucket_length(17, 24) == 24


def test_plan_batches_takes_the_longest_first_and_cuts_each_batch():
    lengths = np.array([5, 20, 3, 17, 40, 17])
    planned = [(rows.tolist(), length) for rows, length in plan_batches(lengths, 2, 48)]
    # Longest first (40, 20), then the two 17s in input order (3 before 5), then 5 and 3.
    assert planned == [([4, 1], 48), ([3, 5], 32), ([0, 2], 16)]
    unsorted = [(rows.tolist(), length)
                for rows, length in plan_batches(lengths, 4, 48, bucketing=False)]
    assert unsorted == [([0, 1, 2, 3], 48), ([4, 5], 48)]
    assert plan_batches(np.zeros([0], int), 4, 48) == []
    exact = [length for _, length in plan_batches(lengths, 2, 48, multiple=1)]
    assert exact == [40, 17, 5]  # without XLA: each batch's longest member, exactly


def test_padded_row_count_is_the_next_power_of_two_at_most_the_batch():
    assert [padded_row_count(n, 256) for n in (1, 2, 3, 5, 200, 256)] == [1, 2, 4, 8, 256, 256]
    assert padded_row_count(5, 6) == 6


def test_bfloat16_calls_take_fewer_rows_the_wider_the_tower():
    from tt_zoo.modeling.towers import BertTower
    options = inference.EncodeOptions(precision="bfloat16")

    def rows(hidden, batch_size=256, options=options):
        tower = BertTower(100, num_layers=1, hidden_size=hidden, num_attention_heads=2)
        return options.resolve(1000, tower).rows_per_call(batch_size)
    assert [rows(h) for h in (128, 384, 768, 4096)] == [128, 32, 16, 16]
    assert rows(384, batch_size=8) == 8
    assert rows(384, options=inference.EncodeOptions(precision="float32")) == 256


def test_cut_to_longest_keeps_the_longest_member_in_graph():
    ids = tf.constant([[2, 7, 8, 3, 0, 0], [2, 9, 3, 0, 0, 0]])
    packed = {"input_word_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
              "input_type_ids": tf.zeros_like(ids)}
    cut = cut_to_longest(packed)
    np.testing.assert_array_equal(cut["input_word_ids"], [[2, 7, 8, 3], [2, 9, 3, 0]])
    assert cut["input_mask"].shape == (2, 4) and cut["input_type_ids"].shape == (2, 4)
    empty = {k: tf.zeros([0, 6], tf.int32) for k in packed}
    assert cut_to_longest(empty)["input_mask"].shape == (0, 1)


@pytest.fixture(scope="module")
def models():
    """One tiny model per tower kind, shared by this module's tests (tracing is what costs)."""
    built = {}

    def get(encoder):
        if encoder not in built:
            built[encoder] = tiny_model(encoder)
            built[encoder].build_by_calling()
        return built[encoder]
    return get


def _spy_on_tower_shapes(monkeypatch):
    """Records the [rows, length] of every batch the towers get."""
    shapes = []
    original = inference.EncodeCache.tower_fn

    def tower_fn(self, role, options):
        fn = original(self, role, options)

        def spy(batch):
            shapes.append(batch["input_word_ids"].shape)
            return fn(batch)
        return spy
    monkeypatch.setattr(inference.EncodeCache, "tower_fn", tower_fn)
    return shapes


@pytest.mark.parametrize("encoder", ["bert", "bow_mlp"])
def test_bucketed_embeddings_equal_the_padded_ones_in_order(encoder, models, monkeypatch):
    model = models(encoder)
    # The towers on texts padded to the full length: the training path, one batch.
    expected_q = model.embed_queries(tf.constant(TEXTS)).numpy()
    expected_d = model.embed_documents(tf.constant(TITLES), tf.constant(TEXTS)).numpy()
    shapes = _spy_on_tower_shapes(monkeypatch)

    q = model.encode_queries(TEXTS, batch_size=3)
    d = model.encode_documents(TEXTS, titles=TITLES, batch_size=3)
    np.testing.assert_allclose(q, expected_q, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d, expected_d, rtol=1e-5, atol=1e-6)
    # Each batch is cut to its longest member (no XLA: any length). Queries (length 16), by
    # token length: 16 (the long text), 11, 10 | 8, 3, 3 | 2 (the empty one). Documents (length
    # 24): 24 (the long text), 24 (the long title), 13 | 12, 5, 4 | 4.
    assert shapes[:3] == [(3, 16), (3, 8), (1, 2)]
    assert shapes[3:] == [(3, 24), (3, 12), (1, 4)]
    # Without bucketing every batch keeps the full length, in input order; same embeddings.
    del shapes[:]
    np.testing.assert_allclose(model.encode_documents(TEXTS, titles=TITLES, batch_size=3,
                                                      bucketing=False),
                               expected_d, rtol=1e-5, atol=1e-6)
    assert shapes == [(3, 24), (3, 24), (1, 24)]
    # One trace of each tower function serves every batch shape.
    cache = model._encode_cache
    assert cache._tower_fns[("document", "float32", False, True)].experimental_get_tracing_count() == 1


def test_one_text_empty_input_and_bad_options(models):
    model = models("bert")
    # Serving's cut (to the request's longest text, 11 of 16 here) gives the full-length
    # embeddings.
    short = tf.constant([t for t in TEXTS if t != LONG])
    np.testing.assert_allclose(model.embed_queries(short, cut_padding=True),
                               model.embed_queries(short), rtol=1e-5, atol=1e-6)
    one = model.encode_documents([TEXTS[3]], titles=[TITLES[3]])
    np.testing.assert_allclose(
        one, model.embed_documents(tf.constant(TITLES[3:4]), tf.constant(TEXTS[3:4])).numpy(),
        rtol=1e-5, atol=1e-6)
    for kwargs in ({}, {"precision": "bfloat16"}, {"jit_compile": True}):
        assert model.encode_queries([], **kwargs).shape == (0, 8)
    with pytest.raises(TtZooError, match="precision must be one of"):
        model.encode_queries(["a"], precision="float16")
    with pytest.raises(TtZooError, match="batch_size must be a positive int"):
        model.encode_queries(["a"], batch_size=0)
    with pytest.raises(TtZooError, match="jit_compile must be True, False or 'auto'"):
        model.encode_queries(["a"], jit_compile="yes")
    with pytest.raises(TtZooError, match="plain_inference must be True or False"):
        model.encode_queries(["a"], plain_inference="no")
    # The BERT tower's Keras layers (the training graph) give the same embeddings.
    np.testing.assert_allclose(model.encode_documents(TEXTS, titles=TITLES,
                                                      plain_inference=False),
                               model.encode_documents(TEXTS, titles=TITLES), atol=1e-5)


def _max_cosine_deviation(a, b):
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return float(np.max(1.0 - cos))


@pytest.mark.parametrize("encoder", ["bert", "bow_mlp"])
def test_bfloat16_and_xla_stay_close_to_float32(encoder, models):
    model = models(encoder)
    weights_before = len(model.weights)
    reference = model.encode_documents(TEXTS, titles=TITLES)
    bf16 = model.encode_documents(TEXTS, titles=TITLES, precision="bfloat16")
    assert bf16.dtype == np.float32
    assert 0 < _max_cosine_deviation(reference, bf16) < 1e-2  # 0 would mean it ran in float32
    xla = model.encode_documents(TEXTS, titles=TITLES, jit_compile=True)
    np.testing.assert_allclose(xla, reference, rtol=1e-4, atol=1e-5)
    # The bfloat16 copy is not part of the model, and it follows later weight changes.
    assert len(model.weights) == weights_before
    saved = model.document_tower.get_weights()
    rng = np.random.default_rng(0)
    model.document_tower.set_weights([w + rng.normal(0, 0.1, w.shape) for w in saved])
    try:
        changed = model.encode_documents(TEXTS, titles=TITLES)
        assert _max_cosine_deviation(changed, reference) > 1e-2
        assert _max_cosine_deviation(changed, model.encode_documents(
            TEXTS, titles=TITLES, precision="bfloat16")) < 1e-2
    finally:
        model.document_tower.set_weights(saved)


def test_bfloat16_copy_of_shared_towers_is_one_copy():
    model = tiny_model(share_towers=True)
    model.encode_queries(TEXTS[:2], precision="bfloat16")
    model.encode_documents(TEXTS[:2], precision="bfloat16")
    copies = model._encode_cache._bfloat16_towers
    assert list(copies) == ["query"]
    policies = {layer.dtype_policy.name for layer in copies["query"]._flatten_layers()}
    assert "mixed_bfloat16" in policies


@pytest.mark.parametrize("encoder", ["bert", "bow_mlp"])
def test_auto_xla_only_for_a_corpus_through_bert_layers(encoder, models, monkeypatch):
    model = models(encoder)
    auto = inference.EncodeOptions(jit_compile="auto")
    layers = inference.EncodeOptions(jit_compile="auto", plain_inference=False)
    big = inference.XLA_AUTO_MIN_DOCUMENTS
    assert layers.resolve(big - 1, model.document_tower).jit_compile is False
    assert layers.resolve(big, model.document_tower).jit_compile is (
        encoder == "bert")
    # The plain inference graph (the default) runs as fast without XLA: "auto" leaves it off.
    assert auto.resolve(big, model.document_tower).jit_compile is False
    assert inference.EncodeOptions(jit_compile=True).resolve(
        1, model.document_tower).jit_compile is True
    # encode_documents defaults to "auto": with the threshold at 3, these 4 texts run a BERT
    # tower's layers under XLA (the same embeddings), and 2 texts, or the plain graph, do not.
    monkeypatch.setattr(inference, "XLA_AUTO_MIN_DOCUMENTS", 3)
    reference = model.encode_documents(TEXTS[:4], titles=TITLES[:4], jit_compile=False)
    asked = []
    tower_fn = inference.EncodeCache.tower_fn
    monkeypatch.setattr(inference.EncodeCache, "tower_fn", lambda self, role, options: (
        asked.append(options.jit_compile) or tower_fn(self, role, options)))
    model.encode_documents(TEXTS[:2], titles=TITLES[:2], plain_inference=False)
    auto_run = model.encode_documents(TEXTS[:4], titles=TITLES[:4], plain_inference=False)
    model.encode_documents(TEXTS[:4], titles=TITLES[:4])
    np.testing.assert_allclose(auto_run, reference, rtol=1e-4, atol=1e-5)
    assert asked == [False, encoder == "bert", False]


# -- one string, batch_size and the progress bar (issue 26) ----------------------------------

def test_a_single_string_is_one_text_and_gives_one_vector(models):
    model = models("bert")
    queries = model.encode_queries(TEXTS)
    one = model.encode_queries(TEXTS[3])
    assert one.shape == (8,)  # a 1-D vector, as sentence-transformers gives for one string
    np.testing.assert_allclose(one, queries[3], rtol=1e-5, atol=1e-6)
    documents = model.encode_documents(TEXTS, titles=TITLES)
    np.testing.assert_allclose(model.encode_documents(TEXTS[3], titles=TITLES[3]), documents[3],
                               rtol=1e-5, atol=1e-6)
    assert model.encode_documents(TEXTS[3]).shape == (8,)  # no title: ""
    with pytest.raises(TypeError, match="titles must be one string when texts is one string"):
        model.encode_documents(TEXTS[3], titles=TITLES[3:4])
    with pytest.raises(TypeError, match="titles must be a sequence of strings"):
        model.encode_documents(TEXTS[3:5], titles="paris")


def test_a_single_string_gives_one_token_array():
    from helpers import tiny_colbert
    model = tiny_colbert()
    model.build_by_calling()
    many = model.encode_document_tokens(TEXTS[:3], titles=TITLES[:3], batch_size=2)
    one = model.encode_document_tokens(TEXTS[1], titles=TITLES[1], batch_size=2)
    assert isinstance(one, np.ndarray) and one.ndim == 2
    np.testing.assert_allclose(one, many[1], rtol=1e-5, atol=1e-6)
    query = model.encode_query_tokens("who discovered penicillin?")
    assert isinstance(query, np.ndarray) and query.shape == (12, 8)


def _bars(capsys) -> list:
    """The descriptions of the tqdm bars drawn on stderr since the last call."""
    err = capsys.readouterr().err
    return sorted({line.split(":")[0].strip() for line in err.replace("\r", "\n").splitlines()
                   if "%|" in line})


def test_show_progress_bar_true_and_false(models, capsys):
    model = models("bow_mlp")
    model.encode_documents(TEXTS, titles=TITLES, batch_size=2, show_progress_bar=True)
    model.encode_queries(TEXTS, batch_size=2, show_progress_bar=True)
    assert _bars(capsys) == ["encode documents", "encode queries"]
    model.encode_documents(TEXTS, batch_size=1, show_progress_bar=False)
    assert _bars(capsys) == []
    with pytest.raises(TtZooError, match="show_progress_bar must be True, False or None"):
        model.encode_queries(TEXTS, show_progress_bar="yes")


def test_token_encoders_take_show_progress_bar(capsys):
    from helpers import tiny_colbert
    model = tiny_colbert()
    model.encode_query_tokens(TEXTS, batch_size=2, show_progress_bar=True)
    model.encode_document_tokens(TEXTS, batch_size=2, show_progress_bar=True)
    assert _bars(capsys) == ["encode document tokens", "encode query tokens"]


def test_progress_bar_by_default_only_for_many_batches_at_a_terminal(models, capsys,
                                                                      monkeypatch):
    model = models("bow_mlp")
    monkeypatch.setattr(inference, "_interactive", lambda: True)
    few = inference.PROGRESS_MIN_BATCHES  # texts at batch_size 1: not more than a few batches
    model.encode_queries(TEXTS[:few], batch_size=1)
    assert _bars(capsys) == []
    model.encode_queries(TEXTS[:few + 1], batch_size=1)
    assert _bars(capsys) == ["encode queries"]
    # Inside a caller's own bar, none of its own.
    from tqdm.auto import tqdm
    with tqdm(total=1, desc="outer"):
        model.encode_queries(TEXTS, batch_size=1)
    assert _bars(capsys) == ["outer"]
    # Not at a terminal (a pipe, a log file): none.
    monkeypatch.setattr(inference, "_interactive", lambda: False)
    model.encode_queries(TEXTS, batch_size=1)
    assert _bars(capsys) == []
