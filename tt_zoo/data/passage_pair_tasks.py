"""Pair sources past the paper that need only one article's passages: Contriever's independent
crops, Spider's recurring spans, and ProQA's generated questions.

Chang et al. 2020 pretrain on ICT, BFS and WLP (``tt_zoo.data.pretraining_tasks``). Their
successors beat BM25 on open-domain questions without labels, and are built here the same way:
pure functions of (an article's passages, a seeded ``random.Random``), called for each pair slot
by :func:`tt_zoo.data.pretraining_tasks.pairs_for_article`, so the local and the Beam pipelines
give the same pairs. Each returns ``(query, document passage, document text)`` or a skip reason.

* ``crop`` (Izacard et al. 2021, *Unsupervised Dense Information Retrieval with Contrastive
  Learning*, Sec. 3.2): two *independent* random spans of one passage; each span's length is a
  ratio of the passage length drawn uniformly in [0.1, 0.5], and each word is then deleted with
  probability 0.1 (the paper's token deletion). The query is the first crop, the document the
  second under the page title (our document tower reads "title [SEP] text", as users' passages).
  Contriever crops chunks of 256 tokens; with ``source_words`` N the crops come from a window of
  N contiguous words of the article (across its passages, in page order) instead of from one
  passage, whose paragraph-bounded length is often far shorter.
* ``span`` (Ram et al. 2022, *Learning to Retrieve Passages without Supervision*, Sec. 3):
  a *recurring span* is a word n-gram (2 to 10 words, not only stop words) that occurs in two or
  more passages of the article; one such span is drawn (maximal ones only, see
  :func:`recurring_spans`), then two passages that hold it; the query is a window of words of
  the first passage around the span, with the span removed (kept with probability
  ``span_keep_prob``, 0.5 in Spider), and the document is the second passage under the title.
* ``qgen`` (Xiong et al. 2020, ProQA): the query is a question a
  :class:`tt_zoo.data.question_generation.QuestionGenerator` writes for a random passage, and the
  document is that passage under the title.
"""

from __future__ import annotations

import bisect
import functools
import random
import re
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

from tt_zoo.data.passages import Passage

# (query, the document's passage, the document's text) or the reason the slot was skipped.
Drawn = Union[Tuple[str, Passage, str], str]

_WORD_CHARS = re.compile(r"[^\w]+", re.UNICODE)


@functools.lru_cache(maxsize=1)
def stop_words() -> FrozenSet[str]:
    """scikit-learn's English stop words (318, the Glasgow list; bm25s's list of 33 lets
    fragments such as "would have been" through)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # noqa: PLC0415

    return frozenset(ENGLISH_STOP_WORDS)


def normalize_word(word: str) -> str:
    """A word's matching key: lower case, punctuation stripped ("Rhine's," -> "rhine s")."""
    return _WORD_CHARS.sub(" ", word.lower()).strip()


# ----------------------------------------------------------------------------- crop

def random_crop(words: Sequence[str], rng: random.Random, min_ratio: float, max_ratio: float,
                deletion_prob: float) -> List[str]:
    """One Contriever crop: a contiguous span of ``round(r * len(words))`` words (at least
    one), r ~ U[min_ratio, max_ratio], its start uniform; then each word is deleted with
    probability ``deletion_prob`` (never all of them)."""
    length = max(1, int(round(rng.uniform(min_ratio, max_ratio) * len(words))))
    start = rng.randrange(len(words) - length + 1)
    crop = list(words[start:start + length])
    kept = [w for w in crop if rng.random() >= deletion_prob]
    return kept or crop[:1]


def crop_pair(passages: Sequence[Passage], rng: random.Random, *, min_words: int,
              min_ratio: float, max_ratio: float, deletion_prob: float,
              source_words: int = 0,
              article: Optional[Tuple[List[str], List[int]]] = None) -> Drawn:
    """A ``crop`` pair: two independent crops of one random passage of at least ``min_words``
    words (Izacard et al. 2021, Sec. 3.2), or with ``source_words`` > 0 of one window of that
    many contiguous words of the article (all of it when shorter), its passage the one the
    window starts in. ``article``: `article_words(passages)`, when the caller made it once for
    all of an article's slots."""
    if source_words > 0:
        return _crop_pair_of_window(passages, article or article_words(passages), rng,
                                    source_words, min_words=min_words,
                                    min_ratio=min_ratio, max_ratio=max_ratio,
                                    deletion_prob=deletion_prob)
    pool = [p for p in passages if len(p.text.split()) >= min_words]
    if not pool:
        return "short_passage"
    passage = rng.choice(pool)
    words = passage.text.split()
    query = random_crop(words, rng, min_ratio, max_ratio, deletion_prob)
    document = random_crop(words, rng, min_ratio, max_ratio, deletion_prob)
    return " ".join(query), passage, " ".join(document)


def article_words(passages: Sequence[Passage]) -> Tuple[List[str], List[int]]:
    """The article's words in page order, and the offset where each passage starts."""
    words, starts = [], []
    for passage in passages:
        starts.append(len(words))
        words += passage.text.split()
    return words, starts


def _crop_pair_of_window(passages: Sequence[Passage], article: Tuple[List[str], List[int]],
                         rng: random.Random, source_words: int, *, min_words: int,
                         **crop) -> Drawn:
    words, starts = article
    if len(words) < min_words:
        return "short_passage"
    length = min(source_words, len(words))
    start = rng.randrange(len(words) - length + 1)
    window = words[start:start + length]
    query = random_crop(window, rng, **crop)
    document = random_crop(window, rng, **crop)
    return " ".join(query), passages[bisect.bisect_right(starts, start) - 1], " ".join(document)


# ----------------------------------------------------------------------------- span

Span = Tuple[str, ...]


def recurring_spans(passages: Sequence[Passage], *, min_words: int = 2,
                    max_words: int = 10) -> Dict[Span, Tuple[int, ...]]:
    """The article's maximal recurring spans (Ram et al. 2022, Sec. 3.1): normalised word
    n-grams of ``min_words``..``max_words`` words that occur in at least two passages, mapped to
    the positions (in ``passages``) that hold them.

    Spider keeps spans that are not only stop words; here a span must also begin and end with a
    word that is not a stop word (nor only digits throughout), which drops phrase fragments such
    as "some of" or "argued that" and keeps "dr beeching" and "replacement bus services".
    Maximal: a span inside a longer qualifying one is dropped, so a long shared phrase counts
    once, not once for each of its sub-phrases.
    """
    stops = stop_words()
    keys = [[normalize_word(w) for w in p.text.split()] for p in passages]
    # Bigrams first; longer n-grams only grow from positions where the shorter one recurs.
    by_length: Dict[int, Dict[Span, set]] = {}
    starts = [list(range(len(k))) for k in keys]
    for n in range(min_words, max_words + 1):
        seen: Dict[Span, set] = {}
        for i, words in enumerate(keys):
            for s in starts[i]:
                if s + n <= len(words):
                    gram = tuple(words[s:s + n])
                    if all(gram):
                        seen.setdefault(gram, set()).add(i)
        recurring = {g: ps for g, ps in seen.items() if len(ps) >= 2}
        if not recurring:
            break
        by_length[n] = recurring
        starts = [[s for s in starts[i] if tuple(keys[i][s:s + n]) in recurring]
                  for i in range(len(keys))]
    qualifying = {gram: holders for grams in by_length.values() for gram, holders in grams.items()
                  if gram[0] not in stops and gram[-1] not in stops
                  and not all(w.isdigit() or w in stops for w in gram)}
    covered = set()
    for gram in qualifying:  # every shorter n-gram inside a qualifying one is not maximal
        n = len(gram)
        covered.update(gram[s:s + m] for m in range(min_words, n) for s in range(n - m + 1))
    return {gram: tuple(sorted(holders)) for gram, holders in qualifying.items()
            if gram not in covered}


def find_span(words: Sequence[str], span: Span) -> List[int]:
    """The word positions where ``span`` (normalised words) starts in ``words`` (raw words)."""
    keys = [normalize_word(w) for w in words]
    n = len(span)
    return [s for s in range(len(keys) - n + 1) if tuple(keys[s:s + n]) == span]


def span_pair(passages: Sequence[Passage], rng: random.Random, *, min_words: int,
              max_words: int, query_words: int, keep_prob: float,
              spans: Optional[Dict[Span, Tuple[int, ...]]] = None) -> Drawn:
    """A ``span`` pair (Ram et al. 2022, Sec. 3): a random maximal recurring span, two passages
    that hold it; the query is a window of ``query_words`` words of the first around one
    occurrence, the span removed unless kept (probability ``keep_prob``); the document is the
    second passage. ``spans`` is :func:`recurring_spans` of ``passages`` when already computed."""
    if spans is None:
        spans = recurring_spans(passages, min_words=min_words, max_words=max_words)
    if not spans:
        return "no_recurring_span"
    span = rng.choice(sorted(spans))
    first, second = rng.sample(spans[span], 2)
    words = passages[first].text.split()
    start = rng.choice(find_span(words, span))
    n = len(span)
    width = max(query_words, n)
    lo = rng.randint(max(0, start + n - width), min(start, max(0, len(words) - width)))
    window = words[lo:lo + width]
    if rng.random() >= keep_prob:
        window = window[:start - lo] + window[start - lo + n:]
    if not window:
        return "empty_query"
    return " ".join(window), passages[second], passages[second].text


# ----------------------------------------------------------------------------- qgen

def qgen_pair(passages: Sequence[Passage], rng: random.Random, generator) -> Drawn:
    """A ``qgen`` pair (Xiong et al. 2020): the question ``generator`` writes for a random
    passage (tried in a random order until one yields a question), and that passage."""
    order = list(passages)
    rng.shuffle(order)
    for passage in order:
        made = generator.generate(passage.title, passage.text, rng)
        if made is not None:
            return made[0], passage, passage.text
    return "no_question"
