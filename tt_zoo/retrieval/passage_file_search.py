"""How `tt-zoo search` shows the hits of any index: each query's hits as a text table
(`format_hits`) or as JSON Lines (`write_hits`), one line a query: {"query", "id"?, "hits":
[{"rank", "id", "score", "title", "text"}]}. (A TREC run of them: `tt_zoo.evaluation.trec`.)

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
from typing import List, Optional, Sequence

from tt_zoo.retrieval.search import Hit

SNIPPET = 100  # characters of a passage the table shows


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


def write_hits(path, queries: Sequence[str], hits: Sequence[Sequence[Hit]],
               query_ids: Optional[Sequence[str]] = None) -> None:
    """One JSON line a query (with its "id" when `query_ids` are given), written to a temp file
    and renamed into place."""
    from tt_zoo.atomic_io import open_for_replace  # noqa: PLC0415

    ids = [None] * len(queries) if query_ids is None else list(query_ids)
    with open_for_replace(path, "w", encoding="utf-8", newline="\n") as f:
        for query, query_id, found in zip(queries, ids, hits):
            f.write(json.dumps({"query": query, **({"id": query_id} if query_id else {}),
                                "hits": [
                {"rank": rank, "id": h.id, "score": round(float(h.score), 6), "title": h.title,
                 "text": h.text} for rank, h in enumerate(found, 1)]}, ensure_ascii=False,
                allow_nan=False)
                + "\n")
