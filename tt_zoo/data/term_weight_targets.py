"""Term-weight targets without labels: which document words the pair's query mentions.

HDCT (Dai & Callan, WWW 2020, Sec. 3.4, "content-based weak supervision") and DeepCT (Dai &
Callan, 2019, Sec. 3.2, query-based labels) train a term-weight head by regression on a
target per term: the fraction of a reference field's instances (titles, anchor texts, relevant
queries) that contain the term. Our pretraining pairs give one (query, document) pair at a
time for free (`tt-zoo make-pairs`: ICT, BFS, WLP, crop, span, qgen), so a document word's
target is 1 when its term occurs in the pair's query and 0 otherwise; a document that appears
in several pairs averages its queries, as HDCT's fraction does, over training.

Words and terms: the document is read as WordPiece tokens (`tt_zoo.data.text`); the pieces of
a word (a piece and the ``##`` pieces after it) are merged back into the word, and the word's
term is BM25's (`tt_zoo.data.terms.TermSpace`: lower-cased, bm25s's tokenisation, stop words
dropped, PyStemmer English stems). A word without a term (a stop word, punctuation, a
one-character word, [UNK]) has target 0; every piece of a word shares the word's target.
Special tokens ([CLS], [SEP]) and padding are outside the loss (mask 0); both segments, the
title and the passage, are in it.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Set, Tuple

import numpy as np

from tt_zoo.data.terms import TermSpace

CONTINUATION = "##"
SPECIAL_TOKENS = frozenset({"[PAD]", "[CLS]", "[SEP]", "[MASK]", ""})
UNKNOWN_TOKEN = "[UNK]"


def merge_word_pieces(tokens: Sequence[str]) -> Tuple[List[str], np.ndarray]:
    """Words from a row of WordPiece tokens, and each token's word index.

    Args:
      tokens: the token strings of one packed row ([CLS], pieces, [SEP], padding "" or
        "[PAD]").

    Returns:
      (words, word_of): the words in order (pieces joined without their ``##``; a word with an
      [UNK] piece is "[UNK]"), and int32 [len(tokens)], the index of each token's word, -1
      for special tokens and padding. A ``##`` piece with no word before it in the row (a
      window that starts inside a word) starts a word of its own.
    """
    words: List[str] = []
    word_of = np.full(len(tokens), -1, np.int32)
    open_word = False
    for i, token in enumerate(tokens):
        if token in SPECIAL_TOKENS:
            open_word = False
            continue
        if token.startswith(CONTINUATION) and open_word:
            if words[-1] != UNKNOWN_TOKEN:
                words[-1] += token[len(CONTINUATION):]
        else:
            words.append(token[len(CONTINUATION):] if token.startswith(CONTINUATION) else token)
            open_word = True
        if token == UNKNOWN_TOKEN:
            words[-1] = UNKNOWN_TOKEN
        word_of[i] = len(words) - 1
    return words, word_of


def word_start_flags(tokens: Sequence[str]) -> np.ndarray:
    """bool [len(tokens)]: the token is the first piece of a word (what a word's weight is
    read from)."""
    _, word_of = merge_word_pieces(tokens)
    previous = np.concatenate([[-1], word_of[:-1]])
    return (word_of >= 0) & (word_of != previous)


def word_term_list(words: Sequence[str], terms: TermSpace) -> List[Optional[str]]:
    """The term of each word ([UNK] has none)."""
    out = terms.word_terms([w for w in words if w != UNKNOWN_TOKEN])
    it = iter(out)
    return [None if w == UNKNOWN_TOKEN else next(it) for w in words]


def query_term_set(query: str, terms: TermSpace) -> Set[str]:
    """The terms of a query (the reference field of the target)."""
    return set(terms.tokenize([query])[0])


def token_targets(tokens: Sequence[str], query: str,
                  terms: TermSpace) -> Tuple[np.ndarray, np.ndarray]:
    """HDCT's query-term targets for one packed document row.

    Args:
      tokens: the row's token strings (see `merge_word_pieces`).
      query: the pair's query.
      terms: the term space (BM25's settings).

    Returns:
      (targets float32 [len(tokens)], mask float32 [len(tokens)]): target 1 for every piece
      of a word whose term occurs in the query, else 0; mask 1 on word pieces, 0 on special
      tokens and padding.
    """
    return _row_targets(tokens, query_term_set(query, terms), terms)


def _row_targets(tokens: Sequence[str], wanted: Set[str], terms: TermSpace):
    words, word_of = merge_word_pieces(tokens)
    word_targets = np.array([t is not None and t in wanted for t in word_term_list(words, terms)]
                            + [False], np.float32)  # the extra slot: index -1 (no word)
    mask = (word_of >= 0).astype(np.float32)
    return word_targets[word_of] * mask, mask


def batch_targets(token_rows: Sequence[Sequence[str]], queries: Sequence[str],
                  terms: TermSpace) -> Tuple[np.ndarray, np.ndarray]:
    """`token_targets` of each row: (targets, mask) float32 [batch, seq_length]."""
    if len(token_rows) != len(queries):
        raise ValueError(f"batch_targets: {len(token_rows)} token rows for {len(queries)} "
                         "queries.")
    wanted = [set(q) for q in terms.tokenize(queries)]  # one bm25s call for the batch
    rows = [_row_targets(row, query, terms) for row, query in zip(token_rows, wanted)]
    if not rows:
        return np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32)
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])
