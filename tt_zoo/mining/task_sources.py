"""Tasks for multi-task retrieval training, built from the benchmarks and pair sets we have.

Multi-task DPR (Maillard et al. 2021, *Multi-task Retrieval for Knowledge-Intensive Tasks*,
Sec. 3-4) trains one retriever on the union of several tasks' (query, positive passage, one BM25
"hard confounder") examples. Each function here turns one source into a `tt_zoo.data.tasks.Task`:

* `qa_task`: a factoid question set (WebQuestions trainmodel, CuratedTREC, any question file of
  `tt_zoo.data.question_sets`) over a passage `Collection` (`tt_zoo.data.passage_collection`).
  As DPR builds its WebQuestions and CuratedTREC training data (Karpukhin et al. 2020, Sec. 5.1
  "Selection of positive passages"):
  the positives are the passages of BM25's top ``depth`` (100) that hold an answer (DrQA/DPR
  answer matching, `tt_zoo.data.answer_passages.AnswerIndex`), in rank order, the first one
  being trained on; a question with none is dropped and counted. The confounder is DPR's BM25
  negative (Sec. 3.2): the first passage of the same ranking that holds no answer anywhere
  (`hard_negatives.mine_answer_negatives`, with its random fallback).
* `reqa_task`: the training part of a ReQA-SQuAD cold-start split (Chang et al. 2020, Sec. 4.1):
  the gold (sentence, passage) candidate, and `hard_negatives.mine_reqa_negatives`' confounder.
  Documents follow fine-tuning's convention (`tt_zoo.evaluation.reqa.training_examples`):
  id = the candidate index, title = the sentence, text = the passage.
* `lexical_task`: BM25 as a teacher, SPAR's training data for its lexical model (Chen et al.
  2021): word spans of random passages as queries, BM25's top passages over the collection as
  positives, a passage it ranks a little lower as the confounder.
* `pair_task`: a self-supervised pair directory (ICT/BFS/WLP, crop, span, qgen) with its stored
  BM25 negative (`hard_negatives.load_or_mine`, reused when stored beside the pairs).

`remine_confounders` replaces a task's confounders with those of any ranking over the collection:
with `dense_rank` (a trained model's exact inner-product search) it is the second round of
Maillard et al. (Sec. 4.4, "confounders mined by the trained model"), by the same miner as BM25's.
`qa_excluded_rows` gives what such a confounder must avoid: the passages holding an answer and
the positives.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import FrozenSet, List, Optional, Sequence, Tuple

import numpy as np
from tqdm.auto import tqdm

from tt_zoo.data import answer_passages
from tt_zoo.data.passage_collection import Collection
from tt_zoo.data.question_sets import OdqaQuestion, QuestionSet
from tt_zoo.data.tasks import Document, Task, TaskExample
from tt_zoo.errors import TtZooError
from tt_zoo.evaluation import odqa
from tt_zoo.mining import hard_negatives as hn

QA_DEPTH = 100  # DPR's BM25 top 100 (Karpukhin et al. 2020, Sec. 5.1)
_RANK_CHUNK = 1024  # questions per BM25 call (the progress bar moves between calls)


def documents_of(collection: Collection) -> List[Document]:
    """The collection's passages as `Document`s, in row order."""
    return [Document(i, t, x) for i, t, x in zip(collection.ids, collection.titles,
                                                 collection.texts)]


def _document(collection: Collection, row: int) -> Document:
    row = int(row)
    return Document(collection.ids[row], collection.titles[row], collection.texts[row])


def _collection_bm25(what: str, collection: Collection, bm25=None):
    """`bm25` (a `BM25Retriever` over the collection's rows), checked to hold as many documents
    as the collection, or one built over it (`odqa.bm25_searcher`)."""
    retriever = bm25 if bm25 is not None else odqa.bm25_searcher(collection)
    if len(retriever) != len(collection):
        raise TtZooError(f"{what}: the BM25 index holds {len(retriever):,} documents, the "
                         f"collection {len(collection):,} passages; index the collection.")
    return retriever


def _rank_all(rank: hn.Rank, texts: List[str], depth: int, progress: bool,
              desc: str) -> np.ndarray:
    """`rank` over all texts in chunks (int64 [len(texts), <= depth]), with a progress bar."""
    parts = []
    with tqdm(total=len(texts), desc=desc, unit="query", disable=not progress,
              mininterval=2) as bar:
        for start in range(0, len(texts), _RANK_CHUNK):
            parts.append(np.asarray(rank(texts[start:start + _RANK_CHUNK], depth), np.int64))
            bar.update(len(parts[-1]))
    return np.concatenate(parts)


def qa_task(name: str, question_set: QuestionSet, collection: Collection, *,
            depth: int = QA_DEPTH, answer_rows: Optional[Sequence[FrozenSet[int]]] = None,
            bm25=None, seed: int = 0, task_class: str = "qa", validation: Sequence[str] = (),
            progress: bool = False) -> Task:
    """A QA task: positives by answer match in BM25's top `depth`, one BM25 confounder each
    (see the module docstring; DPR, Karpukhin et al. 2020, Sec. 3.2 and 5.1).

    Args:
      name: the task's name.
      question_set: `QuestionSet` (questions with string answers or a regex).
      collection: the passages (`Collection`), searched and matched.
      depth: BM25 passages per question where positives and the confounder are looked for.
      answer_rows: per question of the set, the rows of the passages holding an answer (e.g.
        cached); default `answer_passages.AnswerIndex(collection.texts)`'s rows.
      bm25: a `tt_zoo.retrieval.bm25.BM25Retriever` over the collection's rows (default
        `odqa.bm25_searcher(collection)`, built here).
      seed: seeds the confounder's random fallback.

    Returns:
      A `Task` whose stats hold: questions, skipped (bad regex, from the set),
      answerable_in_collection, with_positive_in_top_depth (= the examples), depth, the
      confounder miner's counts and seconds.
    """
    start = time.perf_counter()
    if not isinstance(question_set, QuestionSet):
        raise TypeError(f"qa_task {name!r}: question_set must be a tt_zoo.evaluation.odqa."
                        f"QuestionSet (got {type(question_set).__name__}).")
    questions = question_set.questions
    if not questions:
        raise TtZooError(f"qa_task {name!r}: question set {question_set.name!r} has no "
                         "questions.")
    hn.MiningSettings(1, depth, seed=seed)  # checks depth
    if answer_rows is None:
        answer_rows = answer_passages.AnswerIndex(collection.texts).rows_with_answers(questions)
    elif len(answer_rows) != len(questions):
        raise TtZooError(f"qa_task {name!r}: {len(answer_rows)} answer-row sets for the "
                         f"{len(questions)} questions of {question_set.name!r}.")
    retriever = _collection_bm25(f"qa_task {name!r}", collection, bm25)
    answerable = [i for i, rows in enumerate(answer_rows) if rows]
    kept, positives = [], []
    if answerable:
        texts = [questions[i].text for i in answerable]
        ranked = _rank_all(hn.bm25_rank(retriever), texts, depth, progress,
                           f"{name}: BM25 top {depth}")
        for i, ranking in zip(answerable, ranked):
            found = [int(r) for r in ranking if r >= 0 and int(r) in answer_rows[i]]
            if found:
                kept.append(i)
                positives.append(found)
    if not kept:
        raise TtZooError(f"qa_task {name!r}: none of the {len(questions):,} questions of "
                         f"{question_set.name!r} has an answer-holding passage in its BM25 top "
                         f"{depth} ({len(answerable):,} have one in the collection of "
                         f"{len(collection):,} passages).")
    # The confounders come from the same BM25 ranking (looked up, not searched again).
    ranking_of = {questions[i].text: row for i, row in zip(answerable, ranked)}
    mined = hn.mine_answer_negatives(
        lambda queries, k: np.stack([ranking_of[q][:k] for q in queries]), len(collection),
        [questions[i].text for i in kept], [answer_rows[i] for i in kept], 1, depth=depth,
        seed=seed, progress=progress, what=f"qa_task {name!r}: question")
    examples = tuple(
        TaskExample(questions[i].text, tuple(_document(collection, r) for r in rows),
                    tuple(_document(collection, r) for r in negatives),
                    tuple(questions[i].answers), questions[i].answer_regex)
        for i, rows, negatives in zip(kept, positives, mined.rows))
    stats = {"questions": len(questions), "skipped": len(question_set.skipped),
             "answerable_in_collection": len(answerable),
             "with_positive_in_top_depth": len(kept), "depth": int(depth),
             "negatives": f"BM25 top {depth}: the first passage without an answer",
             "confounders": mined.counts, "seconds": round(time.perf_counter() - start, 2)}
    return Task(name, task_class, examples,
                knowledge_source=f"{len(collection):,} passages (title, text)",
                validation=tuple(validation), stats=stats)


def reqa_documents(reqa) -> List[Document]:
    """The ReQA candidates in index order as documents: ``Document(str(index), sentence,
    passage)``, fine-tuning's DOC_ID / DOC_TITLE / DOC_TEXT
    (`tt_zoo.evaluation.reqa.training_examples`, `tt_zoo.training.finetuning.reqa_pairs`)."""
    return [Document(str(i), c.sentence, c.passage) for i, c in enumerate(reqa.candidates)]


def reqa_task(name: str, reqa, question_ids: Sequence[str], *, seed: int = 0,
              task_class: str = "qa", validation: Sequence[str] = ()) -> Task:
    """The training part of a ReQA cold-start split as a task: the gold candidate and one BM25
    confounder (`hard_negatives.mine_reqa_negatives`) per question; candidates as documents
    by `reqa_documents`."""
    start = time.perf_counter()
    questions = reqa.questions_for(question_ids)
    mined = hn.mine_reqa_negatives(reqa, question_ids, 1, seed=seed)
    documents = reqa_documents(reqa)
    examples = tuple(TaskExample(q.text, (documents[q.gold_index],),
                                 tuple(documents[int(c)] for c in negatives), tuple(q.answers))
                     for q, negatives in zip(questions, mined.rows))
    stats = {"questions": len(questions), "candidates": len(reqa.candidates),
             "negatives": f"BM25 top {hn.DEFAULT_DEPTH} (sentence + passage): the first "
                          "candidate other than the gold whose sentence holds no answer",
             "confounders": mined.counts, "seconds": round(time.perf_counter() - start, 2)}
    return Task(name, task_class, examples,
                knowledge_source=f"ReQA {reqa.source or '(in memory)'}: "
                                 f"{len(reqa.candidates):,} (sentence, passage) candidates",
                validation=tuple(validation), stats=stats)


LEXICAL_QUERY_WORDS = (4, 16)  # a query's length in words, drawn uniformly (both included)
LEXICAL_POSITIVES = 3  # BM25's top passages kept as an example's positives, best first
LEXICAL_NEGATIVE_RANKS = (8, 20)  # the confounder: BM25's passage at a rank drawn from [8, 20)


def lexical_task(name: str, collection: Collection, num_queries: int, *, bm25=None,
                 seed: int = 0, query_words: Tuple[int, int] = LEXICAL_QUERY_WORDS,
                 positives: int = LEXICAL_POSITIVES,
                 negative_ranks: Tuple[int, int] = LEXICAL_NEGATIVE_RANKS,
                 task_class: str = "qa", progress: bool = False) -> Task:
    """BM25 as a teacher: the training data of SPAR's lexical model Λ (Chen et al. 2021,
    *Salient Phrase Aware Dense Retrieval: Can a Dense Retriever Imitate a Sparse One?*),
    which trains a dense retriever to rank as BM25 ranks.

    Each query is a span of words of a passage drawn at random from the collection (its
    length uniform in `query_words`; SPAR draws its queries from Wikipedia text, and spans of
    4-16 words are about as long as a factoid question). Its positives are BM25's top `positives`
    passages over the whole collection, best first (the first is trained on; the passage the
    span was cut from is usually, not always, among them); its confounder is BM25's passage at
    a rank drawn from `negative_ranks`, a passage BM25 ranks close below them. No label of any
    question set is read: the task needs only the passages. A query whose BM25 ranking is
    shorter than ``negative_ranks[1]`` (few shared terms) is dropped and counted.

    Returns:
      A `Task` whose stats hold the queries drawn and kept, the share whose source passage is
      BM25's first, the settings and seconds.
    """
    start = time.perf_counter()
    low, high = query_words
    first, last = negative_ranks
    if not 1 <= low <= high:
        raise ValueError(f"lexical_task {name!r}: query_words must be (low, high) with "
                         f"1 <= low <= high (got {query_words}).")
    if not 1 <= positives <= first < last:
        raise ValueError(f"lexical_task {name!r}: need 1 <= positives <= negative_ranks[0] < "
                         f"negative_ranks[1] (got positives={positives}, negative_ranks="
                         f"{negative_ranks}).")
    if num_queries < 1:
        raise ValueError(f"lexical_task {name!r}: num_queries must be positive "
                         f"(got {num_queries}).")
    retriever = _collection_bm25(f"lexical_task {name!r}", collection, bm25)
    rng = np.random.default_rng(seed)
    sources = rng.integers(len(collection), size=num_queries)
    queries = []
    for row in sources:
        words = collection.texts[row].split()
        length = min(len(words), int(rng.integers(low, high + 1)))
        begin = int(rng.integers(len(words) - length + 1))
        queries.append(" ".join(words[begin:begin + length]))
    ranked = _rank_all(hn.bm25_rank(retriever), queries, last, progress,
                       f"{name}: BM25 top {last}")
    picks = rng.integers(first, last, size=num_queries)
    examples, source_first = [], 0
    for query, source, ranking, pick in zip(queries, sources, ranked, picks):
        if ranking.size < last or ranking[last - 1] < 0:
            continue
        source_first += int(ranking[0] == source)
        examples.append(TaskExample(
            query, tuple(_document(collection, r) for r in ranking[:positives]),
            (_document(collection, ranking[pick]),)))
    if not examples:
        raise TtZooError(f"lexical_task {name!r}: none of the {num_queries:,} queries has "
                         f"{last} passages sharing a term in BM25's ranking of the "
                         f"{len(collection):,} passages.")
    stats = {"queries": int(num_queries), "kept": len(examples),
             "dropped_short_rankings": int(num_queries) - len(examples),
             "source_passage_first": round(source_first / len(examples), 4),
             "query_words": [low, high], "positives": f"BM25 top {positives}",
             "negatives": f"BM25 rank drawn from [{first}, {last})", "seed": int(seed),
             "seconds": round(time.perf_counter() - start, 2)}
    return Task(name, task_class, tuple(examples),
                knowledge_source=f"{len(collection):,} passages (title, text)", stats=stats)


def pair_task(name: str, pairs_dir: str, *, max_pairs: Optional[int] = None, seed: int = 0,
              task_class: str = "self_supervised", negatives_dir: Optional[str] = None,
              progress: bool = False, log=print) -> Task:
    """A pair directory (`tt_zoo.data.pairs_io`, its first `max_pairs` pairs) as a task: each
    pair's document is its positive, its confounder the stored BM25 negative
    (`hard_negatives.load_or_mine`, H = 1, mined and stored beside the pairs or in
    `negatives_dir` the first time, reused after)."""
    from tt_zoo.data.pairs_io import read_pair_texts  # noqa: PLC0415 (imports TensorFlow)

    start = time.perf_counter()
    stored = hn.load_or_mine(pairs_dir, hn.MiningSettings(1, max_pairs=max_pairs, seed=seed),
                             output_dir=negatives_dir, progress=progress, log=log)
    pairs = read_pair_texts(pairs_dir, max_pairs)
    if stored.rows.shape[0] != len(pairs):
        raise TtZooError(f"pair_task {name!r}: {stored.path} holds negatives for "
                         f"{stored.rows.shape[0]:,} pairs, {pairs_dir} has {len(pairs):,}.")

    def document(row) -> Document:
        row = int(row)
        return Document(pairs.doc_ids[row], pairs.titles[row], pairs.texts[row])

    examples = tuple(TaskExample(pairs.queries[i], (document(i),),
                                 tuple(document(r) for r in stored.rows[i]))
                     for i in range(len(pairs)))
    stats = {"pairs": len(pairs), "pair_tasks": dict(collections.Counter(pairs.tasks)),
             "negatives": "BM25 over the pair set's documents (hard_negatives.load_or_mine)",
             "hard_negatives": stored.summary(),
             "seconds": round(time.perf_counter() - start, 2)}
    return Task(name, task_class, examples,
                knowledge_source=f"pair set {pairs_dir}: {len(set(pairs.doc_ids)):,} documents",
                stats=stats)


# ----------------------------------------------------------------- self-mined confounders


def qa_excluded_rows(task: Task, collection: Collection,
                     answer_rows: Optional[Sequence[FrozenSet[int]]] = None
                     ) -> List[FrozenSet[int]]:
    """Per example of `task` (built over `collection`), the rows a confounder must avoid: the
    passages holding one of its answers (`answer_passages.AnswerIndex`, or `answer_rows`
    aligned with the task's examples) and its positives' rows (by id). An example without answers (a
    self-supervised pair) excludes its positives only."""
    row_of = {doc_id: row for row, doc_id in enumerate(collection.ids)}
    if answer_rows is None:
        answer_rows = answer_passages.AnswerIndex(collection.texts).rows_with_answers(
            [OdqaQuestion(str(i), e.query, tuple(e.answers), e.answer_regex)
             for i, e in enumerate(task.examples)])
    elif len(answer_rows) != len(task.examples):
        raise TtZooError(f"qa_excluded_rows: {len(answer_rows)} answer-row sets for the "
                         f"{len(task.examples)} examples of task {task.name!r}.")
    out = []
    for i, (example, rows) in enumerate(zip(task.examples, answer_rows)):
        excluded = set(rows)
        for document in example.positives:
            if document.id not in row_of:
                raise TtZooError(f"Task {task.name!r}, example {i}: positive {document.id!r} is "
                                 f"not a passage of the collection ({len(collection):,} "
                                 "passages); give the collection the task was built over.")
            excluded.add(row_of[document.id])
        out.append(frozenset(excluded))
    return out


def remine_confounders(task: Task, rank: hn.Rank, documents: Sequence[Document],
                       excluded_rows: Sequence[FrozenSet[int]], *,
                       depth: int = hn.DEFAULT_DEPTH, seed: int = 0,
                       progress: bool = False) -> Task:
    """The task with each example's confounder re-mined from `rank` over `documents` (the
    collection in row order): the first of its top `depth` outside `excluded_rows[i]`
    (`qa_excluded_rows`), with the random fallback (`hard_negatives.mine_answer_negatives`).
    With `dense_rank` of the trained model: Maillard et al. 2021, Sec. 4.4."""
    mined = hn.mine_answer_negatives(rank, len(documents), [e.query for e in task.examples],
                                     excluded_rows, 1, depth=depth, seed=seed,
                                     progress=progress, what=f"Task {task.name!r}: example")
    new = task.with_negatives([[documents[int(r)] for r in row] for row in mined.rows],
                              f"re-mined: the first of the given ranking's top {depth} "
                              "outside the excluded rows (answers and positives)")
    return dataclasses.replace(new, stats={**new.stats, "remined_confounders": {
        **mined.counts, "depth": int(depth), "seed": int(seed),
        "seconds": round(mined.seconds, 2), "earlier": task.stats.get("negatives")}})


def dense_rank(model, documents: Sequence[Document], *, cache_path=None,
               progress: bool = False) -> hn.Rank:
    """The `Rank` of a two-tower model over `documents`: psi(title, text) encoded once
    (`odqa.dense_searcher`, to ``cache_path`` when given, resumable), each call encodes the
    queries phi(q) and takes the exact inner-product top `depth` (`search.ExactSearcher`)."""
    if not len(documents):
        raise TtZooError("dense_rank: no documents.")
    searcher = odqa.dense_searcher(
        model, Collection([d.id for d in documents], [d.title for d in documents],
                               [d.text for d in documents]), cache_path, progress)

    def rank(queries: List[str], depth: int) -> np.ndarray:
        return np.asarray(searcher.search(model.encode_queries(list(queries)), depth).rows)

    return rank
