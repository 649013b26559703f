"""Query adaptation against a fixed passage index (ADORE, Zhan et al. 2021;
tt_zoo.training.query_adaptation, `tt-zoo adapt-queries`): the loss by hand, the positives'
mask, a tiny model's query tower trained alone (its document side, token table and cached
passage embeddings stay the base model's; the training questions' loss falls), a teacher's
ranking distilled into it, and bad input named."""

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


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """The answer rows are cached under ./runs/odqa_cache: here, in the test's own folder."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def base_export(tmp_path_factory):
    """A tiny bag-of-words model sharing one tower for both sides (the zoo's MiniLM's layout),
    exported. (A random tiny BERT embeds every passage alike; random token vectors do not.)"""
    from tt_zoo.artifacts.export import export_saved_model

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


def test_the_teachers_listwise_kl_by_hand():
    import tensorflow as tf
    from tt_zoo.modeling.distillation import listwise_kl_over_index

    # Question 1: the teacher ranks rows 2, 0 with scores log 3, 0: p = 3/4, 1/4. The student's
    # log-softmax over scores 1, 2, 3 is s - 3.407606: -2.407606 at row 0, -0.407606 at row 2.
    # KL = 3/4 (log 3/4 + 0.407606) + 1/4 (log 1/4 + 2.407606) = 0.345271. Its third candidate
    # is padding (-1): ignored, whatever its score.
    # Question 2: the teacher's softmax over all three equals the student's: KL 0.
    student = tf.constant([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    rows = tf.constant([[2, 0, -1], [0, 1, 2]])
    teacher = tf.constant([[np.log(3.0), 0.0, 99.0], [1.0, 2.0, 3.0]])
    np.testing.assert_allclose(listwise_kl_over_index(student, rows, teacher).numpy(),
                               [0.345271, 0.0],
                               atol=1e-5)


def test_teacher_targets_pad_and_refuse_what_does_not_fit():
    from tt_zoo.training.teacher_targets import TeacherTargets

    targets = TeacherTargets.from_lists([[3, 1], [0]], [[0.5, 0.25], [1.0]], temperature=0.5)
    assert targets.rows.tolist() == [[3, 1], [0, -1]]
    assert targets.scores.tolist() == [[0.5, 0.25], [1.0, 0.0]]
    targets.check(2, 4)
    with pytest.raises(ValueError, match=r"expected rows in \[0, 3\)"):
        targets.check(2, 3)
    with pytest.raises(ValueError, match=r"expected both \[3, k\]"):
        targets.check(3, 4)
    with pytest.raises(ValueError, match="question 1 has 1 candidate rows but 2 scores"):
        TeacherTargets.from_lists([[1], [2]], [[1.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="question 1 has no candidate"):
        TeacherTargets.from_lists([[1], []], [[1.0], []]).check(2, 4)


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
    # The answer rows are cached where tt-zoo odqa keeps them (answer_sets reads them back).
    cached = list((tmp_path / "runs" / "odqa_cache").glob("answers-*.json"))
    assert len(cached) == 1 and len(json.loads(cached[0].read_text())) == len(CITIES)
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


def write_teacher_scores_file(tmp_path, articles, questions, best=lambda i: i):
    """A teacher-scores file over the six-passage collection: question i's teacher puts passage
    best(i) first (score 1) and every other at 0."""
    from tt_zoo.data.passage_collection import passage_collection
    from tt_zoo.data.teacher_scores import from_candidates, write_teacher_scores

    collection = passage_collection(str(articles))
    meta = {"teacher": {"name": "toy_teacher", "sha256": "0" * 64},
            "student": {"name": "tiny_shared", "sha256": "1" * 64},
            "collection": {"passages": len(collection),
                           "sha256": collection.fingerprint().hexdigest(),
                           "source": str(articles)},
            "depth": {"teacher": 6}, "question_sets": ["questions"]}
    asked = [json.loads(line)["question"] for line in questions.read_text().splitlines()]
    candidates = [(np.arange(6), (np.arange(6) == best(i)).astype(np.float32),
                   np.arange(6) == i, np.full(6, 4, np.uint8)) for i in range(len(asked))]
    path = tmp_path / "teacher.npz"
    write_teacher_scores(from_candidates(asked, [0] * len(asked), candidates, meta), path)
    return path


def test_a_teachers_ranking_is_distilled_into_the_query_tower(base_export, tmp_path):
    """With --teacher-scores and weight 1 the query tower learns the teacher's ranking alone:
    a teacher that ranks the *next* city's passage first (a ranking the answers contradict) is
    followed, and the card and run config record the teacher, the file's sha256, w and T."""
    import tensorflow as tf

    import tt_zoo
    from tt_zoo.modeling.distillation import listwise_kl_over_index

    articles, questions = write_corpus(tmp_path)
    teacher = write_teacher_scores_file(tmp_path, articles, questions, best=lambda i: (i + 1) % 6)
    export = tmp_path / "distilled"
    record = adapt_queries.main([
        "--model", str(base_export), "--questions", str(questions), "--articles", str(articles),
        "--teacher-scores", str(teacher), "--distill-weight", "1", "--teacher-temperature",
        "0.1", "--epochs", "20", "--batch-size", "3", "--learning-rate", "3e-2",
        "--temperature", "0.1", "--workdir", str(tmp_path / "work"), "--export", str(export),
        "--no-progress"])
    distilled = record["train"]["distillation"]
    assert distilled["teacher"] == "toy_teacher" and distilled["distill_weight"] == 1.0
    assert distilled["temperature"] == 0.1 and len(distilled["sha256"]) == 64
    base, adapted = tt_zoo.load(str(base_export)), tt_zoo.load(str(export))
    texts = [f"{c} is a city on the river {r}." for c, r in zip(CITIES, RIVERS)]
    passages = base.encode_documents(texts, titles=CITIES)
    asked = [f"which river flows through {c}?" for c in CITIES]
    rows = tf.constant([[(i + 1) % 6] for i in range(6)])

    def kl(model):
        scores = model.encode_queries(asked) @ passages.T / 0.1
        return float(tf.reduce_mean(listwise_kl_over_index(tf.constant(scores), rows,
                                                           tf.zeros([6, 1]))))

    assert kl(adapted) < kl(base) - 0.1, (kl(base), kl(adapted))

    def follows_the_teacher(model):
        ranked = np.argmax(model.encode_queries(asked) @ passages.T, axis=1)
        return int((ranked == (np.arange(6) + 1) % 6).sum())

    assert follows_the_teacher(adapted) >= follows_the_teacher(base) + 2
    card = adapted.card
    assert "distilling toy_teacher's ranking" in card.training.training_data
    assert card.training.run_config["data"]["teacher_scores"] == str(teacher)


def test_bad_input_is_named(base_export, tmp_path, capsys):
    from tt_zoo.artifacts.export import export_saved_model

    articles, questions = write_corpus(tmp_path)
    common = ["--questions", str(questions), "--articles", str(articles), "--no-progress"]

    def refused(flags, message):
        with pytest.raises(SystemExit) as exited:
            adapt_queries.main(flags)
        said = f"{exited.value.code} {capsys.readouterr().err}"  # sys.exit's message, or usage's
        assert message in said, said

    partial = tmp_path / "partial.jsonl"
    partial.write_text(questions.read_text().splitlines()[0] + "\n", encoding="utf-8")
    teacher = write_teacher_scores_file(tmp_path, articles, partial)
    refused(["--model", str(base_export), "--teacher-scores", str(teacher),
             "--workdir", str(tmp_path / "w0"), *common],
            f"--teacher-scores {teacher}: 5 of the 6 training questions are not in it (the "
            "first: 'which river flows through london?')")
    refused(["--model", str(base_export), "--teacher-scores", str(teacher), "--limit-articles",
             "3", "--workdir", str(tmp_path / "w0"), *common],
            "--teacher-scores: " + str(teacher) + ": scored over a collection of 6 passages")
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
