"""Tests for tt_zoo.data.mediawiki on the real dump fragments in TT_ZOO_DATA and on hand-made wikitext."""

import bz2
import gzip
import re

import pytest

from conftest import data_file
from tt_zoo.data.articles import ReadReport
from tt_zoo.data.mediawiki import (MediaWikiDumpError, normalize_title, read_mediawiki_dump,
                                   wikitext_to_article)

SHORTENED = "wikitext/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TABLES = "wikitext/enwiki-table-markup.xml.bz2"
MARKUP = ("{{", "}}", "[[", "]]", "<ref", "</ref", "{|", "|}", "<!--", "'''", "''")


@pytest.fixture(scope="module")
def shortened():
    """All articles of the 206-page shortened dump, read once, with the report."""
    report = ReadReport()
    articles = list(read_mediawiki_dump(data_file(SHORTENED), report=report, progress=False))
    return articles, report


def _by_title(articles):
    return {a.title: a for a in articles}


def test_anarchism_hand_checked(shortened):
    anarchism = _by_title(shortened[0])["Anarchism"]
    assert anarchism.sections[0].heading == ""
    assert anarchism.lead.paragraphs[0].startswith(
        "Anarchism is a political philosophy that advocates self-governed societies based on "
        "voluntary institutions. These are often described as stateless societies, although")
    headings = [s.heading for s in anarchism.sections]
    assert "Etymology and terminology" in headings
    assert "Origins" in headings
    # Reference apparatus is dropped.
    assert not {"See also", "References", "External links", "Further reading"} & set(headings)
    # [[political philosophy]] -> first letter upper-cased; [[self-governance|self-governed]].
    assert "Political philosophy" in anarchism.links
    assert "Self-governance" in anarchism.links
    assert "Pierre-Joseph Proudhon" in anarchism.links
    assert len(anarchism.links) == len(set(anarchism.links))


def test_no_wiki_markup_left_in_any_paragraph(shortened):
    articles, _ = shortened
    for article in articles:
        for paragraph in article.paragraphs:
            for mark in MARKUP:
                assert mark not in paragraph, (article.title, mark, paragraph[:200])
            assert paragraph == paragraph.strip() and "  " not in paragraph


def test_links_are_normalised_article_titles(shortened):
    articles, _ = shortened
    links = [link for a in articles for link in a.links]
    assert len(links) > 1000
    for link in links:
        assert link and "#" not in link and "_" not in link, link
        assert not link[0].islower(), link
        assert not re.match(r"(?i)(file|image|category|media):", link), link
        assert not re.match(r"[a-z]{2,3}:", link), link  # interlanguage links


def test_report_counts_redirects_and_empty_articles(shortened):
    articles, report = shortened
    # The data README: 206 pages, 106 articles, 100 redirects (one of them in ns 4).
    assert report.skipped["redirect"] == 100
    assert report.kept == len(articles)
    assert report.kept + report.skipped["empty_article"] == 106
    assert set(report.skipped) <= {"redirect", "empty_article"}
    # "Ada" is a disambiguation list and "List of anthropologists" a bare list: nothing left.
    titles = {a.title for a in articles}
    assert "Ada" not in titles and "List of anthropologists" not in titles
    assert report.skipped["empty_article"] == 2
    assert all(a.paragraphs for a in articles)


def test_table_markup_file_yields_its_articles_without_tables():
    report = ReadReport()
    articles = _by_title(read_mediawiki_dump(data_file(TABLES), report=report, progress=False))
    assert set(articles) == {"Constructive vote of no confidence", "List of Prison Break characters",
                             "Academy Award for Best Production Design", "Economy of Estonia",
                             "Brahui language"}
    assert report.as_dict() == {"kept": 5, "skipped": {}}
    vote = articles["Constructive vote of no confidence"]
    assert vote.lead.paragraphs[0].startswith(
        "The constructive vote of no confidence (in German: konstruktives Misstrauensvotum, in "
        "Spanish: moción de censura constructiva) is a variation on the motion of no confidence")
    assert [s.heading for s in vote.sections][:3] == ["", "Germany", "History of use"]
    assert "Motion of no confidence" in vote.links and "West Germany" in vote.links
    for article in articles.values():
        for paragraph in article.paragraphs:
            for mark in MARKUP + ("|-", "cellpadding", "style=", "wikitable"):
                assert mark not in paragraph, (article.title, mark, paragraph[:200])
    # The 1972 vote's table cells ("Rainer Barzel ... 247") are table content, not prose.
    assert not any("247" in p and "Barzel" in p for p in vote.paragraphs)


def test_truncated_bz2_raises_naming_the_file(tmp_path):
    # The table-markup dump is a single bzip2 block: cut short, nothing can be decompressed.
    path = tmp_path / "cut.xml.bz2"
    path.write_bytes(data_file(TABLES).read_bytes()[:30_000])
    with pytest.raises(MediaWikiDumpError, match=r"cut\.xml\.bz2.*before the first page.*truncated"):
        list(read_mediawiki_dump(path, progress=False))


def test_truncated_bz2_skip_keeps_articles_read(tmp_path, shortened):
    path = tmp_path / "cut-shortened.xml.bz2"
    path.write_bytes(data_file(SHORTENED).read_bytes()[:250_000])
    report = ReadReport()
    articles = list(read_mediawiki_dump(path, report=report, progress=False, on_error="skip"))
    assert report.skipped["truncated_file"] == 1
    assert 0 < len(articles) < len(shortened[0])
    assert articles == shortened[0][:len(articles)]  # the same articles as the full read
    assert report.kept == len(articles)


BROKEN = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">
  <page><title>Good page</title><ns>0</ns><id>1</id>
    <revision><id>10</id><text>'''Good page''' is a page about [[good]] things and more.</text></revision>
  </page>
  <page><title>Broken page</title><ns>0</ns><id>2</id>
    <revision><id>11</id><text>text</revision>
  </page>
</mediawiki>
"""


def test_malformed_xml_raises_with_page_count_and_title(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_text(BROKEN, encoding="utf-8")
    articles = []
    with pytest.raises(MediaWikiDumpError,
                       match=r"broken\.xml.* after 1 page\(s\) \(last complete page: 'Good page'\)"
                             r".*malformed xml.*line 6"):
        for article in read_mediawiki_dump(path, progress=False):
            articles.append(article)
    assert [a.title for a in articles] == ["Good page"]


def test_malformed_xml_skip_is_counted(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_text(BROKEN, encoding="utf-8")
    report = ReadReport()
    articles = list(read_mediawiki_dump(path, report=report, progress=False, on_error="skip"))
    assert [a.title for a in articles] == ["Good page"]
    assert articles[0].links == ("Good",)
    assert report.as_dict() == {"kept": 1, "skipped": {"malformed_xml": 1}}


def _page(title, text, ns=0, redirect=None):
    redirect_tag = f'<redirect title="{redirect}" />' if redirect else ""
    return (f"<page><title>{title}</title><ns>{ns}</ns><id>1</id>{redirect_tag}"
            f"<revision><id>2</id><text xml:space=\"preserve\">{text}</text></revision></page>")


def test_skips_empty_redirect_and_non_article_pages_in_gzip_dump(tmp_path):
    xml = ("<mediawiki>" + _page("Only templates", "{{Infobox|a=b}}\n[[Category:X]]")
           + _page("Old name", "#REDIRECT [[New name]]")
           + _page("Moved", "#redirect [[There]]", redirect="There")
           + _page("Talk:Something", "A talk page with enough characters to count.", ns=1)
           + _page("Kept", "Kept is an article with enough text to be kept here.")
           + "</mediawiki>")
    path = tmp_path / "small.xml.gz"
    path.write_bytes(gzip.compress(xml.encode("utf-8")))
    report = ReadReport()
    articles = list(read_mediawiki_dump(path, report=report, progress=False))
    assert [a.title for a in articles] == ["Kept"]
    assert report.as_dict() == {"kept": 1, "skipped": {"empty_article": 1, "non_article_namespace": 1,
                                                       "redirect": 2}}
    # Compression is sniffed from the bytes: the same XML as .bz2 reads the same.
    bz = tmp_path / "small.xml.bz2"
    bz.write_bytes(bz2.compress(xml.encode("utf-8")))
    assert list(read_mediawiki_dump(bz, progress=False)) == articles


def test_max_pages_stops_early(shortened):
    report = ReadReport()
    articles = list(read_mediawiki_dump(data_file(SHORTENED), report=report, progress=False,
                                        max_pages=3))
    assert [a.title for a in articles] == ["Anarchism"]  # AccessibleComputing, Anarchism, AfghanistanHistory
    assert report.as_dict() == {"kept": 1, "skipped": {"redirect": 2}}


def test_missing_file_fails_at_call_time(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.xml.bz2"):
        read_mediawiki_dump(tmp_path / "nope.xml.bz2")
    with pytest.raises(ValueError, match="on_error"):
        read_mediawiki_dump(data_file(TABLES), on_error="ignore")


WIKITEXT = """{{Infobox thing|name=Widget}}
[[File:Widget.jpg|thumb|A [[widget]] in use]]
'''Widget''' (<!-- hidden -->{{IPA|ˈwɪdʒɪt}}) is a ''small'' [[gadget_device#History|gadget]] made in [[germany]].<ref>Smith 2001, p. 3.</ref> It weighs {{convert|3|kg}}.

* a list item that is short
* [[another list item]]

Short bit.

== History ==
Widgets were invented in 1900 by [[Jane Doe|a person]] and [[wikt:widget|named]] later.{{citation needed|date=May 2020}}
{| class="wikitable"
|-
| cell one || cell two
|}

=== Early years ===
In the early years, widgets were made of [http://example.com wood] and http://example.org/bare stone.
Second line of the same paragraph.

== See also ==
* [[Gizmo]]

=== Subsection of see also ===
Text that should go with its dropped parent section.

== Uses ==
Widgets are used everywhere, see [[:Category:Widgets|the category]].

[[Category:Things]]
[[de:Widget]]
"""


def test_wikitext_rendering_rules():
    article = wikitext_to_article("Widget_thing", WIKITEXT)
    assert article.title == "Widget thing"
    assert [s.heading for s in article.sections] == ["", "History", "Early years", "Uses"]
    lead, history, early, uses = article.sections
    assert lead.paragraphs == ("Widget is a small gadget made in germany. It weighs 3 kg.",)
    assert history.paragraphs == ("Widgets were invented in 1900 by a person and named later.",)
    assert early.paragraphs == ("In the early years, widgets were made of wood and stone. "
                                "Second line of the same paragraph.",)
    assert uses.paragraphs == ("Widgets are used everywhere, see the category.",)
    # File captions, category, interwiki and interlanguage links are not article links; the
    # list item's link is kept even though the list-only paragraph is dropped.
    assert article.links == ("Gadget device", "Germany", "Another list item", "Jane Doe")


def test_lead_section_is_kept_even_when_empty():
    article = wikitext_to_article("X", "{{Infobox}}\n== Body ==\nThe body has the only text here.")
    assert article.sections[0].heading == "" and article.sections[0].paragraphs == ()
    assert article.sections[1].paragraphs == ("The body has the only text here.",)


def test_keep_lists_and_min_paragraph_chars():
    text = "* first item of a list\n* second item of a list\n\nTiny."
    assert wikitext_to_article("X", text).paragraphs == ()
    assert wikitext_to_article("X", text, keep_lists=True).paragraphs == (
        "first item of a list second item of a list",)
    assert wikitext_to_article("X", text, min_paragraph_chars=1).paragraphs == ("Tiny.",)


@pytest.mark.parametrize("raw, expected", [
    ("anarchism", "Anarchism"),
    ("Pierre-Joseph_Proudhon", "Pierre-Joseph Proudhon"),
    ("State (polity)#Definition", "State (polity)"),
    (":Foo  bar", "Foo bar"),
    ("#Local section", ""),
])
def test_normalize_title(raw, expected):
    assert normalize_title(raw) == expected
