"""Reader for the SNAP Wikispeedia release (West & Leskovec): 4,598 plain-text articles of the
2007 Wikipedia for Schools selection plus their hyperlink graph.

It produces the :class:`tt_zoo.data.articles.Article` model the pretraining tasks consume: the lead
section (the "first section" BFS and WLP draw queries from) and the outgoing links WLP needs
(Chang et al. 2020, Sec. 3).

Layout of a plaintext article (``plaintext_articles/<url-encoded title>.txt``)::

       #copyright
    <blank>
    Title
    <blank>
    2007 Schools Wikipedia Selection. Related subjects: ...   (may wrap, unindented)
    <blank>
       lead body text, indented by 3 spaces and wrapped at ~75 columns
    <blank>
    Section heading                                          (unindented)
    <blank>
       body text ...
       Caption of an image                                   (caption, "Enlarge", caption again)
       Enlarge
       Caption of an image
       Retrieved from " http://en.wikipedia.org/wiki/..."    (footer: everything from here is dropped)

Parsing rules (documented here, tested in tests/test_wikispeedia.py):

* Headings are unindented lines; each starts a new :class:`Section`. The lead section (heading
  "") is everything before the first heading; it is kept (possibly empty) as ``sections[0]``.
  Non-lead sections left without paragraphs are dropped, as are the reference-like sections
  named in :data:`BOILERPLATE_HEADINGS`.
* Image captions: every ``Enlarge`` line is dropped together with the caption printed before
  it and its repetition after it (matched word by word, or approximately when the two copies
  differ in spelling, e.g. "center"/"centre").
* Paragraphs are runs of indented lines between blank lines; wrapped lines are joined with a
  space (without one after a hyphen at the end of a line). A bulleted item (``* ``, ``+ ``,
  ``- ``, ``# ``) is its own paragraph.
* Only prose is kept. In wrapped text only a paragraph's last line is shorter than
  ``MIN_WRAPPED_LINE`` columns, so a block is cut after each short line; runs of two or more
  lines are paragraphs, a single line is kept only when it is the whole block, and every
  paragraph needs ``MIN_PARAGRAPH_WORDS`` words and must end like a sentence (``. ! ? : ;``, a
  closing quote or bracket). This drops infoboxes,
  tables, succession boxes, captions without "Enlarge" and short list items. Footnote markers
  such as ``.^26`` are removed.
* Titles come from the file names: URL-decoded, underscores as spaces.
"""

from __future__ import annotations

import collections
import difflib
import io
import os
import pathlib
import re
import tarfile
import urllib.parse
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from tqdm.auto import tqdm

from tt_zoo.data.articles import Article, ReadReport, Section

ARTICLES_TARBALL = "wikispeedia_articles_plaintext.tar.gz"
GRAPH_TARBALL = "wikispeedia_paths-and-graph.tar.gz"
ARTICLES_DIR = "plaintext_articles"
GRAPH_DIR = "wikispeedia_paths-and-graph"

BOILERPLATE_HEADINGS = frozenset({
    "references", "external links", "see also", "notes", "further reading", "bibliography",
    "sources", "footnotes", "citations", "notes and references"})
MIN_PARAGRAPH_WORDS = 4
MIN_WRAPPED_LINE = 50
_BASE_INDENT = 3
_MAX_CAPTION_LINES = 15
_BULLETS = ("* ", "+ ", "- ", "# ")
_SENTENCE_END = re.compile(r"[.!?:;\"'”’)\]]$")
_TABLE_GAP = re.compile(r"\S {3,}\S")  # aligned columns: a table row, not prose
_FOOTNOTE = re.compile(r"(?<=[.,;:!?\"'”’)\]])\^\d+")


def decode_title(name: str) -> str:
    """``"%C3%81ed%C3%A1n_mac_Gabr%C3%A1in"`` -> ``"Áedán mac Gabráin"``."""
    return urllib.parse.unquote(name).replace("_", " ")


def read_wikispeedia(source, report: Optional[ReadReport] = None, progress: bool = True,
                     titles: Optional[Iterable[str]] = None) -> Iterator[Article]:
    """Yields the Wikispeedia articles as :class:`Article` objects, with their outgoing links.

    Args:
      source: a folder holding the two SNAP tarballs (``wikispeedia_articles_plaintext.tar.gz``,
        ``wikispeedia_paths-and-graph.tar.gz``) or their extracted folders (``plaintext_articles/``,
        ``wikispeedia_paths-and-graph/links.tsv``). Tarballs are streamed, never extracted.
      report: a :class:`ReadReport` counting kept articles and skipped inputs: ``empty_article``
        (no prose left after parsing), ``link_to_missing_page`` (a link whose target is not in
        the article set, i.e. ``articles.tsv``; without that file links are not checked),
        ``self_link`` (a page linking to itself, per link). Files that are not valid UTF-8 are decoded with replacement
        characters, kept, and counted as ``not_utf8_decoded_with_replacement``.
      progress: show a tqdm progress bar.
      titles: only yield these (decoded) titles; reading stops once all were found. Links are
        still checked against the whole article set.

    Yields:
      Articles in the order of the source (tarball member order, or sorted file names).
    """
    report = report if report is not None else ReadReport()
    root = pathlib.Path(source)
    if not root.is_dir():
        raise FileNotFoundError(f"Wikispeedia source {root} is not a folder (expected a folder "
                                f"holding {ARTICLES_TARBALL} and {GRAPH_TARBALL}, or their "
                                f"extracted folders).")
    links, article_set = _read_graph(root)
    wanted: Optional[Set[str]] = set(titles) if titles is not None else None
    bar = tqdm(total=len(wanted) if wanted is not None else (len(article_set) or None),
               desc="wikispeedia", unit="article", disable=not progress)
    try:
        for name, data in _article_files(root):
            title = decode_title(name)
            if wanted is not None and title not in wanted:
                continue
            bar.update(1)
            raw = data()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace")
                report.skip("not_utf8_decoded_with_replacement")
            kept_links = []
            for target in links.get(name, ()):
                if target == name:
                    report.skip("self_link")
                elif article_set and target not in article_set:
                    report.skip("link_to_missing_page")
                else:
                    kept_links.append(decode_title(target))
            article = parse_plaintext(title, text, links=kept_links)
            if article is None:
                report.skip("empty_article")
            else:
                report.keep()
                yield article
            if wanted is not None:
                wanted.discard(title)
                if not wanted:
                    return
    finally:
        bar.close()


def parse_plaintext(title: str, text: str, links: Sequence[str] = ()) -> Optional[Article]:
    """Parses one plaintext article (layout in the module docstring); None if no prose is left."""
    lines = text.replace("\r\n", "\n").replace("\t", "        ").split("\n")
    body = _drop_captions(_split_enlarge(lines[_body_start(lines):]))
    sections: List[Tuple[str, List[str]]] = [("", [])]
    para: List[str] = []
    kind = "text"  # "text" (base indent), "bullet" (a list item), "deep" (deeper-indented lines)

    def flush():
        nonlocal para
        for run in _prose_runs(para):
            paragraph = _paragraph_text(run)
            if paragraph is not None:
                sections[-1][1].append(paragraph)
        para = []

    def start(new_kind):
        nonlocal kind
        if para and kind != new_kind:
            flush()
        kind = new_kind

    for line in body:
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        if stripped.startswith("Retrieved from"):
            break
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            flush()
            sections.append((stripped, []))
        elif stripped.startswith(_BULLETS) and indent >= _BASE_INDENT:
            flush()
            kind = "bullet"
            para.append(" " * (indent + 2) + stripped[2:])
        elif indent <= _BASE_INDENT:
            start("text")
            para.append(line)
        elif kind == "bullet" and para:
            para.append(line)  # a list item's wrapped continuation
        else:  # deeper-indented non-list lines: tables, succession boxes, block quotes
            start("deep")
            para.append(line)
    flush()
    kept = [Section(heading, tuple(paragraphs)) for i, (heading, paragraphs) in enumerate(sections)
            if i == 0 or (paragraphs and heading.lower() not in BOILERPLATE_HEADINGS)]
    if not any(s.paragraphs for s in kept):
        return None
    seen: Dict[str, None] = {}
    for link in links:
        if link != title:
            seen.setdefault(link, None)
    return Article(title=title, sections=tuple(kept), links=tuple(seen))


def _body_start(lines: List[str]) -> int:
    """Index of the first body line: after the "2007 Schools Wikipedia Selection" paragraph."""
    for i, line in enumerate(lines[:20]):
        if line.startswith("2007 Schools Wikipedia Selection"):
            j = i + 1
            while j < len(lines) and lines[j].strip():
                j += 1
            return j
    # No boilerplate: skip "#copyright" and the unindented title line if present.
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].strip() == "#copyright"):
        i += 1
    if i < len(lines) and lines[i] and not lines[i][0].isspace():
        i += 1
    return i


def _prose_runs(lines: List[str]) -> List[List[str]]:
    """Splits a block of lines into the wrapped-prose paragraphs it holds.

    In wrapped text only a paragraph's last line is short, so the block is cut after every short
    line. A run of two or more lines is wrapped prose; a single line is kept only when it is the
    whole block (a one-line paragraph). Single short lines inside a longer block are infobox
    rows, table rows or image captions without "Enlarge", and are dropped, as are runs with
    aligned columns (three or more spaces inside a line).
    """
    runs: List[List[str]] = [[]]
    for line in lines:
        runs[-1].append(line)
        if len(line.rstrip()) < MIN_WRAPPED_LINE:
            runs.append([])
    runs = [run for run in runs if run and not any(_TABLE_GAP.search(l.strip()) for l in run)]
    if len(lines) == 1:
        return runs
    return [run for run in runs if len(run) >= 2]


def _paragraph_text(lines: List[str]) -> Optional[str]:
    """Joins wrapped lines; None when the text is too short or does not end like a sentence."""
    text = ""
    for line in lines:
        s = line.strip()
        if text.endswith("-") and len(text) > 1 and text[-2].isalnum():
            text += s
        else:
            text = f"{text} {s}" if text else s
    text = _FOOTNOTE.sub("", re.sub(r"\s+", " ", text)).strip()
    if len(text.split()) < MIN_PARAGRAPH_WORDS:
        return None
    return text if _SENTENCE_END.search(text) else None


def _split_enlarge(lines: List[str]) -> List[str]:
    """Puts an "Enlarge" that ends a text line (a few files) on a line of its own."""
    out = []
    for line in lines:
        if line.rstrip().endswith(" Enlarge") and line.strip() != "Enlarge":
            head = line.rstrip()[:-len(" Enlarge")]
            out.extend([head, " " * (len(line) - len(line.lstrip())) + "Enlarge"])
        else:
            out.append(line)
    return out


def _drop_captions(lines: List[str]) -> List[str]:
    """Blanks every "Enlarge" line, the caption before it and the caption's repetition after it.

    Removed lines become blank lines, so the text around a caption splits into paragraphs there.
    """
    out = list(lines)
    for i, line in enumerate(lines):
        if line.strip() != "Enlarge":
            continue
        out[i] = ""
        before = _caption_block(lines, i, -1)
        after = _caption_block(lines, i, +1)
        if not before or not after:
            continue
        after_words = [(j, w) for j in after for w in lines[j].split()]
        matched = False
        for n in range(min(len(before), _MAX_CAPTION_LINES), 0, -1):
            words = [w for j in before[-n:] for w in lines[j].split()]
            if [w for _, w in after_words[:len(words)]] == words:
                for j in before[-n:]:
                    out[j] = ""
                covered = collections.Counter(j for j, _ in after_words[:len(words)])
                for j, count in covered.items():
                    rest = lines[j].split()[count:]
                    out[j] = (lines[j][:len(lines[j]) - len(lines[j].lstrip())] + " ".join(rest)
                              if rest else "")
                matched = True
                break
        if matched:
            continue
        for n in range(min(len(before), len(after), _MAX_CAPTION_LINES), 0, -1):
            a = " ".join(lines[j].strip() for j in before[-n:])
            b = " ".join(lines[j].strip() for j in after[:n])
            if difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.8:
                for j in before[-n:] + after[:n]:
                    out[j] = ""
                break
    return out


def _caption_block(lines: List[str], i: int, step: int) -> List[int]:
    """Indices (in page order) of the nonblank indented block next to line i, skipping blanks."""
    j = i + step
    while 0 <= j < len(lines) and not lines[j].strip():
        j += step
    block = []
    while (0 <= j < len(lines) and lines[j].strip() and lines[j][0].isspace()
           and lines[j].strip() != "Enlarge" and len(block) < 4 * _MAX_CAPTION_LINES):
        block.append(j)
        j += step
    return block if step > 0 else block[::-1]


def _read_graph(root: pathlib.Path) -> Tuple[Dict[str, List[str]], Set[str]]:
    """Reads links.tsv (and articles.tsv when present): URL-encoded names, '#' comments skipped."""
    files = {}
    for folder in (root / GRAPH_DIR, root):
        for name in ("links.tsv", "articles.tsv"):
            if name not in files and (folder / name).is_file():
                files[name] = (folder / name).read_bytes()
    if "links.tsv" not in files and (root / GRAPH_TARBALL).is_file():
        with tarfile.open(root / GRAPH_TARBALL, "r:gz") as tar:
            for member in tar:
                base = os.path.basename(member.name)
                if member.isfile() and base in ("links.tsv", "articles.tsv"):
                    files[base] = tar.extractfile(member).read()
    if "links.tsv" not in files:
        raise FileNotFoundError(f"No links.tsv under {root}: expected {GRAPH_TARBALL} or "
                                f"{GRAPH_DIR}/links.tsv.")
    links: Dict[str, List[str]] = collections.defaultdict(list)
    for lineno, line in enumerate(_tsv_lines(files["links.tsv"]), 1):
        if line is None:
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise ValueError(f"links.tsv line {lineno}: expected 'source<TAB>target', got {line!r}")
        links[fields[0]].append(fields[1])
    article_set = set()
    if "articles.tsv" in files:
        article_set = {line for line in _tsv_lines(files["articles.tsv"]) if line}
    return links, article_set


def _tsv_lines(data: bytes) -> Iterator[Optional[str]]:
    """Lines of a SNAP tsv file; None for comments and blank lines (keeps line numbers)."""
    for line in io.StringIO(data.decode("utf-8")):
        line = line.rstrip("\n")
        yield None if (not line.strip() or line.startswith("#")) else line


def _article_files(root: pathlib.Path):
    """Yields (url-encoded name, read()) for each article file, streaming the tarball."""
    folder = root / ARTICLES_DIR
    if folder.is_dir():
        for path in sorted(folder.glob("*.txt")):
            yield path.name[:-len(".txt")], path.read_bytes
        return
    tarball = root / ARTICLES_TARBALL
    if not tarball.is_file():
        raise FileNotFoundError(f"No articles under {root}: expected {ARTICLES_TARBALL} or "
                                f"{ARTICLES_DIR}/.")
    with tarfile.open(tarball, "r|gz") as tar:
        for member in tar:
            base = os.path.basename(member.name)
            if member.isfile() and base.endswith(".txt"):
                # Read lazily, while this member is the stream's current one.
                yield base[:-len(".txt")], (lambda m=member: tar.extractfile(m).read())
