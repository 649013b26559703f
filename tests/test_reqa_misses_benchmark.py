"""benchmarks/reqa_misses.py: R@1 misses split into sibling sentences and other paragraphs,
hand-worked."""

import pytest

from benchmarks import reqa_misses

# candidates 0-2 are paragraph 0's sentences, 3-4 paragraph 1's, 5 paragraph 2's
PARAGRAPH_OF = [0, 0, 0, 1, 1, 2]


def test_misses_are_split_by_the_first_candidates_paragraph():
    # q0 hit; q1 misses to a sibling (1 for 0); q2 to another paragraph (5 for 3); q3 to a
    # sibling (4 for 3); q4 gets no candidate at all (-1): a miss, not a sibling
    counts = reqa_misses.miss_counts([0, 1, 5, 4, -1], [0, 0, 3, 3, 5], PARAGRAPH_OF)
    assert counts == {"questions": 5, "R@1": pytest.approx(0.2), "misses": 4,
                      "to_sibling": 2, "to_other_paragraph": 2}


def test_sibling_share_of_negatives():
    # negatives 2 (gold 0: sibling), 3 (gold 4: sibling), 0 (gold 5: other), 5 (gold 3: other)
    assert reqa_misses.sibling_share([2, 3, 0, 5], [0, 4, 5, 3], PARAGRAPH_OF) == 0.5


def test_the_report_shows_each_row_and_the_negatives_share():
    out = {"test_questions": 5, "split_fraction": 0.8, "seed": 0, "candidates": 6,
           "paragraphs": 3, "wall_s": 60.0, "train_questions": 4,
           "bm25_negative_sibling_share": 0.5,
           "rows": {"BM25": reqa_misses.miss_counts([0, 1, 5, 4, -1], [0, 0, 3, 3, 5],
                                                    PARAGRAPH_OF)}}
    text = reqa_misses.markdown(out)
    assert "| BM25 | 20.0 | 4 | 2 (50%) | 2 (50%) |" in text
    assert "50.0% are a sibling sentence" in text
