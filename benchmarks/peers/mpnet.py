"""Section `mpnet` of benchmarks.peers: the imported all-mpnet-base-v2 (``mpnet_base_768``, an
MPNet tower: `tt_zoo.modeling.families.mpnet`) against the same checkpoint folder in
sentence-transformers, its own ``encode`` in the peer's environment (--peer-python, its own
process: `benchmarks.peers.minilm.TorchPeer` and `torch_worker.py`).

Each side encodes once (the real model costs ~5x MiniLM: a few minutes a side):

- the first --mpnet-passages 100-word Wikispeedia passages with their titles (the passages the
  `minilm` section reads: `benchmarks.peers.encode.passage_documents`), as (title, passage)
  pairs (``<s> title </s></s> passage </s>``, max length 384);
- the README quick start's texts: its question and four passages as single texts, and the four
  passages with their titles as documents (`QUICKSTART`).

Measured: the share of texts whose token ids are the same on both sides (the peer's tokenizer,
``longest_first`` truncation at its max length, against tt_zoo's in-graph `TextPreprocessor`
with MPNet's mapping), the smallest cosine between the two libraries' vectors (target >=
0.9999), and each side's documents/s on the passages (one timed pass each: a rate, not a
race). A full run also stores the peer's quick-start vectors as the reference of the slow test
(tests/test_mpnet.py, `GOLDEN`).
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import time

from benchmarks.peers.minilm import peer_lines

NAME = "mpnet_base_768"
GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / \
    "mpnet_sentence_transformers.json"
BATCH = 32
# The README's quick start (its passages, their titles and its question).
QUICKSTART = {
    "texts": ["Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London.",
              "Paris is the capital and most populous city of France, on the river Seine.",
              "The Eiffel Tower was built from 1887 to 1889 as the entrance to the World's Fair.",
              "At sea level, water boils at 100 degrees Celsius."],
    "titles": ["Penicillin", "Paris", "Eiffel Tower", "Water"],
    "question": "who discovered penicillin?"}


def settings(args) -> dict:
    s = {"passages": args.mpnet_passages, "batch": BATCH, "peer_python": args.peer_python}
    if args.quick:
        s["passages"] = min(s["passages"], 32)
    return s


def run(args, log) -> dict:
    import numpy as np

    import tt_zoo
    from benchmarks.peers.encode import passage_documents
    from benchmarks.peers.minilm import TorchPeer, peer_reason
    from tt_zoo.zoo.imported import CHECKPOINTS, unpack

    s = settings(args)
    titles, texts = passage_documents(args.wikispeedia, s["passages"])
    singles = [QUICKSTART["question"]] + QUICKSTART["texts"]
    log(f"mpnet: {len(texts):,} passages with titles and the quick start's "
        f"{len(singles)} texts and {len(QUICKSTART['texts'])} documents")
    model = tt_zoo.load(NAME)
    out = {"settings": s, "model": NAME}
    pairs_titles = QUICKSTART["titles"] + titles
    pairs_texts = QUICKSTART["texts"] + texts
    start = time.perf_counter()
    ours = model.encode_documents(texts, titles=titles, batch_size=s["batch"])
    seconds = time.perf_counter() - start
    out["tt_zoo"] = {"seconds": seconds, "docs_per_s": len(texts) / seconds}
    log(f"mpnet: tt_zoo encoded {len(texts):,} passages in {seconds:.1f} s")
    quick = model.encode_documents(QUICKSTART["texts"], titles=QUICKSTART["titles"])
    ours = {"documents": np.concatenate([quick, ours]), "singles": model.encode_queries(singles)}
    reason = peer_reason(s["peer_python"])
    if reason:
        out["skipped"] = reason
        return out
    with tempfile.TemporaryDirectory(prefix="peers-mpnet-") as work:
        inputs = os.path.join(work, "inputs.json")
        with open(inputs, "w", encoding="utf-8") as f:
            json.dump({"titles": pairs_titles, "texts": pairs_texts, "questions": singles}, f)
        folder = unpack(CHECKPOINTS[NAME], work)
        log(f"mpnet: starting the peer ({s['peer_python']})")
        peer = TorchPeer(s["peer_python"], str(folder), inputs, "", work, 0.05, 0.0)
        try:
            out["peer"] = peer.hello
            theirs = {"documents": peer.ask(op="dump", batch=s["batch"]),
                      "singles": peer.ask(op="dump", batch=s["batch"], texts="questions")}
        finally:
            peer.close()
        out["sentence-transformers"] = {"seconds": theirs["documents"]["seconds"],
                                        "docs_per_s": len(pairs_texts)
                                        / theirs["documents"]["seconds"]}
        out["identity"] = identity(model, ours, theirs, pairs_titles, pairs_texts, singles)
        log(f"mpnet: identity {out['identity']}")
        if not args.quick:
            write_golden(theirs, singles)
    return out


def identity(model, ours: dict, theirs: dict, titles, texts, singles) -> dict:
    """Token ids and vectors of both sides: the passages (the quick start's documents first,
    then the Wikispeedia passages) and the quick start's single texts."""
    import numpy as np

    from benchmarks.measure import min_cosine

    keras_model = model.keras_model
    out = {}
    n_quick = len(QUICKSTART["texts"])
    for key, pack, count in (
            ("documents", lambda i, j: keras_model.document_preprocessor(
                (np.array(titles[i:j]), np.array(texts[i:j]))), len(texts)),
            ("singles", lambda i, j: keras_model.query_preprocessor(np.array(singles[i:j])),
             len(singles))):
        vectors = np.load(theirs[key]["vectors"])
        with open(theirs[key]["token_ids"], encoding="utf-8") as f:
            their_ids = json.load(f)
        same = 0
        for i in range(0, count, 256):
            packed = pack(i, i + 256)
            for row, mask, want in zip(packed["input_word_ids"].numpy(),
                                       packed["input_mask"].numpy(), their_ids[i:i + 256]):
                same += row[mask == 1].tolist() == want
        out[key] = {"texts": count, "same_token_ids": same / count,
                    "min_cosine": min_cosine(ours[key], vectors)}
        if key == "documents":
            out["quickstart_documents_min_cosine"] = min_cosine(ours[key][:n_quick],
                                                                vectors[:n_quick])
            out["passages_min_cosine"] = min_cosine(ours[key][n_quick:], vectors[n_quick:])
    out["min_cosine"] = min(out["documents"]["min_cosine"], out["singles"]["min_cosine"])
    return out


def write_golden(theirs: dict, singles) -> None:
    """The peer's quick-start vectors (the reference of tests/test_mpnet.py's slow test)."""
    import numpy as np

    from tt_zoo.atomic_io import write_json

    n = len(QUICKSTART["texts"])
    documents = np.load(theirs["documents"]["vectors"])[:n].astype(np.float64)
    queries = np.load(theirs["singles"]["vectors"]).astype(np.float64)
    write_json(GOLDEN, {"source": "sentence-transformers encode of all-mpnet-base-v2 "
                                  "(python -m benchmarks.peers --sections mpnet)",
                        "queries": singles, "titles": QUICKSTART["titles"],
                        "texts": QUICKSTART["texts"],
                        "query_vectors": np.round(queries, 7).tolist(),
                        "document_vectors": np.round(documents, 7).tolist()}, indent=None)


def render(part: dict) -> list:
    s = part["settings"]
    lines = [f"all-mpnet-base-v2 imported (`{part['model']}`, an MPNet tower) against the same "
             "folder in sentence-transformers (its own `encode`, in the peer's environment), "
             "one pass a side."]
    lines += peer_lines(part)
    ident = part.get("identity")
    if ident:
        d, q = ident["documents"], ident["singles"]
        lines += ["", "| texts | count | same token ids | smallest cosine |",
                  "| --- | --- | --- | --- |",
                  f"| {s['passages']:,} Wikispeedia passages with titles + the quick start's "
                  f"{d['texts'] - s['passages']} documents | {d['texts']:,} | "
                  f"{100 * d['same_token_ids']:.1f}% | {d['min_cosine']:.10f} |",
                  f"| the quick start's question and passages as single texts | {q['texts']} | "
                  f"{100 * q['same_token_ids']:.1f}% | {q['min_cosine']:.10f} |",
                  "", f"Smallest cosine overall: **{ident['min_cosine']:.10f}** (target >= "
                  "0.9999)."]
    rates = [(k, part[k]) for k in ("tt_zoo", "sentence-transformers") if k in part]
    if rates:
        lines += ["", f"One pass over the passages, batch {s['batch']} (docs/s; a single "
                  "timing on a shared machine, not interleaved rounds):", ""]
        lines += [f"- {k}: {r['docs_per_s']:.1f} docs/s ({r['seconds']:.0f} s)"
                  for k, r in rates]
    return lines
