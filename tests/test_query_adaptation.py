"""Query adaptation against a fixed passage index (ADORE, Zhan et al. 2021;
tt_zoo.training.query_adaptation, `tt-zoo adapt-queries`): the loss by hand, the positives'
mask, a tiny model's query tower trained alone (its document side, token table and cached
passage embeddings stay the base model's; the training questions' loss falls), and bad input
named."""

import json

import numpy as np
import pytest

from helpers import tiny_colbert, tiny_model
from tt_zoo.cli import adapt_queries

CITIES = ["paris", "london", "berlin", "rome", "madrid", "vienna"]
RIVERS = ["seine", "thames", "spree", "tiber", "manzanares", "danube"]


def write_corpus(tmp_path):
    """Six one-passage articles ("X is a city on the river Y.") and six questions with answers,
    as JSONL files."""
    articles = tmp_path / "articles.jsonl"
    articles.write_text("".join(json.dumps({
        "title": city, "sections": [{"heading": "", "paragraphs": [
            f"{city} is a city on the river {river}."]}]}) + "\n"
        for city, river in zip(CITIES, RIVERS)), encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": f"which river flows through {city}?",
                                             "answers": [river]}) + "\n"
                                 for city, river in zip(CITIES, RIVERS)), encoding="utf-8")
    return articles, questions


@pytest.fixture(scope="module")
def base_export(tmp_path_factory):
    """A tiny bag-of-words model sharing one tower for both sides (the zoo's MiniLM's layout),
    exported. (A random tiny BERT embeds every passage alike; random token vectors do not.)"""
    from tt_zoo.serving.export import export_saved_model

    model = tiny_model("bow_mlp", share_towers=True, normalize_embeddings=True)
    model.build_by_calling()
    path = tmp_path_factory.mktemp("base") / "shared"
    export_saved_model(model, path, {"name": "tiny_shared", "encoder": "bow_mlp",
                                     "pretraining": "none"})
    return path


def test_the_loss_is_minus_log_the_softmax_mass_on_the_positives_by_hand():
    import tensorflow as tf
    from tt_zoo.training.query_adaptation import multi_positive_softmax_loss

    # exp(scores) = 1, 2, 3: positives 2 and 3 hold 5/6 of the mass; -log(5/6) = 0.18232.
    scores = tf.math.log(tf.constant([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]))
    mask = tf.constant([[False, True, True], [True, False, False], [True, True, True]])
    loss = multi_positive_softmax_loss(scores, mask).numpy()
    np.testing.assert_allclose(loss, [np.log(6 / 5), np.log(6.0), 0.0], atol=1e-6)


def test_the_mask_marks_each_questions_positives_only():
    from tt_zoo.training.query_adaptation import QueryAdapter

    model = tiny_model()
    model.build_by_calling()
    adapter = QueryAdapter(model, np.zeros((5, 8), np.float32), [[1], [0, 4], [2, 2]],
                           temperature=1.0)
    mask = adapter.positive_mask(np.array([2, 0, 1])).numpy()
    assert mask.tolist() == [[False, False, True, False, False], [False, True, False, False, False],
                             [True, False, False, False, True]]
    with pytest.raises(ValueError, match="at least one positive"):
        QueryAdapter(model, np.zeros((5, 8), np.float32), [[1], []], temperature=1.0)
    with pytest.raises(ValueError, match=r"expected \[passages, 8\]"):
        QueryAdapter(model, np.zeros((5, 4), np.float32), [[1]], temperature=1.0)


def training_loss(query_embeddings, passage_embeddings, positives, temperature):
    scores = query_embeddings @ passage_embeddings.T / temperature
    top = scores.max(axis=1, keepdims=True)
    log_all = np.log(np.exp(scores - top).sum(1)) + top[:, 0]
    log_pos = np.array([np.log(np.exp(s[p] - t).sum()) + t
                        for s, p, t in zip(scores, positives, top[:, 0])])
    return float((log_all - log_pos).mean())


def test_only_the_query_tower_trains_and_the_document_side_stays_the_base_models(
        base_export, tmp_path):
    import tt_zoo
    from tt_zoo.evaluation.document_embeddings import model_tag
    from tt_zoo.training.query_adaptation import check_passage_embeddings, token_embedding_layer

    articles, questions = write_corpus(tmp_path)
    export = tmp_path / "adapted"
    record = adapt_queries.main([
        "--model", str(base_export), "--questions", str(questions), "--articles", str(articles),
        "--epochs", "20", "--batch-size", "3", "--learning-rate", "3e-2", "--temperature", "0.1",
        "--workdir", str(tmp_path / "work"), "--export", str(export), "--no-progress",
        "--json-out", str(tmp_path / "out.json")])
    assert record["questions"]["questions"] == {"questions": 6, "answerable": 6}
    assert record["train"]["steps_done"] == 40  # 20 epochs of 6 questions in batches of 3
    base, adapted = tt_zoo.load(str(base_export)), tt_zoo.load(str(export))
    assert not adapted.keras_model.share_towers
    texts = [f"{c} is a city on the river {r}." for c, r in zip(CITIES, RIVERS)]
    passages = base.encode_documents(texts, titles=CITIES)
    np.testing.assert_allclose(adapted.encode_documents(texts, titles=CITIES), passages, atol=1e-6)
    np.testing.assert_array_equal(
        token_embedding_layer(adapted.keras_model.query_tower).get_weights()[0],
        token_embedding_layer(base.keras_model.query_tower).get_weights()[0])
    asked = [f"which river flows through {c}?" for c in CITIES]
    before = training_loss(base.encode_queries(asked), passages, [[i] for i in range(6)], 0.1)
    after = training_loss(adapted.encode_queries(asked), passages, [[i] for i in range(6)], 0.1)
    assert after < before - 0.1, (before, after)
    # The card names the base model as its document side: its cached embeddings serve both.
    card = adapted.card
    assert card.lineage.document_encoder.sha256 == base.card.provenance.sha256
    assert model_tag(adapted) == model_tag(base) != adapted.card.provenance.sha256[:16]
    assert card.training.run_config["training"]["epochs"] == 20
    cached = list((tmp_path / "work").glob("passages-*.npy"))
    assert [p.name for p in cached] == [f"passages-{model_tag(base)}-6.npy"]
    # ... which passes the check --passage-embeddings makes (the adapted model's too).
    for model in (base, adapted):
        assert min(check_passage_embeddings(model.keras_model, np.load(cached[0]), CITIES, texts,
                                            "cached")) > 0.999


def test_bad_input_is_named(base_export, tmp_path, capsys):
    from tt_zoo.serving.export import export_saved_model

    articles, questions = write_corpus(tmp_path)
    common = ["--questions", str(questions), "--articles", str(articles), "--no-progress"]

    def refused(flags, message):
        with pytest.raises(SystemExit) as exited:
            adapt_queries.main(flags)
        said = f"{exited.value.code} {capsys.readouterr().err}"  # sys.exit's message, or usage's
        assert message in said, said

    wrong_shape = tmp_path / "wrong_shape.npy"
    np.save(wrong_shape, np.zeros((5, 8), np.float32))
    refused(["--model", str(base_export), "--passage-embeddings", str(wrong_shape),
             "--workdir", str(tmp_path / "w1"), *common],
            f"--passage-embeddings {wrong_shape}: embeddings of shape (5, 8); expected (6, 8)")
    other = tmp_path / "other.npy"
    np.save(other, np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32))
    refused(["--model", str(base_export), "--passage-embeddings", str(other),
             "--workdir", str(tmp_path / "w2"), *common],
            "row 0 has cosine")
    refused(["--model", str(base_export), "--passage-embeddings", str(tmp_path / "absent.npy"),
             "--workdir", str(tmp_path / "w5"), *common],
            f"--passage-embeddings {tmp_path / 'absent.npy'} does not exist")
    nothing = tmp_path / "nothing.jsonl"
    nothing.write_text(json.dumps({"question": "who?", "answers": ["zzyzx"]}) + "\n")
    refused(["--model", str(base_export), "--questions", str(nothing), "--articles",
             str(articles), "--workdir", str(tmp_path / "w3"), "--no-progress"],
            "no question has an answer in any passage")
    export_saved_model(tiny_colbert(), tmp_path / "colbert", {"name": "colbert_tiny"})
    refused(["--model", str(tmp_path / "colbert"), "--workdir", str(tmp_path / "w4"), *common],
            "query adaptation trains a two-tower model's single-vector query tower")
    refused(["--questions", str(questions)], "give --model NAME_OR_PATH")
    refused(["--model", "ict_bfs_wlp_51", "--workdir", str(tmp_path / "w6"), *common],
            "--model ict_bfs_wlp_51: 'ict_bfs_wlp_51' is not a tt_zoo model. Did you mean")
    assert not list(tmp_path.glob("w*/checkpoints"))  # refused before any training
