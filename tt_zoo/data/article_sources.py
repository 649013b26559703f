"""Article sources: JSON Lines, Hugging Face ``datasets``, and one dispatcher over all readers.

Every reader streams :class:`tt_zoo.data.articles.Article`s (the page model behind the pretraining
tasks of Chang et al. 2020, Sec. 3: paragraphs for ICT, the first section for BFS/WLP, links for
WLP) and counts what it kept and skipped in an optional :class:`ReadReport`.

* :func:`read_jsonl_articles` / :func:`write_jsonl_articles`: our own JSON Lines schema, one
  ``Article.to_json()`` object per line, plain or gzip-compressed.
* :func:`read_hf_articles`: a Hugging Face dataset with a title and a plain-text column (the
  ``wikipedia`` / ``wikimedia/wikipedia`` layout), split into sections by :func:`text_to_sections`.
* :func:`read_articles`: picks the reader from the shape of a source string.
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import re
from typing import Iterable, Iterator, List, Optional, Tuple

from tqdm.auto import tqdm

from tt_zoo.data.articles import Article, ReadReport, Section
from tt_zoo.atomic_io import open_for_replace
from tt_zoo.errors import TtZooError
from tt_zoo.data.inputs import open_input
from tt_zoo.data.mediawiki import DROPPED_SECTIONS, normalize_title, read_mediawiki_dump
from tt_zoo.data.wikispeedia import read_wikispeedia


class ArticleFormatError(TtZooError):
    """An input record that does not hold an article in the expected format."""


def _check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "skip"):
        raise ValueError(f'on_error must be "raise" or "skip" (got {on_error!r}).')


# --------------------------------------------------------------------------------------------
# JSON Lines
# --------------------------------------------------------------------------------------------


def _article_from_record(obj) -> Article:
    """Validates one JSON object against the ``Article.to_json()`` schema and builds it."""
    if not isinstance(obj, dict):
        raise ArticleFormatError(f"expected a JSON object, got {type(obj).__name__}")
    title = obj.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ArticleFormatError(f'"title" must be a non-empty string (got {title!r})')
    sections = obj.get("sections")
    if not isinstance(sections, list):
        raise ArticleFormatError(f'"sections" must be a list (got {type(sections).__name__})')
    for index, section in enumerate(sections):
        if not isinstance(section, dict):
            raise ArticleFormatError(f"sections[{index}] must be an object")
        if not isinstance(section.get("heading", ""), str):
            raise ArticleFormatError(f'sections[{index}]["heading"] must be a string')
        paragraphs = section.get("paragraphs")
        if not isinstance(paragraphs, list) or not all(isinstance(p, str) for p in paragraphs):
            raise ArticleFormatError(f'sections[{index}]["paragraphs"] must be a list of strings')
    links = obj.get("links", [])
    if not isinstance(links, list) or not all(isinstance(link, str) for link in links):
        raise ArticleFormatError('"links" must be a list of strings')
    return Article.from_json(obj)


def read_jsonl_articles(path, report: Optional[ReadReport] = None, progress: bool = True, *,
                        on_error: str = "raise") -> Iterator[Article]:
    """Streams articles from JSON Lines in the ``Article.to_json()`` schema (``.jsonl[.gz]``).

    Blank lines are ignored. A line that is not UTF-8 (``bad_utf8``), not JSON
    (``malformed_json``) or not an article (``bad_record``) raises an :class:`ArticleFormatError`
    naming the file and line, or with ``on_error="skip"`` is skipped and counted in ``report``;
    an article without paragraphs is skipped and counted as ``empty_article``.

    Example:
      >>> write_jsonl_articles(articles, "/tmp/articles.jsonl.gz")
      >>> again = list(read_jsonl_articles("/tmp/articles.jsonl.gz", progress=False))
    """
    _check_on_error(on_error)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"JSON Lines file {os.fspath(path)!r} does not exist or is not a file.")
    return _read_jsonl(os.fspath(path), report if report is not None else ReadReport(),
                       progress, on_error)


def _read_jsonl(path, report, progress, on_error) -> Iterator[Article]:
    with open_input(path, progress) as (stream, _):
        for line_number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ArticleFormatError(f"not UTF-8 ({error})") from error
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ArticleFormatError(f"not valid JSON ({error})") from error
                article = _article_from_record(obj)
            except ArticleFormatError as error:
                cause = error.__cause__
                reason = ("bad_utf8" if isinstance(cause, UnicodeDecodeError) else
                          "malformed_json" if isinstance(cause, json.JSONDecodeError) else
                          "bad_record")
                if on_error == "raise":
                    raise ArticleFormatError(
                        f"{path}, line {line_number}: expected one article as a JSON object "
                        f"in the Article.to_json() schema: {error}") from error
                report.skip(reason)
                continue
            if not article.paragraphs:
                report.skip("empty_article")
                continue
            report.keep()
            yield article


def write_jsonl_articles(articles: Iterable[Article], path, progress: bool = False) -> int:
    """Writes articles as JSON Lines (gzip-compressed when ``path`` ends with ``.gz``).

    The file is written to a temporary name beside ``path`` and renamed when complete, so an
    interrupted write leaves no partial file. Returns the number of articles written.
    """
    path = os.fspath(path)
    count = 0
    with open_for_replace(path, "wb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="wb") if path.endswith(".gz") else raw
        with stream:
            for article in tqdm(articles, desc=f"writing {os.path.basename(path)}",
                                unit="article", disable=not progress, leave=False):
                line = json.dumps(article.to_json(), ensure_ascii=False)
                stream.write(line.encode("utf-8") + b"\n")
                count += 1
    return count


# --------------------------------------------------------------------------------------------
# Plain text -> sections (Hugging Face wikipedia layout)
# --------------------------------------------------------------------------------------------

_MARKED_HEADING = re.compile(r"^\s*(?:(=+)\s*(.+?)\s*=+|(#{1,6})\s+(.+?))\s*$")
_SENTENCE_END = tuple(".!?;:,\"')]}\u201d\u2019\u2026")


def _heading_of(block: str, max_heading_chars: int) -> Optional[str]:
    """The heading text if a paragraph block looks like a heading, else None.

    A block is a heading when it is one line that is either marked up (``== H ==``,
    ``## H``) or short (at most ``max_heading_chars``), starts with a letter or digit and does
    not end like a sentence (``.``, ``!``, ``?``, ``:``, quotes, ...).
    """
    if "\n" in block:
        return None
    marked = _MARKED_HEADING.match(block)
    if marked:
        return (marked.group(2) or marked.group(4)).strip()
    text = block.strip()
    if (0 < len(text) <= max_heading_chars and text[0].isalnum()
            and not text.endswith(_SENTENCE_END)):
        return text
    return None


def text_to_sections(text: str, title: str = "", min_paragraph_chars: int = 20,
                     max_heading_chars: int = 80,
                     dropped_sections: frozenset = DROPPED_SECTIONS) -> Tuple[Section, ...]:
    """Splits a plain-text article (e.g. the Hugging Face ``wikipedia`` layout) into sections.

    What it does, exactly:

    1. Paragraph blocks are separated by blank lines; when the text has no blank line at all,
       every non-empty line is a block. Lines inside a block are joined with a space.
    2. A block that is heading-like (see :func:`_heading_of`: ``== H ==``/``## H`` markup, or a
       single short line not ending like a sentence) *and is followed by another block* starts
       a new section with that heading. Everything before the first heading is the lead
       section (``sections[0]``, heading ``""``); a first block equal to ``title`` is dropped.
    3. Paragraphs shorter than ``min_paragraph_chars`` are dropped, sections whose heading is
       in ``dropped_sections`` (see also, references, ...) are dropped, non-lead sections left
       without paragraphs are dropped; the lead section is always kept, possibly empty.

    Heading detection is a heuristic: a short, unpunctuated one-line paragraph inside the
    body (a caption, a title line) also becomes a heading.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if re.search(r"\n[ \t]*\n", text):
        blocks = [b.strip() for b in re.split(r"\n[ \t]*\n", text)]
    else:
        blocks = [line.strip() for line in text.split("\n")]
    blocks = [b for b in blocks if b]
    if blocks and title and blocks[0].strip() == title.strip():
        blocks = blocks[1:]
    chunks: List[Tuple[str, List[str]]] = [("", [])]
    for index, block in enumerate(blocks):
        heading = _heading_of(block, max_heading_chars) if index + 1 < len(blocks) else None
        if heading is not None:
            chunks.append((heading, []))
        else:
            paragraph = " ".join(block.split())
            if len(paragraph) >= min_paragraph_chars:
                chunks[-1][1].append(paragraph)
    sections = []
    for index, (heading, paragraphs) in enumerate(chunks):
        if index and (heading.lower().rstrip(":") in dropped_sections or not paragraphs):
            continue
        sections.append(Section(heading, tuple(paragraphs)))
    return tuple(sections)


# --------------------------------------------------------------------------------------------
# Hugging Face datasets
# --------------------------------------------------------------------------------------------


def _is_saved_dataset(path: pathlib.Path) -> bool:
    """Whether ``path`` is a folder written by ``Dataset(Dict).save_to_disk``."""
    return path.is_dir() and any((path / name).is_file() for name in
                                 ("state.json", "dataset_info.json", "dataset_dict.json"))


def _load_hf(dataset_or_name, split: str, load_kwargs: dict):
    import datasets  # heavy import: only when Hugging Face input is used

    if isinstance(dataset_or_name, (datasets.Dataset, datasets.IterableDataset)):
        return dataset_or_name
    if isinstance(dataset_or_name, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        dataset = dataset_or_name
    else:
        name = os.fspath(dataset_or_name)
        path = pathlib.Path(name)
        if _is_saved_dataset(path):
            dataset = datasets.load_from_disk(name, **load_kwargs)
        else:
            return datasets.load_dataset(name, split=split, **load_kwargs)
    if isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        if split not in dataset:
            raise ValueError(f"Dataset {dataset_or_name!r} has no split {split!r}; "
                           f"its splits are {sorted(dataset)}.")
        dataset = dataset[split]
    return dataset


def read_hf_articles(dataset_or_name, *, split: str = "train", title_column: str = "title",
                     text_column: str = "text", links_column: Optional[str] = None,
                     report: Optional[ReadReport] = None, progress: bool = True,
                     min_paragraph_chars: int = 20, on_error: str = "raise",
                     **load_kwargs) -> Iterator[Article]:
    """Streams articles from a Hugging Face ``datasets`` dataset of plain-text pages.

    Args:
      dataset_or_name: a ``datasets.Dataset``/``IterableDataset``/``DatasetDict``, a folder
        written by ``save_to_disk``, a local data folder or a hub name for ``load_dataset``
        (e.g. ``"wikimedia/wikipedia"`` with ``name="20231101.en"`` in ``load_kwargs``).
      split: the split to read from a dataset dict / ``load_dataset``.
      title_column, text_column: the columns holding the title and the plain text, split into
        sections by :func:`text_to_sections`.
      links_column: optional column holding a list of linked titles (normalised with
        :func:`tt_zoo.data.mediawiki.normalize_title`); without it, articles have no links.
      report: counts ``missing_title``, ``empty_article`` and (with ``on_error="skip"``)
        ``bad_row`` (a text or links value of the wrong type).
      on_error: "raise" an :class:`ArticleFormatError` naming the row, or "skip" and count.
      load_kwargs: passed to ``datasets.load_dataset`` / ``load_from_disk``.

    Raises:
      ValueError: a column or the split is missing; the message lists what there is.

    Example:
      >>> ds = datasets.Dataset.from_dict({"title": ["A"], "text": ["A is a letter of the alphabet."]})
      >>> [a.lead.paragraphs for a in read_hf_articles(ds, progress=False)]
      [('A is a letter of the alphabet.',)]
    """
    _check_on_error(on_error)
    dataset = _load_hf(dataset_or_name, split, load_kwargs)
    columns = dataset.column_names
    if columns is not None:
        wanted = [c for c in (title_column, text_column, links_column) if c is not None]
        missing = [c for c in wanted if c not in columns]
        if missing:
            label = (repr(os.fspath(dataset_or_name))
                     if isinstance(dataset_or_name, (str, os.PathLike)) else "given")
            raise ValueError(f"Dataset {label} has no column(s) {missing}; its columns are "
                             f"{list(columns)}. Pass title_column=/text_column=/links_column= "
                             f"to name them.")
    return _read_hf(dataset, title_column, text_column, links_column,
                    report if report is not None else ReadReport(), progress,
                    min_paragraph_chars, on_error)


def _read_hf(dataset, title_column, text_column, links_column, report, progress,
             min_paragraph_chars, on_error) -> Iterator[Article]:
    try:
        total = len(dataset)
    except TypeError:  # IterableDataset
        total = None
    rows = tqdm(dataset, total=total, desc="hf articles", unit="article",
                disable=not progress, leave=False)
    for row_number, row in enumerate(rows):
        title, text = row.get(title_column), row.get(text_column)
        links = row.get(links_column) if links_column else []
        problem = None
        if text is not None and not isinstance(text, str):
            problem = f"{text_column!r} must be a string (got {type(text).__name__})"
        elif links is not None and not (isinstance(links, (list, tuple))
                                        and all(isinstance(x, str) for x in links)):
            problem = f"{links_column!r} must be a list of strings (got {links!r:.80})"
        if problem:
            if on_error == "raise":
                raise ArticleFormatError(f"row {row_number} (title {title!r}): {problem}")
            report.skip("bad_row")
            continue
        if not isinstance(title, str) or not title.strip():
            report.skip("missing_title")
            continue
        sections = text_to_sections(text or "", title, min_paragraph_chars)
        if not any(s.paragraphs for s in sections):
            report.skip("empty_article")
            continue
        link_titles = dict.fromkeys(t for t in map(normalize_title, links or []) if t)
        report.keep()
        yield Article(title=title.strip(), sections=sections, links=tuple(link_titles))


# --------------------------------------------------------------------------------------------
# Dispatcher
# --------------------------------------------------------------------------------------------

_XML_NAME = re.compile(r"\.xml(?:\.bz2|\.gz)?$|\.xml-[^/]*\.bz2$", re.IGNORECASE)
_JSONL_NAME = re.compile(r"\.jsonl(?:\.gz)?$", re.IGNORECASE)
_WIKISPEEDIA_TARBALL = "wikispeedia_articles_plaintext.tar.gz"

ACCEPTED_SOURCES = (
    "a MediaWiki XML dump: *.xml, *.xml.bz2, *.xml.gz, or a partitioned *.xml-*.bz2",
    "JSON Lines in the Article.to_json() schema: *.jsonl, *.jsonl.gz",
    "Wikispeedia: a folder holding plaintext_articles/ or the SNAP tarballs, or "
    "wikispeedia_*.tar.gz",
    "Hugging Face: hf:NAME (datasets.load_dataset) or a save_to_disk folder",
)


def _is_wikispeedia(path: pathlib.Path) -> bool:
    if path.is_dir():
        return (path / "plaintext_articles").is_dir() or (path / _WIKISPEEDIA_TARBALL).is_file()
    return path.is_file() and path.name.lower().startswith("wikispeedia") \
        and path.name.lower().endswith((".tar.gz", ".tgz"))


def read_articles(source, *, report: Optional[ReadReport] = None, progress: bool = True,
                  **kwargs) -> Iterator[Article]:
    """Reads articles from any supported source, chosen by its path or prefix.

    ``*.xml``/``*.xml.bz2``/``*.xml.gz`` (and partitioned ``*.xml-p1p41242.bz2``) ->
    :func:`tt_zoo.data.mediawiki.read_mediawiki_dump`; ``*.jsonl``/``*.jsonl.gz`` ->
    :func:`read_jsonl_articles`; a Wikispeedia folder or tarball ->
    ``tt_zoo.data.wikispeedia.read_wikispeedia``; ``hf:NAME`` or a ``save_to_disk`` folder ->
    :func:`read_hf_articles`. ``kwargs`` go to the chosen reader. The source is resolved
    when called, so an unknown or missing source fails here, not at the first ``next()``.

    Raises:
      ValueError: the source matches none of :data:`ACCEPTED_SOURCES` (listed in the message).
      FileNotFoundError: a path-like source that does not exist.
    """
    source = os.fspath(source)
    if source.startswith("hf:"):
        return read_hf_articles(source[3:], report=report, progress=progress, **kwargs)
    path = pathlib.Path(source)
    if _XML_NAME.search(path.name) and path.is_file():
        return read_mediawiki_dump(path, report=report, progress=progress, **kwargs)
    if _JSONL_NAME.search(path.name) and path.is_file():
        return read_jsonl_articles(path, report=report, progress=progress, **kwargs)
    if _is_wikispeedia(path):
        return read_wikispeedia(source, report=report, progress=progress, **kwargs)
    if _is_saved_dataset(path):
        return read_hf_articles(source, report=report, progress=progress, **kwargs)
    accepted = "\n  - ".join(ACCEPTED_SOURCES)
    if not path.exists():
        raise FileNotFoundError(f"Article source {source!r} does not exist. Accepted sources:"
                                f"\n  - {accepted}")
    raise ValueError(f"Cannot tell what kind of article source {source!r} is. Accepted "
                     f"sources:\n  - {accepted}")
