"""Open-domain ReQA (Chang et al. 2020, Sec. 5.3, Table 6): the benchmark's questions against
its own candidates plus every (sentence, passage) of an article corpus, and the candidates'
embeddings streamed to a file, in bounded memory, resumably.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
from tqdm import tqdm

from tt_zoo.atomic_io import write_json
from tt_zoo.data.article_sources import read_articles
from tt_zoo.data.passages import make_passages, split_sentences
from tt_zoo.evaluation.reqa import Candidate, ReQA


def open_domain_reqa(reqa: ReQA, articles, limit_articles=None, progress: bool = True):
    """`reqa` with every (sentence, passage) candidate of `articles` (any source
    `read_articles` reads) appended after its own, so the gold indices are unchanged.

    Returns (the new ReQA, the number of candidates added); pairs already present are skipped.
    """
    candidates = list(reqa.candidates)
    seen = {(c.sentence, c.passage) for c in candidates}
    passage_index = 1 + max(c.passage_index for c in candidates)
    count = 0
    for article in read_articles(articles, progress=progress):
        if limit_articles is not None and count >= limit_articles:
            break
        count += 1
        for passage in make_passages(article):
            for sentence in split_sentences(passage.text):
                if (sentence, passage.text) not in seen:
                    seen.add((sentence, passage.text))
                    candidates.append(Candidate(sentence, passage.text, passage_index))
            passage_index += 1
    added = len(candidates) - len(reqa.candidates)
    source = f"{reqa.source} + {added:,} candidates of {count:,} articles"
    return ReQA(reqa.questions, candidates, reqa.report, source=source), added


def encode_candidates_to_file(model, reqa: ReQA, path, chunk: int = 8192,
                              progress: bool = True) -> np.ndarray:
    """Every candidate's embedding psi(sentence, passage) in a float32 ``.npy`` at `path`:
    `encode_documents_to_file` of the candidates' passages under their sentences."""
    passages = reqa.candidate_passages()
    return encode_documents_to_file(model, passages.texts, passages.titles, path, chunk,
                                    progress)


def encode_documents_to_file(model, texts, titles, path, chunk: int = 8192,
                             progress: bool = True) -> np.ndarray:
    """Every document's embedding psi(title, text) in a float32 ``.npy`` at `path`
    (memory-mapped, returned), written `chunk` rows at a time; ``path.with_suffix('.json')``
    records the rows done and the model, so a rerun with the same model resumes there and
    another model starts over. Models are the same when their document sides are
    (`tt_zoo.evaluation.text_benchmarks.model_tag`, recorded as ``encoder``; a record written
    before that field compares the model's path)."""
    from tt_zoo.evaluation.text_benchmarks import model_tag  # noqa: PLC0415

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
