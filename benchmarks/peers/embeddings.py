"""Where the `search` section's embeddings come from: benchmarks/open_domain.py's cache
(NAME.npy + NAME.json), any finished embeddings file naming its model, or a seeded Gaussian
mixture (--synthetic); and the queries, encoded by the candidates' model."""

from __future__ import annotations

import json
import pathlib
from typing import Optional

import numpy as np


def gaussian_mixture(num_candidates: int, num_queries: int, dim: int, components: int = 50,
                     seed: int = 0):
    """Seeded candidates and queries from one mixture of `components` Gaussians."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(components, dim))
    candidates = centers[rng.integers(0, components, num_candidates)]
    queries = centers[rng.integers(0, components, num_queries)]
    candidates = candidates + 0.5 * rng.normal(size=candidates.shape)
    queries = queries + 0.5 * rng.normal(size=queries.shape)
    return candidates.astype(np.float32), queries.astype(np.float32)


def cached_sources(directory: pathlib.Path, names):
    """(name, candidates .npy, the model that encoded them) of each cached embedding file, as
    benchmarks/open_domain.py wrote them: NAME.npy with NAME.json naming its model."""
    if not directory.is_dir():
        raise SystemExit(f"--embeddings-dir {directory} does not exist: run "
                         "benchmarks/open_domain.py first, or pass --synthetic.")
    found = sorted(p.stem for p in directory.glob("*.npy") if p.with_suffix(".json").is_file())
    wanted = names or found
    missing = sorted(set(wanted) - set(found))
    if missing or not wanted:
        raise SystemExit(f"--embeddings-dir {directory}: no finished NAME.npy + NAME.json for "
                         f"{missing or 'any model'} (found {found}).")
    out = []
    for name in wanted:
        meta = json.loads(directory.joinpath(f"{name}.json").read_text(encoding="utf-8"))
        if meta.get("done") != meta.get("shape", [None])[0]:
            raise SystemExit(f"{directory / name}.npy is not finished ({meta.get('done')} of "
                             f"{meta.get('shape')} rows encoded).")
        out.append((name, directory / f"{name}.npy", meta.get("model", name)))
    return out


def file_source(path: pathlib.Path, model: Optional[str]):
    """(name, candidates .npy, the model that encoded them) of one `--search-embeddings-file`:
    PATH.npy, finished according to its PATH.json (``shape``, ``done``, ``model``: what
    `tt_zoo.evaluation.document_embeddings.encode_documents_to_file` writes), the model from
    the JSON or `model` (`--search-model`; both given, they must name the same model)."""
    if path.suffix != ".npy" or not path.is_file():
        raise SystemExit(f"--search-embeddings-file {path}: expected an existing .npy file of "
                         "candidate embeddings [n, dim].")
    meta_path = path.with_suffix(".json")
    meta = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"{meta_path} is not readable JSON ({e}).")
    shape = list(np.load(path, mmap_mode="r", allow_pickle=False).shape)
    if len(shape) != 2:
        raise SystemExit(f"--search-embeddings-file {path}: expected a 2-D array [n, dim] "
                         f"(got shape {shape}).")
    if meta and (meta.get("shape") != shape or meta.get("done") != shape[0]):
        raise SystemExit(f"{path} is not finished: {meta_path} says {meta.get('done')} of "
                         f"{meta.get('shape')} rows encoded (the file holds {shape}); wait for "
                         "the encoder to finish.")
    named = meta.get("model")
    if named and model and pathlib.Path(named).name != pathlib.Path(model).name:
        raise SystemExit(f"--search-model {model} is not the model that encoded {path} "
                         f"({named}, says {meta_path}): the queries must come from the "
                         "candidates' model.")
    model = model or named
    if not model:
        raise SystemExit(f"--search-embeddings-file {path}: no {meta_path.name} names the model "
                         "that encoded it; pass --search-model NAME (the queries are encoded "
                         "by the candidates' model).")
    return path.stem, path, model


def load_candidates(path: pathlib.Path, limit):
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    return np.ascontiguousarray(array[:limit] if limit else array, dtype=np.float32)


def encode_questions(model_name: str, squad: str, num_queries: int):
    """The first `num_queries` SQuAD dev questions by the model that encoded the candidates."""
    import tt_zoo
    from tt_zoo.evaluation.reqa import build_reqa

    model = tt_zoo.load(model_name if pathlib.Path(model_name).exists()
                        else pathlib.Path(model_name).name)
    questions = build_reqa(squad).questions[:num_queries]
    return np.ascontiguousarray(model.encode_queries([q.text for q in questions]),
                                dtype=np.float32)
