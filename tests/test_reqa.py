"""ReQA builder, cold-start splits and training pairs, on a hand-made SQuAD-format file."""

import copy
import json

import numpy as np
import pytest

from helpers import P0, P1, P2, hand_made_squad, write_squad
from tt_zoo.data import features
from tt_zoo.evaluation import reqa as reqa_lib


@pytest.fixture
def hand_made(tmp_path):
    return reqa_lib.build_reqa(write_squad(tmp_path, hand_made_squad()))


def test_answer_offsets_in_the_hand_made_file():
    assert P0[36] == "." and P0[24:37] == "It was happy."
    assert P0.index("mat", P0.index("mat") + 1) == 57


def test_candidates_are_deduplicated_sentence_passage_pairs(hand_made):
    assert [(c.sentence, c.passage_index) for c in hand_made.candidates] == [
        ("The cat sat on the mat.", 0), ("It was happy.", 0),
        ("Paris is the capital of France.", 1),
        ("The dog barked.", 2), ("It was happy.", 2)]
    assert [c.passage for c in hand_made.candidates] == [P0, P0, P1, P2, P2]
    r = hand_made.report
    assert (r.articles, r.paragraphs, r.passages, r.sentences) == (2, 4, 3, 9)
    assert r.duplicate_candidates == 4  # the repeat in P0, and P0's three sentences again in Beta
    assert r.questions == 6 and not r.skipped_questions


def test_gold_sentences_checked_by_hand(hand_made):
    gold = {q.id: q.gold_index for q in hand_made.questions}
    assert gold == {"q_first": 0, "q_last": 1, "q_repeat": 0, "q_one": 2,
                    "q_dup_passage": 1, "q_other_passage": 4}
    assert hand_made.question("q_one").text == "What is the capital of France?"


def test_unknown_question_id_is_named(hand_made):
    with pytest.raises(KeyError, match="nope"):
        hand_made.question("nope")


def test_hf_rows_convert_to_the_same_benchmark(hand_made):
    rows = []
    for article in hand_made_squad()["data"]:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                rows.append({"id": qa["id"], "title": article["title"], "context": p["context"],
                             "question": qa["question"],
                             "answers": {
                                 "text": [a["text"] for a in qa["answers"]],
                                 "answer_start": [a["answer_start"] for a in qa["answers"]]}})
    rebuilt = reqa_lib.build_reqa_from_squad(reqa_lib.squad_rows_to_json(rows))
    assert rebuilt.questions == hand_made.questions
    assert rebuilt.candidates == hand_made.candidates


# Bad input: a clear error naming the input with on_error="raise"; skipped and counted with "skip".
def _corrupt(mutate):
    obj = copy.deepcopy(hand_made_squad())
    mutate(obj)
    return obj


BAD_INPUTS = {
    "missing_field": (lambda o: o["data"][0]["paragraphs"][0]["qas"][1].pop("question"),
                      "q_last", "missing field 'question'"),
    "answer_outside_passage": (
        lambda o: o["data"][0]["paragraphs"][1]["qas"][0]["answers"][0].update(answer_start=99),
        "q_one", "outside its passage"),
    "answer_text_mismatch": (
        lambda o: o["data"][1]["paragraphs"][1]["qas"][0]["answers"][0].update(answer_start=0),
        "q_other_passage", "does not match"),
    "duplicate_id": (lambda o: o["data"][1]["paragraphs"][0]["qas"][0].update(id="q_first"),
                     "q_first", "duplicate question id"),
    "wrong_type": (
        lambda o: o["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start="0"),
        "q_first", "must be int"),
}


@pytest.mark.parametrize("reason", sorted(BAD_INPUTS))
def test_bad_question_raises_naming_the_id(tmp_path, reason):
    mutate, qid, message = BAD_INPUTS[reason]
    path = write_squad(tmp_path, _corrupt(mutate))
    with pytest.raises(reqa_lib.ReQAFormatError, match=message) as info:
        reqa_lib.build_reqa(path)
    assert qid in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("reason", sorted(BAD_INPUTS))
def test_bad_question_is_skipped_and_counted(tmp_path, reason):
    mutate, qid, _ = BAD_INPUTS[reason]
    reqa = reqa_lib.build_reqa(write_squad(tmp_path, _corrupt(mutate)), on_error="skip")
    assert len(reqa.questions) == 5
    assert dict(reqa.report.skipped_questions) == {reason: 1}


def test_empty_passage_raises_naming_article_and_paragraph(tmp_path):
    obj = _corrupt(lambda o: o["data"][1]["paragraphs"][1].update(context="   \n "))
    with pytest.raises(reqa_lib.ReQAFormatError,
                       match=r"article 1 \('Beta'\), paragraph 1: empty passage.*q_other_passage"):
        reqa_lib.build_reqa(write_squad(tmp_path, obj))
    reqa = reqa_lib.build_reqa(write_squad(tmp_path, obj), on_error="skip")
    assert len(reqa.questions) == 5 and len(reqa.candidates) == 3
    assert reqa.report.skipped_questions == {"empty_passage": 1}
    assert reqa.report.skipped_paragraphs == {"empty_passage": 1}


def test_missing_paragraph_field_and_bad_file(tmp_path):
    obj = _corrupt(lambda o: o["data"][0]["paragraphs"][1].pop("context"))
    with pytest.raises(reqa_lib.ReQAFormatError, match="article 0 .*paragraph 1: missing field"):
        reqa_lib.build_reqa(write_squad(tmp_path, obj))
    with pytest.raises(reqa_lib.ReQAFormatError, match="missing field 'data'"):
        reqa_lib.build_reqa(write_squad(tmp_path, {"version": "1.1"}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(reqa_lib.ReQAFormatError, match="bad.json: not valid JSON"):
        reqa_lib.build_reqa(bad)
    with pytest.raises(FileNotFoundError, match="absent.json"):
        reqa_lib.build_reqa(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="on_error"):
        reqa_lib.build_reqa(write_squad(tmp_path, hand_made_squad()), on_error="ignore")


# Splits.
def synthetic_reqa(n=1000):
    cands = [reqa_lib.Candidate(f"s{i}", f"p{i}", i) for i in range(10)]
    qs = [reqa_lib.Question(f"q{i}", f"question {i}", i % 10) for i in range(n)]
    return reqa_lib.ReQA(qs, cands, reqa_lib.ReQAReport(), source="synthetic")


@pytest.mark.parametrize("fraction,sizes", [(0.01, (9, 1, 990)), (0.05, (45, 5, 950)),
                                            (0.8, (720, 80, 200))])
def test_split_sizes_and_disjoint(fraction, sizes):
    reqa = synthetic_reqa()
    split = reqa_lib.make_splits(reqa, fraction, seed=3)
    assert (len(split.train), len(split.validation), len(split.test)) == sizes
    parts = [set(split.train), set(split.validation), set(split.test)]
    assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    assert set().union(*parts) == set(reqa.question_ids)


def test_split_is_seed_stable_and_seeds_differ():
    reqa = synthetic_reqa()
    a = reqa_lib.make_splits(reqa, 0.05, seed=0)
    b = reqa_lib.make_splits(reqa, 0.05, seed=0)
    c = reqa_lib.make_splits(reqa, 0.05, seed=1)
    assert (a.train, a.validation, a.test) == (b.train, b.validation, b.test)
    assert set(a.train) != set(c.train)


def test_split_bad_fractions():
    reqa = synthetic_reqa(50)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="train_fraction"):
            reqa_lib.make_splits(reqa, bad)
    with pytest.raises(ValueError, match="0 training"):
        reqa_lib.make_splits(reqa, 0.01)  # round(0.5) = 0 questions


def test_split_save_load_roundtrip(tmp_path):
    split = reqa_lib.make_splits(synthetic_reqa(), 0.8, seed=7)
    path = tmp_path / "sub" / "split.json"
    reqa_lib.save_split(split, path)
    assert [p.name for p in path.parent.iterdir()] == ["split.json"]  # no temp file left
    loaded = reqa_lib.load_split(path)
    assert (loaded.train, loaded.validation, loaded.test) == (split.train, split.validation,
                                                              split.test)
    assert loaded.meta["seed"] == 7


def test_load_split_rejects_overlap_naming_the_file(tmp_path):
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"train": ["a", "b"], "validation": [], "test": ["b"]}))
    with pytest.raises(ValueError, match=r"split.json: train and test share question ids.*'b'"):
        reqa_lib.load_split(path)
    path.write_text(json.dumps({"train": ["a"], "test": ["b"]}))
    with pytest.raises(ValueError, match="'validation' must be a list"):
        reqa_lib.load_split(path)


def test_training_pairs_are_gold_sentence_and_passage(hand_made):
    ds = reqa_lib.training_pairs(hand_made, ["q_last", "q_other_passage"])
    rows = [{k: v.numpy().decode() for k, v in ex.items()} for ex in ds]
    assert rows == [
        {features.QUERY: "How did it end?", features.DOC_TITLE: "It was happy.",
         features.DOC_TEXT: P0, features.DOC_ID: "1"},
        {features.QUERY: "Was the dog happy?", features.DOC_TITLE: "It was happy.",
         features.DOC_TEXT: P2, features.DOC_ID: "4"}]
    batch = next(iter(ds.batch(2)))
    assert batch[features.QUERY].shape == (2,)
    with pytest.raises(KeyError, match="missing_id"):
        reqa_lib.training_pairs(hand_made, ["missing_id"])


def test_squad_dev_counts():
    from conftest import data_file

    reqa = reqa_lib.build_reqa(data_file("squad/dev-v1.1.json"))
    print(reqa.summary())
    assert len(reqa.questions) == 10570
    assert len(reqa.candidates) == 10255
    assert reqa.report.passages == 2067
    assert not reqa.report.skipped_questions
    golds = np.array([q.gold_index for q in reqa.questions])
    assert golds.min() >= 0 and golds.max() < len(reqa.candidates)
    # Each gold sentence holds its answer text for a sample of questions.
    squad = json.loads(data_file("squad/dev-v1.1.json").read_text())
    answers = {qa["id"]: qa["answers"][0]["text"] for a in squad["data"]
               for p in a["paragraphs"] for qa in p["qas"]}
    for q in reqa.questions[::97]:
        first_word = answers[q.id].split()[0]
        assert first_word in reqa.candidates[q.gold_index].sentence, q.id
