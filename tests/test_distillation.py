"""Distillation (issue 67): the losses by hand (listwise KL, RocketQAv2 / TCT; Margin-MSE,
Hofstätter et al. 2020), the teacher-scores file (built over a tiny collection, round-tripped,
refused over another collection), `tt-zoo teacher-scores` end to end on a tiny export, and
`tt-zoo multitask --task distill:FILE` lowering the KL on its training questions, mixed with a
task file, its recipe recorded in the card."""

import json

import numpy as np
import pytest

from helpers import tiny_vocab
from tt_zoo.data.passage_collection import Collection
from tt_zoo.data.question_sets import OdqaQuestion, QuestionSet

# -- the losses, by hand ------------------------------------------------------------------------


def test_listwise_kl_by_hand():
    from tt_zoo.modeling.distillation import DistillationLoss, listwise_kl

    # Teacher [[0, 0]] -> p_t = [.5, .5]; student [[1, 0]] -> log p_s = [1 - log(1 + e),
    # -log(1 + e)] = [-0.31326, -1.31326]; KL = .5 (log .5 + 0.31326) + .5 (log .5 + 1.31326)
    # = .5 (-0.37989) + .5 (0.62011) = 0.12011.
    np.testing.assert_allclose(listwise_kl([[1.0, 0.0]], [[0.0, 0.0]]), [0.120115], atol=1e-5)
    # With temperatures: teacher [[.2, .1, .1]] / T 0.1 = [2, 1, 1] -> p_t = [e, 1, 1] / (e + 2)
    # = [0.57612, 0.21194, 0.21194]; student [[.3, .3, .3]] / tau -> uniform;
    # KL = 0.57612 log(3 x 0.57612) + 2 x 0.21194 log(3 x 0.21194) = 0.31525 - 0.19195 = 0.12330.
    scores = listwise_kl([[0.3, 0.3, 0.3], [0.2, 0.1, 0.1]], [[0.2, 0.1, 0.1]] * 2,
                         temperature=0.1, student_temperature=0.1)
    np.testing.assert_allclose(scores, [0.123284, 0.0], atol=1e-5)  # the same scores: 0
    loss = DistillationLoss("kl", temperature=0.1, student_temperature=0.1)
    np.testing.assert_allclose(float(loss([[0.3, 0.3, 0.3], [0.2, 0.1, 0.1]],
                                          [[0.2, 0.1, 0.1]] * 2)), 0.123284 / 2, atol=1e-5)


def test_margin_mse_by_hand():
    from tt_zoo.modeling.distillation import DistillationLoss, margin_mse

    # Row 0: student margins (3 - 1, 3 - 2) = (2, 1), teacher's (2 - 1, 2 - 1) = (1, 1):
    # squared errors (1, 0), mean 0.5. Row 1: student (0, 0), teacher (1 - 0, 1 - 2) = (1, -1):
    # (1, 1), mean 1.
    student, teacher = [[3.0, 1.0, 2.0], [0.0, 0.0, 0.0]], [[2.0, 1.0, 1.0], [1.0, 0.0, 2.0]]
    np.testing.assert_allclose(margin_mse(student, teacher), [0.5, 1.0])
    # A shift of all the student's scores changes no margin.
    np.testing.assert_allclose(margin_mse(np.add(student, 7.0), teacher), [0.5, 1.0], atol=1e-5)
    loss = DistillationLoss("margin_mse")
    assert float(loss(student, teacher)) == pytest.approx(0.75)
    assert loss.describe() == {"loss": "margin_mse"}


def test_distillation_settings_are_checked():
    from tt_zoo.modeling.distillation import DistillationLoss, candidate_scores

    with pytest.raises(ValueError, match=r"Unknown distillation loss 'mse'; expected one of "
                                         r"\('kl', 'margin_mse'\)"):
        DistillationLoss("mse")
    with pytest.raises(ValueError, match="temperature must be a positive number"):
        DistillationLoss("kl", temperature=0.0)
    # Query 0 [1, 0] with candidates [1, 2], [3, 4]; query 1 [0, 1] with [5, 6], [7, 8].
    np.testing.assert_allclose(candidate_scores([[1.0, 0.0], [0.0, 1.0]],
                                                [[1, 2], [3, 4], [5, 6], [7, 8.0]]),
                               [[1, 3], [6, 8]])


# -- the teacher-scores file ------------------------------------------------------------------

PASSAGES = [("penicillin", "alexander fleming discovered penicillin"),
            ("paris", "paris is the capital of france"),
            ("seine", "the seine flows through paris"),
            ("water", "water boils at degrees"),
            ("london", "london is a city in england"),
            ("river", "the river flows through the city")]
QUESTIONS = [("who discovered penicillin?", "fleming", 0),
             ("what is the capital of france?", "paris", 1),
             ("what river flows through paris?", "seine", 2),
             ("when does water boil?", "degrees", 3),
             ("where is london?", "england", 4)]


def tiny_collection() -> Collection:
    return Collection([f"{t}#0" for t, _ in PASSAGES], [t for t, _ in PASSAGES],
                      [x for _, x in PASSAGES])


class HashedWords:
    """A stand-in model: a query or passage is the sum of one fixed random vector per word."""

    def __init__(self, name, dim=16, seed=0):
        self.name, self.metadata, self.dim, self.seed = name, {"sha256": name * 4}, dim, seed

    def _vector(self, text):
        out = np.zeros(self.dim, np.float32)
        for word in text.lower().replace("?", "").split():
            out += np.random.default_rng([self.seed, *word.encode()]).normal(size=self.dim)
        return out

    def encode_queries(self, texts):
        return np.stack([self._vector(t) for t in texts])

    def passages(self, collection):
        return np.stack([self._vector(f"{t} {x}") for t, x in zip(collection.titles,
                                                                  collection.texts)])


def built_scores(depth=2):
    from tt_zoo.mining.teacher_candidates import build_teacher_scores

    collection = tiny_collection()
    questions = QuestionSet("tiny", tuple(OdqaQuestion(str(i), q, (a,))
                                          for i, (q, a, _) in enumerate(QUESTIONS)))
    teacher, student = HashedWords("teacher", seed=1), HashedWords("student", seed=2)
    scores = build_teacher_scores(
        [questions], collection, teacher=teacher, student=student,
        teacher_embeddings=teacher.passages(collection),
        student_embeddings=student.passages(collection), depth=depth,
        collection_source="six passages", log=lambda line: None)
    return scores, collection, teacher, student


def test_teacher_scores_are_the_union_scored_by_the_teacher_and_round_trip(tmp_path):
    from tt_zoo.data.teacher_scores import SOURCES, read_teacher_scores, write_teacher_scores
    from tt_zoo.evaluation import odqa
    from tt_zoo.retrieval.search import ExactSearcher

    scores, collection, teacher, student = built_scores(depth=2)
    assert len(scores) == len(QUESTIONS) and scores.teacher == "teacher"
    assert scores.meta["question_sets"] == ["tiny"] and scores.meta["depth"] == {
        "bm25": 2, "student": 2, "teacher": 2}
    passages = teacher.passages(collection)
    texts = [q for q, _, _ in QUESTIONS]
    tops = [odqa.bm25_searcher(collection).search(texts, 2).rows,
            ExactSearcher(student.passages(collection), collection.ids).search(
                student.encode_queries(texts), 2).rows,
            ExactSearcher(passages, collection.ids).search(teacher.encode_queries(texts),
                                                           2).rows]
    for i, (question, answer, gold) in enumerate(QUESTIONS):
        rows, values, answers = scores.candidates(i)
        union = {int(r) for top in tops for r in top[i] if r >= 0}
        assert set(rows.tolist()) == union  # the union of the three top 2s, no repeat
        assert len(rows) == len(union)
        np.testing.assert_allclose(values, passages[rows] @ teacher.encode_queries([question])[0],
                                   rtol=1e-5)
        assert list(values) == sorted(values, reverse=True)  # best first
        assert answers.tolist() == [answer in collection.texts[r] for r in rows]
        part = slice(int(scores.offsets[i]), int(scores.offsets[i + 1]))
        for r, bits in zip(rows, scores.found_by[part]):
            assert [bool(bits >> b & 1) for b in range(len(SOURCES))] == [
                int(r) in top[i] for top in tops]

    path = write_teacher_scores(scores, tmp_path / "tiny.npz")
    again = read_teacher_scores(path, collection)
    assert again.questions == scores.questions and again.meta["format_version"] == 1
    for key in ("set_of", "offsets", "rows", "scores", "has_answer", "found_by"):
        np.testing.assert_array_equal(getattr(again, key), getattr(scores, key))
    assert not list(tmp_path.glob("*.tmp*"))


def test_lexical_fusion_by_hand_orders_as_the_convex_fusion():
    from tt_zoo.mining.teacher_candidates import lexical_fusion

    # Three candidates: a (both searches), b (teacher only), c (BM25 only). Bits: bm25 1,
    # teacher 4. Dense over the teacher's own (a, b): 0.9, 0.5 -> spread 0.4. BM25 over its
    # own (a, c): 10, 20 -> minmax a 0, c 1; b (BM25 3, not in its top) -> (3 - 10) / 10 = -0.7.
    dense, bm25, bits = [0.9, 0.5, 0.4], [10.0, 3.0, 20.0], [5, 4, 1]
    # w = 0.5: dense + 1 * 0.4 * minmax(BM25) = 0.9, 0.5 - 0.28, 0.4 + 0.4.
    np.testing.assert_allclose(lexical_fusion(dense, bm25, bits, 0.5), [0.9, 0.22, 0.8],
                               rtol=1e-6)
    # The same order as the convex score itself, with dense min-max over (a, b): 1, 0, -0.25.
    convex = 0.5 * np.array([0.0, -0.7, 1.0]) + 0.5 * np.array([1.0, 0.0, -0.25])
    assert list(np.argsort(-convex)) == list(np.argsort(-lexical_fusion(dense, bm25, bits, 0.5)))
    np.testing.assert_allclose(lexical_fusion(dense, bm25, bits, 0.0), dense, rtol=1e-6)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        lexical_fusion(dense, bm25, bits, 1.0)


def test_a_hybrid_teacher_scores_its_candidates_with_bm25_fused_in():
    from tt_zoo.evaluation import odqa
    from tt_zoo.mining.teacher_candidates import build_teacher_scores, lexical_fusion

    plain, collection, teacher, student = built_scores(depth=2)
    questions = QuestionSet("tiny", tuple(OdqaQuestion(str(i), q, (a,))
                                          for i, (q, a, _) in enumerate(QUESTIONS)))
    hybrid = build_teacher_scores(
        [questions], collection, teacher=teacher, student=student,
        teacher_embeddings=teacher.passages(collection),
        student_embeddings=student.passages(collection), depth=2, lexical_weight=0.4,
        log=lambda line: None)
    assert hybrid.meta["lexical_weight"] == 0.4 and "BM25" in hybrid.meta["score"]
    bm25 = odqa.bm25_searcher(collection)
    passages = teacher.passages(collection)
    for i, (question, _, _) in enumerate(QUESTIONS):
        rows, values, _ = hybrid.candidates(i)
        assert sorted(rows.tolist()) == sorted(plain.candidates(i)[0].tolist())  # same union
        part = slice(int(hybrid.offsets[i]), int(hybrid.offsets[i + 1]))
        dense = passages[rows] @ teacher.encode_queries([question])[0]
        lexical = bm25.scores_at([question], [rows])[0]
        np.testing.assert_allclose(values, lexical_fusion(dense, lexical, hybrid.found_by[part],
                                                          0.4), rtol=1e-5)
        assert list(values) == sorted(values, reverse=True)
    # Near w = 1 BM25 decides: the candidates BM25 found come in BM25's order, where the
    # teacher alone (seed 3, depth 3) puts "the river flows through the city" first for
    # question 2 and BM25 the seine's passage.
    sharp = HashedWords("teacher", seed=3)

    def bm25_ordered(weight):
        scored = build_teacher_scores(
            [questions], collection, teacher=sharp, student=student,
            teacher_embeddings=sharp.passages(collection),
            student_embeddings=student.passages(collection), depth=3, lexical_weight=weight,
            log=lambda line: None)
        ordered = []
        for i, (question, _, _) in enumerate(QUESTIONS):
            rows, _, _ = scored.candidates(i)
            part = slice(int(scored.offsets[i]), int(scored.offsets[i + 1]))
            mine = bm25.scores_at([question], [rows[scored.found_by[part] & 1 == 1]])[0]
            ordered.append(bool(np.all(np.diff(mine) <= 0)))
        return ordered

    assert bm25_ordered(0.0)[2] is False
    assert all(bm25_ordered(0.999))
    with pytest.raises(ValueError, match="lexical_weight"):
        build_teacher_scores([questions], collection, teacher=teacher, student=student,
                             teacher_embeddings=passages,
                             student_embeddings=student.passages(collection), lexical_weight=1)


def test_bm25_scores_at_given_rows_match_its_search():
    from tt_zoo.evaluation import odqa

    bm25 = odqa.bm25_searcher(tiny_collection())
    texts = [q for q, _, _ in QUESTIONS]
    rows, scores = bm25.top_rows(texts, 6)
    for i, text in enumerate(texts):
        found = rows[i] >= 0
        np.testing.assert_allclose(bm25.scores_at([text], [rows[i][found]])[0], scores[i][found],
                                   rtol=1e-6)
    assert bm25.scores_at(["zzz unknown"], [[0, 1]])[0].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="rows must lie"):
        bm25.scores_at(["paris"], [[6]])
    with pytest.raises(ValueError, match="one sequence of rows per query"):
        bm25.scores_at("paris", [[0]])


def test_teacher_scores_refuse_another_collection_and_a_foreign_file(tmp_path):
    from tt_zoo.data.teacher_scores import (TeacherScoresError, read_teacher_scores,
                                            write_teacher_scores)

    scores, collection, _, _ = built_scores()
    path = write_teacher_scores(scores, tmp_path / "tiny.npz")
    edited = Collection(collection.ids, collection.titles,
                        collection.texts[:-1] + ["the river flows"])
    with pytest.raises(TeacherScoresError, match=r"tiny.npz: scored over a collection of 6 "
                                                 r"passages \(sha256 .*six passages\), not this "
                                                 r"one of 6 passages"):
        read_teacher_scores(path, edited)
    shorter = Collection(collection.ids[:5], collection.titles[:5], collection.texts[:5])
    with pytest.raises(TeacherScoresError, match="not this one of 5 passages"):
        read_teacher_scores(path, shorter)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(TeacherScoresError, match=r"other.npz: not a teacher-scores file"):
        read_teacher_scores(tmp_path / "other.npz")
    with pytest.raises(TeacherScoresError, match=r"missing.npz does not exist"):
        read_teacher_scores(tmp_path / "missing.npz")


def test_passage_embeddings_refuse_another_models_file(tmp_path, exported):
    import tt_zoo
    from tt_zoo.errors import TtZooError
    from tt_zoo.mining.teacher_candidates import passage_embeddings

    model = tt_zoo.load(str(exported.path))
    collection = tiny_collection()
    path = tmp_path / "passages.npy"
    first = passage_embeddings(model, collection, path, log=lambda line: None)
    assert first.shape == (6, 8)
    np.testing.assert_allclose(passage_embeddings(model, collection, path), first)
    state = json.loads(path.with_suffix(".json").read_text())
    path.with_suffix(".json").write_text(json.dumps({**state, "encoder": "someone-else"}))
    with pytest.raises(TtZooError, match=r"--teacher-embeddings .*passages.npy: its record .* "
                                         r"not tiny_test's of these 6 passages"):
        passage_embeddings(model, collection, path, flag="--teacher-embeddings")


def test_teacher_scores_command_end_to_end(tmp_path, exported, capsys):
    """`tt-zoo teacher-scores` over a JSONL article source, questions from a file, the tiny
    export as teacher and student (its embeddings encoded into --cache-dir)."""
    from tt_zoo import cli
    from tt_zoo.data.article_sources import write_jsonl_articles
    from tt_zoo.data.articles import Article, Section
    from tt_zoo.data.teacher_scores import read_teacher_scores

    articles = tmp_path / "articles.jsonl"
    write_jsonl_articles([Article(t, (Section("", (x,)),)) for t, x in PASSAGES], articles)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": q, "answers": [a]}) + "\n"
                                 for q, a, _ in QUESTIONS))
    out = tmp_path / "scores.npz"
    argv = ["teacher-scores", "--teacher", str(exported.path), "--student", str(exported.path),
            "--questions", str(questions), "--articles", str(articles), "--depth", "3",
            "--cache-dir", str(tmp_path / "cache"), "--output", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    assert "Wrote" in capsys.readouterr().out
    scores = read_teacher_scores(out)
    assert len(scores) == 5 and scores.meta["teacher"]["name"] == "tiny_test"
    assert scores.meta["collection"]["passages"] == 6
    assert np.all(np.diff(scores.offsets) >= 3)
    assert cli.main(argv) == 2  # the output exists: --overwrite replaces it
    assert "exists; pass --overwrite" in capsys.readouterr().err


# -- training ----------------------------------------------------------------------------------

def write_scores(path, collection, seed=0):
    """Every question's candidates = all six passages; the teacher scores its gold passage 0.8,
    the others below 0.4."""
    from tt_zoo.data.teacher_scores import from_candidates, write_teacher_scores

    rng = np.random.default_rng(seed)
    candidates = []
    for _, answer, gold in QUESTIONS:
        values = rng.uniform(0.0, 0.4, len(collection)).astype(np.float32)
        values[gold] = 0.8
        candidates.append((np.arange(len(collection)), values,
                           np.array([answer in x for x in collection.texts]),
                           np.full(len(collection), 1, np.uint8)))
    meta = {"teacher": {"name": "hand_teacher", "sha256": None, "tag": "hand"},
            "student": {"name": "none", "sha256": None, "tag": "none"},
            "collection": {"passages": len(collection),
                           "sha256": collection.fingerprint().hexdigest(), "source": "tiny"},
            "depth": {"bm25": 6}, "question_sets": ["tiny"]}
    return write_teacher_scores(from_candidates([q for q, _, _ in QUESTIONS], [0] * 5,
                                                candidates, meta), path)


def full_list_kl(model, task, loss) -> float:
    """The loss over each question's whole candidate list (not a sampled K)."""
    queries = model.encode_queries([e.query for e in task.examples], precision="float32")
    documents = [e.candidates for e in task.examples]
    student = np.stack([model.encode_documents([d.text for d in ds], [d.title for d in ds],
                                               precision="float32") @ q
                        for q, ds in zip(queries, documents)])
    teacher = np.array([e.teacher_scores for e in task.examples], np.float32)
    return float(loss(student, teacher))


def test_distillation_lowers_the_kl_on_its_training_questions(tmp_path):
    from helpers import tiny_model
    from tt_zoo.data.distill_task import distill_task, is_distillation
    from tt_zoo.modeling.distillation import DistillationLoss
    from tt_zoo.training.multi_task import train_multi_task

    collection = tiny_collection()
    task = distill_task("tiny", write_scores(tmp_path / "tiny.npz", collection), collection)
    assert is_distillation(task) and len(task) == 5
    assert task.examples[0].positive.id == "penicillin#0"  # the teacher's best first
    assert task.stats["teacher"]["name"] == "hand_teacher"
    # The BoW-MLP towers (average pooling) learn from five questions in seconds; the tiny
    # BERT's [CLS] embeddings start near zero and take far longer.
    model = tiny_model(encoder="bow_mlp")
    loss = DistillationLoss("kl", temperature=0.1, student_temperature=1.0)
    before = full_list_kl(model, task, loss)
    summary = train_multi_task(model, [task], steps=60, batch_size=4, learning_rate=5e-2,
                               workdir=str(tmp_path / "work"), distillation=loss,
                               distill_candidates=3, progress=False, log=lambda line: None)
    after = full_list_kl(model, task, loss)
    assert summary["settings"]["distillation"] == {"loss": "kl", "temperature": 0.1,
                                                   "student_temperature": 1.0, "candidates": 3}
    assert after < 0.5 * before, (before, after)
    # The teacher's best (each question's gold passage) is now the student's best too.
    queries = model.encode_queries([e.query for e in task.examples], precision="float32")
    passages = model.encode_documents(collection.texts, collection.titles, precision="float32")
    assert list(np.argmax(queries @ passages.T, axis=1)) == [g for _, _, g in QUESTIONS]


def test_multitask_mixes_a_distillation_task_and_records_the_recipe(tmp_path, monkeypatch):
    """`tt-zoo multitask --task distill:FILE --task jsonl:FILE`: both kinds of batch in one
    fit (the distillation task's alone), the recipe in the card and the run config; a resume
    with another loss is refused; a file of another collection is named."""
    from tt_zoo.cli import multitask
    from tt_zoo.data import passage_collection as pc
    from tt_zoo.artifacts.model_card import ModelCard

    collection = tiny_collection()
    monkeypatch.setattr(pc, "passage_collection", lambda *args, **kwargs: collection)
    (tmp_path / "data" / "wikispeedia").mkdir(parents=True)
    monkeypatch.setenv("TT_ZOO_DATA", str(tmp_path / "data"))
    scores = write_scores(tmp_path / "hand.npz", collection)
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps({"query": q, "positives": [{"title": PASSAGES[g][0],
                                                                 "text": PASSAGES[g][1]}]}) + "\n"
                          for q, _, g in QUESTIONS))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    export = tmp_path / "model"
    argv = ["--init", "none", "--num-layers", "1", "--hidden-size", "16",
            "--num-attention-heads", "2", "--inner-dim", "32", "--embedding-dim", "8",
            "--query-length", "16", "--document-length", "24", "--vocab", str(vocab),
            "--task", f"distill:{scores}", "--task", f"jsonl:{qa}", "--markers",
            "--distill-candidates", "4", "--steps", "6", "--batch-size", "4",
            "--learning-rate", "1e-2", "--workdir", str(tmp_path / "work"), "--no-progress"]
    result = multitask.main([*argv, "--export", str(export)])
    assert result["train"]["steps_done"] == 6
    settings = result["train"]["settings"]
    assert settings["alone"] == [0] and settings["distillation"] == {
        "loss": "kl", "temperature": 1.0, "student_temperature": 1.0, "candidates": 4}
    assert [(t["name"], t["examples"]) for t in result["tasks"]] == [("hand", 5), ("qa", 5)]
    assert result["run_config"]["distillation"] == {
        "distill_loss": "kl", "distill_candidates": 4, "distill_temperature": None}

    card = ModelCard.from_dict(json.loads((export / "metadata.json").read_text()))
    distilled = card.training.multi_task.distillation
    assert (distilled.loss, distilled.candidates, distilled.teachers) == (
        "kl", 4, ["hand_teacher"])
    (record,) = distilled.files
    assert record["task"] == "hand" and record["scores_file"]["sha256"] == \
        card.training.multi_task.tasks[0].stats["scores_file"]["sha256"]
    assert "Distilled from hand_teacher: listwise KL (RocketQAv2), 4 candidates" in \
        (export / "MODEL_CARD.md").read_text()

    with pytest.raises(SystemExit, match="margin_mse"):  # the checkpoints' settings differ
        multitask.main([*argv, "--distill-loss", "margin_mse"])

    other = Collection(collection.ids, collection.titles, collection.texts[::-1])
    monkeypatch.setattr(pc, "passage_collection", lambda *args, **kwargs: other)
    with pytest.raises(SystemExit, match=r"--task 'distill:.*hand.npz': .*hand.npz: scored "
                                         r"over a collection of 6 passages"):
        multitask.main([*argv[:-3], "--workdir", str(tmp_path / "other"), "--no-progress"])


def test_distill_spec_and_its_flags():
    from tt_zoo.training.multi_task_tasks import parse_task_spec

    spec = parse_task_spec("distill:runs/distill/webquestions.npz")
    assert (spec.kind, spec.name, spec.path, spec.task_class) == (
        "distill", "webquestions", "runs/distill/webquestions.npz", "qa")
    from tt_zoo import cli

    assert cli.main(["multitask", "--task", "distill:x.npz", "--distill-candidates", "1"]) == 2


def test_distillation_refuses_what_it_cannot_train():
    from tt_zoo.errors import TtZooError
    from tt_zoo.modeling.distillation import DistillationLoss
    from tt_zoo.training.multi_task import check_distillation

    with pytest.raises(TtZooError, match=r"Tasks \['d'\] distil a teacher's scores: pass "
                                         r"distillation="):
        check_distillation(["d"], None, 8)
    with pytest.raises(TtZooError, match="distill_candidates must be an int >= 2"):
        check_distillation(["d"], DistillationLoss(), 1)


def test_a_colbert_model_trains_on_a_distillation_task(tmp_path):
    """The late-interaction model takes distillation batches as the single-vector ones do,
    scoring its candidates by MaxSim (`LateInteractionModel.candidate_scores`)."""
    from helpers import tiny_colbert
    from tt_zoo.data.distill_task import distill_task
    from tt_zoo.modeling.distillation import DistillationLoss
    from tt_zoo.training.multi_task import train_multi_task

    collection = tiny_collection()
    task = distill_task("tiny", write_scores(tmp_path / "tiny.npz", collection), collection)
    model = tiny_colbert()
    model.build_by_calling()
    before = [w.numpy().copy() for w in model.trainable_weights]
    assert before
    summary = train_multi_task(model, [task], steps=3, batch_size=4, learning_rate=1e-3,
                               workdir=str(tmp_path / "work"),
                               distillation=DistillationLoss("kl", temperature=0.1),
                               distill_candidates=3, progress=False, log=lambda line: None)
    assert summary["steps_done"] == 3 and np.isfinite(summary["final_loss"])
    assert any(not np.array_equal(a, w.numpy()) for a, w in zip(before, model.trainable_weights))
