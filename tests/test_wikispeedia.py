"""Tests of the Wikispeedia reader on the real SNAP tarballs and on tiny hand-made folders."""

import pathlib

import pytest

from conftest import data_file
from tt_zoo.data.articles import ReadReport
from tt_zoo.data.wikispeedia import decode_title, parse_plaintext, read_wikispeedia

TITLES = ["Áedán mac Gabráin", "Cyrus the Great", "Stuttering", "Earth"]


@pytest.fixture(scope="module")
def real():
    folder = data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz").parent
    data_file("wikispeedia/wikispeedia_paths-and-graph.tar.gz")
    report = ReadReport()
    articles = {a.title: a for a in read_wikispeedia(folder, report, progress=False, titles=TITLES)}
    return articles, report


def test_reads_the_named_articles_from_the_tarballs(real):
    articles, report = real
    assert sorted(articles) == sorted(TITLES)
    assert report.kept == len(TITLES)


def test_title_is_url_decoded():
    assert decode_title("%C3%81ed%C3%A1n_mac_Gabr%C3%A1in") == "Áedán mac Gabráin"
    assert decode_title("Dallas%2C_Texas") == "Dallas, Texas"


def test_lead_section_first_words_and_caption_before_it_dropped(real):
    aedan = real[0]["Áedán mac Gabráin"]
    assert aedan.sections[0].heading == ""
    # The file opens with an image caption ("Satellite image ... Enlarge ..."), then the lead.
    assert aedan.lead.paragraphs[0].startswith("Áedán mac Gabráin was king of Dál Riata, a kingdom")
    assert aedan.lead.paragraphs[0].endswith("died in about 608.")
    stutter = real[0]["Stuttering"]
    assert stutter.lead.paragraphs[0].startswith("Stuttering, also known as stammering in the")


def test_known_headings_in_page_order(real):
    headings = [s.heading for s in real[0]["Áedán mac Gabráin"].sections]
    assert headings[:5] == ["", "Background", "Neighbours", "Reign", "Degsastan and after"]


def test_captions_infoboxes_and_footer_dropped(real):
    articles = real[0]
    text = " ".join(p for a in articles.values() for p in a.paragraphs)
    assert "Enlarge" not in text
    assert "Satellite image of northern Britain" not in text
    assert "Footprint used in king-making ceremonies" not in text
    assert "Homa griffin" not in text            # a caption of its own block (Cyrus the Great)
    assert "Place of birth" not in text          # the Cyrus infobox
    assert "Classifications and external resources" not in text  # the Stuttering infobox
    assert "Retrieved from" not in text and "GNU Free" not in text
    # Wrapped lines are joined into one paragraph with single spaces.
    assert "  " not in text and "\n" not in text


def test_caption_attached_to_paragraph_is_cut_and_paragraph_kept(real):
    cyrus = real[0]["Cyrus the Great"]
    text = " ".join(cyrus.paragraphs)
    # In the file the caption follows this paragraph without a blank line, then "Enlarge".
    assert "fought on horseback and on foot." in text
    assert "tomb lies in the ruins of Pasargadae, now a UNESCO" not in text


def test_known_links_present_and_decoded(real):
    aedan = real[0]["Áedán mac Gabráin"]
    assert {"Bede", "Columba", "Dál Riata", "Isle of Man"} <= set(aedan.links)
    assert len(aedan.links) == len(set(aedan.links))


def _write_folder(root: pathlib.Path, files: dict, links: str, articles: str):
    (root / "plaintext_articles").mkdir()
    for name, content in files.items():
        (root / "plaintext_articles" / name).write_bytes(content)
    graph = root / "wikispeedia_paths-and-graph"
    graph.mkdir()
    (graph / "links.tsv").write_text(links, encoding="utf-8")
    (graph / "articles.tsv").write_text(articles, encoding="utf-8")


ARTICLE = """   #copyright

{title}

2007 Schools Wikipedia Selection. Related subjects: Things that wrap over
two lines

   A small picture.
   Enlarge
   A small picture.

   The lead sentence of {title} is here and it is long enough to wrap over
   two lines of text.

First heading

   Body text of the first section, which is a single line of prose.
   Retrieved from " http://en.wikipedia.org/wiki/{title}"
"""


def test_extracted_folder_counts_missing_links_empty_and_non_utf8(tmp_path):
    files = {
        "Caf%C3%A9_A.txt": ARTICLE.format(title="Café A").encode("utf-8"),
        "B.txt": ARTICLE.format(title="B").encode("utf-8").replace(b"Body", b"B\xe9dy"),
        "Empty.txt": b"   #copyright\n\nEmpty\n\n2007 Schools Wikipedia Selection.\n\n",
    }
    links = "# comment\n\nCaf%C3%A9_A\tB\nCaf%C3%A9_A\tNowhere\nB\tCaf%C3%A9_A\nB\tB\n"
    _write_folder(tmp_path, files, links, "# list\nCaf%C3%A9_A\nB\nEmpty\n")
    report = ReadReport()
    articles = {a.title: a for a in read_wikispeedia(tmp_path, report, progress=False)}
    assert sorted(articles) == ["B", "Café A"]
    assert report.as_dict() == {"kept": 2, "skipped": {
        "empty_article": 1, "link_to_missing_page": 1, "not_utf8_decoded_with_replacement": 1,
        "self_link": 1}}
    cafe = articles["Café A"]
    assert cafe.links == ("B",)
    assert [s.heading for s in cafe.sections] == ["", "First heading"]
    assert cafe.lead.paragraphs == ("The lead sentence of Café A is here and it is long enough "
                                    "to wrap over two lines of text.",)
    assert "\ufffd" in articles["B"].sections[1].paragraphs[0]


def test_bad_links_line_names_the_line(tmp_path):
    _write_folder(tmp_path, {"A.txt": ARTICLE.format(title="A").encode()}, "A\tB\tC\n", "A\n")
    with pytest.raises(ValueError, match="links.tsv line 1"):
        list(read_wikispeedia(tmp_path, progress=False))


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="links.tsv"):
        list(read_wikispeedia(tmp_path, progress=False))


def test_parse_keeps_bullets_with_prose_and_drops_tables():
    text = ("   #copyright\n\nT\n\n2007 Schools Wikipedia Selection. Related subjects: X\n\n"
            "   Lead paragraph with enough words to count as prose.\n\n"
            "Lists\n\n"
            "     * A list item that is a full sentence, wrapped over more than one\n"
            "       line of the file.\n"
            "     * Short item\n\n"
            "   Year Title Role\n   1994 Leon Mathilda\n   1995 Heat Lauren\n")
    article = parse_plaintext("T", text)
    assert article.sections[1].paragraphs == (
        "A list item that is a full sentence, wrapped over more than one line of the file.",)
    assert article.lead.paragraphs == ("Lead paragraph with enough words to count as prose.",)


def test_parse_drops_captions_without_enlarge_and_enlarge_at_line_end():
    head = "   #copyright\n\nT\n\n2007 Schools Wikipedia Selection. Related subjects: X\n\n"
    text = head + (
        "   An abacus is a calculating tool, often constructed as a wooden frame\n"
        "   with beads sliding on wires.\n"
        "   A Chinese abacus\n"
        "   A Chinese abacus\n\n"
        "   The tricolour has been the national flag of Ireland since 1919, when\n"
        "   the Irish Republic was established by the first Dail. Enlarge\n"
        "   The tricolour has been the national flag of Ireland since 1919, when\n"
        "   the Irish Republic was established by the first Dail.\n\n"
        "   Cyrus II of Persia\n"
        "   An old Iranian portrait of Cyrus the Great (artist's conception).\n"
        "   Place of birth Presumably Anshan\n")
    assert parse_plaintext("T", text).lead.paragraphs == (
        "An abacus is a calculating tool, often constructed as a wooden frame with beads "
        "sliding on wires.",)
