"""BM25's term space: the one definition of what a "term" is for BM25 and learned term weights.

bm25s's tokenisation (lower-cased ``(?u)\\b\\w\\w+\\b`` tokens, as scikit-learn's
CountVectorizer), stop words removed before stemming, then PyStemmer stemming. BM25
(`tt_zoo.retrieval.bm25`), the HDCT targets (`tt_zoo.data.term_weight_targets`) and the
weighting of documents (`tt_zoo.retrieval.term_weighting`) all go through `TermSpace`, so a
weighted term, a target term and an indexed term are the same string.

No TensorFlow here: BM25 stays importable in a fraction of a second.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import bm25s


def make_stemmer(stemmer):
    """A PyStemmer stemmer from a language name ("english"), or `stemmer` itself when it is
    already a stemmer object, a callable or None."""
    if stemmer is None or callable(stemmer) or hasattr(stemmer, "stemWords"):
        return stemmer
    import Stemmer  # PyStemmer

    try:
        return Stemmer.Stemmer(stemmer)
    except KeyError as e:
        raise ValueError(f"Unknown PyStemmer language {stemmer!r}; choose one of "
                         f"{Stemmer.algorithms()} or None.") from e


class TermSpace:
    """bm25s's tokeniser with a stemmer and stop words: texts -> lists of terms.

    Args:
      stemmer: a PyStemmer language name ("english"), a stemmer object, or None.
      stopwords: "en", a list of words, or None.

    `word_term` maps one word (as BERT's basic tokenizer cuts them: no spaces or punctuation)
    to its term, memoised: a corpus has far fewer distinct words than occurrences.
    """

    def __init__(self, stemmer="english", stopwords="en"):
        self.stemmer_setting = stemmer
        self.stopwords_setting = stopwords
        self.stemmer = make_stemmer(stemmer)
        self.stopwords = stopwords if stopwords is not None else []
        self._word_terms: Dict[str, Optional[str]] = {}

    def settings(self) -> dict:
        """The settings as JSON values (for caches and artifacts)."""
        def describe(value):
            return value if value is None or isinstance(value, str) else repr(value)
        stop = self.stopwords_setting
        return {"stemmer": describe(self.stemmer_setting),
                "stopwords": stop if stop is None or isinstance(stop, str)
                else f"{len(stop)} words"}

    def tokenize(self, texts: Sequence[str], show_progress: bool = False) -> List[List[str]]:
        """The terms of each text, in order (repeats kept)."""
        if isinstance(texts, (str, bytes)):
            raise ValueError("TermSpace.tokenize: texts must be a sequence of strings, not one "
                             "string.")
        return bm25s.tokenize(list(texts), stopwords=self.stopwords, stemmer=self.stemmer,
                              return_ids=False, show_progress=show_progress)

    def word_terms(self, words: Sequence[str]) -> List[Optional[str]]:
        """The term of each word, or None (a stop word, a one-character word, punctuation).

        A word that bm25s cuts into several tokens (e.g. "25°c" -> "25") gets its first one.
        """
        new = sorted({w for w in words if w not in self._word_terms})
        if new:
            for word, terms in zip(new, self.tokenize(new)):
                self._word_terms[word] = terms[0] if terms else None
        return [self._word_terms[w] for w in words]
