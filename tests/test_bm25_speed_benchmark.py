"""benchmarks/bm25_speed.py on a toy corpus: both sides timed, the same scores, the report."""

from test_fusion_benchmark import BENCHMARKS

TEXTS = ["red apple pie", "green apple", "blue sky over the sea", "red sky at night",
         "apple trees in spring", "the sea is blue"]


def test_measure_times_both_sides_and_checks_their_scores():
    from benchmarks import bm25_speed

    assert bm25_speed.__file__.startswith(str(BENCHMARKS))  # the script, not a namesake
    # "the" alone has no indexed term (a stop word): dropped from both sides.
    out = bm25_speed.measure(TEXTS, None, ["red apple", "blue sea", "the", "spring sky"], 2)
    assert out["documents"] == 6 and out["asked"] == 4 and out["queries"] == 3
    assert out["k"] == 6 and out["short_results"] == 3  # no query matches all six documents
    assert out["same_scores"] == 1.0
    assert all(len(s) == 2 for s in out["seconds"].values())
    rates = out["queries_per_s"]
    assert abs(out["ratio"] - rates["top_rows"] / rates["bm25s_retrieve"]) < 0.1
    report = bm25_speed.report({"repeats": 2, "wall_s": 1.0, "corpora": {"toy": out},
                                "machine": {"cpu": "cpu", "cores": 2, "versions": {},
                                            "python": "3.11", "date": "today"}})
    assert "| toy | 6 | 3 |" in report and "100.0%" in report
