"""Which of a card's rows is a model's own search: what ``model.index(...)`` and `tt-zoo search`
do with it, so that `tt-zoo list --shipped` and the README's table show the numbers of that
search. No TensorFlow (the listing reads cards only).

A card of a late-interaction (ColBERT) or term-weight (HDCT) model holds one row per search
setting. A ColBERT model's index searches in the mode its card measured best
(`best_late_interaction_mode`); an HDCT model's is BM25 with `TERM_WEIGHT_K1` and unread
occurrences `TERM_WEIGHT_UNREAD` (`term_weight_label`). A two-tower card's row is the model's
name, or its only row.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

import numpy as np

from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS

# HDCT-weighted BM25's k1 and its treatment of unread occurrences, as every term-weight card's
# ODQA rows chose them on held-out questions: "HDCT-weighted BM25 (k1 10, unread plain)".
TERM_WEIGHT_K1 = 10.0
TERM_WEIGHT_UNREAD = "plain"
MODES = ("rerank", "token_index")
# The card rows of each late-interaction mode (benchmarks/late_interaction.py's labels).
MODE_ROWS = {"rerank": "ColBERT re-ranking", "token_index": "ColBERT end to end"}
FUSED = ("BM25", "convex(", "RRF(", "rrf(")  # rows that are not a model's own search


def term_weight_label() -> str:
    """The card row of an HDCT model's own search."""
    return f"HDCT-weighted BM25 (k1 {TERM_WEIGHT_K1:g}, unread {TERM_WEIGHT_UNREAD})"


def best_late_interaction_mode(metrics: Optional[Mapping]) -> str:
    """The search mode a late-interaction card measured best: of its tables (title -> {row label
    -> {metric: value}}) holding both a re-ranking row and an end-to-end (token index) row, the
    mode with the higher mean over their shared metrics in more tables; "rerank" on a tie or
    without such tables (ColBERT's Sec. 3.5 mode, the cheaper to build)."""
    wins = {mode: 0 for mode in MODES}
    for table in (metrics or {}).values():
        if not isinstance(table, dict):
            continue
        rows = {}
        for mode, prefix in MODE_ROWS.items():
            row = next((v for label, v in table.items() if str(label).startswith(prefix)
                        and isinstance(v, dict)), None)
            if row is not None:
                rows[mode] = row
        if len(rows) < 2:
            continue
        shared = sorted(set.intersection(*(set(r) for r in rows.values())))
        means = {mode: np.mean([float(r[m]) for m in shared]) for mode, r in rows.items()
                 if shared}
        if means:
            wins[max(means, key=means.get)] += 1
    return "token_index" if wins["token_index"] > wins["rerank"] else "rerank"


def own_label(name: str, kind: str, labels: Iterable[str], tables: Optional[Mapping] = None
              ) -> Optional[str]:
    """The row label of model `name`'s own search among a card's `labels` (None: the card has
    no such row). `tables` (title -> {label -> {metric: value}}) decide a late-interaction
    model's mode."""
    labels = set(labels)
    if name in labels:
        return name
    if kind == TERM_WEIGHTS:
        return term_weight_label() if term_weight_label() in labels else None
    if kind == LATE_INTERACTION:
        prefix = MODE_ROWS[best_late_interaction_mode(tables)]
        return next((l for l in sorted(labels) if l.startswith(prefix)), None)
    own = sorted(label for label in labels if not label.startswith(FUSED))
    return own[0] if len(own) == 1 else None
