"""Tasks for multi-task training (tt_zoo.mining.task_sources) and the generic confounder miner
(hard_negatives.mine_answer_negatives): hand-checked positives in BM25 order, dropped and counted
questions, confounders that never hold an answer (fallback included), re-mining from any ranking,
ReQA and pair-set tasks in the conventions of fine-tuning and pretraining."""

import numpy as np
import pytest

from helpers import hand_made_squad, tiny_model
from tt_zoo.data import features as F
from tt_zoo.data.pairs_io import read_pair_texts, write_pair_shards
from tt_zoo.data.pretraining_tasks import Pair
from tt_zoo.data.tasks import Document, Task, TaskExample
from tt_zoo.errors import TtZooError
from tt_zoo.mining import hard_negatives as hn
from tt_zoo.evaluation import odqa
from tt_zoo.evaluation import reqa as reqa_lib
from tt_zoo.mining import task_sources as ts

PASSAGES = [  # (id, title, text); row = position
    ("Penicillin#0", "Penicillin", "Alexander Fleming discovered penicillin in 1928 in London."),
    ("Penicillin#1", "Penicillin",
     "Penicillin was discovered by accident when mould grew on a plate."),
    ("Alexander Fleming#0", "Alexander Fleming",
     "Fleming was a Scottish physician who discovered penicillin."),
    ("Antibiotics#0", "Antibiotics",
     "Antibiotics such as penicillin were discovered in the twentieth century."),
    ("Paris#0", "Paris", "Paris is the capital and largest city of France."),
    ("France#0", "France", "France is a country whose capital is a famous city on the Seine."),
    ("Titanic#0", "Titanic", "The Titanic sank in April 1912 after striking an iceberg."),
    ("Titanic#1", "Titanic",
     "The Titanic was a British passenger liner that sank in the Atlantic."),
    ("Pacific#0", "Pacific", "Pacific water covers about a third of the surface of Earth."),
    ("Water#0", "Water", "Water boils at 100 degrees at sea level."),
]
# BM25 (title + text, matched only) ranks, and the rows holding an answer:
#   fleming  [2, 0, 1, 3]  answers {0, 2}  -> positives [2, 0], confounder 1
#   capital  [5, 4]        answers {4}     -> positive 4, confounder 5 (ranked above it)
#   titanic  [7, 6, 1]     regex 1912 {6}  -> positive 6, confounder 7
#   ocean    [4]           answers {8}     -> no positive in the top: dropped
#   water    [9, 8]        answers {8, 9}  -> positives [9, 8], confounder by the fallback
#   hamlet   [2]           answers {}      -> not answerable in the collection
QUESTIONS = (
    odqa.OdqaQuestion("fleming", "Who discovered penicillin?", ("Fleming",)),
    odqa.OdqaQuestion("capital", "What is the capital of France?", ("Paris",)),
    odqa.OdqaQuestion("titanic", "When did the Titanic sink?", answer_regex="1912"),
    odqa.OdqaQuestion("ocean", "Name the largest ocean.", ("Pacific",)),
    odqa.OdqaQuestion("water", "At what temperature does water boil?", ("water",)),
    odqa.OdqaQuestion("hamlet", "Who wrote Hamlet?", ("Shakespeare",)),
)
QUESTION_OF = {q.text: q for q in QUESTIONS}


def collection():
    return odqa.Collection(*[list(column) for column in zip(*PASSAGES)])


def question_set():
    return odqa.QuestionSet("toy", QUESTIONS, skipped=(("bad", "answer regex '(' does not "
                                                               "compile"),))


def rows_of(documents):
    ids = [p[0] for p in PASSAGES]
    return [ids.index(d.id) for d in documents]


def assert_no_confounder_holds_an_answer(task):
    for example in task.examples:
        question = odqa.OdqaQuestion("x", example.query, example.answers, example.answer_regex)
        assert example.negatives, example
        for document in example.negatives:
            assert not odqa.has_answer(question, document.text), (example.query, document)
            assert document.id not in {p.id for p in example.positives}


def test_the_premise_bm25_rankings_and_answer_rows():
    c = collection()
    ranked, _ = odqa.bm25_searcher(c).top_rows([q.text for q in QUESTIONS], 10)
    assert [[r for r in row if r >= 0] for row in ranked.tolist()] == [
        [2, 0, 1, 3], [5, 4], [7, 6, 1], [4], [9, 8], [2]]
    assert odqa.AnswerIndex(c.texts).rows_with_answers(QUESTIONS) == [
        {0, 2}, {4}, {6}, {8}, {8, 9}, set()]


def test_qa_task_positives_in_bm25_order_and_one_answerless_confounder():
    task = ts.qa_task("toy_qa", question_set(), collection(), validation=("toy-val",))
    assert [e.query for e in task.examples] == [QUESTIONS[i].text for i in (0, 1, 2, 4)]
    assert [rows_of(e.positives) for e in task.examples] == [[2, 0], [4], [6], [9, 8]]
    assert [rows_of(e.negatives) for e in task.examples[:3]] == [[1], [5], [7]]
    water = task.examples[3]
    assert len(water.negatives) == 1 and rows_of(water.negatives)[0] not in {8, 9}  # fallback
    assert task.examples[0].positive == Document("Alexander Fleming#0", "Alexander Fleming",
                                                 PASSAGES[2][2])
    assert task.examples[0].answers == ("Fleming",) and task.examples[0].answer_regex is None
    assert task.examples[2].answer_regex == "1912" and task.examples[2].answers == ()
    assert_no_confounder_holds_an_answer(task)
    stats = task.stats
    assert (stats["questions"], stats["skipped"], stats["answerable_in_collection"],
            stats["with_positive_in_top_depth"], stats["depth"]) == (6, 1, 5, 4, 100)
    assert stats["confounders"]["questions"] == 4
    assert stats["confounders"]["questions_with_fallback"] == 1
    assert stats["confounders"]["fallback_negatives"] == 1
    assert stats["seconds"] >= 0
    assert task.task_class == "qa" and task.validation == ("toy-val",)
    assert task.knowledge_source == "10 passages (title, text)"
    # Deterministic; cached answer rows and a given BM25 index give the same task.
    again = ts.qa_task("toy_qa", question_set(), collection(), validation=("toy-val",),
                       answer_rows=odqa.AnswerIndex(collection().texts).rows_with_answers(
                           QUESTIONS), bm25=odqa.bm25_searcher(collection()))
    assert again.examples == task.examples


def test_qa_task_depth_limits_where_positives_are_found():
    # At depth 1 the capital question's top passage (France#0) holds no answer: dropped.
    task = ts.qa_task("toy_qa", question_set(), collection(), depth=1)
    assert [e.query for e in task.examples] == [QUESTIONS[i].text for i in (0, 4)]
    assert [rows_of(e.positives) for e in task.examples] == [[2], [9]]
    assert task.stats["with_positive_in_top_depth"] == 2
    assert_no_confounder_holds_an_answer(task)  # both from the fallback
    assert task.stats["confounders"]["questions_with_fallback"] == 2


def test_qa_task_refuses_bad_inputs():
    nothing = odqa.QuestionSet("none", (QUESTIONS[3], QUESTIONS[5]))
    with pytest.raises(TtZooError, match="none of the 2 questions of 'none'"):
        ts.qa_task("t", nothing, collection())
    with pytest.raises(TtZooError, match="2 answer-row sets for the 6 questions"):
        ts.qa_task("t", question_set(), collection(), answer_rows=[{0}, {1}])
    small = odqa.bm25_searcher(odqa.Collection(["a"], ["A"], ["penicillin"]))
    with pytest.raises(TtZooError, match="BM25 index holds 1 documents"):
        ts.qa_task("t", question_set(), collection(), bm25=small)
    with pytest.raises(TypeError, match="QuestionSet"):
        ts.qa_task("t", list(QUESTIONS), collection())


def test_lexical_task_queries_are_spans_and_bm25_ranks_positives_and_confounder():
    c = collection()
    bm25 = odqa.bm25_searcher(c)
    task = ts.lexical_task("lex", c, 40, bm25=bm25, seed=3, query_words=(2, 3), positives=2,
                           negative_ranks=(2, 4))
    stats = task.stats
    assert stats["queries"] == 40 and stats["kept"] == len(task.examples) > 0
    assert stats["kept"] + stats["dropped_short_rankings"] == 40
    texts = [" ".join(text.split()) for _, _, text in PASSAGES]
    for example in task.examples:
        words = example.query.split()
        assert 2 <= len(words) <= 3
        assert any(f" {example.query} " in f" {t} " for t in texts), example.query  # a span
        ranked, _ = bm25.top_rows([example.query], 10)
        ranking = [r for r in ranked[0].tolist() if r >= 0]
        assert len(ranking) >= 4  # shorter rankings are dropped
        assert rows_of(example.positives) == ranking[:2]  # BM25's top 2, best first
        assert rows_of(example.negatives)[0] in ranking[2:4]
    assert 0 <= stats["source_passage_first"] <= 1
    assert task.task_class == "qa" and task.knowledge_source == "10 passages (title, text)"
    again = ts.lexical_task("lex", c, 40, seed=3, query_words=(2, 3), positives=2,
                            negative_ranks=(2, 4))
    assert again.examples == task.examples  # deterministic (BM25 built here the same)
    other = ts.lexical_task("lex", c, 40, bm25=bm25, seed=4, query_words=(2, 3), positives=2,
                            negative_ranks=(2, 4))
    assert other.examples != task.examples


def test_lexical_task_refuses_bad_settings_and_a_collection_too_small():
    c = collection()
    with pytest.raises(ValueError, match="query_words"):
        ts.lexical_task("lex", c, 5, query_words=(0, 3))
    with pytest.raises(ValueError, match="positives <= negative_ranks"):
        ts.lexical_task("lex", c, 5, positives=3, negative_ranks=(2, 4))
    with pytest.raises(ValueError, match="num_queries"):
        ts.lexical_task("lex", c, 0)
    small = odqa.bm25_searcher(odqa.Collection(["a"], ["A"], ["penicillin"]))
    with pytest.raises(TtZooError, match="lexical_task 'lex': the BM25 index holds 1 documents"):
        ts.lexical_task("lex", c, 5, bm25=small)
    with pytest.raises(TtZooError, match="none of the 5 queries has 20 passages"):
        ts.lexical_task("lex", c, 5)  # no toy query shares a term with 20 passages


def test_fallback_never_takes_an_excluded_row():
    empty = lambda queries, depth: np.full((len(queries), depth), -1, np.int64)  # noqa: E731
    excluded = [frozenset(range(10)) - {7}] * 5  # one valid row of ten
    mined = hn.mine_answer_negatives(empty, 10, ["a", "b", "c", "d", "e"], excluded)
    assert mined.rows.tolist() == [[7]] * 5 and mined.rows.dtype == np.int32
    counts = dict(mined.counts)
    assert counts.pop("skipped_excluded") >= 0  # the fallback's draws of excluded rows
    assert counts == {"questions": 5, "documents": 10, "queries_without_results": 5,
                      "questions_with_fallback": 5, "fallback_negatives": 5}
    for seed in range(20):
        rows = hn.mine_answer_negatives(empty, 10, ["q"] * 3, [frozenset({1, 2, 3})] * 3, 2,
                                        seed=seed).rows
        assert not set(rows.ravel().tolist()) & {1, 2, 3}
        assert all(len(set(r)) == 2 for r in rows.tolist())
    with pytest.raises(TtZooError, match="Question 0 has only 0 valid hard negatives"):
        hn.mine_answer_negatives(empty, 3, ["q"], [frozenset({0, 1, 2})])


def test_mine_answer_negatives_checks_its_inputs():
    rank = lambda queries, depth: np.zeros((len(queries), depth), np.int64)  # noqa: E731
    with pytest.raises(ValueError, match="1 excluded-row sets for 2 queries"):
        hn.mine_answer_negatives(rank, 5, ["a", "b"], [set()])
    with pytest.raises(TtZooError, match=r"int rows \[2 queries, <= 32\]"):
        hn.mine_answer_negatives(lambda q, d: np.zeros((1, d), np.int64), 5, ["a", "b"],
                                 [set(), set()])
    with pytest.raises(TtZooError, match=r"outside \[0, 5\)"):
        hn.mine_answer_negatives(lambda q, d: np.full((len(q), 1), 9), 5, ["a"], [set()])
    with pytest.raises(ValueError, match="num_documents must be a positive int"):
        hn.mine_answer_negatives(rank, 0, ["a"], [set()])


def test_remine_takes_the_first_unexcluded_row_of_any_ranking():
    task = ts.qa_task("toy_qa", question_set(), collection())
    excluded = ts.qa_excluded_rows(task, collection())
    assert excluded == [{0, 2}, {4}, {6}, {8, 9}]
    rankings = {QUESTIONS[0].text: [0, 2, 9, 3], QUESTIONS[1].text: [4, 5, 6, 7],
                QUESTIONS[2].text: [6, 3, -1, -1], QUESTIONS[4].text: [-1, -1, -1, -1]}
    calls = []

    def rank(queries, depth):
        calls.append(depth)
        return np.array([rankings[q][:depth] for q in queries], np.int64)

    remined = ts.remine_confounders(task, rank, ts.documents_of(collection()), excluded,
                                    depth=4, seed=1)
    assert calls == [4]
    assert [rows_of(e.negatives) for e in remined.examples[:3]] == [[9], [5], [3]]
    assert rows_of(remined.examples[3].negatives)[0] not in {8, 9}  # the fallback
    assert [e.positives for e in remined.examples] == [e.positives for e in task.examples]
    assert_no_confounder_holds_an_answer(remined)
    assert remined.stats["negatives"].startswith("re-mined")
    counts = remined.stats["remined_confounders"]
    # 0 and 2, 4, 6 skipped in the rankings; the fallback counts the excluded rows it draws.
    assert counts["questions_with_fallback"] == 1 and counts["skipped_excluded"] >= 4
    assert counts["earlier"].startswith("BM25 top 100")
    assert task.stats["negatives"].startswith("BM25")  # the original is unchanged


def test_excluded_rows_include_positives_by_id_and_refuse_an_unknown_one():
    pair = Task("pairs", "self_supervised", (
        TaskExample("mould on a plate", (Document(*PASSAGES[1]),)),
        TaskExample("boils", (Document(*PASSAGES[9]), Document(*PASSAGES[3])))))
    assert ts.qa_excluded_rows(pair, collection()) == [{1}, {3, 9}]
    assert ts.qa_excluded_rows(pair, collection(), answer_rows=[{5}, set()]) == [{1, 5}, {3, 9}]
    stranger = Task("x", "qa", (TaskExample("q", (Document("Elsewhere#0", "E", "e"),)),))
    with pytest.raises(TtZooError, match="positive 'Elsewhere#0' is not a passage"):
        ts.qa_excluded_rows(stranger, collection())


def test_dense_rank_is_the_models_exact_top_k_and_remines():
    model = tiny_model(encoder="bow_mlp")
    documents = ts.documents_of(collection())
    rank = ts.dense_rank(model, documents)
    queries = [QUESTIONS[0].text, QUESTIONS[4].text]
    rows = rank(queries, 4)
    scores = model.encode_queries(queries) @ model.encode_documents(
        [d.text for d in documents], titles=[d.title for d in documents]).T
    assert rows.shape == (2, 4)
    for row, score in zip(rows, scores):
        np.testing.assert_allclose(score[row], np.sort(score)[::-1][:4], rtol=1e-5, atol=1e-6)
    task = ts.qa_task("toy_qa", question_set(), collection())
    remined = ts.remine_confounders(task, rank, documents, ts.qa_excluded_rows(task, collection()))
    assert_no_confounder_holds_an_answer(remined)


# ------------------------------------------------------------------------------- ReQA


def test_reqa_task_uses_finetunings_document_convention():
    from tt_zoo.training import finetuning

    reqa = reqa_lib.build_reqa_from_squad(hand_made_squad())
    ids = ["q_first", "q_one", "q_other_passage"]
    task = ts.reqa_task("reqa_squad", reqa, ids, seed=3)
    mined = hn.mine_reqa_negatives(reqa, ids, 1, seed=3)
    pairs = list(finetuning.reqa_pairs(reqa, ids, sampling_correction=False,
                                       hard_negatives=mined.rows).as_numpy_iterator())
    assert len(task) == 3
    for example, pair, q in zip(task.examples, pairs, reqa.questions_for(ids)):
        assert example.query == pair[F.QUERY].decode()
        assert example.positive == Document(pair[F.DOC_ID].decode(), pair[F.DOC_TITLE].decode(),
                                            pair[F.DOC_TEXT].decode())
        assert example.positive.id == str(q.gold_index)
        assert [(d.id, d.title, d.text) for d in example.negatives] == [
            tuple(x.decode() for x in fields) for fields in zip(
                pair[F.HARD_NEGATIVE_IDS], pair[F.HARD_NEGATIVE_TITLES],
                pair[F.HARD_NEGATIVE_TEXTS])]
        assert example.answers == q.answers
    assert task.examples[1].positive == Document("2", "Paris is the capital of France.",
                                                 "Paris is the capital of France.")
    assert task.stats["confounders"] == mined.counts and task.task_class == "qa"
    assert "5 (sentence, passage) candidates" in task.knowledge_source


# ------------------------------------------------------------------------------- pair sets


PAIR_ROWS = [("Who discovered penicillin?", PASSAGES[0], "ict"),
             ("mould on a plate", PASSAGES[1], "ict"),
             ("Scottish physician", PASSAGES[2], "bfs"),
             ("capital of France", PASSAGES[4], "wlp"),
             ("passenger liner", PASSAGES[7], "ict"),
             ("sea level", PASSAGES[9], "ict")]


def test_pair_task_turns_the_stored_negative_rows_into_documents(tmp_path):
    pairs_dir = tmp_path / "pairs"
    write_pair_shards([Pair(q, d[1], d[2], d[0], t) for q, d, t in PAIR_ROWS], str(pairs_dir),
                      num_shards=2, progress=False)
    task = ts.pair_task("ict_bfs_wlp", str(pairs_dir), seed=0, log=lambda *_: None)
    stored = hn.load_or_mine(str(pairs_dir), hn.MiningSettings(1), progress=False,
                             log=lambda *_: None)
    assert stored.reused  # the task mined and stored it beside the pairs
    assert (pairs_dir / "hard_negatives" / (hn.MiningSettings(1).file_stem + ".npy")).is_file()
    pairs = read_pair_texts(str(pairs_dir))
    assert len(task) == len(pairs) == 6
    for i, example in enumerate(task.examples):
        assert example.query == pairs.queries[i]
        assert example.positive == Document(pairs.doc_ids[i], pairs.titles[i], pairs.texts[i])
        r = int(stored.rows[i, 0])
        assert example.negatives == (Document(pairs.doc_ids[r], pairs.titles[r],
                                              pairs.texts[r]),)
        assert example.negatives[0].id != example.positive.id
    assert task.task_class == "self_supervised"
    assert task.stats["pairs"] == 6 and task.stats["pair_tasks"] == {"ict": 4, "bfs": 1,
                                                                     "wlp": 1}
    assert task.stats["hard_negatives"]["num_negatives"] == 1
    first = ts.pair_task("first", str(pairs_dir), max_pairs=4, log=lambda *_: None,
                         negatives_dir=str(tmp_path / "negatives"))
    assert len(first) == 4 and (tmp_path / "negatives").is_dir()
