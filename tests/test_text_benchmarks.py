"""tt_zoo.evaluation.text_benchmarks: the candidate lists of ReQA and ODQA, scoring any
text-query searcher (hand-worked R@k and MRR per question subset), reused searches charged
their first cost, and where embeddings are cached."""

import json
import types

import numpy as np
import pytest

from conftest import DATA_DIR, data_file
from helpers import hand_made_squad, write_squad
from tt_zoo.retrieval import bm25
from tt_zoo.evaluation import reqa as reqa_lib, text_benchmarks as tb
from tt_zoo.evaluation.document_embeddings import model_tag
from tt_zoo.retrieval.search import ExactSearcher, SearchResult


class Constant:
    """Ranks the candidates 0, 1, 2, ... for every query; each search takes `cost` seconds of
    the fake clock."""

    def __init__(self, n, clock=None, cost=0.0):
        self.ids, self.clock, self.cost, self.calls = [str(i) for i in range(n)], clock, cost, 0

    def __len__(self):
        return len(self.ids)

    def search(self, queries, k):
        self.calls += 1
        if self.clock is not None:
            self.clock.now += self.cost
        k = min(k, len(self.ids))
        rows = np.tile(np.arange(k), (len(queries), 1))
        return SearchResult.from_rows(rows, -rows.astype(float), self.ids)


@pytest.fixture
def clock(monkeypatch):
    fake = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(tb, "_now", lambda: fake.now)
    return fake


@pytest.fixture
def bench(tmp_path):
    return tb.reqa_benchmark(write_squad(tmp_path, hand_made_squad()), split_fraction=0.5)


def test_reqa_candidates_are_bm25s_texts_and_the_split_gives_subsets(bench):
    # hand_made_squad: 5 candidates; golds q_first 0, q_last 1, q_repeat 0, q_one 2,
    # q_dup_passage 1, q_other_passage 4. Half the 6 questions train (none held out: 10% of 3
    # rounds to 0), the other 3 are the test subset.
    assert bench.candidates.ids == ["0", "1", "2", "3", "4"]
    assert bench.candidates.bm25_texts == bm25.candidate_texts(bench.reqa)
    assert list(bench.subsets) == ["all", "50% test"]
    assert len(bench.subsets["all"]) == 6 and len(bench.subsets["50% test"]) == 3
    train = set(reqa_lib.make_splits(bench.reqa, 0.5).train)
    assert {q.text for q in bench.reqa.questions if q.id in train} == set(bench.validation.queries)
    assert bench.validation.metric_name == "MRR"
    assert bench.describe()["subsets"] == {"all": 6, "50% test": 3}


def test_reqa_settings_can_be_chosen_on_the_splits_held_out_validation_questions(tmp_path):
    # A model trained on the split's training questions chooses settings on the held-out part.
    # 12 questions (hand_made_squad's 6 and a renamed copy), 0.9: round(10.8) = 11 in the
    # training part, round(1.1) = 1 of them held out for validation, 1 test question.
    squad = hand_made_squad()
    copy = json.loads(json.dumps(squad["data"]))
    for article in copy:
        article["title"] += " copy"
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["id"] += "_copy"
    path = write_squad(tmp_path, {"version": "1.1", "data": squad["data"] + copy})
    bench = tb.reqa_benchmark(path, split_fraction=0.9, choose_on="validation")
    split = reqa_lib.make_splits(bench.reqa, 0.9)
    assert len(split.validation) == 1 and len(split.test) == 1
    held_out = bench.reqa.questions_for(split.validation)
    assert bench.validation.queries == (held_out[0].text,)
    assert bench.validation.name == "ReQA 90% split, validation questions"
    assert len(bench.subsets["90% test"]) == 1
    # ... and reported, so that models can be chosen between on them.
    assert list(bench.subsets) == ["all", "90% test", "90% validation"]
    assert [bench.questions[i].id for i in bench.subsets["90% validation"]] == split.validation
    assert (tb.split_label("90% validation"), tb.split_part("90% validation")) == ("90%",
                                                                                 "validation")
    assert tb.test_subset(bench.subsets) == "90% test"
    # hand_made_squad alone: 6 questions, round(5.4) = 5 train, round(0.5) = 0 held out.
    with pytest.raises(ValueError, match="no validation questions"):
        tb.reqa_benchmark(write_squad(tmp_path, squad, "small.json"), split_fraction=0.9,
                          choose_on="validation")
    with pytest.raises(ValueError, match="choose_on must be one of"):
        tb.reqa_benchmark(path, split_fraction=0.5, choose_on="test")


def test_score_hand_worked_per_subset_with_the_search_time(bench, clock):
    # The ranking 0, 1, 2, 3, 4 puts the gold at ranks 1, 2, 1, 3, 2, 5 (question order).
    # R@1 = 2/6, R@2 = 4/6, MRR = (1 + 1/2 + 1 + 1/3 + 1/2 + 1/5) / 6.
    searcher = Constant(5, clock, cost=2.0)
    out = bench.score(searcher, ks=(1, 2, 5))
    all_ = out["sets"]["all"]
    assert all_["num_questions"] == 6 and all_["R@1"] == pytest.approx(2 / 6)
    assert all_["R@2"] == pytest.approx(4 / 6) and all_["R@5"] == 1.0
    assert all_["MRR"] == pytest.approx((1 + 1 / 2 + 1 + 1 / 3 + 1 / 2 + 1 / 5) / 6)
    rank = dict(zip([q.id for q in bench.questions], [1, 2, 1, 3, 2, 5]))
    test_ranks = [rank[bench.questions[i].id] for i in bench.subsets["50% test"]]
    assert out["sets"]["50% test"]["MRR"] == pytest.approx(np.mean([1 / r for r in test_ranks]))
    assert (out["num_queries"], out["search_seconds"], out["queries_per_s"]) == (6, 2.0, 3.0)
    assert out["queries_without_results"] == 0 and searcher.calls == 1
    with pytest.raises(ValueError, match="holds 4 candidates, the benchmark 5"):
        bench.score(Constant(4))
    # The validation metric: MRR of the training (not test) questions' gold rows, on bare rows.
    rows = np.tile(np.arange(5), (len(bench.validation.queries), 1))
    train_ranks = [rank[q.id] for i, q in enumerate(bench.questions)
                   if i not in set(bench.subsets["50% test"])]
    assert bench.validation.metric(rows) == pytest.approx(np.mean([1 / r for r in train_ranks]))


def test_a_reused_search_is_charged_its_first_cost(clock):
    inner = Constant(4, clock, cost=2.0)
    reused = tb.ReusedSearcher(inner)
    first, seconds = tb.timed_search(reused, ["q1", "q2"], 3)
    assert seconds == 2.0 and (reused.searches, reused.reuses) == (1, 0)
    again, seconds = tb.timed_search(reused, ["q1", "q2"], 2)  # a smaller k: from memory
    assert seconds == 2.0 and inner.calls == 1 and reused.reuses == 1
    np.testing.assert_array_equal(again.rows, first.rows[:, :2])
    assert again.ids == (("0", "1"), ("0", "1"))

    class Both:  # a searcher over two searches (as fusion is)
        def __len__(self):
            return 4

        def search(self, queries, k):
            reused.search(queries, k)
            return reused.search(queries, k)

    _, seconds = tb.timed_search(Both(), ["q1", "q2"], 3)
    assert seconds == 4.0 and inner.calls == 1  # two reuses of a 2-second search
    _, seconds = tb.timed_search(reused, ["q3"], 3)  # other queries: a new search
    assert seconds == 2.0 and inner.calls == 2
    exact = tb.ReusedSearcher(ExactSearcher(np.eye(3, dtype="float32")))
    for _ in range(2):  # embeddings are not hashable: searched every time
        assert exact.search(np.eye(3, dtype="float32")[:1], 1).rows.tolist() == [[0]]
    assert (exact.searches, exact.reuses) == (2, 0)


def test_truncate_cuts_the_ids_of_padded_rows():
    result = SearchResult.from_rows([[2, -1, -1], [0, 1, 3]], [[1.0, 0, 0], [3.0, 2.0, 1.0]],
                                    list("abcd"))
    cut = tb.truncate(result, 2)
    assert cut.rows.tolist() == [[2, -1], [0, 1]] and cut.ids == (("c",), ("a", "b"))


def test_embedding_cache_path_prefers_a_complete_earlier_encoding(tmp_path, bench):
    model = types.SimpleNamespace(name="m", path=tmp_path / "m",
                                  metadata={"sha256": "0123456789abcdef0123"})
    fresh = tmp_path / "candidates-0123456789abcdef-5.npy"
    assert tb.embedding_cache_path(bench, model, tmp_path) == fresh
    earlier = tmp_path / "m.npy"
    earlier.write_bytes(b"")
    state = {"shape": [5, 8], "model": str(model.path), "done": 4}
    earlier.with_suffix(".json").write_text(json.dumps(state))
    assert tb.embedding_cache_path(bench, model, tmp_path) == fresh  # not complete
    earlier.with_suffix(".json").write_text(json.dumps({**state, "done": 5}))
    assert tb.embedding_cache_path(bench, model, tmp_path) == earlier
    assert model_tag(types.SimpleNamespace(name="tiny", metadata={})) == "tiny"


def test_odqa_benchmark_keeps_the_validation_set_apart(tmp_path):
    data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz")
    reported, held = tmp_path / "reported.jsonl", tmp_path / "held.jsonl"
    reported.write_text("\n".join(json.dumps(r) for r in [
        {"question": "Who founded the Persian Empire?", "answers": ["Cyrus"]},
        {"question": "Who is nobody?", "answers": ["Zzyzx Qwertyuiop"]}]) + "\n")
    held.write_text(json.dumps({"question": "Which country borders Ethiopia to the west?",
                                "answers": ["Sudan"]}) + "\n")
    out = tb.odqa_benchmark(DATA_DIR, question_sets=[str(reported)],
                            validation_set=str(held), limit_articles=3,
                            cache_dir=tmp_path / "cache")
    assert [s.name for s in out.benchmark.sets] == ["reported"]
    assert out.validation.queries == ("Which country borders Ethiopia to the west?",)
    assert out.describe()["sets"]["reported"] == {"num_questions": 2, "answerable": 1,
                                                  "skipped": []}
    scored = out.score(tb.bm25_searcher(out), ks=(1, 100))
    assert scored["sets"]["reported"]["R@100"] == 1.0 and scored["num_queries"] == 1
    # The validation metric pads a result narrower than its k (R@20 of 3 rows).
    assert out.validation.metric(np.array([[-1, -1, -1]])) == 0.0
