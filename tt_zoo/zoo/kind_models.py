"""What `tt_zoo.load` gives for the kinds beside two-tower: ColBERT and HDCT models that index text.

Every loaded model's ``index(passages, titles=..., ids=...)`` returns a
`tt_zoo.retrieval.search.TextSearcher` (``search(query, k) -> [Hit]``,
``search_batch(queries, k) -> [[Hit]]``), so every shipped kind is searched alike:

- `LateInteractionZooModel` (a `ZooModel` of a ColBERT export): its index is
  `tt_zoo.retrieval.passage_index.late_interaction_index` in the mode its card measured best
  (`best_late_interaction_mode`: re-ranking BM25's top 100 by MaxSim on every card shipped, e.g.
  ReQA-SQuAD(dev) MRR 62.1 against 59.3 for the token index, ODQA R@20 54.5 against 42.3).
- `TermWeightZooModel` (an HDCT export; its `weighter` is what `tt_zoo.load_term_weighter`
  returns): its index is HDCT's weighted BM25 (`weighted_bm25_index`) with k1 = 10, the k1
  its card's tables chose on held-out questions (grid 0.9, 1.5, 4, 10) on all three benchmarks
  (`tt_zoo.zoo.own_search`, which also names these searches' rows in the cards).

Both indexes save to a folder and load back with their model (`save_passage_index`,
`load_passage_index`): the passages, the token vectors or term weights (the costly part), the
settings and the model's identity, each file under a sha256 manifest; BM25 (seconds) is rebuilt
on load.
"""

from __future__ import annotations

import pathlib
from typing import Optional, Sequence, Union

import numpy as np

from tt_zoo.arguments import as_path
from tt_zoo.errors import ArtifactError
from tt_zoo.retrieval.passage_index import (DEFAULT_RERANK_DEPTH, PASSAGE_INDEX_FILE,
                                            PassageIndex, as_passages, late_interaction_index,
                                            read_passage_index, weighted_bm25_index,
                                            write_passage_index)
from tt_zoo.zoo.own_search import (TERM_WEIGHT_K1, TERM_WEIGHT_UNREAD,  # noqa: F401
                                   best_late_interaction_mode)
from tt_zoo.zoo.zoo_model import CardIdentity, ZooModel, model_source, weights_sha256

TOKENS_DIR = "tokens"  # a late-interaction index's TokenStore
TERM_WEIGHTS_FILE = "term_weights.npz"  # a term-weight index's CorpusTermWeights


class LateInteractionZooModel(ZooModel):
    """A loaded late-interaction (ColBERT) model: token encoders, MaxSim, and a text index.

    `encode_queries` / `encode_documents` raise (no single vector); `encode_query_tokens`,
    `encode_document_tokens` and `score` give token vectors and MaxSim.

    Example:
    >>> colbert = tt_zoo.load("colbert_ict_bfs_wlp_crop_span_qgen_64")
    >>> index = colbert.index(passages, titles=titles)   # re-ranks BM25@100, the card's best
    >>> index.search("who discovered penicillin?", k=10)  # [Hit, ...]
    """

    @property
    def best_mode(self) -> str:
        """The search mode its card measured best (`best_late_interaction_mode`)."""
        return best_late_interaction_mode(self.metadata.get("metrics"))

    def index(self, passages: Union[str, Sequence[str]],
              titles: Union[None, str, Sequence[str]] = None,
              ids: Union[None, str, Sequence[str]] = None, *, mode: Optional[str] = None,
              depth: int = DEFAULT_RERANK_DEPTH, token_k: Optional[int] = None,
              first_stage: Optional[PassageIndex] = None, batch_size: int = 256,
              show_progress_bar: Optional[bool] = None) -> PassageIndex:
        """Encodes the passages' token vectors once and indexes them
        (`tt_zoo.retrieval.passage_index.late_interaction_index`).

        Args:
          passages, titles, ids: as `ZooModel.index`.
          mode: "rerank" (BM25's top `depth`, or `first_stage`'s, re-ordered by MaxSim) or
            "token_index" (ScaNN over every token, `token_k` neighbours a query token);
            default `best_mode`, the one its card measured best.
          batch_size, show_progress_bar: as `encode_document_tokens`.
        """
        mode = self.best_mode if mode is None else mode

        def encode_documents(texts, titles=None):
            return self.encode_document_tokens(texts, titles=titles, batch_size=batch_size,
                                               show_progress_bar=show_progress_bar)

        def encode_queries(texts):
            return self.encode_query_tokens(texts, batch_size=batch_size, show_progress_bar=False)

        return late_interaction_index(encode_queries, encode_documents, passages, titles, ids,
                                      mode=mode, depth=depth, token_k=token_k,
                                      first_stage=first_stage, name=self.name,
                                      save=self._save_index)

    def _save_index(self, index: PassageIndex, path, overwrite: bool):
        return save_passage_index(index, self, path, overwrite=overwrite)

    def load_index(self, path) -> PassageIndex:
        """The index saved at `path` (`save_passage_index`), which this model must have built."""
        return load_passage_index(path, self)


class TermWeightZooModel(CardIdentity):
    """A loaded term-weight (HDCT) model: document term weights, and a weighted BM25 index.

    Attributes:
      weighter: its `tt_zoo.retrieval.term_weighting.TermWeighter` (what
        `tt_zoo.load_term_weighter` returns).
      keras_model: the `TermWeightModel`.
      spec: the registry spec, when loaded by name; path: the export's folder.
      metadata: the export's metadata.json (typed: `card`).

    Example:
    >>> hdct = tt_zoo.load("hdct_ict_bfs_wlp_crop_span_qgen")
    >>> hdct.index(passages, titles=titles).search("who discovered penicillin?", k=10)
    """

    def __init__(self, weighter, spec=None, path=None, metadata: Optional[dict] = None):
        self.weighter = weighter
        self.keras_model = weighter.model
        self.spec = spec
        self.path = pathlib.Path(path) if path else None
        self.metadata = metadata if metadata is not None else dict(
            getattr(weighter.model, "export_metadata", {}) or {})

    def __repr__(self) -> str:
        return f"TermWeightZooModel(name={self.name!r})"

    def weigh(self, titles: Sequence[str], passages: Sequence[str]):
        """One `tt_zoo.retrieval.bm25.TermWeights` per (title, passage) (`TermWeighter.weigh`)."""
        return self.weighter.weigh(titles, passages)

    def index(self, passages: Union[str, Sequence[str]],
              titles: Union[None, str, Sequence[str]] = None,
              ids: Union[None, str, Sequence[str]] = None, *, k1: float = TERM_WEIGHT_K1,
              b: float = 0.75, unread: str = TERM_WEIGHT_UNREAD,
              show_progress_bar: Optional[bool] = None) -> PassageIndex:
        """HDCT's weighted BM25 over the passages: each distinct (title, passage) weighed once,
        BM25 over "title text" with the pseudo term frequencies
        (`tt_zoo.retrieval.passage_index.weighted_bm25_index`; k1 = 10 by default, the card's
        choice). `show_progress_bar`: a bar over the passages weighed (default: from 1,000)."""
        texts, titles, ids = as_passages(passages, titles, ids)
        progress = len(texts) >= 1000 if show_progress_bar is None else bool(show_progress_bar)
        return weighted_bm25_index(self.weighter, texts, titles, ids, k1=k1, b=b, unread=unread,
                                   show_progress=progress, save=self._save_index)

    def _save_index(self, index: PassageIndex, path, overwrite: bool):
        return save_passage_index(index, self, path, overwrite=overwrite)

    def load_index(self, path) -> PassageIndex:
        """The index saved at `path` (`save_passage_index`), which this model must have built."""
        return load_passage_index(path, self)


# -- saving and loading -------------------------------------------------------------------------

def model_fingerprint(model) -> dict:
    """What a saved index records of the model that built it: its name, weights' sha256 and
    `tt_zoo.zoo.zoo_model.model_source` (what `tt_zoo.load_index` loads it by)."""
    return {"name": model.name, "weights_sha256": weights_sha256(model.keras_model),
            "source": model_source(model)}


def _check_model(recorded, model, listed_in) -> None:
    ours = model_fingerprint(model)
    if not isinstance(recorded, dict) or recorded.get("weights_sha256") != ours["weights_sha256"]:
        name = recorded.get("name") if isinstance(recorded, dict) else None
        raise ArtifactError(f"{listed_in}: this index was built by {name!r}, not by the model "
                            f"loading it, {ours['name']!r} (their weights' sha256 differ). Load "
                            "it with the model that built it, or build it again with this one.")


def save_passage_index(index: PassageIndex, model, path, overwrite: bool = False
                       ) -> pathlib.Path:
    """Writes a late-interaction or term-weight model's index to folder `path`
    (`tt_zoo.retrieval.passage_index.write_passage_index`: atomically, with `passages.jsonl`,
    the settings, the model's name and weights' sha256 and the sha256 manifest of every file):
    the token store (`tokens/`) or the term weights (`term_weights.npz`) besides. A token
    index's ScaNN tree is not saved: `load_passage_index` builds it again from the stored
    tokens."""
    from tt_zoo.retrieval.term_weighting import CorpusTermWeights  # noqa: PLC0415

    settings = dict(index.settings)
    kind = settings.get("kind")
    if kind == "late_interaction":
        if settings.get("mode") == "rerank" and settings.get("first_stage") != {"kind": "bm25"}:
            raise TypeError("Only a late-interaction index re-ranking its own BM25 saves (this "
                            f"one re-ranks {settings.get('first_stage')!r}).")
        store = index.searcher.store
    elif kind == "term_weights":
        weights = index.searcher.term_weights
        if not isinstance(weights, CorpusTermWeights) or not np.array_equal(
                weights.doc_rows, np.arange(weights.num_rows)):
            # One row a passage (a CorpusTermWeights saves its distinct rows, not doc_rows).
            weights = CorpusTermWeights.from_term_weights(list(weights))
    else:
        raise TypeError(f"save_passage_index saves a late-interaction or term-weight model's "
                        f"index (got {index.description!r}).")

    def payload(staging: pathlib.Path) -> None:
        if kind == "late_interaction":
            store.save(staging / TOKENS_DIR)
        else:
            weights.save(staging / TERM_WEIGHTS_FILE)

    return write_passage_index(index, path, model=model_fingerprint(model), payload=payload,
                               overwrite=overwrite)


def load_passage_index(path, model) -> PassageIndex:
    """The index `save_passage_index` wrote to `path`, checking every file against its sha256
    and `model` against the one that built it; BM25 (and a token index's ScaNN tree) is built
    again from the saved passages and vectors or weights."""
    from tt_zoo.retrieval.term_weighting import CorpusTermWeights  # noqa: PLC0415
    from tt_zoo.retrieval.token_store import TokenStore  # noqa: PLC0415

    path = as_path(path, "path")
    manifest, ids, titles, texts = read_passage_index(path)
    manifest_path, settings = path / PASSAGE_INDEX_FILE, manifest["settings"]
    _check_model(manifest.get("model"), model, manifest_path)
    kind = settings.get("kind")
    if kind == "late_interaction" and isinstance(model, LateInteractionZooModel):
        store = TokenStore.load(path / TOKENS_DIR)
        options = ({"token_k": settings["token_k"]} if settings.get("mode") == "token_index"
                   else {"depth": settings["depth"]})
        return late_interaction_index(
            lambda q: model.encode_query_tokens(q, show_progress_bar=False), None, texts, titles,
            ids, mode=settings["mode"], store=store, name=model.name, save=model._save_index,
            **options)
    if kind == "term_weights" and isinstance(model, TermWeightZooModel):
        return weighted_bm25_index(model.weighter, texts, titles, ids, k1=settings["k1"],
                                   b=settings["b"], unread=settings["unread"],
                                   weights=CorpusTermWeights.load(path / TERM_WEIGHTS_FILE),
                                   save=model._save_index)
    raise ArtifactError(f"{manifest_path} holds a {kind!r} index, which {model.name!r} (a "
                        f"{type(model).__name__}) does not load.")
