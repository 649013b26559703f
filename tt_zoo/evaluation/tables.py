"""Score tables as text: Chang et al. 2020, Table 3's columns (R@1/5/10/50/100 and MRR, in %),
as `tt-zoo finetune`, `tt-zoo evaluate` and `tt-zoo demo` print them, and as `tt-zoo evaluate
--record-card` records them in a model's card (`card_tables`). Nothing heavy is imported: a
command's ``--help`` stays quick."""

from __future__ import annotations

import pathlib
from collections import Counter
from typing import List, Mapping, Sequence, Tuple

COLUMNS = ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR")


def format_scores(rows: Mapping[str, Mapping[str, float]], columns: Sequence[str],
                  label: str = "") -> str:
    """``name -> {column: fraction}`` as a text table in %, the name column as wide as the
    longest name."""
    width = max([len(label)] + [len(name) for name in rows])
    widths = [max(6, len(c)) for c in columns]
    lines = [f"{label:<{width}}" + "".join(f" {c:>{w}}" for c, w in zip(columns, widths))]
    for name, metrics in rows.items():
        lines.append(f"{name:<{width}}" + "".join(f" {100 * metrics[c]:>{w}.1f}"
                                                  for c, w in zip(columns, widths)))
    return "\n".join(lines)


def format_table(rows) -> str:
    """Rows of {encoder, pretraining, search, R@k..., MRR} as Table 3's text table (in %),
    each text column as wide as its longest entry; a row is labelled by the model name it was
    given (its "model", BM25's its encoder) first."""
    rows = [{"model": r.get("model") or r["encoder"], **r} for r in rows]
    keys = ("model", "encoder", "pretraining", "search")
    widths = {k: max([len(k)] + [len(str(r[k])) for r in rows]) for k in keys}
    head = " ".join(f"{k:<{widths[k]}}" for k in keys) + " " + " ".join(
        f"{c:>6}" for c in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(" ".join(f"{str(r[k]):<{widths[k]}}" for k in keys) + " "
                     + " ".join(f"{100 * r[c]:6.1f}" for c in COLUMNS))
    return "\n".join(lines)


def row_labels(loaded: Sequence[Tuple[str, str]]) -> List[str]:
    """The table rows of models loaded from ``(argument, model name)`` pairs: each model's own
    name, or ``name (argument)`` where two of them share a name (two exports of one base, each
    ``BASE_adapted``), so that no row hides another. The same argument twice raises
    `ValueError`, naming it."""
    repeated = [given for given, n in Counter(given for given, _ in loaded).items() if n > 1]
    if repeated:
        raise ValueError(f"--model {repeated[0]} is given twice: each model is one row.")
    shared = Counter(name for _, name in loaded)
    return [name if shared[name] == 1 else f"{name} ({given})" for given, name in loaded]


def card_tables(rows, where: str, num_questions: int,
                num_candidates: int) -> List[Tuple[pathlib.Path, dict]]:
    """(export directory, its card's tables) of each model row of exact search in `rows`
    (`tt_zoo.evaluation.metrics.table3_rows`): its numbers on ReQA-SQuAD(dev) zero-shot, on
    the questions `where` says, in % with two decimals, and BM25's beside them when `rows`
    hold a BM25 row."""
    bm25 = next((r for r in rows if r["encoder"] == "BM25"), None)
    tables = []
    for row in rows:
        if row["encoder"] == "BM25" or row["search"] != "exact":
            continue
        table = {f"ReQA-SQuAD(dev), zero-shot, {where} ({num_questions:,} questions, "
                 f"{num_candidates:,} candidates), exact search (%)":
                 {c: round(100 * row[c], 2) for c in COLUMNS}}
        if bm25 is not None:
            table["BM25 on the same questions (%)"] = {c: round(100 * bm25[c], 2)
                                                       for c in COLUMNS}
        tables.append((pathlib.Path(row["model"]), table))
    return tables
