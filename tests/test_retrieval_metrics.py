"""Recall@k, MRR and the evaluation of searchers and encoders, on hand-worked numbers."""

import numpy as np
import pytest

from helpers import LookupEncoder, hand_made_squad
from tt_zoo.evaluation import metrics as rm
from tt_zoo.evaluation import reqa as reqa_lib
from tt_zoo.retrieval.search import ExactSearcher, SearchResult


# Rankings (best first) and gold ids:
#   q0: [3, 1, 2]  gold 1 -> rank 2
#   q1: [0, 2, 1]  gold 0 -> rank 1
#   q2: [2, 0, 1]  gold 1 -> rank 3
#   q3: [5, 4, -1] gold 9 -> absent
# R@1 = 1/4, R@2 = 2/4, R@3 = 3/4, R@100 = 3/4; MRR = (1/2 + 1 + 1/3 + 0) / 4 = 11/24.
RANKED = [[3, 1, 2], [0, 2, 1], [2, 0, 1], [5, 4, -1]]
GOLD = [1, 0, 1, 9]


def test_recall_at_k_hand_worked():
    assert rm.recall_at_k(RANKED, GOLD, ks=(1, 2, 3, 100)) == {1: 0.25, 2: 0.5, 3: 0.75,
                                                               100: 0.75}
    assert rm.recall_at_k(np.array(RANKED), np.array(GOLD), ks=(2,)) == {2: 0.5}


def test_mrr_hand_worked():
    assert rm.mrr(RANKED, GOLD) == pytest.approx(11 / 24)
    metrics = rm.ranking_metrics(RANKED, GOLD, ks=(1, 3))
    assert metrics == pytest.approx({"R@1": 0.25, "R@3": 0.75, "MRR": 11 / 24})


def test_metric_input_errors():
    with pytest.raises(ValueError, match="4 rows but gold_ids has 3"):
        rm.recall_at_k(RANKED, GOLD[:3])
    with pytest.raises(ValueError, match="positive"):
        rm.recall_at_k(RANKED, GOLD, ks=(0,))
    with pytest.raises(ValueError, match="at least one query"):
        rm.mrr([], [])


@pytest.fixture
def hand_made():
    return reqa_lib.build_reqa_from_squad(hand_made_squad())


def test_evaluate_encoder_perfect(hand_made, capsys):
    targets = {q.text: q.gold_index for q in hand_made.questions}
    result = rm.evaluate_encoder(LookupEncoder(hand_made, targets), hand_made, ks=(1, 2),
                                 batch_size=2)
    assert result["exact"] == {"R@1": 1.0, "R@2": 1.0, "MRR": 1.0}
    assert "%|" not in capsys.readouterr().err  # stderr is no terminal here: no bar in a log
    assert result["index"] is None
    assert (result["num_queries"], result["num_candidates"]) == (6, 5)


def test_evaluate_encoder_hit_is_the_gold_sentence_only(hand_made):
    # Queries point at their gold passage; documents only see the passage, so every sentence of
    # a passage scores the same and the first one (lowest id) ranks first:
    #   gold 0 (q_first, q_repeat) -> rank 1; gold 1 (q_last, q_dup_passage) -> rank 2;
    #   gold 2 (q_one) -> rank 1; gold 4 (q_other_passage) -> rank 2.
    # R@1 = 3/6, R@2 = 6/6, MRR = (3 * 1 + 3 * 1/2) / 6 = 0.75.
    enc = LookupEncoder(hand_made, {}, passage_only=True)
    enc.targets = {q.text: enc.first_of_passage[hand_made.candidates[q.gold_index].passage]
                   for q in hand_made.questions}
    result = rm.evaluate_encoder(enc, hand_made, ks=(1, 2))
    assert result["exact"] == pytest.approx({"R@1": 0.5, "R@2": 1.0, "MRR": 0.75})


class RolledBruteForce:
    """A searcher that returns a wrong first result for every query."""

    def __init__(self, embeddings):
        self.exact = ExactSearcher(embeddings)

    def __len__(self):
        return len(self.exact)

    def search(self, query_embeddings, k):
        result = self.exact.search(query_embeddings, k)
        # The worst of the top k moves to the front.
        return SearchResult.from_rows(np.roll(result.rows, 1, axis=1),
                                      np.roll(result.scores, 1, axis=1), self.exact.ids)


def test_evaluate_encoder_with_index_reports_both(hand_made):
    targets = {q.text: q.gold_index for q in hand_made.questions}
    enc = LookupEncoder(hand_made, targets)
    # Question subset, and the index given as a builder called on the candidate embeddings.
    result = rm.evaluate_encoder(enc, hand_made, ["q_one", "q_last"], ks=(1, 2),
                                 build_index=RolledBruteForce)
    assert result["num_queries"] == 2
    assert result["exact"]["R@1"] == 1.0
    assert result["index"] == pytest.approx({"R@1": 0.0, "R@2": 1.0, "MRR": 0.5})
    assert "index_build" in result["seconds"]


def test_evaluate_encoder_with_embedding_index(hand_made):
    index_lib = pytest.importorskip("tt_zoo.retrieval.index")
    targets = {q.text: q.gold_index for q in hand_made.questions}
    enc = LookupEncoder(hand_made, targets)
    cand = enc.encode_documents([c.passage for c in hand_made.candidates],
                                [c.sentence for c in hand_made.candidates])
    index = index_lib.EmbeddingIndex(cand, [str(i) for i in range(len(cand))],
                                     backend="brute_force")
    result = rm.evaluate_encoder(enc, hand_made, ks=(1,), index=index)
    assert result["index"] == result["exact"] == {"R@1": 1.0, "MRR": 1.0}


def test_evaluate_encoder_bad_encoder_output(hand_made):
    class Broken(LookupEncoder):
        def encode_queries(self, texts):
            return np.zeros((len(texts) + 1, self.dim))

    enc = Broken(hand_made, {})
    with pytest.raises(ValueError, match=r"encode queries: the encoder returned shape \(7, 5\)"):
        rm.evaluate_encoder(enc, hand_made)


def test_encoder_and_bm25_evaluations_share_one_shape(hand_made):

    targets = {q.text: q.gold_index for q in hand_made.questions}
    encoder = rm.evaluate_encoder(LookupEncoder(hand_made, targets), hand_made, ks=(1, 2))
    lexical = rm.evaluate_bm25(hand_made, ks=(1, 2))
    assert set(lexical) - {"settings"} == set(encoder) == {
        "num_queries", "num_candidates", "exact", "index", "queries_without_results", "seconds"}
    assert set(lexical["exact"]) == set(encoder["exact"]) == {"R@1", "R@2", "MRR"}
    assert encoder["queries_without_results"] == 0
