"""Text searchers over passages that answer `Hit`s: BM25, ColBERT, HDCT's weighted BM25, fusion.

`PassageIndex` is the one `tt_zoo.retrieval.search.TextSearcher` built on any `Searcher` of query
strings (rows and scores of the passages, in their order); it keeps the passages' texts and
titles so that every result is a list of `tt_zoo.retrieval.search.Hit`, the same type a
two-tower model's `tt_zoo.zoo.zoo_model.TextIndex` returns. The builders:

- `bm25_index`: BM25 over "title text" (`tt_zoo.retrieval.bm25.BM25Retriever`; Chang et al.
  2020, Sec. 4's baseline).
- `late_interaction_index`: ColBERT (Khattab & Zaharia, SIGIR 2020) over the passages' token
  vectors (`tt_zoo.retrieval.token_store.TokenStore`, encoded once): ``mode="rerank"`` re-ranks
  BM25's top `depth` by exact MaxSim (Sec. 3.5, `MaxSimReranker`), ``mode="token_index"``
  searches ScaNN over every passage token (Sec. 3.6, `TokenIndex`).
- `weighted_bm25_index`: HDCT (Dai & Callan, WWW 2020, Sec. 3.3): each (title, passage) weighed
  by a `tt_zoo.retrieval.term_weighting.TermWeighter`, BM25 over the pseudo term frequencies.
- `fuse`: a convex combination or reciprocal-rank fusion of two of these over the same passages
  (`tt_zoo.retrieval.fusion.FusionSearcher`).

Each saves to a folder (``index.save(path)``) in one layout: ``passages.jsonl``,
``passage_index.json`` (format, settings, the model that built it if any, the sha256 manifest of
every file) and what the kind needs besides (`write_passage_index`, `read_passage_index`): BM25
nothing (rebuilt from the passages in seconds on load, `load_bm25_index`), a fusion the folders
of its two parts (``first/``, ``second/``). A two-tower model's index (`TextIndex`) keeps its own
layout; `tt_zoo.load_index` reads every one of them.

Example:
>>> bm25 = bm25_index(["Fleming discovered penicillin.", "Paris is in France."],
...                   titles=["Penicillin", "Paris"])
>>> [(h.id, h.title) for h in bm25.search("who discovered penicillin?", k=1)]
[('0', 'Penicillin')]
"""

from __future__ import annotations

import json
import pathlib
from typing import Callable, List, Optional, Sequence

from tt_zoo.retrieval.fusion import DEFAULT_DEPTH, DEFAULT_RRF_K, METHODS, FusionSearcher
from tt_zoo.retrieval.search import (Hit, SearchResult, WrappedSearcher, check_k,
                                     check_text_queries)

MODES = ("rerank", "token_index")  # how a late-interaction index searches (module docstring)
DEFAULT_RERANK_DEPTH = 100  # BM25's top 100, as every measured "ColBERT re-ranking BM25@100"


def bm25_text(title: str, text: str) -> str:
    """The text BM25 indexes for a (title, passage): "title text" (the text alone without a
    title), as `tt-zoo search --bm25` and the ODQA benchmarks index a passage."""
    return f"{title} {text}" if title else text


def as_passages(passages, titles=None, ids=None):
    """``(texts, titles, ids)`` lists of an ``index(passages, titles=..., ids=...)`` call: one
    passage string (with one title and one id) or sequences; titles default to "", ids to
    "0", "1", ... Raises TypeError or ValueError naming the bad argument."""
    from tt_zoo.arguments import as_documents  # noqa: PLC0415

    single = isinstance(passages, (str, bytes))
    texts, titles, _ = as_documents(passages, titles)
    if ids is None:
        return texts, titles, [str(i) for i in range(len(texts))]
    if isinstance(ids, (str, bytes)):
        if not single:
            raise TypeError(f"ids must be a sequence of ids, not a single string ({ids!r}).")
        return texts, titles, [str(ids)]
    return texts, titles, [str(i) for i in ids]


class PassageIndex(WrappedSearcher):
    """Passages searched with query text through a `Searcher` of strings; answers `Hit`s.

    Args:
      searcher: a built `tt_zoo.retrieval.search.Searcher` that takes query strings and
        searches these passages in this order (its rows are their positions).
      texts: the passages.
      titles: one per passage (default "").
      description: what searches, for listings ("BM25", "ColBERT re-ranking BM25@100", ...).
      settings: how it was built, as JSON values (the builders record theirs).
      save: ``save(index, path, overwrite)`` writing it to a folder, if it can be saved (a
        model's index: `tt_zoo.zoo.kind_models.save_passage_index`).

    Attributes:
      searcher, texts, titles, description, settings; `ids` (the searcher's candidate ids)
      and the length are the searcher's (`tt_zoo.retrieval.search.WrappedSearcher`).

    Example:
    >>> index = PassageIndex(BM25Retriever(texts, ids=ids), texts, titles, description="BM25")
    >>> index.search("who discovered penicillin?", k=3)        # [Hit, Hit, Hit]
    >>> index.search_batch(["a question", "another"], k=3)     # [[Hit, ...], [Hit, ...]]
    """

    def __init__(self, searcher, texts: Sequence[str], titles: Optional[Sequence[str]] = None,
                 *, description: str = "", settings: Optional[dict] = None,
                 save: Optional[Callable] = None):
        super().__init__(searcher)
        self.texts = list(texts)
        self.titles = [""] * len(self.texts) if titles is None else list(titles)
        if len(self.titles) != len(self.texts) or len(self.texts) != len(searcher):
            raise ValueError(f"PassageIndex: {len(self.texts)} texts and {len(self.titles)} "
                             f"titles for a searcher over {len(searcher)} passages; they must "
                             "match one to one.")
        self.description = description or type(searcher).__name__
        self.settings = dict(settings or {})
        self._save = save


    def __repr__(self) -> str:
        return f"PassageIndex({self.description!r}, num_passages={len(self)})"

    def save(self, path, overwrite: bool = False):
        """Writes the index to folder `path`; `tt_zoo.load_index(path)` reads it back (a model's
        index with its model; BM25 rebuilt from the saved passages; a fusion with its parts)."""
        if self._save is None:
            raise TypeError(f"This index ({self.description}) cannot be saved: a fusion saves "
                            "when both its parts do; build it again from its passages.")
        return self._save(self, path, overwrite)

    def search(self, query, k: int = 10):
        """The top-k `Hit`s of one query string, best first; a sequence of strings gives one
        list a query (`search_batch`), as `TextIndex.search` does."""
        if isinstance(query, (str, bytes)):
            return self.search_batch([query], k)[0]
        return self.search_batch(query, k)

    def search_batch(self, queries: Sequence[str], k: int = 10) -> List[List[Hit]]:
        """The top-k `Hit`s of each query string, best first (fewer where the searcher finds
        fewer: BM25 returns only passages sharing a term with the query)."""
        return self.search_result(queries, k).hits(self.texts, self.titles)

    def search_result(self, queries: Sequence[str], k: int = 10) -> SearchResult:
        """The searcher's `SearchResult` (rows, scores, ids) of each query string."""
        queries = check_text_queries(queries, "search_batch", " (search takes one)")
        k = check_k(k)
        if not queries:
            return SearchResult.of_no_queries()
        return self.searcher.search(queries, k)


# -- builders -----------------------------------------------------------------------------------

def bm25_index(passages, titles=None, ids=None, *, show_progress: bool = False,
               **bm25_options) -> PassageIndex:
    """BM25 over the passages' "title text" (`bm25_text`); `bm25_options` go to
    `tt_zoo.retrieval.bm25.BM25Retriever` (stemmer, stopwords, k1, b, method)."""
    from tt_zoo.retrieval.bm25 import BM25Retriever  # noqa: PLC0415 (bm25s)

    texts, titles, ids = as_passages(passages, titles, ids)
    retriever = BM25Retriever([bm25_text(t, p) for t, p in zip(titles, texts)], ids=ids,
                              show_progress=show_progress, **bm25_options)
    return PassageIndex(retriever, texts, titles, description="BM25",
                        settings={"kind": "bm25", **bm25_options}, save=_save_bm25)


def late_interaction_index(encode_query_tokens: Callable, encode_document_tokens: Callable,
                           passages, titles=None, ids=None, *, mode: str = "rerank",
                           depth: int = DEFAULT_RERANK_DEPTH, token_k: Optional[int] = None,
                           store=None, first_stage: Optional[PassageIndex] = None,
                           name: str = "ColBERT", save: Optional[Callable] = None
                           ) -> PassageIndex:
    """A ColBERT index over the passages: their token vectors encoded once into a float16
    `TokenStore`, searched by `mode` (Khattab & Zaharia 2020):

    - "rerank": BM25's top `depth` (or `first_stage`'s: any `PassageIndex` over the same
      passages) re-ordered by exact MaxSim (Sec. 3.5; `MaxSimReranker`);
    - "token_index": each query token's `token_k` nearest passage tokens by ScaNN name the
      candidates, exact MaxSim ranks them (Sec. 3.6; `TokenIndex`).

    Args:
      encode_query_tokens: ``texts -> [float32 [n_i, m]]`` (a late-interaction model's).
      encode_document_tokens: ``(texts, titles=...) -> [float32 [n_i, m]]``.
      passages, titles, ids: as `bm25_index`.
      store: the passages' `TokenStore`, if already encoded (its ids must be `ids`).
      name: the model's name, for `description`.
      save: as `PassageIndex`'s.
    """
    from tt_zoo.retrieval.late_interaction import MaxSimReranker  # noqa: PLC0415
    from tt_zoo.retrieval.token_store import TokenStore  # noqa: PLC0415

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} (got {mode!r}).")
    texts, titles, ids = as_passages(passages, titles, ids)
    if store is None:
        store = TokenStore.from_documents(encode_document_tokens(texts, titles=titles), ids,
                                          encoder=name)
    elif tuple(store.ids) != tuple(ids):
        raise ValueError("late_interaction_index: the token store's ids differ from the "
                         "passages' ids; it must hold these passages in this order.")
    if mode == "token_index":
        from tt_zoo.retrieval.token_index import DEFAULT_TOKEN_K, TokenIndex  # noqa: PLC0415
        searcher = TokenIndex(store, encode_query_tokens,
                              token_k=DEFAULT_TOKEN_K if token_k is None else token_k)
        description = f"{name} end to end (token index, k' {searcher.token_k})"
        settings = {"mode": mode, "token_k": searcher.token_k}
    else:
        if token_k is not None:
            raise ValueError("token_k is for mode='token_index' (re-ranking reads BM25's top "
                             "`depth`).")
        if first_stage is None:
            first_stage = bm25_index(texts, titles, ids)
        elif list(first_stage.texts) != texts:
            raise ValueError("late_interaction_index: first_stage searches other passages.")
        searcher = MaxSimReranker(first_stage.searcher, encode_query_tokens, store=store,
                                  depth=depth)
        description = f"{name} re-ranking {first_stage.description}@{searcher.depth}"
        settings = {"mode": mode, "depth": searcher.depth,
                    "first_stage": first_stage.settings or first_stage.description}
    return PassageIndex(searcher, texts, titles, description=description,
                        settings={"kind": "late_interaction", **settings}, save=save)


def weighted_bm25_index(weighter, passages, titles=None, ids=None, *, k1: float = 1.5,
                        b: float = 0.75, unread: str = "plain", weights=None,
                        show_progress: bool = False, save: Optional[Callable] = None
                        ) -> PassageIndex:
    """HDCT's weighted BM25 (Dai & Callan 2020, Sec. 3.3): each (title, passage) weighed by
    `weighter` (`tt_zoo.retrieval.term_weighting.weigh_corpus`, each distinct one once; or the
    given `weights`, one `TermWeights` a passage), then BM25 over "title text" with pseudo term
    frequencies round(100 sqrt(y)), in the weighter's term space. `k1`, `b`, `unread` as
    `BM25Retriever`. The weights are kept as the searcher's `term_weights`; `save` as
    `PassageIndex`'s."""
    from tt_zoo.retrieval.term_weighting import weigh_corpus  # noqa: PLC0415

    texts, titles, ids = as_passages(passages, titles, ids)
    if weights is None:
        weights = weigh_corpus(weighter, titles, texts, progress=show_progress, log=None)
    elif len(weights) != len(texts):
        raise ValueError(f"weighted_bm25_index: {len(weights)} weights for {len(texts)} "
                         "passages.")
    terms = weighter.terms
    return term_weighted_bm25(texts, titles, ids, weights, stemmer=terms.stemmer_setting,
                              stopwords=terms.stopwords_setting, k1=k1, b=b, unread=unread,
                              save=save)


def term_weighted_bm25(texts, titles, ids, weights, *, stemmer, stopwords, k1: float, b: float,
                       unread: str, save: Optional[Callable] = None) -> PassageIndex:
    """BM25 over "title text" with the pseudo term frequencies of `weights` (one `TermWeights`
    a passage) in the term space of `stemmer` and `stopwords`: `weighted_bm25_index` once the
    passages are weighed, and a saved HDCT index read back (no model needed: queries are BM25's).
    The settings record `stemmer` and `stopwords` when they are JSON values (a name or None), so
    the index loads without its model (`tt_zoo.retrieval.numpy_queries`)."""
    from tt_zoo.retrieval.bm25 import BM25Retriever  # noqa: PLC0415

    retriever = BM25Retriever([bm25_text(t, p) for t, p in zip(titles, texts)], ids=ids,
                              stemmer=stemmer, stopwords=stopwords, k1=k1, b=b, weights=weights,
                              unread=unread)
    retriever.term_weights = weights
    settings = {"kind": "term_weights", "k1": k1, "b": b, "unread": unread}
    if all(v is None or isinstance(v, str) for v in (stemmer, stopwords)):
        settings.update(stemmer=stemmer, stopwords=stopwords)
    return PassageIndex(retriever, texts, titles,
                        description=f"HDCT-weighted BM25 (k1 {k1:g}, b {b:g})",
                        settings=settings, save=save)


def fuse(first, second, *, weight: Optional[float] = None, method: Optional[str] = None,
         depth: int = DEFAULT_DEPTH, rrf_k: float = DEFAULT_RRF_K,
         fill_depth: Optional[int] = None) -> PassageIndex:
    """One `TextSearcher` fusing two over the same passages (same ids, same order): each one's
    top `depth` of a query merged (`tt_zoo.retrieval.fusion`).

    Args:
      first, second: `TextSearcher`s (a model's ``index(...)``, `bm25_index`, another fusion).
      weight: the convex combination's share of `first`, in [0, 1]: the fused score is
        ``weight * norm(first) + (1 - weight) * norm(second)``, each min-max normalised over its
        own top `depth` (Bruch et al., TOIS 2023).
      method: "convex" (the default when `weight` is given) or "rrf", reciprocal-rank fusion,
        ``1 / (rrf_k + rank)`` summed (Cormack et al., SIGIR 2009; the default without weight).
      depth, rrf_k: as `tt_zoo.retrieval.fusion.FusionSearcher`.
      fill_depth: None, or a depth beyond `depth` to which each searcher is searched so that a
        candidate of the other's top `depth` gets its own score rather than the floor
        (`tt_zoo.retrieval.fusion`, "filled scores").

    Example:
    >>> colbert = tt_zoo.load("colbert_ict_bfs_wlp_crop_span_qgen_64")
    >>> fused = tt_zoo.fuse(tt_zoo.bm25_index(passages, titles=titles),
    ...                     colbert.index(passages, titles=titles), weight=0.7)
    >>> fused.search("who discovered penicillin?", k=10)
    """
    method = method or ("rrf" if weight is None else "convex")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS} (got {method!r}).")
    if method == "convex" and weight is None:
        raise ValueError("fuse: a convex combination needs weight= (the first searcher's share, "
                         "in [0, 1]).")
    if method == "rrf" and weight is not None:
        raise ValueError("fuse: reciprocal-rank fusion takes no weight (it reads ranks only); "
                         "drop weight= or pass method='convex'.")
    for what, index in (("first", first), ("second", second)):
        if not all(hasattr(index, a) for a in ("searcher", "texts", "titles")):
            raise TypeError(f"fuse: the {what} argument must be a text searcher over passages "
                            "(a model's index(...), tt_zoo.bm25_index(...) or a fusion; got "
                            f"{type(index).__name__}).")
    if list(first.texts) != list(second.texts):
        raise ValueError("fuse: the two searchers index different passages; index the same "
                         "passages (in the same order) with both.")
    searcher = FusionSearcher(first.searcher, second.searcher, method=method,
                              weight=0.5 if weight is None else weight, depth=depth,
                              rrf_k=rrf_k, fill_depth=fill_depth)
    share = f", weight {searcher.weight:g}" if method == "convex" else ""
    saves = all(_can_save(index) for index in (first, second))
    return PassageIndex(searcher, first.texts, first.titles, description=(
        f"{method}({_describe(first)}, {_describe(second)}{share})"),
        settings={"kind": "fusion", **searcher.describe()},
        save=_fusion_saver(first, second) if saves else None)


def _describe(index) -> str:
    description = getattr(index, "description", None)
    return description if isinstance(description, str) and description else \
        type(index).__name__


# -- saving -------------------------------------------------------------------------------------

PASSAGES_FILE = "passages.jsonl"
PASSAGE_INDEX_FILE = "passage_index.json"
PASSAGE_INDEX_FORMAT = "tt_zoo.PassageIndex"
PASSAGE_INDEX_FORMAT_VERSION = 1
FUSION_PARTS = ("first", "second")  # a saved fusion's folders of its two searchers


def _can_save(index) -> bool:
    """Whether `index` saves: a two-tower model's `TextIndex`, or a `PassageIndex` with a saver."""
    return callable(getattr(index, "save", None)) and getattr(index, "_save", True) is not None


def write_passages(path: pathlib.Path, ids, titles, texts) -> None:
    """``passages.jsonl``: one ``{"id", "title", "text"}`` line a passage, in order."""
    from tt_zoo.atomic_io import json_text  # noqa: PLC0415

    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for cid, title, text in zip(ids, titles, texts):
            f.write(json_text({"id": cid, "title": title, "text": text}, where=path,
                              indent=None) + "\n")


def read_passages(path: pathlib.Path):
    """``(ids, titles, texts)`` of a ``passages.jsonl`` that `write_passages` wrote."""
    from tt_zoo.errors import ArtifactError  # noqa: PLC0415

    rows = []
    with open(path, encoding="utf-8") as f:
        try:
            for line in f:
                row = json.loads(line)
                rows.append((row["id"], row["title"], row["text"]))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
            raise ArtifactError(f"{path}: line {len(rows) + 1} is not a passage record with id, "
                                f"title, text ({e!r}).") from e
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def write_passage_index(index: PassageIndex, path, *, model: Optional[dict] = None,
                        payload: Optional[Callable[[pathlib.Path], None]] = None,
                        overwrite: bool = False) -> pathlib.Path:
    """Writes `index` to folder `path` atomically (refused if it exists and is not a saved
    index, unless `overwrite`): its passages, ``payload(staging)``'s files (token vectors, term
    weights, a fusion's parts), and ``passage_index.json`` with its settings, `model` (what the
    index records of the model that built it: `tt_zoo.zoo.kind_models.model_fingerprint`; None
    for BM25) and the sha256 manifest of every file."""
    from tt_zoo.arguments import as_path  # noqa: PLC0415
    from tt_zoo.atomic_io import write_directory, write_json  # noqa: PLC0415
    from tt_zoo.manifest import describe_files  # noqa: PLC0415

    def build(staging: pathlib.Path) -> None:
        write_passages(staging / PASSAGES_FILE, index.ids, index.titles, index.texts)
        if payload is not None:
            payload(staging)
        write_json(staging / PASSAGE_INDEX_FILE, {
            "format": PASSAGE_INDEX_FORMAT, "format_version": PASSAGE_INDEX_FORMAT_VERSION,
            "description": index.description, "settings": dict(index.settings), "model": model,
            "files": describe_files(staging)})

    return write_directory(as_path(path, "path"), build, overwrite=overwrite,
                           what="saved tt_zoo PassageIndex",
                           is_replaceable=is_saved_index)


def is_saved_index(path: pathlib.Path) -> bool:
    """Whether folder `path` holds a saved index of any kind (one that saving may replace)."""
    path = pathlib.Path(path)
    return (path / PASSAGE_INDEX_FILE).is_file() or (path / "text_index.json").is_file()


def read_passage_index(path):
    """``(manifest, ids, titles, texts)`` of a folder `write_passage_index` wrote, every file
    checked against its sha256.

    Raises:
      ArtifactError: not a saved index, a format this tt_zoo cannot read, a changed file.
    """
    from tt_zoo.arguments import as_path  # noqa: PLC0415
    from tt_zoo.atomic_io import recover_replaced  # noqa: PLC0415
    from tt_zoo.errors import ArtifactError  # noqa: PLC0415
    from tt_zoo.manifest import check_format_version, read_json_object, verify_files  # noqa

    path = as_path(path, "path")
    recover_replaced(path)
    manifest_path = path / PASSAGE_INDEX_FILE
    manifest = read_json_object(manifest_path, "the manifest of a saved tt_zoo index")
    if manifest.get("format") != PASSAGE_INDEX_FORMAT:
        raise ArtifactError(f"{manifest_path} is not a {PASSAGE_INDEX_FORMAT} manifest (format "
                            f"{manifest.get('format')!r}).")
    check_format_version(manifest.get("format_version"), PASSAGE_INDEX_FORMAT_VERSION,
                         listed_in=manifest_path, what=PASSAGE_INDEX_FORMAT)
    files, settings = manifest.get("files"), manifest.get("settings")
    if not isinstance(files, dict) or PASSAGES_FILE not in files or not isinstance(settings,
                                                                                   dict):
        raise ArtifactError(f"{manifest_path} lists no {PASSAGES_FILE} or no settings.")
    verify_files(path, files, listed_in=manifest_path)
    return (manifest, *read_passages(path / PASSAGES_FILE))


def _save_bm25(index: PassageIndex, path, overwrite: bool = False) -> pathlib.Path:
    return write_passage_index(index, path, overwrite=overwrite)


def load_bm25_index(path) -> PassageIndex:
    """The BM25 index saved at `path` (``bm25_index(...).save(path)``), built again from its
    passages with its settings."""
    from tt_zoo.errors import ArtifactError  # noqa: PLC0415

    manifest, ids, titles, texts = read_passage_index(path)
    settings = dict(manifest["settings"])
    if settings.pop("kind", None) != "bm25":
        raise ArtifactError(f"{path} holds a {manifest['settings'].get('kind')!r} index, not "
                            "BM25.")
    return bm25_index(texts, titles, ids, **settings)


def _fusion_saver(first, second) -> Callable:
    """The ``save`` of a fusion: its two parts saved in ``first/`` and ``second/``, and the
    fusion's settings."""

    def save(index: PassageIndex, path, overwrite: bool = False) -> pathlib.Path:
        def parts(staging: pathlib.Path) -> None:
            for name, part in zip(FUSION_PARTS, (first, second)):
                part.save(staging / name)
        return write_passage_index(index, path, payload=parts, overwrite=overwrite)
    return save


def fusion_options(settings: dict) -> dict:
    """`fuse`'s keyword arguments from a saved fusion's settings (`FusionSearcher.describe`)."""
    method = settings["method"]
    return {"method": method, "weight": settings.get("weight") if method == "convex" else None,
            "depth": settings["depth"], "fill_depth": settings.get("fill_depth"),
            **({"rrf_k": settings["rrf_k"]} if method == "rrf" else {})}
