"""benchmarks/reqa_questions.py: the ReQA split's training questions as an ODQA question file,
never a test question, read back by the question-set loader; an existing file refused."""

import json

import pytest

from helpers import hand_made_squad, write_squad


def test_the_training_part_is_written_and_the_test_part_never(tmp_path):
    from benchmarks import reqa_questions
    from tt_zoo.data.question_sets import read_questions
    from tt_zoo.evaluation.reqa import build_reqa, make_splits

    squad = write_squad(tmp_path, hand_made_squad())
    out = tmp_path / "questions" / "train.jsonl"
    record = reqa_questions.main(["--squad", str(squad), "--output", str(out),
                                  "--split-fraction", "0.5"])
    split = make_splits(build_reqa(squad), 0.5, seed=0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == list(split.train) and record["questions"] == len(rows)
    assert not set(split.test) & {r["id"] for r in rows}
    by_id = {q["id"]: q for d in hand_made_squad()["data"] for p in d["paragraphs"]
             for q in p["qas"]}
    assert all(r["answers"] == [by_id[r["id"]]["answers"][0]["text"]] for r in rows)
    loaded = read_questions(out)
    assert [q.text for q in loaded.questions] == [r["question"] for r in rows]


def test_an_existing_output_is_refused(tmp_path, capsys):
    from benchmarks import reqa_questions

    out = tmp_path / "mine.jsonl"
    out.write_text("keep me\n")
    with pytest.raises(SystemExit):
        reqa_questions.main(["--squad", str(write_squad(tmp_path, hand_made_squad())),
                             "--output", str(out)])
    assert "exists" in capsys.readouterr().err and out.read_text() == "keep me\n"
