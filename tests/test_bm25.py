"""The BM25 baseline: a tiny corpus with an obvious answer, stemming and stop words, ReQA."""

import numpy as np
import pytest

from helpers import hand_made_squad
from tt_zoo.evaluation.metrics import evaluate_bm25
from tt_zoo.retrieval import bm25
from tt_zoo.evaluation import reqa as reqa_lib

DOCS = ["The cat sat on the mat.",
        "A dog barks at the postman every morning.",
        "Paris is the capital and largest city of France."]


def test_obvious_document_ranks_first():
    retriever = bm25.BM25Retriever(DOCS)
    result = retriever.search(["What is the capital of France?", "which animal sat on a mat"],
                              k=3)
    assert result.rows[:, 0].tolist() == [2, 0]
    assert result.ids[0][0] == "2"  # the default ids are the documents' positions
    assert not result.empty.any()
    # Only documents sharing a term are returned: "capital" and "France" are in document 2 only
    # ("is", "the", "of" are stop words), so the first query gets one result, not three.
    assert result.rows[0].tolist() == [2, -1, -1] and result.ids[0] == ("2",)
    assert result.scores[0, 0] > 0 and np.isnan(result.scores[0, 1:]).all()


def test_only_matching_documents_ranked_equal_scores_by_row():
    docs = ["red apple", "green apple", "red red apple pie", "blue sky", "green apple"]
    rows, scores = bm25.BM25Retriever(docs).top_rows(["apple", "sky"], 5)
    assert rows[1].tolist() == [3, -1, -1, -1, -1]
    # "apple" is in documents 0, 1, 2, 4; 0, 1 and 4 tie (two words each) and come by row.
    assert set(rows[0, :4]) == {0, 1, 2, 4} and rows[0, 4] == -1
    tied = [r for r in rows[0] if r in (0, 1, 4)]
    assert tied == [0, 1, 4]
    assert scores[0, 0] >= scores[0, 1] >= scores[0, 2] >= scores[0, 3] > 0 == scores[0, 4]


def test_stemming_matches_inflections_and_can_be_turned_off():
    # "barking" and "barks" share the stem "bark" only with a stemmer.
    result = bm25.BM25Retriever(DOCS).search(["barking"], k=3)
    assert result.rows[0, 0] == 1 and not result.empty[0]
    result = bm25.BM25Retriever(DOCS, stemmer=None).search(["barking"], k=3)
    assert result.empty[0] and result.rows[0].tolist() == [-1, -1, -1]  # no indexed term:
    assert result.ids == ((),) and np.isnan(result.scores).all()        # no results


def test_stop_words_setting():
    assert bm25.BM25Retriever(DOCS).search(["the"], k=2).empty[0]
    result = bm25.BM25Retriever(DOCS, stopwords=None).search(["the"], k=2)
    assert not result.empty[0] and set(result.rows[0]) <= {0, 1, 2}


def test_k_is_capped_and_bad_settings_are_named():
    assert bm25.BM25Retriever(DOCS).search(["cat"], k=50).rows.shape == (1, 3)
    with pytest.raises(ValueError, match="PyStemmer language 'klingon'"):
        bm25.BM25Retriever(DOCS, stemmer="klingon")
    with pytest.raises(ValueError, match="no texts"):
        bm25.BM25Retriever([])


def test_candidate_text_fields():
    reqa = reqa_lib.build_reqa_from_squad(hand_made_squad())
    c = reqa.candidates[1]
    assert bm25.candidate_texts(reqa)[1] == c.sentence + " " + c.passage
    assert bm25.candidate_texts(reqa, "sentence")[1] == c.sentence
    assert bm25.candidate_texts(reqa, "passage")[1] == c.passage
    with pytest.raises(ValueError, match="field must be one of"):
        bm25.candidate_texts(reqa, "title")


def test_bm25_on_hand_made_reqa():
    reqa = reqa_lib.build_reqa_from_squad(hand_made_squad())
    ids = bm25.bm25_rankings(reqa, ["q_one", "q_other_passage"], k=5)
    assert ids.shape == (2, 5)
    # "What is the capital of France?" -> the Paris sentence; "Was the dog happy?" -> a
    # sentence of the dog passage (3 or 4: both hold "dog" through the passage text).
    assert ids[0, 0] == 2 and ids[1, 0] in (3, 4)
    result = evaluate_bm25(reqa, ks=(1, 5))
    assert result["num_queries"] == 6 and result["num_candidates"] == 5
    # "How did it end?" has no indexed term ("end" is in no candidate): no results, a miss.
    assert result["queries_without_results"] == 1
    assert 0.0 <= result["exact"]["R@1"] <= result["exact"]["R@5"] == pytest.approx(5 / 6)
    assert result["index"] is None and set(result["seconds"]) == {"build", "exact_search"}
    assert result["settings"] == {"field": "sentence+passage", "stemmer": "english",
                                  "stopwords": "en"}


@pytest.mark.slow
def test_bm25_full_squad_dev():
    from conftest import data_file

    reqa = reqa_lib.build_reqa(data_file("squad/dev-v1.1.json"))
    result = evaluate_bm25(reqa)
    print(result)
    # Measured: R@1 67.4, R@100 97.6 (benchmarks/bm25_reqa.py).
    assert 0.65 < result["exact"]["R@1"] < 0.70
    assert 0.97 < result["exact"]["R@100"] < 0.985
    assert result["queries_without_results"] == 0
    assert np.isclose(result["num_queries"], 10570)
