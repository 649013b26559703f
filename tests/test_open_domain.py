"""tt_zoo.evaluation.open_domain (benchmarks/open_domain.py's Table 6): the candidate set and
the resumable streaming encoder."""

import json
import types

import numpy as np
import pytest

from conftest import data_file
from tt_zoo.evaluation import reqa as reqa_lib
from tt_zoo.evaluation.open_domain import encode_candidates_to_file, open_domain_reqa


@pytest.fixture(scope="module")
def squad_reqa():
    return reqa_lib.build_reqa(data_file("squad/dev-v1.1.json"))


def test_wikipedia_candidates_come_after_squad_ones(squad_reqa):
    reqa, added = open_domain_reqa(squad_reqa, data_file("wikispeedia"), limit_articles=3,
                                   progress=False)
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


def test_streaming_encoder_writes_every_row_and_resumes(tmp_path):
    candidates = [reqa_lib.Candidate(f"s{i}", "p" * i, i) for i in range(10)]
    reqa = reqa_lib.ReQA([], candidates, reqa_lib.ReQAReport())
    path = tmp_path / "emb.npy"
    model = CountingModel("m")
    full = encode_candidates_to_file(model, reqa, path, chunk=4, progress=False)
    np.testing.assert_array_equal(full[:, 0], np.arange(10))
    assert model.encoded == 10 and json.loads(path.with_suffix(".json").read_text())["done"] == 10

    state = {"shape": [10, 2], "model": "m", "done": 8}  # as if killed after two chunks
    path.with_suffix(".json").write_text(json.dumps(state))
    again = CountingModel("m")
    resumed = encode_candidates_to_file(again, reqa, path, chunk=4, progress=False)
    assert again.encoded == 2
    np.testing.assert_array_equal(np.asarray(resumed), np.asarray(full))

    other = CountingModel("another model")  # a different model starts over
    encode_candidates_to_file(other, reqa, path, chunk=4, progress=False)
    assert other.encoded == 10


def test_the_recorded_open_domain_report_re_renders_from_its_json():
    """results/open_domain.md is benchmarks/open_domain.py's report of its JSON."""
    from benchmarks.open_domain import format_report
    from conftest import REPO_ROOT

    results = REPO_ROOT / "results"
    recorded = json.loads((results / "open_domain.json").read_text(encoding="utf-8"))
    assert format_report(recorded) == (results / "open_domain.md").read_text(encoding="utf-8")
