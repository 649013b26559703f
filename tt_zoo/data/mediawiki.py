"""Reads MediaWiki XML dumps (``enwiki-*-pages-articles*.xml[.bz2]``) into :class:`Article`s.

The pretraining tasks of Chang et al. 2020 (Sec. 3) need, per Wikipedia page, its paragraphs
(ICT), its *first section* (BFS and WLP draw queries from it) and its hyperlinks (WLP pairs a
page with the pages that link to it). This module recovers exactly that from raw wikitext:

* pages are streamed with ``mwxml`` (constant memory; ``.bz2``/``.gz`` are decompressed on the
  fly, detected from the file's magic bytes, so partitioned dumps such as
  ``enwiki-latest-pages-articles1.xml-p1p41242.bz2`` work too);
* wikitext is parsed with ``mwparserfromhell`` and rendered to plain text by :func:`wikitext_to_article`:

  - sections follow ``== headings ==`` of any level; the text before the first heading is the
    lead section (``sections[0]``, heading ``""``), kept even when it renders empty; other
    sections that render empty are dropped, and so are reference apparatus sections
    (:data:`DROPPED_SECTIONS`, e.g. "See also", "References") with their subsections;
  - templates, ``<ref>``s and other invisible tags (:data:`DROPPED_TAGS`), tables, HTML comments,
    file/image/category links and interlanguage links are dropped; a small table of inline text
    templates (:data:`INLINE_TEMPLATES`, e.g. ``{{convert|10|km}}`` -> "10 km") is rendered;
  - bold/italic markup is stripped; a ``[[target|label]]`` link renders as its label, an
    external link ``[url label]`` as its label;
  - paragraphs are split at blank lines; lines of one paragraph are joined with a space; a
    paragraph made only of list items (``*``/``#`` lines) is dropped unless ``keep_lists``;
    paragraphs shorter than ``min_paragraph_chars`` are dropped;
  - ``links`` are the targets of ``[[wikilinks]]`` in the rendered sections (list items
    included), normalised by :func:`normalize_title`, deduplicated in first-seen order.

Redirects and pages outside the article namespace (``ns != 0``) are skipped and counted in the
:class:`ReadReport`, and so are articles with no text left after cleaning.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Callable, Dict, Iterator, List, Optional, Tuple
from xml.etree.ElementTree import ParseError

import mwparserfromhell
import mwxml
from mwparserfromhell import nodes as mwnodes
from mwxml.element_iterator import ElementIterator
from mwxml.errors import MalformedXML

from tt_zoo.data.articles import Article, ReadReport, Section
from tt_zoo.data.inputs import open_input
from tt_zoo.errors import TtZooError

logger = logging.getLogger(__name__)

#: Headings (case-insensitive) of sections that hold reference apparatus, not prose.
DROPPED_SECTIONS = frozenset({
    "see also", "references", "external links", "further reading", "notes", "footnotes",
    "bibliography", "sources", "citations", "notes and references", "references and notes",
    "works cited", "notes and citations", "other websites",
})

#: Tags whose content never renders as article prose.
DROPPED_TAGS = frozenset({
    "ref", "references", "table", "gallery", "math", "chem", "ce", "timeline", "imagemap",
    "score", "syntaxhighlight", "source", "pre", "includeonly", "graph", "templatedata",
    "inputbox", "categorytree", "mapframe", "maplink", "hiero", "section", "indicator",
})

#: Namespace prefixes (lower-case) of non-article pages; a link to one is not an article link.
NAMESPACES = frozenset({
    "media", "special", "talk", "user", "user talk", "wikipedia", "wikipedia talk", "wp",
    "project", "file", "file talk", "image", "image talk", "mediawiki", "mediawiki talk",
    "template", "template talk", "help", "help talk", "category", "category talk", "portal",
    "portal talk", "book", "book talk", "draft", "draft talk", "education program",
    "education program talk", "timedtext", "timedtext talk", "module", "module talk",
    "gadget", "gadget talk", "gadget definition", "gadget definition talk", "topic",
})

#: Link prefixes that are dropped without rendering (they render as page furniture).
_INVISIBLE_LINK_NAMESPACES = frozenset({"file", "image", "category", "media"})

#: Interwiki prefixes to sister projects: the link renders as its label but is not an article.
INTERWIKI_PREFIXES = frozenset({
    "wikt", "wiktionary", "w", "wikipedia", "s", "wikisource", "q", "wikiquote", "b",
    "wikibooks", "n", "wikinews", "v", "wikiversity", "voy", "wikivoyage", "c", "commons",
    "m", "meta", "metawikipedia", "d", "wikidata", "species", "wikispecies", "mw", "phab",
    "foundation", "wmf", "outreach", "incubator", "doi", "google", "imdbtitle", "imdbname",
})

#: Interlanguage link prefix (``[[fr:Anarchisme]]``): dropped without rendering.
_LANGUAGE_PREFIX = re.compile(r"^(?:[a-z]{2,3}(?:-[a-z0-9]{2,8})*|simple)$")

_REDIRECT = re.compile(r"^\s*#\s*redirect", re.IGNORECASE)
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_LIST_MARK = "\x01"  # starts a rendered line that came from a "*" or "#" list item


def _positional(template, index: int) -> str:
    """The positional parameter ``index`` (1-based) of a template, or ""."""
    name = str(index)
    return str(template.get(name).value) if template.has(name) else ""


def _lang_xx(template) -> str:
    return _positional(template, 1)


#: Inline templates that render text inside a sentence: name (lower-case) -> wikitext.
INLINE_TEMPLATES: Dict[str, Callable] = {
    "nowrap": lambda t: _positional(t, 1),
    "nobr": lambda t: _positional(t, 1),
    "nobreak": lambda t: _positional(t, 1),
    "lang": lambda t: _positional(t, 2),
    "transl": lambda t: _positional(t, 3) or _positional(t, 2),
    "convert": lambda t: f"{_positional(t, 1)} {_positional(t, 2)}",
    "cvt": lambda t: f"{_positional(t, 1)} {_positional(t, 2)}",
    "nbsp": lambda t: " ",
    "ndash": lambda t: "\u2013",
    "mdash": lambda t: "\u2014",
}


class MediaWikiDumpError(TtZooError):
    """A dump file that cannot be read to its end (truncated, corrupt or malformed XML)."""


# --------------------------------------------------------------------------------------------
# Titles and links
# --------------------------------------------------------------------------------------------


def normalize_title(title: str) -> str:
    """Normalises a page title the way MediaWiki does for ``[[links]]``.

    Underscores become spaces, runs of whitespace collapse, a ``#fragment`` and a leading ``:``
    are dropped and the first letter is upper-cased (``"anarchism_in_France#History"`` ->
    ``"Anarchism in France"``). Returns "" for a link to a section of the same page.
    """
    title = title.split("#", 1)[0].replace("_", " ")
    title = " ".join(title.split()).lstrip(":").strip()
    return title[:1].upper() + title[1:]


def _link_kind(target: str) -> str:
    """Classifies a link target: "article", "hidden" (drop, no text) or "other" (text only)."""
    target = target.strip()
    leading_colon = target.startswith(":")
    target = target.lstrip(":").strip()
    if ":" not in target:
        return "article"
    prefix = target.split(":", 1)[0].strip()
    key = " ".join(prefix.replace("_", " ").split()).lower()
    if key in _INVISIBLE_LINK_NAMESPACES:
        return "other" if leading_colon else "hidden"
    if key in NAMESPACES or key in INTERWIKI_PREFIXES:
        return "other"
    if _LANGUAGE_PREFIX.match(prefix):
        return "other" if leading_colon else "hidden"
    return "article"


# --------------------------------------------------------------------------------------------
# Wikitext -> plain text
# --------------------------------------------------------------------------------------------


class _Renderer:
    """Renders mwparserfromhell nodes to plain text, collecting article link targets."""

    def __init__(self):
        self.links: Dict[str, None] = {}  # an ordered set

    def render(self, wikicode) -> str:
        if wikicode is None:
            return ""
        return "".join(self._node(node) for node in wikicode.nodes)

    def _node(self, node) -> str:
        if isinstance(node, mwnodes.Text):
            return node.value
        if isinstance(node, mwnodes.Wikilink):
            return self._wikilink(node)
        if isinstance(node, mwnodes.Tag):
            return self._tag(node)
        if isinstance(node, mwnodes.HTMLEntity):
            return node.normalize()
        if isinstance(node, mwnodes.ExternalLink):
            return self.render(node.title) if node.brackets and node.title else ""
        if isinstance(node, mwnodes.Template):
            render = INLINE_TEMPLATES.get(str(node.name).strip().lower())
            if render is None and str(node.name).strip().lower().startswith("lang-"):
                render = _lang_xx
            return self.render(mwparserfromhell.parse(render(node))) if render else ""
        if isinstance(node, mwnodes.Heading):  # a heading nested in a tag: plain text
            return "\n" + self.render(node.title) + "\n"
        return ""  # Comment, Argument, anything else

    def _wikilink(self, node) -> str:
        target = str(node.title)
        kind = _link_kind(target)
        if kind == "hidden":
            return ""
        if kind == "article":
            title = normalize_title(target)
            if title:
                self.links[title] = None
        if node.text is not None and str(node.text).strip():
            return self.render(node.text)
        return self.render(node.title)

    def _tag(self, node) -> str:
        tag = str(node.tag).strip().lower()
        if tag in DROPPED_TAGS:
            return ""
        if tag in ("li", "dt", "dd"):
            mark = _LIST_MARK if tag == "li" else ""
            body = self.render(node.contents) if node.contents is not None else ""
            # Wiki markup ("*", "#", ";", ":") already starts a line; an HTML <li> starts one.
            return ("" if node.wiki_markup else "\n") + mark + body
        if tag == "br":
            return "\n"
        if tag == "hr":
            return "\n\n"
        if node.contents is not None:
            return self.render(node.contents)
        return ""


_SPACE = re.compile(r"[ \t\u00a0\u2009\u200a\u202f\u3000]+")
_SPACE_BEFORE_PUNCT = re.compile(r" +([,.;:!?%)\]])")
_SPACE_AFTER_OPEN = re.compile(r"([(\[]) +")
_EMPTY_PARENS = re.compile(r"\(\s*[,;:]*\s*\)")
_OPEN_PAREN_PUNCT = re.compile(r"\(\s*[,;:]+\s*")
_REPEATED_COMMA = re.compile(r",(?:\s*,)+")


def _clean_line(line: str) -> str:
    line = _MAGIC_WORD.sub("", line)
    line = _SPACE.sub(" ", line)
    line = _EMPTY_PARENS.sub("", line)
    line = _OPEN_PAREN_PUNCT.sub("(", line)
    line = _REPEATED_COMMA.sub(",", line)
    line = _SPACE_BEFORE_PUNCT.sub(r"\1", line)
    line = _SPACE_AFTER_OPEN.sub(r"\1", line)
    return _SPACE.sub(" ", line).strip()


_LEFTOVER_REF = re.compile(r"<ref\b[^<>]*/>|<ref\b[^<>]*>.*?</ref\s*>", re.S | re.I)
_LEFTOVER_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_LEFTOVER_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*(?:\s[^<>]*)?/?>")
_LEFTOVER_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_LEFTOVER_HIDDEN_LINK = re.compile(r"\[\[\s*:?\s*(?:file|image|category|media)\s*:[^\[\]]*\]\]", re.I)
_LEFTOVER_LINK = re.compile(r"\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]")
_QUOTE_MARKUP = re.compile(r"'{2,}")
_MARKUP_LEFT = ("{{", "}}", "[[", "]]", "{|", "|}", "<ref", "</ref")


def _strip_leftover_markup(text: str, links: Optional[Dict[str, None]] = None) -> str:
    """Removes wikitext that mwparserfromhell left as plain text.

    The parser keeps a construct as text when it cannot close it (an unbalanced quote in a
    ``<ref>``, a table inside a broken template, stray ``'''``); this pass removes such
    leftovers with regular expressions, innermost first, keeping link labels (and, when
    ``links`` is given, collecting the article link targets).
    """
    kept, depth = [], 0
    for line in text.split("\n"):  # tables: drop "{|" ... "|}" line blocks (nested)
        stripped = line.lstrip(" :" + _LIST_MARK)
        if stripped.startswith("{|"):
            depth += 1
        elif depth and stripped.startswith("|}"):
            depth -= 1
        elif not depth:
            kept.append(line)
    text = "\n".join(kept)
    text = _LEFTOVER_COMMENT.sub("", _LEFTOVER_REF.sub("", text))

    def link_label(match):
        target, label = match.group(1), match.group(2)
        kind = _link_kind(target)
        if kind == "hidden":
            return ""
        if kind == "article" and links is not None and normalize_title(target):
            links[normalize_title(target)] = None
        return label if label and label.strip() else target

    previous = None
    while previous != text:
        previous = text
        text = _LEFTOVER_TEMPLATE.sub("", text)
        text = _LEFTOVER_HIDDEN_LINK.sub("", text)
        text = _LEFTOVER_LINK.sub(link_label, text)
    return _QUOTE_MARKUP.sub("", _LEFTOVER_TAG.sub("", text))


def split_paragraphs(text: str, min_paragraph_chars: int = 20,
                     keep_lists: bool = False) -> Tuple[str, ...]:
    """Splits rendered text into paragraphs at blank lines (see the module docstring)."""
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", text):
        lines, list_lines = [], 0
        for raw in block.split("\n"):
            is_list = raw.lstrip(" \t:;").startswith(_LIST_MARK)
            line = _clean_line(raw.replace(_LIST_MARK, " "))
            if line:
                lines.append(line)
                list_lines += is_list
        if not lines or (list_lines == len(lines) and not keep_lists):
            continue
        paragraph = " ".join(lines)
        if any(mark in paragraph for mark in _MARKUP_LEFT):
            continue  # unparseable wikitext that survived _strip_leftover_markup
        if len(paragraph) >= min_paragraph_chars:
            paragraphs.append(paragraph)
    return tuple(paragraphs)


def wikitext_to_article(title: str, text: str, min_paragraph_chars: int = 20,
                        keep_lists: bool = False,
                        dropped_sections: frozenset = DROPPED_SECTIONS) -> Article:
    """Renders one page's wikitext to an :class:`Article` (rules in the module docstring).

    Args:
      title: the page title (underscores are turned into spaces).
      text: the page's wikitext.
      min_paragraph_chars: paragraphs shorter than this (after cleaning) are dropped.
      keep_lists: keep paragraphs made only of ``*``/``#`` list items.
      dropped_sections: lower-case headings of sections dropped with their subsections.

    Example:
      >>> a = wikitext_to_article(
      ...     "X", "'''X''' is a [[letter|glyph]] of the alphabet.{{cn}}\\n== Use ==\\nIt is used in many words.")
      >>> a.sections[0].paragraphs, a.sections[1].heading, a.links
      (('X is a glyph of the alphabet.',), 'Use', ('Letter',))
    """
    renderer = _Renderer()
    chunks: List[Tuple[str, int, list]] = [("", 0, [])]  # (heading, level, nodes)
    for node in mwparserfromhell.parse(text).nodes:
        if isinstance(node, mwnodes.Heading):
            heading = _clean_line(renderer.render(node.title).replace("\n", " "))
            chunks.append((heading, node.level, []))
        else:
            chunks[-1][2].append(node)
    sections, drop_below = [], None
    for index, (heading, level, body) in enumerate(chunks):
        if drop_below is not None and level > drop_below:
            continue  # a subsection of a dropped section
        drop_below = None
        if index and heading.lower().rstrip(":") in dropped_sections:
            drop_below = level
            continue
        rendered = renderer.render(mwparserfromhell.wikicode.Wikicode(body))
        rendered = _strip_leftover_markup(rendered, renderer.links)
        paragraphs = split_paragraphs(rendered, min_paragraph_chars, keep_lists)
        if index == 0 or paragraphs:
            sections.append(Section(heading, paragraphs))
    return Article(title=title.replace("_", " ").strip(), sections=tuple(sections),
                   links=tuple(renderer.links))


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def _iter_pages(stream) -> Iterator[mwxml.Page]:
    """Streams ``<page>``s with mwxml; a missing ``<siteinfo>`` is tolerated (unlike
    ``mwxml.Dump``), since exports of a few pages often lack it."""
    root = ElementIterator.from_file(stream)
    if root.tag != "mediawiki":
        raise MalformedXML(f"expected a <mediawiki> root element, found <{root.tag}>")
    namespace_map = None
    for element in root:
        if element.tag == "siteinfo":
            site_info = mwxml.SiteInfo.from_element(element)
            if site_info.namespaces is not None:
                namespace_map = {ns.name: ns for ns in site_info.namespaces}
        elif element.tag == "page":
            yield mwxml.Page.from_element(element, namespace_map)
        # <logitem> and anything else is not an article: ignored.


def _latest_text(page) -> Optional[str]:
    """The text of a page's last revision (pages-articles dumps hold exactly one)."""
    text = None
    for revision in page:
        text = revision.text
    return text


_READ_ERRORS = {
    EOFError: "truncated_file",
    ParseError: "malformed_xml",
    MalformedXML: "malformed_xml",
    OSError: "corrupt_file",
    ValueError: "malformed_xml",
    AssertionError: "malformed_xml",
}


def _error_reason(error: BaseException) -> str:
    for cls, reason in _READ_ERRORS.items():
        if isinstance(error, cls):
            return reason
    raise error


def read_mediawiki_dump(path, report: Optional[ReadReport] = None, progress: bool = True,
                        min_paragraph_chars: int = 20, *, on_error: str = "raise",
                        keep_lists: bool = False,
                        dropped_sections: frozenset = DROPPED_SECTIONS,
                        max_pages: Optional[int] = None) -> Iterator[Article]:
    """Streams the articles of a MediaWiki XML dump (``.xml``, ``.xml.bz2``, ``.xml.gz``).

    Implements the Wikipedia preprocessing behind the pretraining tasks of Chang et al. 2020
    (Sec. 3: paragraphs for ICT, the first section for BFS/WLP, hyperlinks for WLP); the
    rendering rules are in the module docstring.

    Args:
      path: the dump file; compression is detected from the magic bytes.
      report: optional :class:`ReadReport`; counts ``redirect``, ``non_article_namespace``,
        ``empty_article``, and with ``on_error="skip"`` one of ``truncated_file``,
        ``corrupt_file`` or ``malformed_xml`` for a file that breaks off.
      progress: show a tqdm bar over the (compressed) bytes read.
      min_paragraph_chars: paragraphs shorter than this after cleaning are dropped.
      on_error: "raise" (a :class:`MediaWikiDumpError` naming the file, the pages read and the
        last title) or "skip" (stop reading the file, count it, keep what was read).
      keep_lists: keep paragraphs made only of list items.
      dropped_sections: lower-case headings of sections to drop (with subsections).
      max_pages: stop after this many ``<page>`` elements (any namespace).

    Returns:
      An iterator of :class:`Article`, lazily read (constant memory).

    Example:
      >>> report = ReadReport()
      >>> for article in read_mediawiki_dump("enwiki-latest-pages-articles1.xml-p1p41242.bz2",
      ...                                    report=report):
      ...     print(article.title, article.lead.paragraphs[0][:60])
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f'on_error must be "raise" or "skip" (got {on_error!r}).')
    if not os.path.isfile(path):
        raise FileNotFoundError(f"MediaWiki dump {os.fspath(path)!r} does not exist or is not a file.")
    return _read_dump(os.fspath(path), report if report is not None else ReadReport(), progress,
                      min_paragraph_chars, on_error, keep_lists, dropped_sections, max_pages)


def _read_dump(path, report, progress, min_paragraph_chars, on_error, keep_lists,
               dropped_sections, max_pages) -> Iterator[Article]:
    pages, kept, last_title = 0, 0, None
    with open_input(path, progress) as (stream, bar):
        page_iter = None
        while max_pages is None or pages < max_pages:
            try:
                if page_iter is None:
                    page_iter = _iter_pages(stream)
                page = next(page_iter, None)
                if page is None:
                    break
                text = _latest_text(page)
            except Exception as error:  # noqa: BLE001 - classified, re-raised if unknown
                reason = _error_reason(error)
                where = (f"after {pages} page(s) (last complete page: {last_title!r})"
                         if pages else "before the first page")
                message = (f"{path}: cannot read the MediaWiki dump {where}: "
                           f"{reason.replace('_', ' ')}: {type(error).__name__}: {error}")
                if on_error == "raise":
                    raise MediaWikiDumpError(message) from error
                logger.warning("%s; skipping the rest of the file.", message)
                report.skip(reason)
                return
            pages += 1
            last_title = page.title
            if page.redirect is not None or (text is not None and _REDIRECT.match(text)):
                report.skip("redirect")
                continue
            if page.namespace != 0:
                report.skip("non_article_namespace")
                continue
            article = wikitext_to_article(page.title, text or "", min_paragraph_chars,
                                          keep_lists, dropped_sections)
            if not article.paragraphs:
                report.skip("empty_article")
                continue
            report.keep()
            kept += 1
            if pages % 16 == 0:
                bar.set_postfix(pages=pages, articles=kept, refresh=False)
            yield article
