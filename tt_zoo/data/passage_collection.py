"""The passages an open-domain benchmark searches, or a training run mines: every article of a
source cut into DPR's disjoint ``words``-word blocks with titles
(`tt_zoo.data.passages.word_passages`), in row order. `tt_zoo.evaluation.odqa` scores answer
recall over them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import List, Optional


@dataclasses.dataclass
class Collection:
    """The passages searched: ids ("title#i"), titles and texts, in row order."""

    ids: List[str]
    titles: List[str]
    texts: List[str]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def bm25_texts(self) -> List[str]:
        """What BM25 indexes: "title text"."""
        return [f"{t} {x}" for t, x in zip(self.titles, self.texts)]

    def fingerprint(self, h=None):
        """`h` (a new sha256 if None) updated with the passages' ids and texts in row order: what
        identifies the collection (rows, ids and what they hold). Returns `h`."""
        h = hashlib.sha256() if h is None else h
        for part in (self.ids, self.texts):
            for item in part:
                h.update(item.encode("utf-8"))
                h.update(b"\x1f")
        return h


def passage_collection(articles, words: int = 100, limit_articles: Optional[int] = None,
                       progress: bool = False) -> Collection:
    """Every article of a source (any `read_articles` takes) cut into ``words``-word passages."""
    from tt_zoo.data.article_sources import read_articles  # noqa: PLC0415
    from tt_zoo.data.passages import word_passages  # noqa: PLC0415

    ids, titles, texts = [], [], []
    for n, article in enumerate(read_articles(articles, progress=progress)):
        if limit_articles is not None and n >= limit_articles:
            break
        for p in word_passages(article, words):
            ids.append(p.doc_id)
            titles.append(p.title)
            texts.append(p.text)
    if not ids:
        raise ValueError(f"passage_collection: no passages in {articles!r}.")
    return Collection(ids, titles, texts)


__all__ = ["Collection", "passage_collection"]
