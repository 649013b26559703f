"""A model's document embeddings of a collection, cached in a file: what names them
(`model_tag`, `cache_file`) and how they are written, resumably (`encode_documents_to_file`).

Shared by the benchmarks of `tt_zoo.evaluation` (open-domain ReQA, ODQA answer recall,
`text_benchmarks`) and by training that needs a corpus's embeddings (query adaptation); it
imports none of them.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
from tqdm import tqdm

from tt_zoo.atomic_io import write_json


def model_tag(model) -> str:
    """What names a model's cached document embeddings: the sha256 (16 hex digits) of the
    artifact whose document side encodes them, the model's own or, for a query-adapted model,
    its base's (``document_encoder``, `tt_zoo.training.query_adaptation`); else its name (as
    `tt-zoo odqa` names them)."""
    metadata = getattr(model, "metadata", None) or {}
    encoder = metadata.get("document_encoder") or {}
    return str(encoder.get("sha256") or metadata.get("sha256", model.name))[:16]


def cache_file(cache_dir, prefix: str, model, n: int) -> pathlib.Path:
    """``{cache_dir}/{prefix}-{model_tag}-{n}.npy``: the one name of a model's cached embeddings
    of `n` candidates (ODQA's `prefix` is "passages", `OdqaBenchmark.cache_prefix`)."""
    return pathlib.Path(cache_dir) / f"{prefix}-{model_tag(model)}-{n}.npy"


def encode_documents_to_file(model, texts, titles, path, chunk: int = 8192,
                             progress: bool = True) -> np.ndarray:
    """Every document's embedding psi(title, text) in a float32 ``.npy`` at `path`
    (memory-mapped, returned), written `chunk` rows at a time; ``path.with_suffix('.json')``
    records the rows done and the model, so a rerun with the same model resumes there and
    another model starts over. Models are the same when their document sides are
    (`model_tag`, recorded as ``encoder``; a record written
    before that field compares the model's path)."""
    path = pathlib.Path(path)
    n, dim = len(texts), model.keras_model.embedding_dim
    if len(titles) != n:
        raise ValueError(f"encode_documents_to_file: {len(titles)} titles for {n} texts.")
    state_path = path.with_suffix(".json")
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    encoder = model_tag(model)
    same = (state.get("encoder") == encoder if "encoder" in state
            else state.get("model") == str(model.path))
    if state.get("shape") != [n, dim] or not same:
        state = {"shape": [n, dim], "model": str(model.path), "encoder": encoder, "done": 0}
    path.parent.mkdir(parents=True, exist_ok=True)
    array = np.lib.format.open_memmap(path, mode="r+" if state["done"] and path.is_file()
                                      else "w+", dtype=np.float32, shape=(n, dim))
    with tqdm(total=n, initial=state["done"], desc=f"encode {model.name}", unit="doc",
              file=sys.stderr, mininterval=10, disable=not progress) as bar:
        for start in range(state["done"], n, chunk):
            stop = min(n, start + chunk)
            array[start:stop] = model.encode_documents(
                list(texts[start:stop]), titles=list(titles[start:stop]))
            array.flush()
            state["done"] = stop
            write_json(state_path, state)
            bar.update(stop - start)
    return array
