"""What several commands share: where the data and the vocabulary are by default, ReQA
loading, and the Table 3 printout (Chang et al. 2020, Table 3's columns)."""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Optional

from tt_zoo.serving.registry import SAVED_MODELS_DIR

COLUMNS = ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR")
# The git clone's root (README.md, saved_models/): what `tt-zoo reproduce` updates. Work
# folders (runs/, results/) are relative to the current directory instead.
CLONE_ROOT = SAVED_MODELS_DIR.parent
# The vocabulary the project learned from Wikispeedia (`tt-zoo learn-vocab`), in a clone.
PROJECT_VOCAB = SAVED_MODELS_DIR / "vocab" / "vocab.txt"


def default_data_dir() -> pathlib.Path:
    """$TT_ZOO_DATA, else ../shared/data beside the clone."""
    return pathlib.Path(os.environ.get("TT_ZOO_DATA", CLONE_ROOT.parent / "shared" / "data"))


def default_squad_path() -> str:
    return str(default_data_dir() / "squad" / "dev-v1.1.json")


def default_vocab_path() -> str:
    """The project's learned vocabulary when it exists, else the BERT uncased one."""
    if PROJECT_VOCAB.is_file():
        return str(PROJECT_VOCAB)
    return str(default_data_dir() / "bert-vocab" / "vocab.txt")


def load_reqa(path: Optional[str] = None):
    """ReQA from the SQuAD file a user named (which must exist), or by default from
    $TT_ZOO_DATA/squad/dev-v1.1.json, else from Hugging Face datasets (online only)."""
    from tt_zoo.retrieval import reqa as reqa_lib  # noqa: PLC0415 (imports TensorFlow: after argparse)

    if path is not None:
        if not pathlib.Path(path).is_file():
            raise FileNotFoundError(f"SQuAD file {path} does not exist.")
        return reqa_lib.build_reqa(path)
    default = default_squad_path()
    if pathlib.Path(default).is_file():
        return reqa_lib.build_reqa(default)
    print(f"{default} is absent; loading SQuAD validation from Hugging Face datasets instead.",
          file=sys.stderr)
    return reqa_lib.load_squad_from_hf("validation")


def format_table(rows) -> str:
    """Rows of {encoder, pretraining, search, R@k..., MRR} as Table 3's text table (in %)."""
    head = f"{'encoder':<28} {'pretraining':<16} {'search':<8} " + " ".join(
        f"{c:>6}" for c in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['encoder']:<28.28} {r['pretraining']:<16.16} {r['search']:<8} "
                     + " ".join(f"{100 * r[c]:6.1f}" for c in COLUMNS))
    return "\n".join(lines)
