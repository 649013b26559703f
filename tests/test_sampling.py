"""q(d) = count(d) / total, worked out by hand (tt_zoo.data.sampling), and its callers agree."""

import collections

import pytest

from tt_zoo.data import sampling


def test_sampling_probabilities_hand_worked():
    q = sampling.sampling_probabilities(["a#0", "b#1", "a#0", "c#2"])
    assert q == {"a#0": 0.5, "b#1": 0.25, "c#2": 0.25}
    assert sampling.sampling_probabilities([]) == {}


def test_counts_give_the_same_probabilities():
    # 8 pairs: d1 five times, d2 twice, d3 once -> 5/8, 2/8, 1/8.
    ids = ["d1"] * 5 + ["d2"] * 2 + ["d3"]
    expected = {"d1": 0.625, "d2": 0.25, "d3": 0.125}
    assert sampling.sampling_probabilities(ids) == expected
    assert sampling.sampling_probabilities(collections.Counter(ids)) == expected
    assert sampling.sampling_probabilities({"d1": 5, "d2": 2, "d3": 1}) == expected
    assert sum(expected.values()) == 1.0


def test_sampling_probability_hand_worked_and_checked():
    assert sampling.sampling_probability(1, 4) == 0.25
    assert sampling.sampling_probability(3, 3) == 1.0
    for count, total in ((0, 4), (5, 4), (1, 0), (-1, 4)):
        with pytest.raises(ValueError, match="0 < count <= total"):
            sampling.sampling_probability(count, total)
