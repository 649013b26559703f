"""Sentences and passages: the units the pretraining tasks draw queries and documents from.

Chang et al. 2020, Sec. 3: queries are sentences, documents are passages of at most 288 tokens
(the document length of the paper's document tower). Sentences come from blingfire; passages
follow paragraph boundaries (see :func:`make_passages` for the exact rule).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional, Tuple

import blingfire

from tt_zoo.data.articles import Article

DEFAULT_MAX_TOKENS = 288  # the paper's document length (Chang et al. 2020, Sec. 4)
DEFAULT_MIN_TOKENS = 64


def sentence_spans(text: str) -> List[Tuple[int, int]]:
    """The one sentence splitter (blingfire): ``(start, end)`` character offsets into ``text``.

    One span per non-empty sentence, in order, end exclusive, without surrounding whitespace.
    If blingfire finds no sentence in a non-blank text, the whole (stripped) text is one.
    ReQA needs the offsets (to find the sentence holding an answer); everything else reads the
    sentences themselves through :func:`split_sentences`.

    Example:
      >>> sentence_spans("It rains. It pours!")
      [(0, 9), (10, 19)]
    """
    if not text or not text.strip():
        return []
    _, offsets = blingfire.text_to_sentences_and_offsets(text)
    spans = []
    for start, end in offsets:
        # blingfire's spans exclude surrounding whitespace; trim defensively anyway.
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
    if not spans:  # blingfire failed on this text: the text is one sentence.
        stripped = text.strip()
        start = text.index(stripped)
        spans = [(start, start + len(stripped))]
    return spans


def split_sentences(text: str) -> List[str]:
    """The sentences of ``text``: ``text[start:end]`` for each of :func:`sentence_spans`.

    Each sentence is an exact substring of ``text`` (a line break inside a sentence stays a
    line break; WordPiece tokenization treats it as any other whitespace).

    Example:
      >>> split_sentences("It rains. It pours!")
      ['It rains.', 'It pours!']
    """
    return [text[start:end] for start, end in sentence_spans(text)]


def whitespace_token_count(text: str) -> int:
    """The default token counter: whitespace-separated words (approximates WordPiece tokens)."""
    return len(text.split())


@dataclasses.dataclass(frozen=True)
class Passage:
    """A passage of an article.

    Args:
      title: the article's title.
      section_index: index of the section in ``article.sections`` (0 is the lead section).
      index: position of the passage among the article's passages (0, 1, ...).
      text: the passage text (paragraphs joined by a space).
    """

    title: str
    section_index: int
    index: int
    text: str

    @property
    def in_lead(self) -> bool:
        """Whether the passage comes from the lead ("first") section, the BFS/WLP query source."""
        return self.section_index == 0

    @property
    def doc_id(self) -> str:
        """Stable identifier: ``"{title}#{index}"`` (titles never contain '#')."""
        return f"{self.title}#{self.index}"


def make_passages(article: Article, max_tokens: int = DEFAULT_MAX_TOKENS,
                  count_tokens: Optional[Callable[[str], int]] = None,
                  min_tokens: int = DEFAULT_MIN_TOKENS) -> List[Passage]:
    """Cuts an article into passages of at most ``max_tokens`` tokens, at paragraph boundaries.

    The rule, applied section by section (a passage never spans two sections):

    1. A paragraph of at most ``max_tokens`` tokens is one unit. A longer one is split at
       sentence boundaries (blingfire) into units packed greedily with whole sentences; a single
       sentence longer than the budget is cut at word boundaries.
    2. Units are merged greedily: the next unit is appended to the current passage while the
       current passage is shorter than ``min_tokens`` and the sum stays within ``max_tokens``.
       So short paragraphs (a one-line paragraph, the tail of a split paragraph) join their
       neighbour, while paragraphs of ordinary length stay passages of their own.

    Args:
      article: the article.
      max_tokens: the passage budget; 288 is the paper's document length.
      count_tokens: counts the tokens of a text; defaults to whitespace words, an approximation
        of WordPiece tokens. It must be additive over whitespace-separated words (true for
        whitespace words and for BERT WordPiece), since long sentences are cut word by word.
      min_tokens: passages shorter than this absorb the next unit of the same section.

    Returns:
      The passages in page order, ``index`` 0, 1, ...
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive (got {max_tokens}).")
    count = count_tokens or whitespace_token_count
    passages: List[Passage] = []
    for section_index, section in enumerate(article.sections):
        current: List[str] = []
        current_count = 0
        for paragraph in section.paragraphs:
            for unit, unit_count in _units(paragraph, max_tokens, count):
                if current and current_count < min_tokens and current_count + unit_count <= max_tokens:
                    current.append(unit)
                    current_count += unit_count
                    continue
                if current:
                    passages.append(Passage(article.title, section_index, len(passages),
                                            " ".join(current)))
                current, current_count = [unit], unit_count
        if current:
            passages.append(Passage(article.title, section_index, len(passages), " ".join(current)))
    return passages


def _units(paragraph: str, max_tokens: int, count):
    """Yields (text, token count) pieces of a paragraph, each within max_tokens."""
    n = count(paragraph)
    if n <= max_tokens:
        if n > 0:
            yield paragraph, n
        return
    yield from _pack((part for sentence in split_sentences(paragraph)
                      for part in _cut_words(sentence, max_tokens, count)), max_tokens)


def _cut_words(sentence: str, max_tokens: int, count):
    """Yields the sentence whole, or cut at word boundaries when it exceeds max_tokens."""
    n = count(sentence)
    if n <= max_tokens:
        yield sentence, n
        return
    yield from _pack(((word, count(word)) for word in sentence.split()), max_tokens)


def _pack(parts, max_tokens: int):
    """Greedily joins (text, token count) parts, in order, into chunks of at most max_tokens."""
    chunk: List[str] = []
    chunk_count = 0
    for text, n in parts:
        if chunk and chunk_count + n > max_tokens:
            yield " ".join(chunk), chunk_count
            chunk, chunk_count = [], 0
        chunk.append(text)
        chunk_count += n
    if chunk:
        yield " ".join(chunk), chunk_count


DPR_PASSAGE_WORDS = 100  # Karpukhin et al. 2020, Sec. 4.1: disjoint 100-word text blocks


def word_passages(article: Article, words: int = DPR_PASSAGE_WORDS) -> List[Passage]:
    """Cuts an article DPR-style into consecutive, disjoint blocks of ``words`` whitespace words
    over its whole text (every section's paragraphs in page order; the last block may be
    shorter), the title kept apart (Karpukhin et al. 2020, Sec. 4.1). The open-domain QA
    benchmark's passages (`tt_zoo.evaluation.odqa`); each passage's ``section_index`` is the
    section its first word comes from.
    """
    if words < 1:
        raise ValueError(f"words must be positive (got {words}).")
    tokens: List[Tuple[str, int]] = [(w, s) for s, section in enumerate(article.sections)
                                     for paragraph in section.paragraphs
                                     for w in paragraph.split()]
    return [Passage(article.title, tokens[start][1], i,
                    " ".join(w for w, _ in tokens[start:start + words]))
            for i, start in enumerate(range(0, len(tokens), words))]
