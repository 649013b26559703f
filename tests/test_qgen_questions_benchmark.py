"""benchmarks/qgen_questions.py: generated questions over passages as an ODQA question file,
read back by the question-set loader; a passage the generator makes nothing of is skipped, the
draw is the seed's, and an existing file is refused."""

import json

import pytest

from tt_zoo.data.passage_collection import Collection
from tt_zoo.data.question_generation import get_generator

COLLECTION = Collection(
    ids=["Penicillin#0", "Cat#0", "Curie#0"], titles=["Penicillin", "Cat", "Curie"],
    texts=["Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital.",
           "the cat sat on a mat all day long without end.",
           "Marie Curie won the Nobel Prize in 1903 and again in 1911 for chemistry."])


def test_each_usable_passage_gives_one_question_with_its_answer_and_source(tmp_path):
    from benchmarks.qgen_questions import question_lines
    from tt_zoo.data.question_sets import read_questions

    lines = question_lines(COLLECTION, [0, 1, 2], get_generator("cloze"), seed=0)
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == ["qgen-0", "qgen-2"]  # the cat passage makes none
    assert [r["passage"] for r in rows] == ["Penicillin#0", "Curie#0"]
    for row, text in zip(rows, [COLLECTION.texts[0], COLLECTION.texts[2]]):
        (answer,) = row["answers"]
        assert answer in text and answer not in row["question"]
        assert row["question"].endswith("?")
    assert question_lines(COLLECTION, [0, 1, 2], get_generator("cloze"), seed=0) == lines
    path = tmp_path / "qgen.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    assert [q.text for q in read_questions(path).questions] == [r["question"] for r in rows]


def test_an_existing_output_is_refused(tmp_path, capsys):
    from benchmarks import qgen_questions

    out = tmp_path / "mine.jsonl"
    out.write_text("keep me\n")
    with pytest.raises(SystemExit):
        qgen_questions.main(["--output", str(out)])
    assert "exists" in capsys.readouterr().err and out.read_text() == "keep me\n"
