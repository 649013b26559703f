"""TREC runs and qrels: writing a run of any searcher's hits, reading runs and qrels, scoring a run
with trec_eval's measures (through `pytrec_eval`, the trec_eval C code; no metric code of ours).

A run has one line a (query, hit), ``qid Q0 docid rank score tag``, white-space separated. Qrels
are read in either of their two common forms: TREC's ``qid iteration docid relevance`` (four
columns) or BEIR's ``query-id<TAB>corpus-id<TAB>score`` with its header line (three columns).

`evaluate_run` reports, in %: nDCG@10 (``ndcg_cut_10``, graded relevance), R@k for each k
(``recall_k``) and MRR@10 (``recip_rank`` of the run cut to each query's top 10, in trec_eval's
order: score descending, ties by docid descending). Means are over the queries of the qrels that
hold a relevant document; such a query absent from the run counts 0 (trec_eval ``-c``), and the
report says how many there were.
"""

from __future__ import annotations

import collections
import math
import pathlib
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from tt_zoo.errors import TtZooError

Run = Dict[str, Dict[str, float]]    # qid -> docid -> score
Qrels = Dict[str, Dict[str, int]]    # qid -> docid -> relevance
DEFAULT_RECALL_AT = (10, 100)
DEFAULT_TAG = "tt_zoo"


class TrecFileError(TtZooError):
    """A run or qrels file that cannot be read; the message names the file and the line."""


def run_tag(text: str) -> str:
    """`text` as a run tag: its white space (which separates a run's columns) replaced by '_'."""
    tag = re.sub(r"\s+", "_", str(text).strip())
    return tag or DEFAULT_TAG


def run_lines(query_ids: Sequence[str], hits: Sequence[Sequence], tag: str = DEFAULT_TAG
              ) -> List[str]:
    """The lines of a TREC run: for each query id, its hits (`tt_zoo.retrieval.search.Hit`,
    best first) as ``qid Q0 docid rank score tag`` with ranks from 1 and each score with the
    9 significant digits that keep a float32 exact."""
    if len(query_ids) != len(hits):
        raise ValueError(f"{len(query_ids)} query ids for {len(hits)} lists of hits.")
    tag = run_tag(tag)
    lines = []
    for qid, found in zip(query_ids, hits):
        for rank, hit in enumerate(found, 1):
            lines.append(f"{qid} Q0 {hit.id} {rank} {float(hit.score):.9g} {tag}")
    return lines


def write_run(path, query_ids: Sequence[str], hits: Sequence[Sequence],
              tag: str = DEFAULT_TAG) -> int:
    """Writes `run_lines` to `path` (a temp file, then renamed); returns the number of lines."""
    from tt_zoo.atomic_io import open_for_replace  # noqa: PLC0415

    lines = run_lines(query_ids, hits, tag)
    with open_for_replace(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    return len(lines)


def _rows(path):
    path = pathlib.Path(path)
    if not path.is_file():
        raise TrecFileError(f"{path}: no such file.")
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, line.split()


def read_run(path) -> Run:
    """{qid: {docid: score}} of a TREC run file (six columns a line)."""
    run: Run = collections.defaultdict(dict)
    for number, fields in _rows(path):
        if len(fields) != 6:
            raise TrecFileError(f"{path}:{number}: a run line has 6 columns, qid Q0 docid rank "
                                f"score tag (got {len(fields)}).")
        qid, _, docid, _, score, _ = fields
        try:
            value = float(score)
        except ValueError:
            raise TrecFileError(f"{path}:{number}: score {score!r} is not a number.") from None
        if not math.isfinite(value):
            raise TrecFileError(f"{path}:{number}: score {score!r} is not finite.")
        if docid in run[qid]:
            raise TrecFileError(f"{path}:{number}: document {docid!r} appears twice for query "
                                f"{qid!r}.")
        run[qid][docid] = value
    if not run:
        raise TrecFileError(f"{path}: holds no run lines.")
    return dict(run)


def read_qrels(path) -> Qrels:
    """{qid: {docid: relevance}} of a qrels file: TREC's four columns, or BEIR's TSV (three
    columns, a header line ``query-id corpus-id score``). A BEIR folder gives its
    qrels/test.tsv."""
    from tt_zoo.data.text_files import beir_file  # noqa: PLC0415

    path = beir_file(path, "qrels")
    qrels: Qrels = collections.defaultdict(dict)
    for number, fields in _rows(path):
        if len(fields) == 3 and not qrels and not _is_int(fields[2]):
            continue  # BEIR's header line
        if len(fields) not in (3, 4):
            raise TrecFileError(f"{path}:{number}: a qrels line has 4 columns (qid iteration "
                                f"docid relevance) or 3 (query-id corpus-id score); got "
                                f"{len(fields)}.")
        qid, docid, relevance = fields[0], fields[-2], fields[-1]
        if not _is_int(relevance):
            raise TrecFileError(f"{path}:{number}: relevance {relevance!r} is not an integer.")
        qrels[qid][docid] = int(relevance)
    if not qrels:
        raise TrecFileError(f"{path}: holds no judgements.")
    return dict(qrels)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def trec_order(scores: Mapping[str, float]) -> List[str]:
    """A query's documents in trec_eval's order: score descending, ties by docid descending."""
    return [d for d, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]),
                                 reverse=True)]


def cut(run: Run, depth: int) -> Run:
    """Each query's top `depth` documents of `run`, in trec_eval's order (`trec_order`)."""
    return {qid: {d: scores[d] for d in trec_order(scores)[:depth]} for qid, scores in run.items()}


def metric_names(recall_at: Sequence[int] = DEFAULT_RECALL_AT) -> List[str]:
    return ["nDCG@10", *(f"R@{k}" for k in recall_at), "MRR@10"]


def evaluate_run(run: Run, qrels: Qrels, recall_at: Sequence[int] = DEFAULT_RECALL_AT
                 ) -> Tuple[Dict[str, float], dict]:
    """``(scores, counts)``: the mean of each of `metric_names` (in %) over the qrels' queries
    holding a relevant document, computed by pytrec_eval; ``counts`` says how many queries were
    judged, how many of them the run has no line for (counted 0) and how many run queries the
    qrels do not judge (left out)."""
    import pytrec_eval  # noqa: PLC0415

    judged = {q: docs for q, docs in qrels.items() if any(r > 0 for r in docs.values())}
    if not judged:
        raise TrecFileError("the qrels hold no relevant document (relevance > 0) for any query.")
    measures = {"ndcg_cut_10", *(f"recall_{k}" for k in recall_at)}
    # pytrec_eval takes "ndcg_cut.10" and answers under "ndcg_cut_10".
    full = pytrec_eval.RelevanceEvaluator(
        judged, {"ndcg_cut.10", *(f"recall.{k}" for k in recall_at)}).evaluate(
        {q: run[q] for q in judged if q in run})
    top10 = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}).evaluate(
        cut({q: run[q] for q in judged if q in run}, 10))
    names = dict(zip(["ndcg_cut_10", *(f"recall_{k}" for k in recall_at)],
                     ["nDCG@10", *(f"R@{k}" for k in recall_at)]))
    totals = {name: 0.0 for name in metric_names(recall_at)}
    for qid, values in full.items():
        for measure in measures:
            totals[names[measure]] += values[measure]
    for qid, values in top10.items():
        totals["MRR@10"] += values["recip_rank"]
    scores = {name: 100.0 * total / len(judged) for name, total in totals.items()}
    counts = {"queries": len(judged), "missing_from_run": sum(q not in run for q in judged),
              "unjudged_in_run": sum(q not in judged for q in run)}
    return scores, counts


def format_scores(scores: Mapping[str, float], counts: Mapping[str, int], label: str = "run"
                  ) -> str:
    """A two-line table of `evaluate_run`'s scores, and a note on queries left out or counted 0."""
    names = list(scores)
    width = max(len(label), 3)
    lines = [f"{'':<{width}}  " + "  ".join(f"{n:>7}" for n in names),
             f"{label:<{width}}  " + "  ".join(f"{scores[n]:>7.2f}" for n in names)]
    notes = [f"{counts['queries']:,} judged queries"]
    if counts["missing_from_run"]:
        notes.append(f"{counts['missing_from_run']:,} of them absent from the run, counted 0")
    if counts["unjudged_in_run"]:
        notes.append(f"{counts['unjudged_in_run']:,} run queries without judgements left out")
    return "\n".join(lines + ["(" + "; ".join(notes) + ")"])


def evaluate_files(run_path, qrels_path, recall_at: Sequence[int] = DEFAULT_RECALL_AT,
                   label: Optional[str] = None) -> Tuple[Dict[str, float], dict, str]:
    """`evaluate_run` of a run file against a qrels file, and its `format_scores` table."""
    scores, counts = evaluate_run(read_run(run_path), read_qrels(qrels_path), recall_at)
    return scores, counts, format_scores(scores, counts, label or pathlib.Path(run_path).name)
