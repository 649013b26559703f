"""Tests for tt_zoo.data.article_sources: JSON Lines, Hugging Face datasets and the dispatcher."""

import gzip
import json
import os

import pytest

from conftest import data_file
from tt_zoo.data import article_sources
from tt_zoo.data.article_sources import (ArticleFormatError, read_articles, read_hf_articles,
                                         read_jsonl_articles, text_to_sections, write_jsonl_articles)
from tt_zoo.data.articles import Article, ReadReport, Section

TABLES = "wikitext/enwiki-table-markup.xml.bz2"
SHORTENED = "wikitext/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"

ARTICLES = [
    Article("Penicillin", (Section("", ("Penicillin is a group of antibiotics.",
                                        "It was discovered in 1928 by Alexander Fleming.")),
                           Section("Medical uses", ("Penicillins are used against bacteria.",))),
            links=("Antibiotic", "Alexander Fleming")),
    Article("Café Ünïcode — “quotes”", (Section("", ("Unicode text survives the round trip.",)),)),
]


@pytest.mark.parametrize("name", ["articles.jsonl", "articles.jsonl.gz"])
def test_jsonl_round_trip(tmp_path, name):
    path = tmp_path / "out" / name
    assert write_jsonl_articles(ARTICLES, path) == 2
    assert os.listdir(path.parent) == [name]  # no temp file left behind
    report = ReadReport()
    assert list(read_jsonl_articles(path, report=report, progress=False)) == ARTICLES
    assert report.as_dict() == {"kept": 2, "skipped": {}}
    if name.endswith(".gz"):
        assert gzip.decompress(path.read_bytes()).count(b"\n") == 2


def test_jsonl_round_trip_of_real_dump_articles(tmp_path):
    from tt_zoo.data.mediawiki import read_mediawiki_dump
    articles = list(read_mediawiki_dump(data_file(TABLES), progress=False))
    path = tmp_path / "tables.jsonl"
    write_jsonl_articles(articles, path)
    assert list(read_articles(str(path), progress=False)) == articles


def test_interrupted_write_leaves_nothing(tmp_path):
    def articles():
        yield ARTICLES[0]
        raise RuntimeError("source broke")

    path = tmp_path / "partial.jsonl"
    with pytest.raises(RuntimeError, match="source broke"):
        write_jsonl_articles(articles(), path)
    assert os.listdir(tmp_path) == []


def _write_lines(path, lines):
    path.write_bytes(b"\n".join(lines) + b"\n")


GOOD = json.dumps(ARTICLES[0].to_json()).encode()


@pytest.mark.parametrize("bad_line, reason, message", [
    (b'{"title": "Broken", "sections": [', "malformed_json", "not valid JSON"),
    ("{\"title\": \"Caf\u00e9\"}".encode("latin-1"), "bad_utf8", "not UTF-8"),
    (b'{"title": "X", "sections": [{"heading": "", "paragraphs": "not a list"}]}', "bad_record",
     "paragraphs"),
    (b'["a", "list"]', "bad_record", "JSON object"),
])
def test_bad_jsonl_line_raises_or_is_counted(tmp_path, bad_line, reason, message):
    path = tmp_path / "bad.jsonl"
    _write_lines(path, [GOOD, b"", bad_line, GOOD])
    with pytest.raises(ArticleFormatError, match=rf"bad\.jsonl, line 3: .*{message}"):
        list(read_jsonl_articles(path, progress=False))
    report = ReadReport()
    articles = list(read_jsonl_articles(path, report=report, progress=False, on_error="skip"))
    assert articles == [ARTICLES[0], ARTICLES[0]]
    assert report.as_dict() == {"kept": 2, "skipped": {reason: 1}}


def test_empty_jsonl_article_is_skipped_and_counted(tmp_path):
    path = tmp_path / "empty.jsonl"
    empty = Article("Nothing", (Section("", ()),))
    write_jsonl_articles([empty, ARTICLES[1]], path)
    report = ReadReport()
    assert list(read_jsonl_articles(path, report=report, progress=False)) == [ARTICLES[1]]
    assert report.as_dict() == {"kept": 1, "skipped": {"empty_article": 1}}


# A page in the plain-text layout of the Hugging Face "wikipedia" datasets: headings are
# one-line paragraphs of their own.
WIKI_TEXT = """Penicillin is a group of beta-lactam antibiotics.

It was among the first medications effective against many bacterial infections.

Medical uses

The term penicillin is often used generically to refer to benzylpenicillin.

History

Discovery

In 1928 Alexander Fleming noticed a mould that killed bacteria.

See also

Antibiotic resistance in bacteria and more

References"""


def test_text_to_sections_wikipedia_layout():
    sections = text_to_sections(WIKI_TEXT, title="Penicillin")
    assert [s.heading for s in sections] == ["", "Medical uses", "Discovery"]
    assert sections[0].paragraphs == (
        "Penicillin is a group of beta-lactam antibiotics.",
        "It was among the first medications effective against many bacterial infections.")
    assert sections[2].paragraphs == ("In 1928 Alexander Fleming noticed a mould that killed bacteria.",)
    # "History" has no paragraph of its own; "See also" is dropped; the final "References"
    # line is not followed by anything, so it is not a heading (and is too short to keep).


def test_text_to_sections_markup_title_line_and_single_newlines():
    text = "Foo\n== Body ==\nThe body is a paragraph of text.\nA second line is a second paragraph."
    sections = text_to_sections(text, title="Foo")
    assert sections == (Section("", ()), Section("Body", (
        "The body is a paragraph of text.", "A second line is a second paragraph.")))


@pytest.fixture
def hf_dataset():
    datasets = pytest.importorskip("datasets")
    return datasets.Dataset.from_dict({
        "title": ["Penicillin", "", "Empty", "Caffeine"],
        "text": [WIKI_TEXT, "No title here but some text.", "Short.",
                 "Caffeine is a central nervous system stimulant."],
        "outlinks": [["antibiotic", "Alexander_Fleming", "antibiotic"], [], [], []],
    })


def test_read_hf_articles_in_memory(hf_dataset):
    report = ReadReport()
    articles = list(read_hf_articles(hf_dataset, links_column="outlinks", report=report,
                                     progress=False))
    assert [a.title for a in articles] == ["Penicillin", "Caffeine"]
    assert articles[0].sections == text_to_sections(WIKI_TEXT, "Penicillin")
    assert articles[0].links == ("Antibiotic", "Alexander Fleming")
    assert articles[1].lead.paragraphs == ("Caffeine is a central nervous system stimulant.",)
    assert report.as_dict() == {"kept": 2, "skipped": {"empty_article": 1, "missing_title": 1}}


def test_read_hf_articles_missing_column_lists_columns(hf_dataset):
    with pytest.raises(ValueError, match=r"\['body'\].*\['title', 'text', 'outlinks'\]"):
        read_hf_articles(hf_dataset, text_column="body")


def test_read_hf_articles_bad_row(hf_dataset):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"title": ["A", "B"], "text": ["A is the first letter.", "x"],
                                     "links": [["B"], None]})
    assert [a.links for a in read_hf_articles(ds, links_column="links", progress=False)] == [("B",)]
    ds = datasets.Dataset.from_dict({"title": ["A", "B"], "n": [1, 2]})
    with pytest.raises(ArticleFormatError, match=r"row 0 \(title 'A'\): 'n' must be a string"):
        list(read_hf_articles(ds, text_column="n", progress=False))
    report = ReadReport()
    assert list(read_hf_articles(ds, text_column="n", progress=False, report=report,
                                 on_error="skip")) == []
    assert report.as_dict() == {"kept": 0, "skipped": {"bad_row": 2}}


def test_read_hf_saved_to_disk_and_dispatch(tmp_path, hf_dataset):
    datasets = pytest.importorskip("datasets")
    expected = list(read_hf_articles(hf_dataset, progress=False))
    saved = tmp_path / "saved"
    hf_dataset.save_to_disk(str(saved))
    assert list(read_hf_articles(str(saved), progress=False)) == expected
    assert list(read_articles(str(saved), progress=False)) == expected
    assert list(read_articles("hf:" + str(saved), progress=False)) == expected
    # A DatasetDict picks the split, and names the splits when it is missing.
    dict_dir = tmp_path / "dict"
    datasets.DatasetDict({"train": hf_dataset}).save_to_disk(str(dict_dir))
    assert list(read_articles(str(dict_dir), progress=False)) == expected
    with pytest.raises(ValueError, match=r"no split 'test'.*\['train'\]"):
        read_hf_articles(str(dict_dir), split="test")


def test_read_articles_dispatches_xml_dumps():
    tables = list(read_articles(str(data_file(TABLES)), progress=False))
    assert len(tables) == 5
    # A partitioned dump name (*.xml-p...-shortened.bz2); reader kwargs pass through.
    report = ReadReport()
    first = list(read_articles(str(data_file(SHORTENED)), report=report, progress=False,
                               max_pages=2))
    assert [a.title for a in first] == ["Anarchism"]
    assert report.as_dict() == {"kept": 1, "skipped": {"redirect": 1}}


def test_read_articles_dispatches_wikispeedia(tmp_path, monkeypatch):
    calls = []
    fake = lambda source, report=None, progress=True: calls.append(source) or iter(ARTICLES)
    monkeypatch.setattr(article_sources, "read_wikispeedia", fake)
    (tmp_path / "plaintext_articles").mkdir()
    assert list(read_articles(str(tmp_path), progress=False)) == ARTICLES
    shared = data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz")
    list(read_articles(str(shared.parent)))
    list(read_articles(str(shared)))
    assert calls == [str(tmp_path), str(shared.parent), str(shared)]


def test_read_articles_unknown_source(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"(?s)notes\.txt.*\*\.xml\.bz2.*\*\.jsonl.*Wikispeedia.*hf:NAME"):
        read_articles(str(tmp_path / "notes.txt"))
    with pytest.raises(FileNotFoundError, match=r"(?s)missing\.jsonl.*Accepted sources"):
        read_articles(str(tmp_path / "missing.jsonl"))
