"""Searching the passages of a text file (`tt_zoo.data.text_files.Texts`) with query text, as
`tt-zoo search` does: BM25's hits (`bm25_hits`; a model's come from its ``index``), then the
hits of each query as a text table (`format_hits`) or as JSON Lines (`write_hits`), one line a
query: {"query", "hits": [{"rank", "id", "score", "title", "text"}]}.

Nothing here imports TensorFlow: BM25 needs only bm25s, imported when it searches.
"""

from __future__ import annotations

import json
from typing import List, Sequence

from tt_zoo.data.text_files import Texts
from tt_zoo.retrieval.passage_index import bm25_text
from tt_zoo.retrieval.search import Hit

SNIPPET = 100  # characters of a passage the table shows
BM25_PROGRESS_FROM = 10_000  # passages from which BM25 indexing shows bm25s's progress bars


def bm25_hits(passages: Texts, queries: Sequence[str], k: int,
              progress: bool) -> List[List[Hit]]:
    """The top-k `Hit`s of each query by BM25 over the passages' "title text" (`bm25_text`;
    `tt_zoo.retrieval.bm25.BM25Retriever`: bm25s, English stemming and stop words), with
    bm25s's progress bars from `BM25_PROGRESS_FROM` passages when `progress`. A query gets only
    passages that share a term with it: no arbitrary order of zero scores."""
    from tt_zoo.retrieval.bm25 import BM25Retriever  # noqa: PLC0415 (bm25s)

    texts = [bm25_text(title, text) for title, text in zip(passages.titles, passages.texts)]
    retriever = BM25Retriever(texts, ids=passages.ids_or_positions(),
                              show_progress=progress and len(texts) >= BM25_PROGRESS_FROM)
    return retriever.search(list(queries), k).hits(passages.texts, passages.titles)


def format_hits(queries: Sequence[str], hits: Sequence[Sequence[Hit]], searcher: str) -> str:
    """Each query and its hits: rank, score, id, then "title | text" cut to `SNIPPET`
    characters; `searcher` (what searched) heads the passage column."""
    lines: List[str] = []
    for number, (query, found) in enumerate(zip(queries, hits), 1):
        if number > 1:
            lines.append("")
        lines.append(f"query {number}: {query}")
        if not found:
            lines.append("  (no hit: no query term occurs in the passages)")
            continue
        id_width = max(len("id"), *(len(h.id) for h in found))
        lines.append(f"  {'rank':>4}  {'score':>8}  {'id':<{id_width}}  passage ({searcher})")
        for rank, hit in enumerate(found, 1):
            passage = f"{hit.title} | {hit.text}" if hit.title else hit.text
            passage = " ".join(passage.split())
            if len(passage) > SNIPPET:
                passage = passage[:SNIPPET - 1] + "…"
            lines.append(f"  {rank:>4}  {hit.score:>8.3f}  {hit.id:<{id_width}}  {passage}")
    return "\n".join(lines)


def write_hits(path, queries: Sequence[str], hits: Sequence[Sequence[Hit]]) -> None:
    """One JSON line a query, written to a temp file and renamed into place."""
    from tt_zoo.atomic_io import open_for_replace  # noqa: PLC0415

    with open_for_replace(path, "w", encoding="utf-8", newline="\n") as f:
        for query, found in zip(queries, hits):
            f.write(json.dumps({"query": query, "hits": [
                {"rank": rank, "id": h.id, "score": round(float(h.score), 6), "title": h.title,
                 "text": h.text} for rank, h in enumerate(found, 1)]}, ensure_ascii=False,
                allow_nan=False)
                + "\n")
