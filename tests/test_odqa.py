"""The open-domain QA answer-recall benchmark: normalisation, matching, question files, the
metric on hand-worked rankings, the 100-word passages, and the command on a tiny corpus."""

import json

import numpy as np
import pytest

from conftest import data_file
from tt_zoo.data.articles import Article, Section
from tt_zoo.data.passages import word_passages
from tt_zoo.evaluation import odqa
from tt_zoo.retrieval.search import SearchResult


def test_normalisation_hand_worked():
    assert odqa.normalize_tokens("The Rhine's  Delta, U.S.A.!") == ["rhines", "delta", "usa"]
    # NFD splits the accent off, and the accent goes with the punctuation.
    assert odqa.normalize_tokens("Padmé Amidala") == odqa.normalize_tokens("PADME amidala")
    assert odqa.normalize_tokens("an apple and a pear") == ["apple", "and", "pear"]
    assert odqa.normalize_tokens("...") == []


def test_string_answers_match_whole_tokens_only():
    art = odqa.OdqaQuestion("q", "what?", answers=("art",))
    assert not odqa.has_answer(art, "Part of the artwork")
    assert odqa.has_answer(art, "Modern Art, e.g. cubism")
    bahama = odqa.OdqaQuestion("q", "?", answers=("The Bahamas",))
    assert odqa.has_answer(bahama, "a country, the Bahamas.")
    assert not odqa.has_answer(bahama, "Grand Bahama island")
    two_words = odqa.OdqaQuestion("q", "?", answers=("Grand Bahama",))
    assert not odqa.has_answer(two_words, "grand old Bahama")


def test_regex_answers_search_the_raw_text_case_insensitively():
    q = odqa.OdqaQuestion("q", "?", answer_regex=r"Long Island|New\s?York")
    assert odqa.has_answer(q, "He left from NEWYORK in May.")
    assert not odqa.has_answer(q, "He left from Paris.")
    assert odqa.search_equivalent(".*Eureka.*") == "Eureka"
    assert odqa.search_equivalent(r"a\.*") == r"a\.*"


def test_answer_index_finds_rows_and_regexes_do_not_cross_passages():
    texts = ["Fleming discovered penicillin in 1928.", "New", "York is big.",
             "Penicillin saves lives."]
    index = odqa.AnswerIndex(texts)
    by_string = odqa.OdqaQuestion("a", "?", answers=("penicillin", "absent answer"))
    by_regex = odqa.OdqaQuestion("b", "?", answer_regex=r"New\s*York")
    rows = index.rows_with_answers([by_string, by_regex])
    assert rows == [frozenset({0, 3}), frozenset()]  # "New" + "York" are two passages


def test_question_files_and_their_errors(tmp_path):
    good = tmp_path / "q.jsonl"
    good.write_text(json.dumps({"question": "who?", "answers": ["Fleming"]}) + "\n"
                    + json.dumps({"question": "when?", "answer_regex": "19(28|29)"}) + "\n"
                    + json.dumps({"question": "bad?", "answer_regex": "(unclosed"}) + "\n")
    read = odqa.read_questions(good)
    assert [q.text for q in read.questions] == ["who?", "when?"]
    assert len(read.skipped) == 1 and "does not compile" in read.skipped[0][1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "who?", "answers": ["x"]}) + "\n{not json\n")
    with pytest.raises(odqa.OdqaFormatError, match=r"bad.jsonl:2"):
        odqa.read_questions(bad)
    no_answer = tmp_path / "none.jsonl"
    no_answer.write_text(json.dumps({"question": "who?"}) + "\n")
    with pytest.raises(odqa.OdqaFormatError, match=r"none.jsonl:1: expected 'answers'"):
        odqa.read_questions(no_answer)
    tsv = tmp_path / "trec.tsv"
    tsv.write_text("1\tfactoid\tWho?\tFleming\n2\tfactoid\tonly three fields\n")
    with pytest.raises(odqa.OdqaFormatError, match=r"trec.tsv:2: expected 4"):
        odqa.read_questions(tsv)
    with pytest.raises(odqa.OdqaFormatError, match="expected a .json"):
        odqa.read_questions(tmp_path / "q.txt") if (tmp_path / "q.txt").write_text("x") else None


def test_answer_recall_hand_worked():
    # Question 0: answer rows {2}; ranked 4, 2, -1 -> first hit at rank 2 (index 1).
    # Question 1: answer rows {7}; never retrieved.  Question 2: {0}, first.
    ranked = [[4, 2, -1], [0, 1, 3], [0, 5, 6]]
    gold = [frozenset({2}), frozenset({7}), frozenset({0})]
    assert odqa.answer_recall(ranked, gold, ks=(1, 2, 3)) == {
        "R@1": pytest.approx(1 / 3), "R@2": pytest.approx(2 / 3), "R@3": pytest.approx(2 / 3)}
    with pytest.raises(ValueError, match="fewer than k"):
        odqa.answer_recall(ranked, gold, ks=(5,))


def test_evaluate_sets_over_a_searcher_and_the_union():
    class Fixed:  # a Searcher whose rankings are given
        def __len__(self):
            return 4

        def search(self, queries, k):
            rows = {"q0": [1, 0, -1], "q1": [3, 2, 1]}
            return SearchResult.from_rows(np.array([rows[q][:k] for q in queries]),
                                          np.zeros((len(queries), k)), list("abcd"))

    a = odqa.AnswerSets("a", (odqa.OdqaQuestion("0", "q0", ("x",)),), (frozenset({0}),), 3, ())
    b = odqa.AnswerSets("b", (odqa.OdqaQuestion("1", "q1", ("y",)),), (frozenset({1}),), 1, ())
    out = odqa.evaluate_sets(Fixed(), lambda texts: texts, [a, b], ks=(1, 3))
    assert out["a"]["R@1"] == 0.0 and out["a"]["R@3"] == 1.0 and out["a"]["answerable"] == 1
    assert out["b"]["R@1"] == 0.0 and out["b"]["R@3"] == 1.0
    assert out["all"] == {"num_questions": 4, "answerable": 2, "skipped": 0, "R@1": 0.0,
                          "R@3": 1.0}


def test_word_passages_cut_the_whole_article_into_disjoint_blocks():
    article = Article("Rhine", (Section("", ("one two three", "four five")),
                                Section("Delta", ("six seven",))), ())
    passages = word_passages(article, words=3)
    assert [p.text for p in passages] == ["one two three", "four five six", "seven"]
    assert [p.section_index for p in passages] == [0, 0, 1]
    assert [p.doc_id for p in passages] == ["Rhine#0", "Rhine#1", "Rhine#2"]


def test_the_command_on_a_tiny_corpus_with_bm25(tmp_path, capsys):
    data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz")
    data_file("odqa/curatedtrec/curated-train.tsv")
    from tt_zoo.cli import odqa as command

    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(r) for r in [
        {"question": "Who was the first to climb Everest with Tenzing?",
         "answers": ["Edmund Hillary"]},
        {"question": "What is the capital of Finland?", "answer_regex": "Helsinki"},
        {"question": "Broken?", "answer_regex": "(x"},
        {"question": "Who is nobody?", "answers": ["Zzyzx Qwertyuiop"]}]) + "\n")
    out = command.main(["--bm25", "--questions", str(questions), "--limit-articles", "60",
                        "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                        "--json-out", str(tmp_path / "out.json")])
    sets = out["benchmark"]["sets"]["q"]
    assert sets["num_questions"] == 3 and len(sets["skipped"]) == 1
    assert sets["answerable"] == 2  # no passage names "Zzyzx Qwertyuiop"
    assert out["results"]["BM25"]["q"]["R@100"] == 1.0
    assert json.loads((tmp_path / "out.json").read_text())["ks"] == [1, 5, 20, 100]
    # The cached answer rows give the same benchmark on a second run.
    again = command.main(["--bm25", "--questions", str(questions), "--limit-articles", "60",
                          "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    assert again["results"] == out["results"]
    assert "Broken" not in capsys.readouterr().out


def test_the_command_table_aligns_counts_wider_than_the_set_name():
    # "all" (3 letters) over 3,026 answerable questions once made a negative pad width, a
    # ValueError after the whole run; the count now sits under its "SET (n)" header.
    from tt_zoo.evaluation.odqa import format_table

    results = {"BM25": {"all": {"answerable": 3026, "R@1": 0.25, "R@5": 0.5}}}
    head, rule, row = format_table(results, (1, 5)).splitlines()
    assert head == "retriever    | all (n)    R@1    R@5"
    assert row == "BM25         |  (3026)   25.0   50.0"
    assert head.index("R@1") + 3 == row.index("25.0") + 4


def test_r_precision_hand_worked():
    # q0: 2 answer passages, top 2 = [4, 2] both hold one: 1. q1: 4 answer passages, capped at
    # the 3 rows ranked, one of [0, 1, 3] holds one: 1/3. q2: no answer passage ranked first.
    ranked = [[4, 2, -1], [0, 1, 3], [5, 6, 7]]
    gold = [frozenset({2, 4}), frozenset({1, 7, 8, 9}), frozenset({6})]
    assert odqa.r_precision(ranked, gold) == pytest.approx((1 + 1 / 3 + 0) / 3)
    with pytest.raises(ValueError, match="must be \\[3, depth\\]"):
        odqa.r_precision(ranked[:2], gold)


def test_rows_of_models_that_share_a_name_are_told_apart():
    """Two exports of one base (each BASE_adapted) would be one row, the later hiding the
    earlier: they get their argument beside the name; a name used once stays bare."""
    from tt_zoo.evaluation.tables import row_labels

    assert row_labels([("minilm_l6_384", "minilm_l6_384"),
                       ("runs/a", "minilm_l6_384_adapted"),
                       ("runs/b", "minilm_l6_384_adapted")]) == [
        "minilm_l6_384", "minilm_l6_384_adapted (runs/a)", "minilm_l6_384_adapted (runs/b)"]
    with pytest.raises(ValueError, match="runs/a is given twice"):
        row_labels([("runs/a", "x"), ("runs/a", "x")])


def test_the_command_refuses_the_same_model_twice(capsys):
    from tt_zoo.cli import odqa as command

    with pytest.raises(SystemExit):
        command.parse_args(["--model", "minilm_l6_384", "--model", "minilm_l6_384"])
    assert "--model minilm_l6_384 is given twice" in capsys.readouterr().err
