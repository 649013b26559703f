"""BM25-mined hard negatives: a few "hard confounders" per training example.

DPR (Karpukhin et al. 2020, Sec. 3.2) trains each question against the batch's passages plus
one BM25 passage that does not hold the answer; Multi-task DPR (Maillard et al. 2021, Sec. 3)
keeps one such BM25 "hard confounder" per example across its tasks. In-batch negatives of a
small batch (the ~128 pairs a CPU step takes) are mostly easy: a BM25 negative shares terms with
the query, so the sampled softmax (Chang et al. 2020, Sec. 2) gets a harder contrast per step.

**Pretraining pairs** (`mine_pair_negatives`). The corpus is the pair set's distinct documents,
one per DOC_ID, indexed as ``title + " " + passage`` with `tt_zoo.retrieval.bm25` (bm25s,
English stemming and stop words); the queries are the pairs' queries. Each pair keeps the first
H valid documents of its BM25 top ``depth`` (documents sharing a term with the query, best
first, equal scores by corpus order; `BM25Retriever.top_rows`), skipping:

* the positive itself (the same DOC_ID: the ICT documents of one passage share it);
* for BFS and WLP pairs, every passage of the positive's article (the same DOC_TITLE): BFS
  learns that a lead sentence belongs with *any* passage of its page, and a WLP positive stands
  for its linked page;
* every positive of the same query elsewhere in the pair set (miner version 2): a lead sentence
  is the query of BFS pairs (passages of its own page) and of WLP pairs (passages of the pages
  that link to it), so the documents that any pair with this query (lower-cased, whitespace
  collapsed) holds, and for its BFS/WLP pairs every passage of their articles, are positives
  of it, not negatives;
* any document that contains the query (lower-cased, whitespace collapsed): an ICT query left in
  a passage, a sentence repeated elsewhere, a lead sentence in its own lead passage are
  positives in disguise.

A negative is stored as a *row index of the pair set* whose document it is, so that training
takes its tokens, hashed id and q(d) from the tokenized pair arrays
(`tt_zoo.training.step_data.step_batches`). A DOC_ID's row is the first of its rows with the
longest DOC_TEXT: the whole passage when any pair has it (an ICT document lacks its query
sentence 90% of the time), and the same text BM25 indexed and the validity rules checked.

**Fallback.** A pair with fewer than H valid documents among its top ``depth`` (a query without
an indexed term, or an article whose passages fill the top) gets its other slots from documents
drawn uniformly at random under the same rules, without repeats, from
``numpy.random.default_rng([seed, pair row])``: random negatives like the in-batch ones, and
deterministic. `MinedNegatives.counts` records how many pairs and slots needed it.

**Stored with the pairs** (`load_or_mine`): ``PAIRS/hard_negatives/NAME.npy`` (int32 [pairs, H])
and ``NAME.json`` beside it, NAME encoding the settings; the sidecar records the pair manifest's
sha256, the settings, the counts, the mining time and the .npy's size and sha256. Both are
written to temporary names and renamed, the sidecar last, so a file without its sidecar is an
unfinished write and is mined again. A stored file with a matching sidecar is reused; a sidecar
written for another version of the pairs (or other settings) is refused, never overwritten. The
pair files themselves are never touched; ``output_dir`` puts the files elsewhere when the pair
directory is read-only or remote.

**ReQA fine-tuning** (`mine_reqa_negatives`): for each training question, H candidates of its
BM25 top-``depth`` (the baseline's ``sentence + passage`` text), skipping the gold candidate and
every candidate whose sentence contains one of the question's answer texts (normalised as
above), with the same random fallback.

**Any ranking** (`mine_answer_negatives`): the same loop over any `Rank`, ``rank(queries,
depth) -> int rows`` (-1 padding), skipping per query a given set of rows (the passages that
hold an answer, and the positives). With `bm25_rank` it gives DPR's BM25 confounder of a QA
question (Karpukhin et al. 2020, Sec. 3.2); with a trained model's search
(`tt_zoo.mining.task_sources.dense_rank`), the "self-mined" confounders of Maillard et al.
(2021, Sec. 4.4), by this same code.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import os
import time
from typing import TYPE_CHECKING, AbstractSet, Callable, Dict, List, Optional, Sequence

import numpy as np
from tqdm.auto import tqdm

from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.retrieval import bm25

if TYPE_CHECKING:  # (pairs_io imports TensorFlow: only `load_or_mine` reads a pair directory)
    from tt_zoo.data.pairs_io import PairTexts

MINER_VERSION = 2  # 2: positives of the same query elsewhere in the pair set are skipped
DEFAULT_DEPTH = 32
SUBDIRECTORY = "hard_negatives"
_ARTICLE_TASKS = ("bfs", "wlp")  # their positives stand for a whole article
_SEARCH_CHUNK = 1024  # queries per BM25 call (the progress bar moves between calls)
_RANDOM_ROUNDS = 8  # rejection-sampling rounds before the fallback scans a whole permutation
# A ranking of a corpus: rank(queries, depth) -> int rows [len(queries), <= depth], best first,
# -1 padding a query with fewer results (`bm25_rank`; a dense model's:
# `tt_zoo.mining.task_sources.dense_rank`).
Rank = Callable[[List[str], int], np.ndarray]
# bm25s's and `tt_zoo.retrieval.bm25`'s defaults, recorded in every sidecar.
BM25_SETTINGS = {"k1": 1.5, "b": 0.75, "method": "lucene", "stemmer": "english",
                 "stopwords": "en"}


class HardNegativesMismatchError(ArtifactError):
    """A stored hard-negative file was mined from other pairs or with other settings."""


def normalize_text(text: str) -> str:
    """Lower-cased, whitespace collapsed: what "contains the query / the answer" compares."""
    return " ".join(text.lower().split())


@dataclasses.dataclass(frozen=True)
class MiningSettings:
    """What defines a set of mined pretraining negatives (and the file's name).

    Args:
      num_negatives: H, negatives per pair.
      depth: BM25 results searched per query (the valid ones are kept in rank order).
      max_pairs: mine for the first N pairs of the directory only (`read_pairs(...).take(N)`,
        the rows a `--max-pairs` training run tokenizes); None or 0 for all.
      seed: seeds the random fallback.
    """

    num_negatives: int
    depth: int = DEFAULT_DEPTH
    max_pairs: Optional[int] = None
    seed: int = 0

    def __post_init__(self):
        for name in ("num_negatives", "depth"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"MiningSettings.{name} must be a positive int (got {value!r}).")
        if self.depth < self.num_negatives:
            raise ValueError(f"MiningSettings: depth {self.depth} must be at least "
                             f"num_negatives {self.num_negatives}.")
        if self.max_pairs is not None and self.max_pairs < 0:
            raise ValueError(f"MiningSettings.max_pairs must be >= 0 (got {self.max_pairs}).")
        object.__setattr__(self, "max_pairs", self.max_pairs or None)

    @property
    def file_stem(self) -> str:
        """``bm25-v2-h4-depth32-seed0-all`` (``-first20000`` for max_pairs 20000)."""
        subset = f"first{self.max_pairs}" if self.max_pairs else "all"
        return (f"bm25-v{MINER_VERSION}-h{self.num_negatives}-depth{self.depth}-"
                f"seed{self.seed}-{subset}")

    def as_dict(self) -> dict:
        return {"num_negatives": int(self.num_negatives), "depth": int(self.depth),
                "max_pairs": self.max_pairs, "seed": int(self.seed),
                "miner_version": MINER_VERSION, "bm25": dict(BM25_SETTINGS),
                "document_text": "title + ' ' + passage"}


@dataclasses.dataclass
class MinedNegatives:
    """rows: int32 [examples, H] (pair rows, or ReQA candidate indices), best BM25 rank first;
    counts: what was skipped and how many slots the fallback filled; seconds: index + search."""

    rows: np.ndarray
    counts: Dict[str, int]
    seconds: float


def document_rows(pairs: PairTexts) -> np.ndarray:
    """The representative pair row of each distinct DOC_ID, in order of first appearance: the
    first row with the longest DOC_TEXT among the id's rows."""
    best: Dict[str, int] = {}
    for row, (doc_id, text) in enumerate(zip(pairs.doc_ids, pairs.texts)):
        current = best.get(doc_id)
        if current is None or len(text) > len(pairs.texts[current]):
            best[doc_id] = row
    return np.fromiter(best.values(), dtype=np.int64, count=len(best))


def query_positives(pairs: PairTexts) -> Dict[str, tuple]:
    """For each query (`normalize_text`): (the DOC_IDs its pairs hold, the DOC_TITLEs of its BFS
    and WLP pairs, whose every passage is a positive of it)."""
    out: Dict[str, tuple] = {}
    for query, doc_id, title, task in zip(pairs.queries, pairs.doc_ids, pairs.titles,
                                          pairs.tasks):
        ids, articles = out.setdefault(normalize_text(query), (set(), set()))
        ids.add(doc_id)
        if task in _ARTICLE_TASKS:
            articles.add(title)
    return out


def _first_valid(ranked: np.ndarray, is_valid: Callable[[int], bool], num: int) -> List[int]:
    """The first `num` valid entries of a BM25 ranking (-1 pads are ignored)."""
    chosen = []
    for candidate in ranked:
        if candidate < 0:
            break
        if is_valid(int(candidate)):
            chosen.append(int(candidate))
            if len(chosen) == num:
                break
    return chosen


def _fill_at_random(chosen: List[int], is_valid: Callable[[int], bool], num_documents: int,
                    num: int, rng: np.random.Generator, what: str) -> int:
    """Completes `chosen` to `num` distinct valid documents drawn uniformly at random (the
    documented fallback); returns how many it added. Raises when the corpus has too few."""
    added = 0
    taken = set(chosen)

    def offer(candidate):
        nonlocal added
        candidate = int(candidate)
        if candidate not in taken and is_valid(candidate):
            taken.add(candidate)
            chosen.append(candidate)
            added += 1
        return len(chosen) == num

    for _ in range(_RANDOM_ROUNDS):
        if any(offer(c) for c in rng.integers(0, num_documents, size=2 * num)):
            return added
    if len(chosen) < num and not any(offer(c) for c in rng.permutation(num_documents)):
        raise TtZooError(f"{what} has only {len(chosen)} valid hard negatives in the whole "
                         f"corpus of {num_documents} documents, fewer than the {num} asked for; "
                         "mine fewer negatives per example (a larger corpus has more).")
    return added


def bm25_rank(retriever: bm25.BM25Retriever) -> Rank:
    """The `Rank` of a BM25 index: `BM25Retriever.top_rows`, the documents that share a term
    with the query, best first, equal scores by row, -1 padding the rest."""
    return lambda queries, depth: retriever.top_rows(queries, depth)[0]


def _ranked_rows(rank: Rank, queries: Sequence[str], depth: int) -> np.ndarray:
    """`rank(queries, depth)`, checked: int rows [len(queries), <= depth], -1 padding."""
    rows = np.asarray(rank(list(queries), depth))
    if (rows.ndim != 2 or rows.shape[0] != len(queries) or rows.shape[1] > depth
            or not np.issubdtype(rows.dtype, np.integer)):
        raise TtZooError(f"A ranking must give int rows [{len(queries)} queries, <= {depth}] "
                         f"(got {rows.dtype} of shape {rows.shape}).")
    return rows


def _mine(rank: Rank, num_documents: int, queries: Sequence[str], num: int, depth: int,
          validity: Callable[[int], Callable[[int], bool]], seed: int, progress: bool,
          desc: str, what: Callable[[int], str]) -> tuple:
    """The top-`depth` of every query by `rank` (e.g. `bm25_rank`), its first `num` valid
    documents, the random fallback over all `num_documents` documents.

    `validity(i)` gives example i's rule over corpus documents. Returns (chosen [n, num] corpus
    indices, counts)."""
    n = len(queries)
    chosen = np.empty((n, num), dtype=np.int64)
    counts = {"examples": n, "queries_without_bm25_results": 0, "examples_with_fallback": 0,
              "fallback_negatives": 0}
    with tqdm(total=n, desc=desc, unit="query", disable=not progress, mininterval=2) as bar:
        for start in range(0, n, _SEARCH_CHUNK):
            ranked = _ranked_rows(rank, queries[start:start + _SEARCH_CHUNK], depth)
            for offset, ranking in enumerate(ranked):
                i = start + offset
                is_valid = validity(i)
                if ranking.size == 0 or ranking[0] < 0:
                    counts["queries_without_bm25_results"] += 1
                picked = _first_valid(ranking, is_valid, num)
                if len(picked) < num:
                    added = _fill_at_random(picked, is_valid, num_documents, num,
                                            np.random.default_rng([seed, i]), what(i))
                    counts["examples_with_fallback"] += 1
                    counts["fallback_negatives"] += added
                chosen[i] = picked
            bar.update(len(ranked))
    return chosen, counts


def mine_pair_negatives(pairs: PairTexts, num_negatives: int, *, depth: int = DEFAULT_DEPTH,
                        seed: int = 0, progress: bool = True, log=print) -> MinedNegatives:
    """H BM25 hard negatives for every pair, as pair rows (see the module docstring).

    Returns:
      `MinedNegatives` with rows int32 [len(pairs), H] (each a row whose document is the
      negative) and counts: pairs, distinct_documents, skipped_same_document,
      skipped_same_article, skipped_positive_of_same_query, skipped_containing_query (among
      the documents looked at),
      queries_without_bm25_results, pairs_with_fallback, fallback_negatives.
    """
    settings = MiningSettings(num_negatives, depth, seed=seed)  # checks the numbers
    if len(pairs) == 0:
        raise ValueError("mine_pair_negatives: the pair set is empty.")
    start = time.perf_counter()
    doc_rows = document_rows(pairs)
    titles = [pairs.titles[r] for r in doc_rows]
    texts = [pairs.texts[r] for r in doc_rows]
    ids = [pairs.doc_ids[r] for r in doc_rows]
    normalized = [normalize_text(title + " " + text) for title, text in zip(titles, texts)]
    retriever = bm25.BM25Retriever([t + " " + x for t, x in zip(titles, texts)],
                                   stemmer=BM25_SETTINGS["stemmer"],
                                   stopwords=BM25_SETTINGS["stopwords"],
                                   k1=BM25_SETTINGS["k1"], b=BM25_SETTINGS["b"],
                                   method=BM25_SETTINGS["method"])
    index_s = time.perf_counter() - start
    log(f"BM25 index of {len(doc_rows):,} distinct documents built in {index_s:.1f} s")
    skipped = {"skipped_same_document": 0, "skipped_same_article": 0,
               "skipped_positive_of_same_query": 0, "skipped_containing_query": 0}
    positives = query_positives(pairs)

    def validity(i):
        doc_id, title = pairs.doc_ids[i], pairs.titles[i]
        whole_article = pairs.tasks[i] in _ARTICLE_TASKS
        query = normalize_text(pairs.queries[i])
        query_ids, query_articles = positives[query]

        def is_valid(d):
            if ids[d] == doc_id:
                skipped["skipped_same_document"] += 1
                return False
            if whole_article and titles[d] == title:
                skipped["skipped_same_article"] += 1
                return False
            if ids[d] in query_ids or titles[d] in query_articles:
                skipped["skipped_positive_of_same_query"] += 1
                return False
            if query and query in normalized[d]:
                skipped["skipped_containing_query"] += 1
                return False
            return True
        return is_valid

    chosen, counts = _mine(bm25_rank(retriever), len(retriever), pairs.queries,
                           settings.num_negatives, settings.depth, validity, seed, progress,
                           "BM25 hard negatives",
                           lambda i: f"Pair {i} (doc id {pairs.doc_ids[i]!r})")
    seconds = time.perf_counter() - start
    counts = {"pairs": counts.pop("examples"), "distinct_documents": len(doc_rows), **skipped,
              "queries_without_bm25_results": counts["queries_without_bm25_results"],
              "pairs_with_fallback": counts["examples_with_fallback"],
              "fallback_negatives": counts["fallback_negatives"]}
    log(f"mined {num_negatives} negatives for {len(pairs):,} pairs in {seconds:.1f} s "
        f"({len(pairs) / seconds:,.0f} pairs/s); fallback for {counts['pairs_with_fallback']:,} "
        f"pairs ({counts['fallback_negatives']:,} negatives)")
    return MinedNegatives(doc_rows[chosen].astype(np.int32), counts, seconds)


def mine_reqa_negatives(reqa, question_ids: Optional[Sequence[str]], num_negatives: int, *,
                        depth: int = DEFAULT_DEPTH, seed: int = 0, progress: bool = False,
                        rank: Optional[Rank] = None,
                        skip_gold_passage: bool = False) -> MinedNegatives:
    """H hard negatives among the ReQA candidates for each question (MT-DPR style).

    The ranking is BM25 over (sentence + passage) by default, or `rank` over the candidates in
    index order (`tt_zoo.mining.task_sources.dense_rank` of a trained model: Maillard et al.
    2021, Sec. 4.4, confounders mined by the model). Skips each question's gold candidate and
    every candidate whose sentence contains one of its answer texts (`Question.answers`;
    lower-cased, whitespace collapsed); with `skip_gold_passage`, also every sibling sentence of
    the gold's passage, so the negatives are other paragraphs (the kind of R@1 miss a dense
    model makes most, benchmarks/reqa_misses.py). The random fallback as for pairs. Returns
    `MinedNegatives` with rows = candidate indices int32 [questions, H].
    """
    settings = MiningSettings(num_negatives, depth, seed=seed)
    questions = reqa.questions_for(question_ids)
    if not questions:
        raise ValueError("mine_reqa_negatives: no questions.")
    start = time.perf_counter()
    if rank is None:
        rank = bm25_rank(bm25.BM25Retriever(bm25.candidate_texts(reqa, "sentence+passage")))
    sentences = [normalize_text(c.sentence) for c in reqa.candidates]
    passages = [c.passage_index for c in reqa.candidates]
    skipped = {"skipped_gold": 0, "skipped_containing_answer": 0}
    if skip_gold_passage:
        skipped["skipped_gold_passage"] = 0

    def validity(i):
        gold = questions[i].gold_index
        gold_passage = passages[gold]
        answers = [a for a in map(normalize_text, questions[i].answers) if a]

        def is_valid(c):
            if c == gold:
                skipped["skipped_gold"] += 1
                return False
            if skip_gold_passage and passages[c] == gold_passage:
                skipped["skipped_gold_passage"] += 1
                return False
            if any(answer in sentences[c] for answer in answers):
                skipped["skipped_containing_answer"] += 1
                return False
            return True
        return is_valid

    chosen, counts = _mine(rank, len(reqa.candidates), [q.text for q in questions],
                           settings.num_negatives, settings.depth, validity, seed, progress,
                           "hard negatives", lambda i: f"Question {questions[i].id!r}")
    counts = {"questions": counts.pop("examples"), "candidates": len(reqa.candidates),
              **skipped, "queries_without_bm25_results": counts["queries_without_bm25_results"],
              "questions_with_fallback": counts["examples_with_fallback"],
              "fallback_negatives": counts["fallback_negatives"]}
    return MinedNegatives(chosen.astype(np.int32), counts, time.perf_counter() - start)


def mine_answer_negatives(rank: Rank, num_documents: int, queries: Sequence[str],
                          excluded_rows: Sequence[AbstractSet[int]], num_negatives: int = 1, *,
                          depth: int = DEFAULT_DEPTH, seed: int = 0, progress: bool = False,
                          what: str = "Question") -> MinedNegatives:
    """H confounders per query from any ranking of a corpus: its first `num_negatives` ranked
    documents outside `excluded_rows[i]` (the passages that hold an answer, and the
    positives), with the random fallback of the module docstring (never an excluded row).

    DPR's BM25 negative (Karpukhin et al. 2020, Sec. 3.2) with ``rank = bm25_rank(...)``, and
    Maillard et al.'s (2021, Sec. 4.4) confounders mined by the trained model with a dense
    model's ranking (`tt_zoo.mining.task_sources.dense_rank`).

    Args:
      rank: `Rank`, ``rank(queries, depth) -> int rows [n, <= depth]``, -1 padding.
      num_documents: the corpus size (rows are in ``[0, num_documents)``).
      queries: the query strings.
      excluded_rows: per query, the rows that must not be a confounder.
      what: names a query in an error ("Question 3 has only ...").

    Returns:
      `MinedNegatives` with rows int32 [queries, H] and counts: questions, documents,
      skipped_excluded (among the documents looked at), queries_without_results,
      questions_with_fallback, fallback_negatives.
    """
    settings = MiningSettings(num_negatives, depth, seed=seed)
    if isinstance(queries, (str, bytes)) or not len(queries):
        raise ValueError("mine_answer_negatives: queries must be a non-empty sequence of "
                         f"strings (got {queries!r:.80}).")
    if len(excluded_rows) != len(queries):
        raise ValueError(f"mine_answer_negatives: {len(excluded_rows)} excluded-row sets for "
                         f"{len(queries)} queries; give one per query.")
    if isinstance(num_documents, bool) or not isinstance(num_documents, (int, np.integer)) \
            or num_documents < 1:
        raise ValueError(f"mine_answer_negatives: num_documents must be a positive int (got "
                         f"{num_documents!r}).")
    start = time.perf_counter()
    skipped = {"skipped_excluded": 0}

    def validity(i):
        excluded = excluded_rows[i]

        def is_valid(d):
            if d in excluded:
                skipped["skipped_excluded"] += 1
                return False
            return True
        return is_valid

    chosen, counts = _mine(rank, int(num_documents), list(queries), settings.num_negatives,
                           settings.depth, validity, seed, progress, "confounders",
                           lambda i: f"{what} {i}")
    if chosen.size and (chosen.min() < 0 or chosen.max() >= num_documents):
        raise TtZooError(f"mine_answer_negatives: the ranking gave rows outside [0, "
                         f"{num_documents}) (the corpus size).")
    counts = {"questions": counts.pop("examples"), "documents": int(num_documents), **skipped,
              "queries_without_results": counts["queries_without_bm25_results"],
              "questions_with_fallback": counts["examples_with_fallback"],
              "fallback_negatives": counts["fallback_negatives"]}
    return MinedNegatives(chosen.astype(np.int32), counts, time.perf_counter() - start)


# ------------------------------------------------------------------------- stored with the pairs


def default_output_dir(pairs_dir: str) -> str:
    """``PAIRS/hard_negatives``: where the mined files live beside the pairs by default."""
    return os.path.join(str(pairs_dir), SUBDIRECTORY)


def artifact_paths(settings: MiningSettings, output_dir: str) -> tuple:
    """(the .npy of the rows, its .json sidecar) for these settings in `output_dir`."""
    stem = os.path.join(str(output_dir), settings.file_stem)
    return stem + ".npy", stem + ".json"


@dataclasses.dataclass
class StoredNegatives:
    """`load_or_mine`'s answer: rows int32 [pairs, H], the sidecar, the .npy path, and
    whether an earlier file was reused."""

    rows: np.ndarray
    sidecar: dict
    path: str
    reused: bool

    def summary(self) -> dict:
        """What a train summary / model card records about the negatives."""
        return {"source": "BM25 (bm25s) over the pair set's distinct documents",
                **{k: self.sidecar["settings"][k] for k in ("num_negatives", "depth", "seed",
                                                            "miner_version")},
                "file": self.path, "reused": self.reused,
                "mining_seconds": self.sidecar["mining_seconds"],
                "counts": self.sidecar["counts"]}


def _gfile():
    import tensorflow as tf  # noqa: PLC0415 (paths may be gs:// URLs)
    return tf.io.gfile


def _read_sidecar(path: str) -> dict:
    with _gfile().GFile(path, "r") as f:
        try:
            return json.loads(f.read())
        except json.JSONDecodeError as e:
            raise ArtifactError(f"{path} is not valid JSON ({e}); delete it to mine again.")


def _check_sidecar(sidecar: dict, sidecar_path: str, manifest: str,
                   settings: MiningSettings) -> None:
    recorded = sidecar.get("pairs_manifest_sha256")
    if recorded != manifest:
        raise HardNegativesMismatchError(
            f"{sidecar_path} was mined from other pairs (pair manifest sha256 {str(recorded)[:16]}"
            f"…, the pairs now have {manifest[:16]}…): the pair directory was rewritten. Delete "
            f"{sidecar_path} and its .npy to mine again, or pass another output directory.")
    expected = json.loads(json.dumps(settings.as_dict()))
    if sidecar.get("settings") != expected:
        raise HardNegativesMismatchError(
            f"{sidecar_path} records settings {sidecar.get('settings')}, not the requested "
            f"{expected}. Delete it and its .npy to mine again, or pass another output "
            "directory.")


def _load_rows(path: str, sidecar: dict, sidecar_path: str) -> np.ndarray:
    from tt_zoo.manifest import verify_file

    verify_file(path, sidecar["file"], listed_in=sidecar_path, check="sha256")
    with _gfile().GFile(path, "rb") as f:
        rows = np.load(io.BytesIO(f.read()), allow_pickle=False)
    if list(rows.shape) != sidecar["shape"]:
        raise ArtifactError(f"{path} holds an array of shape {list(rows.shape)}, its sidecar "
                            f"{sidecar_path} says {sidecar['shape']}.")
    return rows


def load_or_mine(pairs_dir: str, settings: MiningSettings, *, output_dir: Optional[str] = None,
                 progress: bool = True, log=print) -> StoredNegatives:
    """The pair set's mined hard negatives for `settings`: reused when stored, else mined and
    stored (see the module docstring).

    Args:
      pairs_dir: a pair directory (`tt_zoo.data.pairs_io`); only read.
      settings: `MiningSettings`.
      output_dir: where the .npy and its sidecar live; default ``PAIRS/hard_negatives``.

    Raises:
      HardNegativesMismatchError: a sidecar of this name records other pairs or settings.
      ArtifactError: the stored .npy does not match its sidecar.
    """
    from tt_zoo.atomic_io import open_for_replace, write_json
    from tt_zoo.data.pairs_io import manifest_sha256, read_manifest, read_pair_texts

    output_dir = output_dir or default_output_dir(pairs_dir)
    path, sidecar_path = artifact_paths(settings, output_dir)
    manifest = manifest_sha256(pairs_dir)
    gfile = _gfile()
    if gfile.exists(sidecar_path):
        sidecar = _read_sidecar(sidecar_path)
        _check_sidecar(sidecar, sidecar_path, manifest, settings)
        rows = _load_rows(path, sidecar, sidecar_path)
        log(f"read {rows.shape[1]} BM25 hard negatives for {rows.shape[0]:,} pairs from {path} "
            f"(mined in {sidecar['mining_seconds']:.0f} s)")
        return StoredNegatives(rows, sidecar, path, reused=True)
    if gfile.exists(path):
        log(f"{path} has no sidecar (an interrupted write): mining again")

    start = time.perf_counter()
    read_manifest(pairs_dir)  # a complete pair directory, before minutes of mining
    pairs = read_pair_texts(pairs_dir, settings.max_pairs)
    read_s = time.perf_counter() - start
    mined = mine_pair_negatives(pairs, settings.num_negatives, depth=settings.depth,
                                seed=settings.seed, progress=progress, log=log)
    with open_for_replace(path, "wb") as f:
        np.save(f, mined.rows, allow_pickle=False)
    from tt_zoo.manifest import describe_file
    sidecar = {"kind": "tt_zoo BM25 hard negatives", "pairs_dir": str(pairs_dir),
               "pairs_manifest_sha256": manifest, "settings": settings.as_dict(),
               "shape": list(mined.rows.shape), "dtype": str(mined.rows.dtype),
               "file": {"name": os.path.basename(path), **describe_file(path)},
               "counts": mined.counts, "read_seconds": round(read_s, 1),
               "mining_seconds": round(mined.seconds, 1),
               "pairs_per_s": round(len(pairs) / mined.seconds, 1),
               "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                   timespec="seconds")}
    write_json(sidecar_path, sidecar, indent=2)  # last: the .npy is complete and described
    log(f"wrote {path} and {os.path.basename(sidecar_path)}")
    return StoredNegatives(mined.rows, sidecar, path, reused=False)
