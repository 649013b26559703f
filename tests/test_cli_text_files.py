"""tt_zoo.data.text_files: the .jsonl / .tsv / .txt files of `tt-zoo encode` and `tt-zoo search`;
a malformed record names the file and the line."""

import pytest

from tt_zoo.data.text_files import TextFileError, read_texts


def write(tmp_path, name, content, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_jsonl_with_ids_and_titles(tmp_path):
    path = write(tmp_path, "p.jsonl", '{"id": "a", "title": "T", "text": "one"}\n\n'
                                       '{"id": 7, "text": "two"}\n')
    texts = read_texts(path)
    assert (texts.texts, texts.titles, texts.ids) == (["one", "two"], ["T", ""], ["a", "7"])
    assert texts.has_titles and len(texts) == 2


def test_tsv_with_a_header_and_txt_lines(tmp_path):
    tsv = read_texts(write(tmp_path, "p.tsv", "title\ttext\nRhine\tA river.\n\tNo title.\n"))
    assert (tsv.texts, tsv.titles, tsv.ids) == (["A river.", "No title."], ["Rhine", ""], None)
    assert tsv.ids_or_positions() == ["0", "1"]
    txt = read_texts(write(tmp_path, "q.txt", "who?\r\n\nwhat?\n"))
    assert (txt.texts, txt.has_titles) == (["who?", "what?"], False)


@pytest.mark.parametrize("name, content, message", [
    ("p.jsonl", '{"text": "ok"}\n{"text": "cut\n', r"p.jsonl:2: not valid JSON"),
    ("p.jsonl", '{"text": "ok"}\n["a list"]\n', r"p.jsonl:2: expected a JSON object"),
    ("p.jsonl", '{"title": "no text"}\n', r"p.jsonl:1: expected a \"text\" string \(got none\)"),
    ("p.jsonl", '{"text": 3}\n', r"p.jsonl:1: expected a \"text\" string \(got int\)"),
    ("p.jsonl", '{"text": "a", "title": 1}\n', r"p.jsonl:1: \"title\" must be a string"),
    ("p.jsonl", '{"id": "a", "text": "x"}\n\n{"text": "y"}\n',
     r"p.jsonl:3: give an \"id\" for every record or for none \(line 1 has one\)"),
    ("p.jsonl", '{"text": "x"}\n{"id": "b", "text": "y"}\n',
     r"p.jsonl:2: give an \"id\" for every record or for none \(line 1 has none\)"),
    ("p.jsonl", '{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
     r"p.jsonl:2: id 'a' repeats line 1"),
    ("p.tsv", "title\tbody\nx\ty\n", r"p.tsv:1: the first line must name"),
    ("p.tsv", "id\ttitle\ttext\n1\tRhine\tA river.\n2\tno title\n",
     r"p.tsv:3: 2 tab-separated fields where the header names 3"),
    ("p.csv", "text\nx\n", r"p.csv: expected a .jsonl, .tsv, .txt file"),
    ("p.txt", "\n \n", r"p.txt: holds no texts"),
])
def test_malformed_files_name_the_file_and_line(tmp_path, name, content, message):
    with pytest.raises(TextFileError, match=message):
        read_texts(write(tmp_path, name, content))


def test_undecodable_and_missing_files(tmp_path):
    with pytest.raises(TextFileError, match=r"p.txt:2: not UTF-8 text"):
        read_texts(write(tmp_path, "p.txt", b"fine\n\xff\xfe bad\n", mode="wb"))
    with pytest.raises(TextFileError, match=r"absent.jsonl: no such file"):
        read_texts(tmp_path / "absent.jsonl")
