"""Open-domain ReQA (Chang et al. 2020, Sec. 5.3, Table 6): the benchmark's questions against
its own candidates plus every (sentence, passage) of an article corpus, and the candidates'
embeddings streamed to a file, in bounded memory, resumably.
"""

from __future__ import annotations

import numpy as np

from tt_zoo.data.article_sources import read_articles
from tt_zoo.data.passages import make_passages, split_sentences
from tt_zoo.evaluation.document_embeddings import encode_documents_to_file
from tt_zoo.evaluation.reqa import Candidate, ReQA


def open_domain_reqa(reqa: ReQA, articles, limit_articles=None, progress: bool = True):
    """`reqa` with every (sentence, passage) candidate of `articles` (any source
    `read_articles` reads) appended after its own, so the gold indices are unchanged.

    Returns (the new ReQA, the number of candidates added); pairs already present are skipped.
    """
    candidates = list(reqa.candidates)
    seen = {(c.sentence, c.passage) for c in candidates}
    passage_index = 1 + max(c.passage_index for c in candidates)
    count = 0
    for article in read_articles(articles, progress=progress):
        if limit_articles is not None and count >= limit_articles:
            break
        count += 1
        for passage in make_passages(article):
            for sentence in split_sentences(passage.text):
                if (sentence, passage.text) not in seen:
                    seen.add((sentence, passage.text))
                    candidates.append(Candidate(sentence, passage.text, passage_index))
            passage_index += 1
    added = len(candidates) - len(reqa.candidates)
    source = f"{reqa.source} + {added:,} candidates of {count:,} articles"
    return ReQA(reqa.questions, candidates, reqa.report, source=source), added


def encode_candidates_to_file(model, reqa: ReQA, path, chunk: int = 8192,
                              progress: bool = True) -> np.ndarray:
    """Every candidate's embedding psi(sentence, passage) in a float32 ``.npy`` at `path`:
    `encode_documents_to_file` of the candidates' passages under their sentences."""
    passages = reqa.candidate_passages()
    return encode_documents_to_file(model, passages.texts, passages.titles, path, chunk,
                                    progress)
