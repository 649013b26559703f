"""Writes tests/golden/<name>.json for every shipped model: embeddings and scores of fixed texts.

Run after (re)training a shipped model, and commit the result with the new weights:
  python tests/golden/regenerate.py
"""

import json
import pathlib

import numpy as np

import tt_zoo
from tt_zoo.atomic_io import write_text

HERE = pathlib.Path(__file__).resolve().parent
QUERIES = ["who discovered penicillin?", "what is the capital of france?",
           "when was the eiffel tower built?"]
TITLES = ["Penicillin", "Paris", "Eiffel Tower"]
PASSAGES = ["Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London.",
            "Paris is the capital and most populous city of France, on the river Seine.",
            "The Eiffel Tower was built from 1887 to 1889 as the entrance to the World's Fair."]


def golden(model) -> dict:
    q = model.encode_queries(QUERIES)
    d = model.encode_documents(PASSAGES, titles=TITLES)
    return {"queries": QUERIES, "titles": TITLES, "passages": PASSAGES,
            "query_embeddings_first8": np.round(q[:, :8], 6).tolist(),
            "document_embeddings_first8": np.round(d[:, :8], 6).tolist(),
            "scores": np.round(q @ d.T, 6).tolist()}


def main():
    for name in tt_zoo.list_models(shipped_only=True):
        write_text(HERE / f"{name}.json", json.dumps(golden(tt_zoo.load(name)), indent=1) + "\n")
        print(f"wrote {HERE / (name + '.json')}")


if __name__ == "__main__":
    main()
