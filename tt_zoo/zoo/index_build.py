"""Building a saved index of any kind over a corpus, resumably: what `tt-zoo index` runs.

Pyserini's loop (build an index once, query it many times) over every kind of index tt_zoo has,
each written in its own saved layout and read back by `tt_zoo.load_index` with no passage
encoded again:

- "dense": a two-tower model's embeddings (`ZooModel.index`: ScaNN or brute force);
- "bm25": BM25 over "title text" (`tt_zoo.bm25_index`);
- "hybrid": a two-tower model's index fused with BM25 (`tt_zoo.fuse`: reciprocal-rank fusion,
  or a convex combination given its weight);
- "late_interaction": a ColBERT model's token vectors (its ``index``, in its card's best mode);
- "term_weights": an HDCT model's weighted BM25.

The costly part, encoding the passages, runs in chunks committed to ``.NAME.partial/`` beside the
output folder (`encode_resumable`; a ColBERT model's `TokenStore.build` and an HDCT model's
`weigh_corpus` cache do the same for theirs): a build killed half way and run again with the same
model and passages encodes only the chunks not yet done. The partial folder goes once the index
is saved.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import sys
from typing import Callable, Optional, Sequence

import numpy as np

from tt_zoo.arguments import as_path
from tt_zoo.atomic_io import check_replaceable, write_json
from tt_zoo.retrieval import passage_index as passage_lib
from tt_zoo.zoo.kind_models import (TERM_WEIGHT_K1, TERM_WEIGHT_UNREAD, LateInteractionZooModel,
                                    TermWeightZooModel)
from tt_zoo.zoo.zoo_model import weights_sha256

INDEX_KINDS = ("dense", "bm25", "hybrid", "late_interaction", "term_weights")
DEFAULT_CHUNK = 4096  # passages encoded and committed at a time
_STATE_FILE = "state.json"


def index_kind(model, hybrid: bool = False) -> str:
    """The kind of index `build_index` makes of `model` (None: BM25)."""
    if model is None:
        return "bm25"
    if isinstance(model, LateInteractionZooModel):
        return "late_interaction"
    if isinstance(model, TermWeightZooModel):
        return "term_weights"
    return "hybrid" if hybrid else "dense"


def partial_folder(output) -> pathlib.Path:
    """Where an unfinished build of `output` keeps its finished chunks: ``.NAME.partial/``."""
    output = pathlib.Path(output)
    return output.parent / f".{output.name}.partial"


def _fingerprint(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def encode_resumable(encode: Callable, texts: Sequence[str], titles: Sequence[str],
                     work: pathlib.Path, *, key: str, chunk: int = DEFAULT_CHUNK,
                     progress: bool = True, log: Optional[Callable[[str], None]] = print
                     ) -> np.ndarray:
    """``encode(texts, titles)`` of every passage, `chunk` passages at a time, each finished
    chunk saved in `work` (``chunk-NNNNN.npy``, written to a temp name and renamed). A rerun with
    the same `key` (the model's weights and the settings), passages and chunk size reads the
    chunks done and encodes the rest; anything else starts afresh. Returns float32 [n, dim]."""
    from tqdm.auto import tqdm  # noqa: PLC0415

    texts, titles = list(texts), list(titles)
    state = {"key": key, "chunk": chunk, "passages": _fingerprint(texts, titles)}
    state_file = work / _STATE_FILE
    if work.is_dir():
        try:
            previous = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            previous = None
        if previous != state:
            shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    write_json(state_file, state)
    starts = range(0, len(texts), chunk)
    done = [s for c, s in enumerate(starts) if (work / f"chunk-{c:05d}.npy").is_file()]
    if done and log:
        log(f"resuming: {sum(min(chunk, len(texts) - s) for s in done):,} of {len(texts):,} "
            f"passages encoded already ({work})")
    parts = []
    with tqdm(total=len(texts), desc="encode passages", unit="passage", file=sys.stderr,
              disable=not progress, mininterval=2) as bar:
        for c, start in enumerate(starts):
            path = work / f"chunk-{c:05d}.npy"
            stop = min(len(texts), start + chunk)
            if path.is_file():
                part = np.load(path, allow_pickle=False)
                if part.shape[0] != stop - start:
                    raise ValueError(f"{path} holds {part.shape[0]} rows, not {stop - start}: "
                                     f"delete {work} to encode again.")
            else:
                part = np.asarray(encode(texts[start:stop], titles[start:stop]), np.float32)
                tmp = work / f".chunk-{c:05d}.npy.tmp"
                with open(tmp, "wb") as f:
                    np.save(f, part, allow_pickle=False)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            parts.append(part)
            bar.update(stop - start)
    return np.concatenate(parts)


def build_index(texts: Sequence[str], titles: Sequence[str], ids: Sequence[str], output, *,
                model=None, hybrid: bool = False, backend: str = "scann",
                mode: Optional[str] = None, weight: Optional[float] = None,
                chunk: int = DEFAULT_CHUNK, batch_size: int = 256, progress: bool = True,
                overwrite: bool = False, log: Optional[Callable[[str], None]] = print):
    """Indexes the passages with `model` (None: BM25) and saves the index to folder `output`;
    returns it (`load_index(output)` gives it back).

    Args:
      texts, titles, ids: the passages.
      output: the index folder: new, empty or an earlier saved index (replaced), unless
        `overwrite`.
      model: a loaded model of any kind (`tt_zoo.load`), or None for BM25.
      hybrid: a two-tower model's index fused with BM25 (`tt_zoo.fuse`).
      backend: a two-tower model's vector index, "scann" or "brute_force".
      mode: a ColBERT model's search, "rerank" or "token_index" (default: its card's best).
      weight: a hybrid's convex share of the model's scores, in [0, 1]; None: reciprocal-rank
        fusion.
      chunk: passages encoded and committed at a time (what a rerun after a kill keeps).
      batch_size: passages a forward pass.
      progress: a progress bar over the passages encoded.
    """
    from tt_zoo.retrieval.term_weighting import weigh_corpus  # noqa: PLC0415
    from tt_zoo.retrieval.token_store import TokenStore  # noqa: PLC0415

    output = as_path(output, "output")
    check_replaceable(output, overwrite=overwrite, is_replaceable=passage_lib.is_saved_index,
                      what="saved tt_zoo index")
    kind = index_kind(model, hybrid)
    texts, titles, ids = list(texts), list(titles), list(ids)
    work = partial_folder(output)
    if kind == "bm25":
        index = passage_lib.bm25_index(texts, titles, ids,
                                       show_progress=progress and len(texts) >= 10_000)
    elif kind in ("dense", "hybrid"):
        key = _fingerprint(weights_sha256(model.keras_model), model.document_length, batch_size)
        embeddings = encode_resumable(
            lambda t, ti: model.encode_documents(t, titles=ti, batch_size=batch_size,
                                                 show_progress_bar=False),
            texts, titles, work, key=key, chunk=chunk, progress=progress, log=log)
        index = model.index(texts, titles=titles, ids=ids, backend=backend,
                            embeddings=embeddings)
        if kind == "hybrid":
            index = passage_lib.fuse(index, passage_lib.bm25_index(texts, titles, ids),
                                     weight=weight)
    elif kind == "late_interaction":
        store = TokenStore.build(
            work / "tokens",
            lambda t, titles=None: model.encode_document_tokens(
                t, titles=titles, batch_size=batch_size, show_progress_bar=False),
            texts, titles, ids, chunk=chunk, progress=progress,
            encoder=f"{model.name}:{weights_sha256(model.keras_model)}", overwrite=True)
        mode = model.best_mode if mode is None else mode
        index = passage_lib.late_interaction_index(
            lambda q: model.encode_query_tokens(q, batch_size=batch_size,
                                                show_progress_bar=False),
            None, texts, titles, ids, mode=mode, store=store, name=model.name,
            save=model._save_index)  # pylint: disable=protected-access
    else:
        weights = weigh_corpus(model.weighter, titles, texts, cache_dir=str(work),
                               chunk_size=chunk, progress=progress, log=None)
        index = passage_lib.weighted_bm25_index(
            model.weighter, texts, titles, ids, k1=TERM_WEIGHT_K1, unread=TERM_WEIGHT_UNREAD,
            weights=weights, save=model._save_index)  # pylint: disable=protected-access
    index.save(output, overwrite=True)
    if work.exists():
        shutil.rmtree(work)
    return index
