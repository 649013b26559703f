"""The results document of benchmarks.peers (OUTPUT.json and its OUTPUT.md): one part per
section, each rewritten on its own (`merge_section`), so a later run can measure the remaining
sections; and the Markdown report of every part measured so far (`render`, each section's
table by its module's `render`)."""

from __future__ import annotations

import importlib
import json
import pathlib
from typing import Optional

from benchmarks.measure import is_busy, machine_line

# The name the results file records as its writer (results/performance.json says it): kept
# when the script became the package benchmarks/peers, so that file is still merged into.
GENERATOR = "benchmarks/peers.py"
SECTIONS = ("train", "encode", "search", "minilm", "mpnet")
# What --sections runs by default: `mpnet` needs the teacher's packages (`make teacher`).
DEFAULT_SECTIONS = ("train", "encode", "search", "minilm")
TITLES = {"train": "Training step: tt_zoo against PyTorch (pairs/s)",
          "encode": "Encoding: tt_zoo against sentence-transformers (documents/s)",
          "search": "Nearest-neighbour search: ScaNN (tt_zoo) against FAISS (queries/s at "
                    "recall@10 >= target)",
          "minilm": "A real-size tower: the imported all-MiniLM-L6-v2 against "
                    "sentence-transformers and PyTorch on the same weights",
          "mpnet": "A second architecture: the imported all-mpnet-base-v2 (MPNet) against "
                   "sentence-transformers on the same folder"}


def section_module(name: str):
    """The module of section `name`: benchmarks.peers.NAME (its `run` and `render`)."""
    return importlib.import_module(f"benchmarks.peers.{name}")


def merge_section(existing: Optional[dict], section: str, part: dict) -> dict:
    """`existing` results (or a new document) with `section` replaced by `part`; the other
    sections are kept, so a later run can measure only the remaining ones. Refuses a document
    this benchmark did not write (it is someone's file)."""
    if existing is None:
        existing = {"generator": GENERATOR, "sections": {}}
    elif existing.get("generator") != GENERATOR or not isinstance(existing.get("sections"), dict):
        raise ValueError(f"the results file was not written by {GENERATOR} (its 'generator' is "
                         f"{existing.get('generator')!r}); refusing to overwrite it.")
    merged = {"generator": GENERATOR, "sections": dict(existing["sections"])}
    merged["sections"][section] = part
    return merged


def render(results: dict) -> str:
    """The Markdown report of every section measured so far."""
    lines = ["# tt_zoo beside PyTorch, sentence-transformers and FAISS", "",
             f"Written by `{GENERATOR}`. Each section measures tt_zoo and its peers in one "
             "process on one machine, in interleaved rounds (A B A B ...), and gives medians "
             "over rounds: compare within a section, not across machines or sections.", ""]
    for name in SECTIONS:
        part = results["sections"].get(name)
        if part is None:
            continue
        quick = " (smoke run, --quick sizes: not a measurement)" if part.get("quick") else ""
        lines += [f"## {TITLES[name]}{quick}", "", machine_line(part["machine"]), ""]
        if is_busy(part["machine"]):
            lines += ["**Busy machine**: other processes kept more than half a core busy when "
                      "this section started or ended. Their threads cost the OpenMP-based peers "
                      "(PyTorch, FAISS) far more than TensorFlow and ScaNN (own thread pools): "
                      "these ratios are skewed against the peers.", ""]
        lines += section_module(name).render(part) + [""]
    return "\n".join(lines)


def read_existing(output: pathlib.Path) -> Optional[dict]:
    """OUTPUT.json as written before, or None when there is none."""
    path = output.with_suffix(".json")
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"{path} exists but is not readable JSON ({e}); move it away first.")
