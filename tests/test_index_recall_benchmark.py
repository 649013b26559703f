"""benchmarks/index_recall.py: ScaNN against exact search (`against_exact`, open_domain's table;
what benchmarks/scann_vs_brute_force.py measured), the one-at-a-time column of
--single-queries, and its reports re-rendered from their JSON."""

import json

import numpy as np
import pytest

from conftest import REPO_ROOT
from helpers import gaussian_mixture


def test_against_exact_times_both_backends_and_scores_scann():
    from benchmarks.index_recall import against_exact

    candidates, queries = gaussian_mixture(2000, 30, 16, seed=0)
    out = against_exact(candidates, queries, k=10, runs=1, single_queries=5)
    assert (out["num_candidates"], out["dim"], out["num_queries"]) == (2000, 16, 30)
    assert out["single_queries_timed"] == 5 and 0 <= out["scann_recall_at_10"] <= 1
    for backend in ("brute_force", "scann"):  # what open_domain's report reads
        assert out[f"{backend}_build_s"] >= 0
        assert out[f"{backend}_batch_qps"] > 0 and out[f"{backend}_single_qps"] > 0


def test_single_queries_add_a_column_and_measure_once_per_setting():
    from benchmarks.index_recall import markdown, measure

    candidates, queries = gaussian_mixture(1200, 12, 8, seed=1)
    gold = [0] * len(queries)
    row = measure("m", "synthetic", candidates, queries, np.array(gold),
                  ["default", "tree"], single_queries=4)
    assert row["single_queries"] == 4 and row["exact"]["single_queries_per_s"] > 0
    assert all(s["single_queries_per_s"] > 0 for s in row["settings"])
    table = [line for line in markdown([row]).splitlines() if line.startswith("|")]
    assert table[0].endswith("| queries/s one at a time (4) |")
    assert len({line.count("|") for line in table}) == 1  # every row has the extra cell
    without = measure("m", "synthetic", candidates, queries, np.array(gold),
                      ["default"])
    assert "one at a time" not in markdown([without])


@pytest.mark.parametrize("name", ["index_recall", "index_recall_open_domain"])
def test_the_recorded_reports_re_render_from_their_json(name):
    from benchmarks.index_recall import markdown

    results = REPO_ROOT / "results"
    rows = json.loads((results / f"{name}.json").read_text(encoding="utf-8"))
    assert markdown(rows) == (results / f"{name}.md").read_text(encoding="utf-8")
