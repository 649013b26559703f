"""Writes tests/golden/<name>.json for every shipped model: its outputs for fixed texts.

By kind (`tt_zoo.modeling.kinds.KINDS`):
- two-tower: the first 8 dims of the query and document embeddings, and their scores;
- late interaction (ColBERT): the first 8 dims of the first 3 token vectors of each query and
  document, their token counts, and the MaxSim score matrix;
- term weights (HDCT): each passage's (term, weight) list (rounded, by term) and its top terms.

Run after (re)training or shipping a model, and commit the result with the new weights:
  python tests/golden/regenerate.py                  # every shipped model
  python tests/golden/regenerate.py NAME [NAME ...]  # only these
"""

import argparse
import json
import pathlib

import numpy as np

import tt_zoo
from tt_zoo.atomic_io import write_text
from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS
from tt_zoo.zoo import registry

HERE = pathlib.Path(__file__).resolve().parent
QUERIES = ["who discovered penicillin?", "what is the capital of france?",
           "when was the eiffel tower built?"]
TITLES = ["Penicillin", "Paris", "Eiffel Tower"]
PASSAGES = ["Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London.",
            "Paris is the capital and most populous city of France, on the river Seine.",
            "The Eiffel Tower was built from 1887 to 1889 as the entrance to the World's Fair."]
TOKENS, DIMS = 3, 8  # the leading token vectors and dimensions pinned of a ColBERT model
TERM_DECIMALS, TOP_TERMS = 4, 5


def golden(model) -> dict:
    """A two-tower model's golden outputs."""
    q = model.encode_queries(QUERIES)
    d = model.encode_documents(PASSAGES, titles=TITLES)
    return {"queries": QUERIES, "titles": TITLES, "passages": PASSAGES,
            "query_embeddings_first8": np.round(q[:, :8], 6).tolist(),
            "document_embeddings_first8": np.round(d[:, :8], 6).tolist(),
            "scores": np.round(q @ d.T, 6).tolist()}


def leading_tokens(vectors) -> list:
    """The first TOKENS token vectors' first DIMS dims of each text, rounded."""
    return [np.round(v[:TOKENS, :DIMS], 6).tolist() for v in vectors]


def late_interaction_golden(model) -> dict:
    """A late-interaction model's golden outputs (token vectors and MaxSim scores)."""
    q = model.encode_query_tokens(QUERIES)
    d = model.encode_document_tokens(PASSAGES, titles=TITLES)
    return {"kind": LATE_INTERACTION, "queries": QUERIES, "titles": TITLES,
            "passages": PASSAGES,
            "query_token_counts": [len(v) for v in q], "document_token_counts": [len(v) for v in d],
            "query_tokens_first3x8": leading_tokens(q),
            "document_tokens_first3x8": leading_tokens(d),
            "scores": np.round(model.score(QUERIES, PASSAGES, titles=TITLES), 6).tolist()}


def term_list(weights) -> list:
    """A `TermWeights`' (term, weight) pairs, by term, weights rounded."""
    return [[t, round(float(w), TERM_DECIMALS)] for t, w in sorted(weights.weights.items())]


def top_terms(weights, k: int = TOP_TERMS) -> list:
    """The k terms of highest weight (ties by term)."""
    return [t for t, _ in sorted(weights.weights.items(), key=lambda tw: (-tw[1], tw[0]))[:k]]


def term_weight_golden(weighter) -> dict:
    """A term-weight model's golden outputs: each golden (title, passage)'s weighted terms."""
    weights = weighter.weigh(TITLES, PASSAGES)
    return {"kind": TERM_WEIGHTS, "queries": QUERIES, "titles": TITLES,
            "passages": PASSAGES, "terms": [term_list(w) for w in weights],
            "top_terms": [top_terms(w) for w in weights]}


def golden_of(name: str) -> dict:
    """The golden outputs of a shipped model, by its kind."""
    kind = registry.get_spec(name).kind
    if kind == TERM_WEIGHTS:
        return term_weight_golden(tt_zoo.load_term_weighter(name))
    model = tt_zoo.load(name)
    return late_interaction_golden(model) if kind == LATE_INTERACTION else golden(model)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="shipped models (default: every one)")
    p.add_argument("--output", type=pathlib.Path, default=HERE, help="default: tests/golden/")
    args = p.parse_args(argv)
    shipped = tt_zoo.list_models(shipped_only=True)
    unknown = sorted(set(args.names) - set(shipped))
    if unknown:
        p.error(f"not shipped: {', '.join(unknown)} (ship them first: tt-zoo ship NAME)")
    for name in args.names or shipped:
        path = args.output / f"{name}.json"
        write_text(path, json.dumps(golden_of(name), indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
