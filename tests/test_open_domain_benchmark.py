"""benchmarks/open_domain.py: the candidate set and the resumable streaming encoder."""

import importlib.util
import json
import sys
import types

import numpy as np
import pytest

from conftest import REPO_ROOT, data_file
from tt_zoo.retrieval import reqa as reqa_lib


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("open_domain_bench",
                                                  REPO_ROOT / "benchmarks" / "open_domain.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def squad_reqa():
    return reqa_lib.build_reqa(data_file("squad/dev-v1.1.json"))


def test_wikipedia_candidates_come_after_squad_ones(bench, squad_reqa):
    reqa, added = bench.open_domain_reqa(squad_reqa, data_file("wikispeedia"), limit_articles=3)
    assert added > 50 and len(reqa.candidates) == len(squad_reqa.candidates) + added
    assert reqa.candidates[:len(squad_reqa.candidates)] == squad_reqa.candidates
    assert [q.gold_index for q in reqa.questions] == [q.gold_index for q in squad_reqa.questions]
    extra = reqa.candidates[len(squad_reqa.candidates):]
    assert all(c.sentence in c.passage for c in extra)
    assert len({(c.sentence, c.passage) for c in extra}) == added  # no duplicates
    assert min(c.passage_index for c in extra) > max(c.passage_index
                                                     for c in squad_reqa.candidates)


class CountingModel:
    """Embeds a document as [len(passage), len(sentence)]; counts the texts it encodes."""

    def __init__(self, path):
        self.path, self.name, self.encoded = path, "counting", 0
        self.keras_model = types.SimpleNamespace(embedding_dim=2)

    def encode_documents(self, texts, titles):
        self.encoded += len(texts)
        return np.array([[len(t), len(s)] for t, s in zip(texts, titles)], np.float32)


def test_streaming_encoder_writes_every_row_and_resumes(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "CHUNK", 4)
    candidates = [reqa_lib.Candidate(f"s{i}", "p" * i, i) for i in range(10)]
    reqa = reqa_lib.ReQA([], candidates, reqa_lib.ReQAReport())
    path = tmp_path / "emb.npy"
    model = CountingModel("m")
    full = bench.encode_candidates_streaming(model, reqa, path)
    np.testing.assert_array_equal(full[:, 0], np.arange(10))
    assert model.encoded == 10 and json.loads(path.with_suffix(".json").read_text())["done"] == 10

    state = {"shape": [10, 2], "model": "m", "done": 8}  # as if killed after two chunks
    path.with_suffix(".json").write_text(json.dumps(state))
    again = CountingModel("m")
    resumed = bench.encode_candidates_streaming(again, reqa, path)
    assert again.encoded == 2
    np.testing.assert_array_equal(np.asarray(resumed), np.asarray(full))

    other = CountingModel("another model")  # a different model starts over
    bench.encode_candidates_streaming(other, reqa, path)
    assert other.encoded == 10
