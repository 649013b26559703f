"""The paragraph-level pretraining tasks ICT, BFS and WLP, and the MLM baseline.

Chang et al. 2020, Sec. 3. Each task turns unlabeled articles into positive (query, document)
pairs:

* ICT (Inverse Cloze Task): q = a random sentence of a passage; d = the rest of the passage,
  with the article title as the document's first segment ("title [SEP] passage"). As in ORQA
  (Lee et al. 2019), the sentence is left in the document with a small probability (10%).
* BFS (Body First Selection): q = a random sentence of the first (lead) section of page A;
  d = a random passage of A.
* WLP (Wiki Link Prediction): q = a random sentence of the lead section of page A; d = a passage
  of another page B that links to A.
* ICT+BFS+WLP: every pair draws its task uniformly from the three.
* MLM: the token-level masked-LM baseline, as Model Garden BERT pretraining examples.

Past the paper, three successors (``tt_zoo.data.passage_pair_tasks``): ``crop`` (Contriever's
independent random crops), ``span`` (Spider's recurring spans) and ``qgen`` (ProQA's generated
questions). Any subset of the six is a mixture; each pair draws its task uniformly.

This module is the ONE implementation of the task logic; the single-machine path
(:func:`generate_pairs`) and the Beam pipeline (``tt_zoo.data.beam_pairs``) both call
:func:`linking_passages` and :func:`pairs_for_article`.

Decisions (documented here once):

* Determinism: every article draws from ``random.Random`` seeded with a SHA-256 of
  ``(config.seed, article title)`` (:func:`stable_seed`), never Python's salted ``hash()``, and
  WLP candidates are sorted by ``doc_id`` first, so the pairs do not depend on article order,
  worker, or process.
* Queries are drawn uniformly among the eligible sentences (at least ``min_query_words``
  words); a slot is skipped only when no eligible sentence (or document) exists. ICT first
  decides whether the query stays in the document, then draws a passage uniformly among those
  that can serve (an eligible sentence, and a second sentence when the query is removed), then
  the sentence.
* ``doc_id`` is always the passage's :attr:`Passage.doc_id`, also for an ICT document with its
  query sentence removed: two ICT pairs from the same passage have (nearly) the same document,
  so in-batch accidental-hit removal must treat them as one document, and q(d) counts passages.
* BFS documents exclude the passage the query sentence came from (a page of one passage gives
  no BFS pair): the paper's BFS pairs a lead sentence with *another* part of the page.
* WLP: :func:`linking_passages` picks, in page B, a passage that mentions A's title when one
  does (likely the passage holding the hyperlink; the plain text has no anchors), otherwise any
  passage of B, deterministically.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import math
import os
import random
import collections.abc
from typing import (Callable, Counter, Dict, Iterable, Iterator, List, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from tt_zoo.data import passage_pair_tasks
from tt_zoo.data.articles import Article
from tt_zoo.data.passages import Passage, make_passages, split_sentences

PAPER_TASKS = ("ict", "bfs", "wlp")
SUCCESSOR_TASKS = ("crop", "span", "qgen")
TASKS = PAPER_TASKS + SUCCESSOR_TASKS


@dataclasses.dataclass(frozen=True)
class Pair:
    """A positive (query, document) pair.

    Args:
      query: the query sentence.
      doc_title: the document's first segment (the title of the page the passage comes from).
      doc_text: the document's second segment (the passage; for ICT without the query sentence
        unless it was kept).
      doc_id: identifies the document (the passage) for accidental-hit removal and q(d).
      task: one of TASKS.
    """

    query: str
    doc_title: str
    doc_text: str
    doc_id: str
    task: str


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """How pairs are generated.

    Args:
      tasks: the task mixture; each pair draws one uniformly (Chang et al. 2020, Sec. 3).
      pairs_per_article: slots per article (query page); impossible slots are skipped.
      ict_keep_query_prob: probability that ICT leaves the query sentence in the document
        (0.1, as ORQA).
      max_doc_tokens: passage budget for :func:`tt_zoo.data.passages.make_passages` (paper: 288).
      min_query_words: a query sentence needs at least this many words.
      seed: the base seed; pairs are a pure function of (seed, article, its WLP candidates).
      crop_min_ratio, crop_max_ratio: a crop's length is a ratio of its passage's, uniform in
        this range (Contriever: 0.1, 0.5).
      crop_deletion_prob: each word of a crop is deleted with this probability (Contriever: 0.1).
      crop_min_words: a passage needs this many words to be cropped.
      crop_source_words: 0 to crop one passage; N > 0 to crop a window of N contiguous words
        of the article instead (Contriever crops 256-token chunks).
      span_min_words, span_max_words: a recurring span's length in words (Spider: up to 10).
      span_query_words: the query's window of words around the span.
      span_keep_prob: probability that the span stays in the query (Spider: 0.5).
      question_generator: the name of the ``qgen`` generator
        (``tt_zoo.data.question_generation.GENERATORS``).
    """

    tasks: tuple = PAPER_TASKS
    pairs_per_article: int = 4
    ict_keep_query_prob: float = 0.1
    max_doc_tokens: int = 288
    min_query_words: int = 3
    seed: int = 0
    crop_min_ratio: float = 0.1
    crop_max_ratio: float = 0.5
    crop_deletion_prob: float = 0.1
    crop_min_words: int = 10
    crop_source_words: int = 0
    span_min_words: int = 2
    span_max_words: int = 10
    span_query_words: int = 30
    span_keep_prob: float = 0.5
    question_generator: str = "cloze"

    def __post_init__(self):
        tasks = tuple(self.tasks)
        object.__setattr__(self, "tasks", tasks)
        unknown = [t for t in tasks if t not in TASKS]
        if not tasks or unknown:
            raise ValueError(f"TaskConfig.tasks must be a non-empty subset of {TASKS} "
                             f"(got {self.tasks!r}).")
        if self.pairs_per_article < 0:
            raise ValueError(f"pairs_per_article must be >= 0 (got {self.pairs_per_article}).")
        for name in ("ict_keep_query_prob", "crop_deletion_prob", "span_keep_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1] (got {getattr(self, name)}).")
        if not 0.0 < self.crop_min_ratio <= self.crop_max_ratio <= 1.0:
            raise ValueError(f"crop ratios must satisfy 0 < crop_min_ratio <= crop_max_ratio <= 1 "
                             f"(got {self.crop_min_ratio}, {self.crop_max_ratio}).")
        if not 1 <= self.span_min_words <= self.span_max_words:
            raise ValueError(f"span lengths must satisfy 1 <= span_min_words <= span_max_words "
                             f"(got {self.span_min_words}, {self.span_max_words}).")
        if "qgen" in tasks:
            question_generator(self)  # an unknown generator name fails here, naming the choices
        if self.crop_source_words < 0:
            raise ValueError(f"crop_source_words must be >= 0 (got {self.crop_source_words}).")
        if self.span_query_words < 1 or self.crop_min_words < 1:
            raise ValueError(f"span_query_words and crop_min_words must be >= 1 (got "
                             f"{self.span_query_words}, {self.crop_min_words}).")

    def manifest_config(self, source, limit: Optional[int] = None) -> dict:
        """What a pair directory's manifest records as its ``config``: these settings (lists
        for tuples), the articles' `source` (a path; "<articles>" for articles given in
        memory) and the `limit` on their number (`tt_zoo.data.pairs_run`, ``beam_pairs``)."""
        out = {k: (list(v) if isinstance(v, tuple) else v)
               for k, v in dataclasses.asdict(self).items()}
        out["source"] = str(source) if isinstance(source, (str, os.PathLike)) else "<articles>"
        out["limit"] = limit
        return out


def stable_seed(*parts) -> int:
    """A 64-bit seed from a SHA-256 of the parts' reprs (stable across processes and runs)."""
    digest = hashlib.sha256("\x1f".join(repr(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def linking_passages(article: Article, config: TaskConfig) -> Iterator[Tuple[str, Passage]]:
    """Yields (T, passage of ``article``) for every link target T: the reverse-link entries WLP needs.

    For WLP, ``article`` is the linking page B and T the linked page A. The passage is one that
    mentions T (case-insensitive) if any does, else any passage; chosen with a seed from
    (config.seed, B, T), so it is deterministic.
    """
    passages = make_passages(article, config.max_doc_tokens)
    if not passages:
        return
    lowered = [p.text.lower() for p in passages]
    for target in article.links:
        if target == article.title:
            continue
        mentioning = [p for p, text in zip(passages, lowered) if target.lower() in text]
        rng = random.Random(stable_seed(config.seed, "wlp-link", article.title, target))
        yield target, rng.choice(mentioning or passages)


def pairs_for_article(article: Article, wlp_candidates: Sequence[Passage], config: TaskConfig,
                      counters: Optional[Counter] = None) -> List[Pair]:
    """All pairs whose query comes from ``article`` (page A).

    Args:
      article: page A.
      wlp_candidates: passages of other pages that link to A (from :func:`linking_passages`);
        any order.
      config: the task configuration.
      counters: if given, counts ``"{task}_pairs"`` for made pairs and ``"{task}_skipped_{why}"``
        for skipped slots (why: ``no_passage``, ``short_query``, ``no_lead``,
        ``no_other_passage``, ``no_linking_page``).

    Returns:
      At most ``config.pairs_per_article`` pairs.
    """
    counters = counters if counters is not None else collections.Counter()
    rng = random.Random(stable_seed(config.seed, article.title))
    passages = make_passages(article, config.max_doc_tokens)
    sentences: Dict[int, List[str]] = {}

    def sentences_of(p: Passage) -> List[str]:
        if p.index not in sentences:
            sentences[p.index] = split_sentences(p.text)
        return sentences[p.index]

    def long_enough(s: str) -> bool:
        return len(s.split()) >= config.min_query_words

    candidates = sorted({p.doc_id: p for p in wlp_candidates if p.title != article.title}.values(),
                        key=lambda p: p.doc_id)
    pairs: List[Pair] = []
    spans = None  # the article's recurring spans, found on the first span slot
    words = None  # the article's words for crop windows, made on the first crop slot
    for _ in range(config.pairs_per_article):
        task = rng.choice(config.tasks)
        if not passages:
            counters[f"{task}_skipped_no_passage"] += 1
            continue
        if task in SUCCESSOR_TASKS:
            if task == "span" and spans is None:
                spans = passage_pair_tasks.recurring_spans(
                    passages, min_words=config.span_min_words, max_words=config.span_max_words)
            if task == "crop" and config.crop_source_words and words is None:
                words = passage_pair_tasks.article_words(passages)
            drawn = _successor_pair(task, passages, rng, config, spans, words)
            if isinstance(drawn, str):
                counters[f"{task}_skipped_{drawn}"] += 1
                continue
            query, doc, doc_text = drawn
            pairs.append(Pair(query, doc.title, doc_text, doc.doc_id, task))
        elif task == "ict":
            # A removed query needs a passage with another sentence left as the document.
            keep = rng.random() < config.ict_keep_query_prob
            pool = [p for p in passages if (keep or len(sentences_of(p)) >= 2)
                    and any(long_enough(s) for s in sentences_of(p))]
            if not pool:
                counters["ict_skipped_short_query"] += 1
                continue
            passage = rng.choice(pool)
            sents = sentences_of(passage)
            q = rng.choice([i for i, s in enumerate(sents) if long_enough(s)])
            rest = sents if keep else sents[:q] + sents[q + 1:]
            pairs.append(Pair(sents[q], article.title, " ".join(rest), passage.doc_id, "ict"))
        else:
            lead = [(p, s) for p in passages if p.in_lead for s in sentences_of(p)]
            if not lead:
                counters[f"{task}_skipped_no_lead"] += 1
                continue
            eligible = [(p, s) for p, s in lead if long_enough(s)]
            if not eligible:
                counters[f"{task}_skipped_short_query"] += 1
                continue
            query_passage, query = rng.choice(eligible)
            if task == "bfs":
                others = [p for p in passages if p.index != query_passage.index]
                if not others:
                    counters["bfs_skipped_no_other_passage"] += 1
                    continue
                doc = rng.choice(others)
            else:
                if not candidates:
                    counters["wlp_skipped_no_linking_page"] += 1
                    continue
                doc = rng.choice(candidates)
            pairs.append(Pair(query, doc.title, doc.text, doc.doc_id, task))
        counters[f"{task}_pairs"] += 1
    return pairs


def _successor_pair(task: str, passages, rng: random.Random, config: TaskConfig, spans, words):
    """One ``crop``/``span``/``qgen`` slot (``tt_zoo.data.passage_pair_tasks``)."""
    if task == "crop":
        return passage_pair_tasks.crop_pair(
            passages, rng, min_words=config.crop_min_words, min_ratio=config.crop_min_ratio,
            max_ratio=config.crop_max_ratio, deletion_prob=config.crop_deletion_prob,
            source_words=config.crop_source_words, article=words)
    if task == "span":
        return passage_pair_tasks.span_pair(
            passages, rng, min_words=config.span_min_words, max_words=config.span_max_words,
            query_words=config.span_query_words, keep_prob=config.span_keep_prob, spans=spans)
    return passage_pair_tasks.qgen_pair(passages, rng, question_generator(config))


@functools.lru_cache(maxsize=8)
def _generator(name: str):
    from tt_zoo.data import question_generation  # noqa: PLC0415 (only the qgen task needs it)

    return question_generation.get_generator(name)


def question_generator(config: TaskConfig):
    """The ``qgen`` task's question generator, named by ``config.question_generator``."""
    return _generator(config.question_generator)


ArticleSource = Union[Callable[[], Iterable[Article]], Sequence[Article]]


def generate_pairs(articles: ArticleSource, config: TaskConfig = TaskConfig(),
                   counters: Optional[Counter] = None) -> Iterator[Pair]:
    """The single-machine path: two passes over the articles.

    Pass 1 builds the reverse-link index (target title -> passages of pages linking to it, from
    :func:`linking_passages`; only those passages are held in memory). Pass 2 yields
    :func:`pairs_for_article` for each article.

    Args:
      articles: something that can be iterated twice: a zero-argument callable returning a fresh
        iterable of articles (e.g. ``lambda: read_wikispeedia(path)``), or a list/tuple. A
        one-shot iterator is rejected, since it cannot be read twice.
      config: the task configuration.
      counters: optional Counter for the per-task pair and skip counts.
    """
    if callable(articles):
        first, second = articles, articles
    elif isinstance(articles, collections.abc.Iterator) or iter(articles) is articles:
        raise TypeError("generate_pairs reads the articles twice; pass a list or a callable "
                        "returning a fresh iterable (e.g. lambda: read_wikispeedia(path)), "
                        f"not a one-shot iterator ({type(articles).__name__}).")
    else:
        first = second = (lambda: articles)
    index: Dict[str, List[Passage]] = collections.defaultdict(list)
    for article in first():
        for target, passage in linking_passages(article, config):
            index[target].append(passage)
    for article in second():
        yield from pairs_for_article(article, index.get(article.title, ()), config, counters)


# ----------------------------------------------------------------------------- MLM baseline

def mlm_examples(passages: Iterable[Union[Passage, str]], vocabulary,
                 seq_length: Optional[int] = None, mask_prob: float = 0.15,
                 max_predictions: Optional[int] = None, seed: int = 0,
                 batch_size: int = 256) -> Iterator[Dict[str, np.ndarray]]:
    """Masked-LM examples in the Model Garden BERT pretraining format (the MLM baseline).

    The inputs are packed by the towers' own :class:`tt_zoo.data.text.TextPreprocessor`, so MLM
    pretraining sees exactly what the document tower sees: a :class:`Passage` is the text pair
    ``[CLS] title [SEP] text [SEP]`` (type ids 0 then 1; the two segments share the budget
    round-robin, as for every document), a plain string is ``[CLS] text [SEP]``. Then
    ``round(mask_prob * n)`` of the n real tokens (at least 1, at most ``max_predictions``) are
    selected, never [CLS]/[SEP]/[PAD]; of those 80% become [MASK], 10% a random vocabulary
    token, 10% stay unchanged (Devlin et al. 2019, Sec. 3.1).

    Args:
      passages: Passages or strings.
      vocabulary: the towers' ``TextPreprocessor`` (e.g. ``model.document_preprocessor``), or
        a ``vocab.txt`` path / token list for one (lower-cased, as the towers' default). The
        vocabulary needs ``[MASK]``.
      seq_length: sequence length; default the preprocessor's, or 288 (the paper's document
        length) for a vocabulary. A preprocessor of another length is copied with this one.
      mask_prob: fraction of tokens selected for prediction.
      max_predictions: size of the masked_lm_* features; default ``ceil(seq_length * mask_prob)``.
      seed: numpy seed; the output is a pure function of the inputs and the seed.
      batch_size: how many texts are tokenized per preprocessor call.

    Yields:
      Dicts with ``input_word_ids``, ``input_mask``, ``input_type_ids`` (int32 [seq_length]),
      ``masked_lm_positions``, ``masked_lm_ids`` (int32 [max_predictions]) and
      ``masked_lm_weights`` (float32 [max_predictions]).
    """
    import tensorflow as tf  # noqa: PLC0415 (TensorFlow only for MLM; the pair tasks need none)
    from tt_zoo.data.text import MASK, TextPreprocessor  # noqa: PLC0415

    if isinstance(vocabulary, TextPreprocessor):
        preprocessor = vocabulary
        if seq_length is not None and seq_length != preprocessor.seq_length:
            preprocessor = TextPreprocessor.from_config(
                {**preprocessor.get_config(), "seq_length": seq_length})
    else:
        preprocessor = TextPreprocessor(vocabulary, seq_length=seq_length or 288)
    seq_length = preprocessor.seq_length
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_prob must be in (0, 1) (got {mask_prob}).")
    if preprocessor.mask_id is None:
        raise ValueError(f"MLM needs {MASK} in the vocabulary (vocabulary sha256 "
                         f"{preprocessor.vocabulary_sha256[:12]} has none).")
    max_predictions = max_predictions or int(math.ceil(seq_length * mask_prob))
    cls_id, sep_id, mask_id = preprocessor.cls_id, preprocessor.sep_id, preprocessor.mask_id
    # Random replacements come from real tokens, not from [PAD]/[unusedN]/[CLS]/... entries.
    replacement_ids = np.array([i for i, t in enumerate(preprocessor.vocabulary)
                                if not (t.startswith("[") and t.endswith("]"))], np.int32)
    rng = np.random.default_rng(seed)

    def packed(batch) -> List[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(word ids, mask, type ids) of each item, in order: pairs and strings packed apart."""
        rows: List = [None] * len(batch)
        pairs = [i for i, item in enumerate(batch) if isinstance(item, Passage)]
        singles = [i for i, item in enumerate(batch) if not isinstance(item, Passage)]
        if pairs:
            place(rows, pairs, preprocessor((tf.constant([batch[i].title for i in pairs]),
                                             tf.constant([batch[i].text for i in pairs]))))
        if singles:
            place(rows, singles, preprocessor(tf.constant([batch[i] for i in singles])))
        return rows

    def place(rows, indices, inputs):
        word_ids, mask, type_ids = (inputs[k].numpy() for k in
                                    ("input_word_ids", "input_mask", "input_type_ids"))
        for row, i in enumerate(indices):  # copies: an example does not pin its whole batch
            rows[i] = (word_ids[row].copy(), mask[row].copy(), type_ids[row].copy())

    def masked(word_ids, input_mask, type_ids):
        n_real = int(input_mask.sum())  # real tokens come first, then [PAD]s
        candidates = np.array([i for i, t in enumerate(word_ids[:n_real])
                               if t not in (cls_id, sep_id)], np.int32)
        n = min(max_predictions, max(1, int(round(len(candidates) * mask_prob))),
                len(candidates))
        positions = np.sort(rng.permutation(candidates)[:n]) if n else np.zeros(0, np.int32)
        original = word_ids[positions].copy()
        action = rng.random(n)
        random_tokens = replacement_ids[rng.integers(0, len(replacement_ids), n)]
        word_ids[positions] = np.where(action < 0.8, mask_id,
                                       np.where(action < 0.9, original, random_tokens))
        lm_positions = np.zeros(max_predictions, np.int32)
        lm_ids = np.zeros(max_predictions, np.int32)
        lm_weights = np.zeros(max_predictions, np.float32)
        lm_positions[:n], lm_ids[:n], lm_weights[:n] = positions, original, 1.0
        return {"input_word_ids": word_ids, "input_mask": input_mask, "input_type_ids": type_ids,
                "masked_lm_positions": lm_positions, "masked_lm_ids": lm_ids,
                "masked_lm_weights": lm_weights}

    batch: List[Union[Passage, str]] = []
    for item in passages:
        if not isinstance(item, (Passage, str)):
            raise TypeError(f"mlm_examples takes Passages or strings (got {type(item).__name__}).")
        batch.append(item)
        if len(batch) == batch_size:
            for row in packed(batch):
                yield masked(*row)
            batch = []
    if batch:
        for row in packed(batch):
            yield masked(*row)
