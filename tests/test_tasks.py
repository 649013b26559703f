"""Tests for tt_zoo.data.tasks: Task validation, few-shot subsampling, replaced confounders,
task markers (Maillard et al. 2021, Sec. 4.3) and the task JSONL format."""

import dataclasses
import gzip
import json
import re

import pytest

from tt_zoo.data.tasks import (Document, Task, TaskExample, TaskFormatError, marker_token,
                               read_task_jsonl, text_document_id, with_marker,
                               write_task_jsonl)
from tt_zoo.errors import TtZooError


def _doc(i, title="T"):
    return Document(id=f"d{i}", title=f"{title}{i}", text=f"passage {i}")


def _examples(n):
    return tuple(TaskExample(query=f"q{i}", positives=(_doc(i),)) for i in range(n))


def _task(n=5, **kwargs):
    return Task(name=kwargs.pop("name", "toy"), task_class=kwargs.pop("task_class", "qa"),
                examples=_examples(n), **kwargs)


def _write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


GOOD = json.dumps({"query": "who", "positives": ["a passage"]})


# ----------------------------------------------------------------------------- Task

def test_task_validation_errors():
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        Task(name="", task_class="qa", examples=_examples(1))
    for bad in ("QA", "fact-checking", "", "1qa", None):
        with pytest.raises(ValueError, match="task class must be a lower-case word"):
            Task(name="t", task_class=bad, examples=_examples(1))
    with pytest.raises(ValueError, match="'t' has no training examples"):
        Task(name="t", task_class="qa", examples=())
    task = _task(3, task_class="fact_checking")
    assert len(task) == 3 and task.examples[0].positive == _doc(0)
    assert task.describe() == {"name": "toy", "task_class": "fact_checking", "examples": 3,
                               "knowledge_source": "", "validation": [], "stats": {}}


def test_subsample_is_seeded_deterministic_and_keeps_order():
    task = _task(10)
    a, b = task.subsample(4, seed=3), task.subsample(4, seed=3)
    assert a.examples == b.examples and len(a) == 4
    positions = [task.examples.index(e) for e in a.examples]
    assert positions == sorted(positions) and len(set(positions)) == 4
    assert a.stats["subsample"] == {"examples": 4, "of": 10, "seed": 3}
    assert task.stats == {}  # the original is untouched
    # Other seeds draw other subsets (not all 8 seeds can give the same 4 of 10).
    assert len({task.subsample(4, seed=s).examples for s in range(8)}) > 1
    assert task.subsample(10) is task and task.subsample(11) is task


def test_subsample_bad_n():
    task = _task(3)
    for bad in (0, -1, 2.0, "2", None):
        with pytest.raises(ValueError, match="n must be a positive int"):
            task.subsample(bad)


def test_with_negatives():
    task = _task(2)
    with pytest.raises(ValueError, match=r"'toy': 1 negative lists for 2 examples"):
        task.with_negatives([[_doc(9)]], how="bm25")
    remined = task.with_negatives([[_doc(7)], [_doc(8), _doc(9)]], how="model top-k")
    assert [e.negatives for e in remined.examples] == [(_doc(7),), (_doc(8), _doc(9))]
    assert [e.positives for e in remined.examples] == [e.positives for e in task.examples]
    assert remined.stats == {"negatives": "model top-k"}
    assert task.examples[0].negatives == ()


# ----------------------------------------------------------------------------- markers

def test_marker_token_and_with_marker():
    assert marker_token("qa") == "ttzootaskqa"
    assert marker_token("self_supervised") == "ttzootaskselfsupervised"
    assert with_marker("who is x", "qa") == "ttzootaskqa who is x"
    with pytest.raises(ValueError, match="task class must be a lower-case word"):
        marker_token("Self Supervised")


def test_marker_word_is_one_token_once_in_the_vocabulary():
    import tensorflow as tf  # noqa: PLC0415 (the only test here that needs TensorFlow)

    from tt_zoo.data.text import TextPreprocessor  # noqa: PLC0415

    # "ttzoo" and "##taskqa" are there too: WordPiece matches the longest whole entry first.
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "who", "is", "x", "ttzoo", "##taskqa",
             marker_token("qa")]
    pre = TextPreprocessor(vocab, seq_length=8)
    ids = pre(tf.constant([with_marker("who is x", "qa")]))["input_word_ids"].numpy()
    # [CLS] ttzootaskqa who is x [SEP] [PAD] [PAD]
    assert ids.tolist() == [[2, 9, 4, 5, 6, 3, 0, 0]]


def test_default_id_is_the_rule_of_text_document_ids():
    import tensorflow as tf  # noqa: PLC0415

    from tt_zoo.modeling.pair_model import text_document_ids  # noqa: PLC0415

    titles, texts = ["Hamlet", "", "Ünïcode"], ["a play", "bare text", "ß and 字"]
    in_graph = text_document_ids(tf.constant(titles), tf.constant(texts)).numpy()
    assert [i.decode("utf-8") for i in in_graph] == [
        text_document_id(t, x) for t, x in zip(titles, texts)]
    assert text_document_id("Hamlet", "a play") == "Hamlet\x1fa play"


# ----------------------------------------------------------------------------- JSONL

def test_jsonl_round_trip(tmp_path):
    examples = (
        TaskExample(query="who wrote hamlet",
                    positives=(Document("p17", "Hamlet", "A play by Shakespeare."),
                               Document("p18", "", "Shakespeare wrote it.")),
                    negatives=(Document("n1", "Macbeth", "Another play."),),
                    answers=("Shakespeare", "William Shakespeare"),
                    answer_regex=r"(William )?Shakespeare"),
        TaskExample(query="naïve café “quotes”\u2028line", positives=(_doc(1),)),
    )
    task = Task(name="toy", task_class="qa", examples=examples)
    path = tmp_path / "out" / "webq.jsonl"
    assert write_task_jsonl(task, path) == str(path)
    back = read_task_jsonl(path, knowledge_source="wiki", validation=["webq-dev"])
    assert back.examples == examples
    assert (back.name, back.task_class, back.knowledge_source, back.validation) == (
        "webq", "qa", "wiki", ("webq-dev",))
    assert back.stats == {"file": str(path)}
    # Every field is spelt out, ids included.
    # (split on "\n" only: U+2028 inside a string is not a line break of the file)
    first = json.loads(path.read_text(encoding="utf-8").split("\n")[1])
    assert first == {"query": "naïve café “quotes”\u2028line",
                     "positives": [{"id": "d1", "title": "T1", "text": "passage 1"}],
                     "negatives": [], "answers": [], "answer_regex": None}
    # Rewriting replaces the file atomically and leaves no temp file beside it.
    write_task_jsonl(task.subsample(1, seed=0), path)
    assert len(read_task_jsonl(path)) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["webq.jsonl"]


def test_jsonl_gzip_and_name(tmp_path):
    task = _task(3)
    path = tmp_path / "trec.jsonl.gz"
    write_task_jsonl(task, path)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 3
    back = read_task_jsonl(path, task_class="self_supervised")
    assert back.examples == task.examples
    assert (back.name, back.task_class) == ("trec", "self_supervised")
    assert read_task_jsonl(path, name="other").name == "other"


def test_bare_string_documents_and_default_ids(tmp_path):
    path = _write_lines(tmp_path / "t.jsonl", [
        json.dumps({"query": "q1", "positives": ["bare text", {"title": "T", "text": "x"}],
                    "negatives": [{"title": "T", "text": "x", "id": "given"}]}),
        "",
        "   ",
        json.dumps({"query": "q2", "positives": [{"title": "", "text": "bare text"}]}),
    ])
    task = read_task_jsonl(path)
    assert len(task) == 2
    first, second = task.examples
    assert first.positives == (Document("\x1fbare text", "", "bare text"),
                               Document("T\x1fx", "T", "x"))
    assert first.negatives == (Document("given", "T", "x"),)
    assert (first.answers, first.answer_regex) == ((), None)
    # Equal (title, text) gives equal ids, whether bare string or object.
    assert second.positive.id == first.positive.id == text_document_id("", "bare text")


@pytest.mark.parametrize("line, expected", [
    ("{not json", "not valid JSON"),
    ('["query", "positives"]', "expected a JSON object"),
    ('{"positives": ["p"]}', "'query' must be a non-empty string"),
    ('{"query": "  ", "positives": ["p"]}', "'query' must be a non-empty string"),
    ('{"query": "q"}', re.escape("'positives' must be a non-empty list of documents "
                                 '({"title", "text", "id"?} or strings) (got None)')),
    ('{"query": "q", "positives": []}', "'positives' must be a non-empty list"),
    ('{"query": "q", "positives": "p"}', "'positives' must be a non-empty list"),
    ('{"query": "q", "positives": ["p", 3]}', r"'positives'\[1\] must be a document"),
    ('{"query": "q", "positives": [{"text": "t"}]}',
     r"'positives'\[0\]\['title'\] must be a string"),
    ('{"query": "q", "positives": [{"title": "t", "txt": "t"}]}',
     r"'positives'\[0\] has unknown key\(s\) \['txt'\]"),
    ('{"query": "q", "positives": [{"title": "t", "text": "t", "id": 7}]}',
     r"'positives'\[0\]\['id'\] must be a non-empty string"),
    ('{"query": "q", "positives": ["p"], "negatives": "n"}', "'negatives' must be a list"),
    ('{"query": "q", "positives": ["p"], "negatives": [null]}',
     r"'negatives'\[0\] must be a document"),
    ('{"query": "q", "positives": ["p"], "negative": ["n"]}',
     r"unknown key\(s\) \['negative'\]"),
    ('{"query": "q", "positives": ["p"], "answers": "a"}', "'answers' must be a list of strings"),
    ('{"query": "q", "positives": ["p"], "answers": [1]}', "'answers' must be a list of strings"),
    ('{"query": "q", "positives": ["p"], "answer_regex": 1}', "'answer_regex' must be a string"),
    ('{"query": "q", "positives": ["p"], "answer_regex": "(a"}',
     r"'answer_regex' '\(a' is not a valid Python regular expression"),
])
def test_malformed_line_names_file_and_line(tmp_path, line, expected):
    # Line 1 good, line 2 blank (still counted), line 3 good, line 4 the bad one.
    path = _write_lines(tmp_path / "tasks.jsonl", [GOOD, "", GOOD, line, GOOD])
    with pytest.raises(TaskFormatError, match=re.escape(f"{path}:4: ") + expected):
        read_task_jsonl(path)


def test_bad_utf8_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b'{"query": "\xff"}\n')
    with pytest.raises(TaskFormatError, match=re.escape(f"{path}:2: not UTF-8")):
        read_task_jsonl(path)


def test_missing_and_empty_files(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(TaskFormatError, match=re.escape(f"{missing} does not exist")):
        read_task_jsonl(missing)
    with pytest.raises(TaskFormatError, match=re.escape(f"{tmp_path} does not exist or is not "
                                                        "a file")):
        read_task_jsonl(tmp_path)
    for content in ("", "\n  \n\n"):
        empty = tmp_path / "empty.jsonl"
        empty.write_text(content)
        with pytest.raises(TaskFormatError, match=re.escape(f"{empty} holds no examples")):
            read_task_jsonl(empty)


def test_task_format_error_is_a_tt_zoo_value_error(tmp_path):
    assert issubclass(TaskFormatError, TtZooError) and issubclass(TaskFormatError, ValueError)
    path = _write_lines(tmp_path / "t.jsonl", [GOOD])
    with pytest.raises(ValueError, match="task class must be a lower-case word"):
        read_task_jsonl(path, task_class="QA")
    with pytest.raises(TypeError, match="not a single string"):
        read_task_jsonl(path, validation="webq-dev")


def test_read_is_plain_python(tmp_path):
    """Task files are read without TensorFlow (any source can produce a task)."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    path = _write_lines(tmp_path / "t.jsonl", [GOOD])
    code = ("import sys; from tt_zoo.data.tasks import read_task_jsonl; "
            f"read_task_jsonl({str(path)!r}); print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_task_examples_are_frozen():
    task = _task(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.examples[0].query = "changed"


def test_one_example_per_positive_expands_up_to_the_limit():
    from tt_zoo.data.tasks import Document, Task, TaskExample

    a, b, c = (Document(i, "t", f"text {i}") for i in "abc")
    neg = Document("n", "t", "negative")
    task = Task("qa", "qa", (TaskExample("q1", (a, b, c), (neg,), ("x",)),
                             TaskExample("q2", (b,), (neg,))))
    assert task.one_example_per_positive(1) is task
    two = task.one_example_per_positive(2)
    assert [(e.query, e.positive.id) for e in two.examples] == [("q1", "a"), ("q1", "b"),
                                                               ("q2", "b")]
    assert all(e.negatives == (neg,) for e in two.examples)
    assert two.examples[1].answers == ("x",)
    assert two.stats["positives_per_question"] == {"limit": 2, "questions": 2, "examples": 3}
    with pytest.raises(ValueError, match="limit must be a positive int"):
        task.one_example_per_positive(0)
