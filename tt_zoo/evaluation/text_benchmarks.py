"""One evaluation path for text-query searchers on three benchmarks of one kind.

Each benchmark is a candidate list (`tt_zoo.evaluation.odqa.Collection`: ids, titles, texts;
BM25 reads ``"title text"``) and a way to score any `Searcher` of it that takes question
strings (BM25, a dense model through `QueryEncodingSearcher`, score fusion, a re-ranker, ...):

- **ReQA-SQuAD(dev)** (Ahmad et al. 2019; Chang et al. 2020, Sec. 4.1): every question against
  every (sentence, passage) candidate; a candidate's title is its sentence and its text its
  passage (so BM25 reads `tt_zoo.retrieval.bm25.candidate_texts` and the document tower
  ``encode_documents(texts=passage, titles=sentence)``). R@k against the gold candidate, and
  MRR (`tt_zoo.evaluation.metrics`), on all questions and on a cold-start split's test questions;
  the split's training questions are the validation queries (`Validation`).
- **Open-domain ReQA** (Chang et al. 2020, Sec. 5.3, Table 6): the same questions against the
  same candidates plus every (sentence, passage) of an article corpus
  (`tt_zoo.evaluation.open_domain.open_domain_reqa`); no validation queries of its own.
- **ODQA answer recall** (DPR's top-k accuracy, `tt_zoo.evaluation.odqa`): the validation
  questions against 100-word passages; a named question set (``webquestions-trainmodel``) over
  the same passages gives the validation queries.

`Benchmark.score(searcher)` searches every reported question once, at max(ks), and returns R@k
(+ MRR for ReQA) per question set and the queries/s of that search. `ReusedSearcher` keeps a
searcher's results so that rows built on it (fusion, re-ranking) search it only once, and still
report the queries/s of a fresh search.

Example:
>>> bench = reqa_benchmark("dev-v1.1.json")                           # doctest: +SKIP
>>> bm25 = ReusedSearcher(bm25_searcher(bench))                       # doctest: +SKIP
>>> dense = ReusedSearcher(dense_searcher(tt_zoo.load("ict_512"), bench))  # doctest: +SKIP
>>> bench.score(FusionSearcher(bm25, dense, method="rrf"))["sets"]["all"]["R@1"]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tt_zoo.evaluation import metrics as retrieval_metrics, odqa, reqa as reqa_lib
from tt_zoo.evaluation.document_embeddings import cache_file
from tt_zoo.retrieval.search import (QueryEncodingSearcher, SearchResult, WrappedSearcher,
                                     check_built_searcher)

KS = (1, 5, 10, 20, 50, 100)
ODQA_VALIDATION_SET = "webquestions-trainmodel"
_now = time.perf_counter  # the clock of every timing here (tests replace it)


# -- timing and reuse ---------------------------------------------------------------------------

class ReusedSearcher(WrappedSearcher):
    """A searcher whose results are kept: the same queries again, at the same or a smaller k,
    are answered from memory (a benchmark's fusion and re-ranking rows reuse the rows' own
    searches). Such a reuse is charged the seconds the first search took (`timed_search`), so
    every row's queries/s is that of a fresh search. Only hashable queries (strings) are
    kept; others (e.g. embeddings) are searched every time.

    Attributes:
      searches, reuses: how many searches ran and how many were answered from memory.
    """

    replayed_seconds = 0.0  # every reuse's charge, process-wide; read by `timed_search`

    def __init__(self, searcher):
        super().__init__(searcher)
        self._kept: Dict[tuple, Tuple[int, SearchResult, float]] = {}
        self.searches = self.reuses = 0

    def search(self, queries, k: int = 10) -> SearchResult:
        try:
            key = tuple(queries) if not isinstance(queries, (str, bytes)) else None
            hash(key)
        except TypeError:  # unhashable queries: never kept
            key = None
        kept = self._kept.get(key) if key is not None else None
        if kept is not None and kept[0] >= k:
            self.reuses += 1
            ReusedSearcher.replayed_seconds += kept[2]
            return kept[1] if kept[0] == k else truncate(kept[1], k)
        result, seconds = timed_search(self.searcher, queries, k)
        self.searches += 1
        if key is not None:
            self._kept[key] = (k, result, seconds)
        return result


def truncate(result: SearchResult, k: int) -> SearchResult:
    """The first k columns of a result (its ids cut to the rows kept)."""
    rows, scores = result.rows[:, :k], result.scores[:, :k]
    kept = (rows >= 0).sum(axis=1)
    return SearchResult(rows, scores, tuple(ids[:n] for ids, n in zip(result.ids, kept)))


def timed_search(searcher, queries, k: int) -> Tuple[SearchResult, float]:
    """`searcher.search(queries, k)` and its seconds, reuses inside it charged their first cost."""
    before = ReusedSearcher.replayed_seconds
    start = _now()
    result = searcher.search(queries, k)
    seconds = _now() - start + ReusedSearcher.replayed_seconds - before
    if not isinstance(result, SearchResult):
        raise TypeError(f"{type(searcher).__name__}.search returned {type(result).__name__}, "
                        "not a SearchResult.")
    return result, seconds


class _Timed:
    """Counts the queries and seconds of every search through it."""

    def __init__(self, searcher):
        self.searcher, self.queries, self.seconds = searcher, 0, 0.0

    def __len__(self):
        return len(self.searcher)

    def search(self, queries, k):
        result, seconds = timed_search(self.searcher, queries, k)
        self.queries += len(result)
        self.seconds += seconds
        return result


def _check_searcher(searcher, bench) -> None:
    check_built_searcher(searcher, f"{bench.name}: the searcher")
    if len(searcher) != len(bench.candidates):
        raise ValueError(f"{bench.name}: the searcher holds {len(searcher):,} candidates, the "
                         f"benchmark {len(bench.candidates):,}; build it on bench.candidates.")


def _speed(timed: _Timed) -> dict:
    return {"num_queries": timed.queries, "search_seconds": timed.seconds,
            "queries_per_s": timed.queries / timed.seconds if timed.seconds > 0 else None}


# -- the benchmarks -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Validation:
    """Queries for choosing a setting (never the reported ones) and the metric of a ranking.

    Attributes:
      name: what they are (e.g. "ReQA 5% split, training questions").
      queries: the question strings.
      metric: rows (`SearchResult.rows` of the queries, -1 padding) -> a number, higher better.
      metric_name: e.g. "MRR" or "R@20".
    """

    name: str
    queries: Tuple[str, ...]
    metric: Callable[[np.ndarray], float]
    metric_name: str


@dataclasses.dataclass
class ReqaBenchmark:
    """ReQA or open-domain ReQA: its candidates, the questions reported and their named subsets.

    Attributes:
      name: "reqa" or "open_domain_reqa".
      reqa: the `tt_zoo.evaluation.reqa.ReQA` (questions and candidates).
      candidates: the candidate list (ids = row numbers, titles = sentences, texts = passages).
      questions: the reported questions, searched once per score.
      subsets: name -> positions in `questions` (``"all"`` = every one).
      validation: queries for choosing settings, or None.
      meta: how it was built (split, limits, source).
    """

    name: str
    reqa: reqa_lib.ReQA
    candidates: odqa.Collection
    questions: List[reqa_lib.Question]
    subsets: Dict[str, np.ndarray]
    validation: Optional[Validation]
    meta: dict
    cache_prefix = "candidates"

    def score(self, searcher, ks: Sequence[int] = KS) -> dict:
        """R@k and MRR per subset of the reported questions, and the queries/s of the search.

        Returns:
          ``{"sets": {subset: {"num_questions", "R@k"..., "MRR"}}, "num_queries",
          "search_seconds", "queries_per_s", "queries_without_results"}``.
        """
        _check_searcher(searcher, self)
        timed = _Timed(searcher)
        result = timed.search([q.text for q in self.questions], max(ks))
        gold = np.array([q.gold_index for q in self.questions], dtype=np.int64)
        sets = {}
        for name, positions in self.subsets.items():
            sets[name] = {"num_questions": int(len(positions))}
            if len(positions):
                sets[name].update(retrieval_metrics.ranking_metrics(
                    result.rows[positions], gold[positions], ks))
        return {"sets": sets, **_speed(timed),
                "queries_without_results": int(result.empty.sum())}

    def describe(self) -> dict:
        return {"name": self.name, "num_candidates": len(self.candidates),
                "subsets": {n: int(len(p)) for n, p in self.subsets.items()},
                "validation": None if self.validation is None else {
                    "name": self.validation.name, "num_queries": len(self.validation.queries),
                    "metric": self.validation.metric_name},
                **self.meta}


def reqa_candidates(reqa: reqa_lib.ReQA) -> odqa.Collection:
    """ReQA's candidates as a candidate list: ids are row numbers, titles the sentences, texts
    the passages (`Collection.bm25_texts` is then `tt_zoo.retrieval.bm25.candidate_texts`)."""
    return odqa.Collection([str(i) for i in range(len(reqa.candidates))],
                           [c.sentence for c in reqa.candidates],
                           [c.passage for c in reqa.candidates])


REQA_CHOOSE_ON = ("train", "validation")
TEST_SUBSET = " test"  # "<p>% test": the subset of the <p>% cold-start split's test questions
# "<p>% validation": its held-out validation questions, reported when settings are chosen on them
VALIDATION_SUBSET = " validation"


def split_label(set_name: str) -> str:
    """The split a ReQA subset's name holds ("5%" of "5% test"), for its title."""
    return set_name.removesuffix(TEST_SUBSET).removesuffix(VALIDATION_SUBSET)


def split_part(set_name: str) -> str:
    """The part of the split a ReQA subset holds: "test" or "validation"."""
    return "validation" if set_name.endswith(VALIDATION_SUBSET) else "test"


def test_subset(sets) -> Optional[str]:
    """The name of the split's test subset among a row's `sets`, None without a split."""
    return next((s for s in sets if s.endswith(TEST_SUBSET)), None)


def reqa_benchmark(squad_path, *, split_fraction: float = 0.05, seed: int = 0,
                   limit_questions: Optional[int] = None, validation_metric: str = "MRR",
                   choose_on: str = "train") -> ReqaBenchmark:
    """ReQA-SQuAD(dev): all questions against all candidates.

    Subsets: ``"all"`` and ``"<p>% test"``, the test questions of the cold-start split
    ``reqa.make_splits(reqa, split_fraction, seed=seed)``, whose training questions are the
    validation queries, scored by `validation_metric` ("MRR" or "R@k"). ``choose_on=
    "validation"`` takes the split's held-out validation questions instead: for a model trained
    on the split's training questions (`tt-zoo multitask --task reqa`), which would otherwise
    choose settings on questions it has seen; they are then reported too (``"<p>%
    validation"``), so that models can be chosen between on them. `limit_questions` keeps the
    first N reported (and N validation) questions: a smoke run.
    """
    if choose_on not in REQA_CHOOSE_ON:
        raise ValueError(f"choose_on must be one of {REQA_CHOOSE_ON} (got {choose_on!r}).")
    reqa = reqa_lib.build_reqa(squad_path)
    split = reqa_lib.make_splits(reqa, split_fraction, seed=seed)
    questions = list(reqa.questions)[:limit_questions]
    test = set(split.test)
    label = f"{100 * split_fraction:g}%"
    in_test = [i for i, q in enumerate(questions) if q.id in test]
    subsets = {"all": np.arange(len(questions)),
               f"{label}{TEST_SUBSET}": np.array(in_test, dtype=np.int64)}
    chosen_on = split.train if choose_on == "train" else split.validation
    if not chosen_on:
        raise ValueError(f"The ReQA {label} split (seed {seed}) has no {choose_on} questions "
                         "to choose settings on.")
    if choose_on == "validation":
        held_out = set(chosen_on)
        subsets[f"{label}{VALIDATION_SUBSET}"] = np.array(
            [i for i, q in enumerate(questions) if q.id in held_out], dtype=np.int64)
    train = reqa.questions_for(chosen_on[:limit_questions])
    gold = np.array([q.gold_index for q in train], dtype=np.int64)
    validation = Validation(f"ReQA {label} split, {choose_on} questions",
                            tuple(q.text for q in train),
                            _reqa_metric(gold, validation_metric), validation_metric)
    meta = {"source": reqa.source, "num_questions": len(reqa.questions),
            "limit_questions": limit_questions, "split": split.meta}
    return ReqaBenchmark("reqa", reqa, reqa_candidates(reqa), questions, subsets, validation,
                         meta)


def _reqa_metric(gold: np.ndarray, name: str) -> Callable[[np.ndarray], float]:
    if name == "MRR":
        return lambda rows: retrieval_metrics.mrr(rows, gold)
    k = _cut_off(name)
    return lambda rows: retrieval_metrics.recall_at_k(rows, gold, (k,))[k]


def _cut_off(metric_name: str) -> int:
    if not metric_name.startswith("R@") or not metric_name[2:].isdigit() or int(
            metric_name[2:]) < 1:
        raise ValueError(f"The validation metric must be 'MRR' or 'R@k' (got {metric_name!r}).")
    return int(metric_name[2:])


def open_domain_benchmark(reqa_bench: ReqaBenchmark, articles, *,
                          limit_articles: Optional[int] = None,
                          progress: bool = False) -> ReqaBenchmark:
    """Open-domain ReQA: `reqa_bench`'s questions and subsets against its candidates plus every
    (sentence, passage) of `articles`; no validation queries (use ReQA's choices)."""
    from tt_zoo.evaluation.open_domain import open_domain_reqa  # noqa: PLC0415 (TensorFlow)

    reqa, added = open_domain_reqa(reqa_bench.reqa, articles, limit_articles, progress=progress)
    meta = {**reqa_bench.meta, "source": reqa.source, "added_candidates": added,
            "limit_articles": limit_articles}
    return ReqaBenchmark("open_domain_reqa", reqa, reqa_candidates(reqa), reqa_bench.questions,
                         reqa_bench.subsets, None, meta)


@dataclasses.dataclass
class OdqaBenchmark:
    """ODQA answer recall: the passages, the reported question sets, the validation set.

    Attributes:
      name: "odqa".
      benchmark: the `tt_zoo.evaluation.odqa.Benchmark` of the reported sets.
      candidates: its passages (``benchmark.collection``).
      validation: the validation set's answerable questions and its answer recall at k.
      validation_sets: that set's `AnswerSets` (counts).
    """

    name: str
    benchmark: odqa.Benchmark
    validation: Optional[Validation]
    validation_sets: Tuple[odqa.AnswerSets, ...]
    meta: dict
    cache_prefix = "passages"  # the name `tt-zoo odqa` gives its passage embeddings

    @property
    def candidates(self) -> odqa.Collection:
        return self.benchmark.collection

    def score(self, searcher, ks: Sequence[int] = KS) -> dict:
        """Answer recall per question set (and "all", their union) and the queries/s.

        Returns:
          ``{"sets": {set: {"num_questions", "answerable", "skipped", "R@k"...}},
          "num_queries", "search_seconds", "queries_per_s"}``.
        """
        _check_searcher(searcher, self)
        timed = _Timed(searcher)
        sets = self.benchmark.score(timed, ks=ks)
        return {"sets": sets, **_speed(timed)}

    def describe(self) -> dict:
        return {"name": self.name, **self.benchmark.describe(),
                "validation": None if self.validation is None else {
                    "name": self.validation.name, "num_queries": len(self.validation.queries),
                    "metric": self.validation.metric_name,
                    "num_questions": sum(s.num_questions for s in self.validation_sets)},
                **self.meta}


def odqa_benchmark(data_dir, *, articles=None, question_sets: Sequence[str] = odqa.VALIDATION,
                   validation_set: Optional[str] = ODQA_VALIDATION_SET,
                   limit_articles: Optional[int] = None, limit_questions: Optional[int] = None,
                   cache_dir=None, validation_metric: str = "R@20",
                   progress: bool = False) -> OdqaBenchmark:
    """ODQA answer recall of `question_sets` (default the validation questions) over the
    100-word passages of `articles` (default ``data_dir/wikispeedia``); the answerable questions
    of `validation_set` over the same passages are the validation queries (answer recall at
    `validation_metric`'s k). Answer rows are cached in `cache_dir` (`odqa.Benchmark.build`).
    `limit_questions` keeps the first N questions of each set: a smoke run."""
    names = list(question_sets) + ([validation_set] if validation_set else [])
    loaded = []
    for name in names:
        qs = odqa.load_question_set(name, data_dir)
        if limit_questions is not None:
            qs = dataclasses.replace(qs, questions=qs.questions[:limit_questions])
        loaded.append(qs)
    built = odqa.Benchmark.build(articles or pathlib.Path(data_dir) / "wikispeedia", loaded,
                                 limit_articles=limit_articles, progress=progress,
                                 cache_dir=cache_dir)
    reported = dataclasses.replace(built, sets=built.sets[:len(question_sets)])
    check, held = None, ()
    if validation_set:
        held = (built.sets[-1],)
        k = _cut_off(validation_metric)
        answers = built.sets[-1].rows
        check = Validation(f"ODQA {validation_set}, answerable questions",
                           tuple(q.text for q in built.sets[-1].questions),
                           lambda rows: _answer_recall_at(rows, answers, k), validation_metric)
    meta = {"limit_articles": limit_articles, "limit_questions": limit_questions}
    return OdqaBenchmark("odqa", reported, check, held, meta)


def _answer_recall_at(rows: np.ndarray, answers, k: int) -> float:
    padded = np.full((rows.shape[0], max(k, rows.shape[1])), -1, dtype=np.int64)
    padded[:, :rows.shape[1]] = rows
    return odqa.answer_recall(padded, answers, (k,))[f"R@{k}"]


# -- searchers of a benchmark's candidates -----------------------------------------------------

def bm25_searcher(bench):
    """BM25 (bm25s, the package's defaults) over each candidate's ``"title text"``."""
    return odqa.bm25_searcher(bench.candidates)


def embedding_cache_path(bench, model, cache_dir) -> pathlib.Path:
    """Where `dense_searcher` keeps `model`'s candidate embeddings of `bench` in `cache_dir`:
    ``{prefix}-{model_tag}-{num_candidates}.npy`` (`cache_file`; for ODQA the file `tt-zoo odqa`
    writes). A complete earlier encoding of the same number of candidates by the same model that
    `benchmarks/open_domain.py` left there (``{model.name}.npy``) is used instead."""
    cache_dir = pathlib.Path(cache_dir)
    n = len(bench.candidates)
    earlier = cache_dir / f"{model.name}.npy"
    if earlier.is_file() and earlier.with_suffix(".json").is_file():
        state = json.loads(earlier.with_suffix(".json").read_text())
        if (state.get("shape", [None])[0] == n and state.get("done") == n
                and state.get("model") == str(model.path)):
            return earlier
    return cache_file(cache_dir, bench.cache_prefix, model, n)


def dense_searcher(model, bench, cache_path=None, progress: bool = False) -> QueryEncodingSearcher:
    """Exact inner-product search over `model`'s embeddings of the candidates,
    psi(title, text), searched with question strings through ``model.encode_queries``. With
    `cache_path` (e.g. `embedding_cache_path`) the embeddings are encoded there, resumably."""
    return QueryEncodingSearcher(model.encode_queries,
                                 odqa.dense_searcher(model, bench.candidates, cache_path, progress))


def searcher_seconds(build: Callable[[], object]) -> Tuple[object, float]:
    """``build()`` and the seconds it took (a searcher's build time for a report)."""
    start = _now()
    built = build()
    return built, _now() - start
