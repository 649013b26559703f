"""Shared test fixtures: the data path and small real slices of the shared data."""

import os
import pathlib

import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA_DIR = pathlib.Path(os.environ.get("TT_ZOO_DATA", REPO_ROOT.parent / "shared" / "data"))


def data_file(relative: str) -> pathlib.Path:
    """Returns a file under TT_ZOO_DATA, or skips the test with the reason when it is absent."""
    path = DATA_DIR / relative
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent (set TT_ZOO_DATA to the data folder)")
    return path


@pytest.fixture
def bert_vocab_file():
    return data_file("bert-vocab/vocab.txt")
