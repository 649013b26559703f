"""q(d): a document's sampling probability, for the logQ correction of the sampled softmax.

Chang et al. 2020, Sec. 2 train the two towers with a sampled softmax over the batch's
documents. A document that is the positive of many pairs is also drawn often as an in-batch
negative; the correction of Yi et al. 2019 (RecSys, "Sampling-bias-corrected neural modeling")
subtracts log q(d) from each candidate's logit (`tt_zoo.modeling.losses`). With batches drawn uniformly
over a pair set, q(d) is the fraction of the pairs whose document is d::

    q(d) = count(d) / total

This module is the one place that formula lives. Its callers: `tt_zoo.data.pairs_io` (pair shards,
counted in a first pass), `tt_zoo.data.beam_pairs` (per-doc counts combined in parallel, the total
as a side input) and `tt_zoo.training.finetuning` (ReQA pairs: d is a question's gold candidate).
"""

from __future__ import annotations

import collections
from typing import Dict, Iterable, Mapping, Union


def sampling_probability(count: int, total: int) -> float:
    """q(d) = count / total: ``count`` of the ``total`` pairs have document d.

    Raises ``ValueError`` unless ``0 < count <= total`` (a document in the set occurs at least
    once; log q(d) must be finite).

    Example:
      >>> sampling_probability(1, 4)
      0.25
    """
    if not 0 < count <= total:
        raise ValueError(f"q(d) needs 0 < count <= total (got count {count}, total {total}).")
    return count / total


def sampling_probabilities(doc_ids: Union[Iterable[str], Mapping[str, int]]) -> Dict[str, float]:
    """q(d) for every document of a pair set.

    Args:
      doc_ids: the doc id of each pair (one entry per pair, repeats counted), or a mapping
        doc id -> number of pairs (e.g. a ``collections.Counter`` filled while streaming).

    Returns:
      doc id -> :func:`sampling_probability` (count, number of pairs); ``{}`` for no pairs.

    Example:
      >>> sampling_probabilities(["a#0", "b#1", "a#0", "c#2"])
      {'a#0': 0.5, 'b#1': 0.25, 'c#2': 0.25}
    """
    counts = doc_ids if isinstance(doc_ids, Mapping) else collections.Counter(doc_ids)
    total = sum(counts.values())
    return {doc_id: sampling_probability(count, total) for doc_id, count in counts.items()}
