"""Query-token weights on MaxSim (BERTScore's idf importance weighting on ColBERT's query side):
idf by hand, the weighted score by hand, export and reload, training, the CLI flag."""

import math

import numpy as np
import pytest
import tensorflow as tf

import tt_zoo
from conftest import data_file
from helpers import PAIRS, pair_dataset, tiny_colbert, tiny_vocab
from tt_zoo.data import features as F
from tt_zoo.modeling import query_token_weights as qtw

VOCAB = tiny_vocab()
RECORD = {"scheme": "idf", "alpha": 1.0, "mask_weight": 0.0, "corpus": "test", "documents": 2}


def ids_of(*tokens):
    return [VOCAB.index(t) for t in tokens]


# ---------------------------------------------------------------- idf, by hand

# Two documents, packed [CLS] title [SEP] text [SEP]:
#   ("the river", "the river flows")  and  ("a city", "the city")
# df: [CLS] 2, [SEP] 2, the 2, river 1, city 1, a 1, flows 1 (each counted once per document),
# seine 0, [PAD] 0 however much padding.
# idf = log(1 + (N - df + .5) / (df + .5)), N = 2:
#   df 2: log(1 + .5 / 2.5) = log 1.2 = 0.18232    df 1: log(1 + 1.5 / 1.5) = log 2 = 0.69315
#   df 0: log(1 + 2.5 / .5) = log 6 = 1.79176
def test_document_frequencies_and_idf_by_hand():
    model = tiny_colbert()
    pre = model.document_preprocessor
    df, n = qtw.document_frequencies(pre, ["the river", "a city"], ["the river flows", "the city"],
                                     batch_size=1)
    assert n == 2 and df.shape == (pre.vocab_size,) and df.dtype == np.int64
    cls, sep, the, river, city, a, seine = ids_of("[CLS]", "[SEP]", "the", "river", "city", "a",
                                                  "seine")
    assert [df[i] for i in (cls, sep, the, river, city, a, seine)] == [2, 2, 2, 1, 1, 1, 0]
    assert df[pre.pad_id] == 0 and df.max() == 2
    weights = qtw.idf_weights(df, n, alpha=1.0, mask_id=pre.mask_id, mask_weight=0.25)
    assert weights.dtype == np.float32 and weights.shape == df.shape
    np.testing.assert_allclose(weights[[the, river, seine]],
                               [math.log(1.2), math.log(2.0), math.log(6.0)], rtol=1e-6)
    assert weights[pre.mask_id] == 0.25
    squared = qtw.idf_weights(df, n, alpha=2.0)
    np.testing.assert_allclose(squared[river], math.log(2.0) ** 2, rtol=1e-6)
    assert np.all(qtw.idf_weights(df, n, alpha=0.0) == 1.0)  # alpha 0: every token once


# The question log ("the river?", "the city?"), packed [CLS] q [SEP] [MASK]...: qdf the 2,
# ? 2, river 1, city 1, seine 0; qidf over 2 questions as idf above, qidf_max = log 6 (a token
# no question holds). With the documents above and alpha = beta = 1:
#   w(river) = log 2 * (log 2 / log 6) = 0.26815     w(the) = log 1.2 * (log 1.2 / log 6)
#   w(seine) = log 6 * 1 = 1.79176                    w(?) : df 0 in the documents, qdf 2
def test_the_question_log_factor_by_hand():
    model = tiny_colbert()
    docs = qtw.document_frequencies(model.document_preprocessor, ["the river", "a city"],
                                    ["the river flows", "the city"])
    questions = qtw.query_frequencies(model.query_preprocessor, ["the river?", "the city?"],
                                      batch_size=1)
    the, river, seine, mark = ids_of("the", "river", "seine", "?")
    assert questions[1] == 2 and [questions[0][i] for i in (the, river, seine, mark)] == [
        2, 1, 0, 2]
    weights = qtw.idf_weights(*docs, questions=questions, beta=1.0)
    np.testing.assert_allclose(
        weights[[river, the, seine, mark]],
        [math.log(2) ** 2 / math.log(6), math.log(1.2) ** 2 / math.log(6), math.log(6),
         math.log(6) * math.log(1.2) / math.log(6)], rtol=1e-6)
    # beta 0, or no log: the plain idf weights.
    np.testing.assert_array_equal(qtw.idf_weights(*docs, questions=questions, beta=0.0),
                                  qtw.idf_weights(*docs))
    record = qtw.weigh_queries_by_idf(model, docs, alpha=1.0, questions=questions, beta=1.0,
                                      question_log="two questions")
    assert (record["beta"], record["questions"], record["question_log"]) == (
        1.0, 2, "two questions")
    with pytest.raises(ValueError, match="question counts cover 3 ids"):
        qtw.idf_weights(*docs, questions=(np.zeros(3, np.int64), 2), beta=1.0)


@pytest.mark.parametrize("call, message", [
    (lambda: qtw.idf_weights(np.array([3, 1]), 2), r"counts in \[0, 2\]"),
    (lambda: qtw.idf_weights(np.array([1.5]), 2), "integer array"),
    (lambda: qtw.idf_weights(np.array([1]), 0), "num_documents >= 1"),
    (lambda: qtw.idf_weights(np.array([1]), 2, alpha=-1), "alpha must be a finite number"),
    (lambda: qtw.idf_weights(np.array([1]), 2, mask_weight=float("nan")), "mask_weight"),
    (lambda: qtw.idf_weights(np.array([1]), 2, mask_id=5), "mask_id 5 is outside"),
    (lambda: qtw.idf_weights(np.array([1]), 2, beta=-1), "beta must be a finite number"),
])
def test_bad_weight_settings_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_document_frequencies_refuse_empty_or_unequal_inputs():
    pre = tiny_colbert().document_preprocessor
    with pytest.raises(ValueError, match="at least one document"):
        qtw.document_frequencies(pre, [], [])
    with pytest.raises(ValueError, match="1 titles for 2 texts"):
        qtw.document_frequencies(pre, ["a"], ["b", "c"])


# ---------------------------------------------------------------- the weighted MaxSim

def weighted(model):
    """A tiny ColBERT with weights 1 + id / 10 (distinct per token) and [MASK] 0."""
    weights = 1.0 + np.arange(len(VOCAB), dtype=np.float32) / 10
    weights[model.query_preprocessor.mask_id] = 0.0
    model.set_query_token_weights(weights, RECORD)
    return weights


def test_weighted_maxsim_is_the_sum_of_weighted_token_maxima():
    model = tiny_colbert()
    queries, docs, titles = PAIRS[F.QUERY], PAIRS[F.DOC_TEXT], PAIRS[F.DOC_TITLE]
    plain_q = model.encode_query_tokens(queries)  # (traced before the weights: re-traced after)
    plain_d = model.encode_document_tokens(docs, titles=titles)
    weights = weighted(model)
    ids = model.query_preprocessor(tf.constant(queries))["input_word_ids"].numpy()
    expected = [[float((weights[row] * (q @ d.T).max(axis=1)).sum()) for d in plain_d]
                for row, q in zip(ids, plain_q)]
    np.testing.assert_allclose(model.score(queries, docs, titles=titles), expected, rtol=1e-5)
    # A [MASK] of weight 0 leaves the query: [CLS] query [SEP] only; each row scaled.
    got = model.encode_query_tokens(queries)
    assert [len(g) for g in got] == [int((row != model.query_preprocessor.mask_id).sum())
                                     for row in ids]
    assert min(len(g) for g in got) < ids.shape[1]
    for row, q, g in zip(ids, plain_q, got):
        real = row != model.query_preprocessor.mask_id
        np.testing.assert_allclose(g, q[real] * weights[row[real], None], rtol=1e-5, atol=1e-6)
    # The documents are not weighted.
    for e, g in zip(plain_d, model.encode_document_tokens(docs, titles=titles)):
        np.testing.assert_allclose(g, e, atol=1e-6)
    # New weights take effect in the functions already traced (the table is assigned).
    model.set_query_token_weights(2 * weights, RECORD)
    for g, twice in zip(got, model.encode_query_tokens(queries)):
        np.testing.assert_allclose(twice, 2 * g, rtol=1e-5, atol=1e-6)


def test_bad_weight_tables_are_refused():
    model = tiny_colbert()
    for bad in (np.ones(3), -np.ones(len(VOCAB)), np.full(len(VOCAB), np.inf)):
        with pytest.raises(ValueError, match=f"{len(VOCAB)} finite floats >= 0"):
            model.set_query_token_weights(bad, RECORD)
    with pytest.raises(ValueError, match="non-empty dict"):
        model.set_query_token_weights(np.ones(len(VOCAB)), {})
    assert model.query_token_weights is None  # nothing was set


def test_weights_are_not_trained_and_training_still_lowers_the_loss():
    model = tiny_colbert()
    weights = weighted(model)
    model.build_by_calling()
    assert all("query_token_weights" not in v.name for v in model.trainable_variables)
    batch = next(iter(pair_dataset()))
    before = float(model.compute_loss(batch))
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2), run_eagerly=True)
    model.fit(pair_dataset().repeat(), steps_per_epoch=12, epochs=1, verbose=0)
    assert float(model.compute_loss(batch)) < before - 0.1, before
    np.testing.assert_array_equal(model.query_token_weight_table.numpy(), weights)


def test_weights_survive_export_and_load(tmp_path):
    from tt_zoo.artifacts.export import export_saved_model

    model = tiny_colbert()
    weighted(model)
    model.build_by_calling()
    export_saved_model(model, tmp_path / "export", {"name": "colbert_idf_test",
                                                    "encoder": "colbert", "pretraining": "none"})
    loaded = tt_zoo.load(tmp_path / "export")
    assert loaded.keras_model.query_token_weights == RECORD
    queries = PAIRS[F.QUERY]
    for e, g in zip(model.encode_query_tokens(queries), loaded.encode_query_tokens(queries)):
        np.testing.assert_allclose(g, e, atol=1e-5)
    serving = tf.saved_model.load(str(tmp_path / "export"))
    out = serving.signatures["encode_query_tokens"](query=tf.constant(queries))
    vectors, mask = out["token_vectors"].numpy(), out["mask"].numpy().astype(bool)
    for i, e in enumerate(model.encode_query_tokens(queries)):
        np.testing.assert_allclose(vectors[i][mask[i]], e, atol=1e-5)


# ---------------------------------------------------------------- tt-zoo multitask --query-idf

def test_the_cli_weighs_a_colbert_model_and_refuses_a_single_vector_one(tmp_path, monkeypatch):
    data_file("wikispeedia")
    from tt_zoo.cli import multitask
    from tt_zoo.cli.common import default_data_dir
    from tt_zoo.modeling.late_interaction_model import LateInteractionModel
    from tt_zoo.data import passage_collection as collections
    from tt_zoo.training.multitask_run import MultitaskError, weigh_query_tokens

    tiny = collections.Collection(["x#0", "y#0"], ["the river", "a city"],
                                  ["the river flows", "the city"])
    monkeypatch.setattr(collections, "passage_collection", lambda *a, **k: tiny)
    task = tmp_path / "a.jsonl"
    task.write_text('{"query": "q", "positives": [{"title": "t", "text": "p"}]}\n')
    config = multitask.parse_args(["--init", "none", "--task", f"jsonl:{task}",
                                   "--query-idf", "2", "--query-mask-weight", "0.5"])
    model = tiny_colbert()
    weigh_query_tokens(config, model, default_data_dir())
    assert isinstance(model, LateInteractionModel)
    assert model.query_token_weights["alpha"] == 2.0 and \
        model.query_token_weights["documents"] == 2
    table = model.query_token_weight_table.numpy()
    np.testing.assert_allclose(table[VOCAB.index("river")], math.log(2.0) ** 2, rtol=1e-6)
    assert table[model.query_preprocessor.mask_id] == 0.5
    single = tt_zoo.load("bow_mlp_ict_bfs_wlp_512").keras_model
    with pytest.raises(MultitaskError, match="--query-idf weighs the query tokens of a "
                                             "late-interaction"):
        weigh_query_tokens(config, single, default_data_dir())


@pytest.mark.parametrize("flags, message", [
    (["--query-idf", "-1"], "argument --query-idf: must be a finite number in [0, 100]"),
    (["--query-idf", "1", "--query-mask-weight", "-0.5"],
     "argument --query-mask-weight: must be a finite number in [0, 100] (got '-0.5')"),
])
def test_bad_cli_weights_are_named(flags, message, tmp_path, capsys):
    data_file("wikispeedia")
    from tt_zoo import cli
    task = tmp_path / "a.jsonl"
    task.write_text('{"query": "q", "positives": [{"title": "t", "text": "p"}]}\n')
    assert cli.main(["multitask", "--init", "none", "--task", f"jsonl:{task}", *flags]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_export_weighs_a_colbert_export_over_its_corpus(tmp_path, capsys):
    import json

    from tt_zoo.cli import export as command
    from tt_zoo.artifacts.export import export_saved_model

    model = tiny_colbert()
    export_saved_model(model, tmp_path / "colbert", {"name": "colbert_tiny"})
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "x", "title": "the river", "text": "the river flows"},
        {"id": "y", "title": "a city", "text": "the city"}]))
    log = tmp_path / "questions.txt"
    log.write_text("the river?\nthe city?\n")
    command.main(["--model", str(tmp_path / "colbert"), "--corpus", str(passages),
                  "--query-idf", "1", "--query-mask-weight", "0.5", "--question-log", str(log),
                  "--query-beta", "2", "--output", str(tmp_path / "idf")])
    assert "idf ** 1 over 2 documents" in capsys.readouterr().out
    loaded = tt_zoo.load(tmp_path / "idf")
    record = loaded.keras_model.query_token_weights
    assert (record["alpha"], record["mask_weight"], record["documents"], record["corpus"]) == (
        1.0, 0.5, 2, str(passages))
    assert (record["beta"], record["questions"], record["question_log"]) == (2.0, 2, str(log))
    assert loaded.metadata["late_interaction"]["query_token_weights"] == record
    table = loaded.keras_model.query_token_weight_table.numpy()
    np.testing.assert_allclose(table[VOCAB.index("river")],
                               math.log(2.0) * (math.log(2.0) / math.log(6.0)) ** 2, rtol=1e-6)
    # The weights are in the signatures: the export's query vectors are the weighted ones.
    model.set_query_token_weights(table, record)
    for e, g in zip(model.encode_query_tokens(PAIRS[F.QUERY]),
                    loaded.encode_query_tokens(PAIRS[F.QUERY])):
        np.testing.assert_allclose(g, e, atol=1e-5)


@pytest.mark.parametrize("flags, message", [
    (["--query-idf", "1"], "--query-idf needs --corpus (the idf's documents) and --output"),
    (["--query-idf", "-1", "--corpus", "squad"], "argument --query-idf: must be a finite number"),
    (["--question-log", "q.txt", "--corpus", "squad"], "--question-log weighs query tokens with "
                                                       "--query-idf: give it too"),
])
def test_bad_export_weights_are_named(flags, message, tmp_path, capsys):
    from tt_zoo import cli
    assert cli.main(["export", "--model", "bow_mlp_none_512", "--output", str(tmp_path / "o"),
                     *flags]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
