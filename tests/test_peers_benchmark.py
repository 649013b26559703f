"""benchmarks/peers.py: the rules that choose its numbers (hand-worked), and its --quick path,
which must work with or without the benchmark-only peers (`pip install -e .[bench]`)."""

import json
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))  # the peers_* modules import one another by name

import peers_measure as m  # noqa: E402


def test_recall_at_k_hand_worked():
    found = [[1, 2, 3], [4, 5, 6]]
    exact = [[1, 2, 9], [7, 8, 9]]
    assert m.recall_at_k(found, exact, 3) == pytest.approx((2 / 3 + 0) / 2)
    assert m.recall_at_k([[-1, -1, 1]], [[1, 2, 3]], 3) == pytest.approx(1 / 3)  # FAISS's -1
    assert m.recall_at_k([[3, 2, 1, 7]], [[1, 2, 3, 4]], 3) == 1.0  # order within top-k free
    with pytest.raises(ValueError, match="num_queries"):
        m.recall_at_k([[1, 2]], [[1, 2, 3]], 3)


def test_walk_knob_stops_at_the_first_value_reaching_the_target():
    recalls = {8: 0.80, 16: 0.93, 32: 0.96, 64: 0.99}
    asked = []

    def recall_of(value):
        asked.append(value)
        return recalls[value]

    assert m.walk_knob([32, 8, 64, 16], recall_of, 0.95) == [(8, 0.80), (16, 0.93), (32, 0.96)]
    assert asked == [8, 16, 32]  # ascending; 64 costs more and is never searched
    assert [v for v, _ in m.walk_knob(recalls, recalls.get, 0.999)] == [8, 16, 32, 64]


def test_fastest_reaching_picks_the_fastest_setting_at_the_target():
    rows = [{"recall_at_10": 0.97, "median_qps": 100},
            {"recall_at_10": 0.95, "median_qps": 300},
            {"recall_at_10": 0.94, "median_qps": 900}]
    assert m.fastest_reaching(rows, 0.95) is rows[1]
    assert m.fastest_reaching(rows, 0.96) is rows[0]
    assert m.fastest_reaching(rows, 0.99) is None


def test_rates_and_interleaved_rounds_hand_worked():
    r = m.rates([2.0, 1.0, 4.0], units=8)  # 4, 8 and 2 units/s
    assert (r["median_per_s"], r["min_per_s"], r["max_per_s"], r["rounds"]) == (4, 2, 8, 3)
    with pytest.raises(ValueError, match="positive"):
        m.rates([1.0, 0.0], units=8)
    calls = []
    seconds = m.interleaved_rounds({"a": lambda: calls.append("a") or 1.0,
                                    "b": lambda: calls.append("b") or 2.0}, rounds=2)
    assert calls == ["a", "b", "a", "b"]
    assert seconds == {"a": [1.0, 1.0], "b": [2.0, 2.0]}


def test_merge_section_keeps_other_sections_and_refuses_foreign_files():
    first = m.merge_section(None, "train", {"rows": [1]})
    both = m.merge_section(first, "search", {"rows": [2]})
    assert both["sections"] == {"train": {"rows": [1]}, "search": {"rows": [2]}}
    again = m.merge_section(both, "train", {"rows": [3]})
    assert again["sections"]["train"] == {"rows": [3]} and first["sections"] == {
        "train": {"rows": [1]}}
    with pytest.raises(ValueError, match="refusing"):
        m.merge_section({"results": []}, "train", {})


def test_a_missing_peer_is_named_with_its_install_command():
    assert m.unavailable_reason(["json"]) is None
    reason = m.unavailable_reason(["json", "no_such_module_for_peers_test"])
    assert "no_such_module_for_peers_test" in reason and "json" not in reason
    assert "pip install -e .[bench]" in reason


def test_skipped_peers_render_with_their_reason():
    import peers_encode
    import peers_train

    reason = m.unavailable_reason(["no_such_module_for_peers_test"])
    train = {"settings": {"batch": 128, "query_length": 64, "document_length": 128,
                          "rounds": 5, "steps": 5, "warmup": 2},
             "rows": [{"size": "tiny", "framework": "tt_zoo", "what": "fit",
                       "parameters": 1500000, "median_pairs_per_s": 128.0,
                       "min_pairs_per_s": 120.0, "max_pairs_per_s": 130.0, "vs_tt_zoo": 1.0},
                      {"size": "tiny", "framework": "pytorch", "skipped": reason}]}
    text = "\n".join(peers_train.render(train))
    assert "| tiny | tt_zoo | fit | 1,500,000 | 128.0 | 120.0–130.0 |  | x1.00 |  |" in text
    assert f"| tiny | pytorch | {reason} |" in text
    train["rows"][0].update(vs_pytorch=1.6, model_gflops=66.0, fraction_of_matmul=0.5)
    train["matmul_gflops"] = {"float32": 132.0, "bfloat16": 264.0}
    text = "\n".join(peers_train.render(train))
    assert "| 120.0–130.0 | 66 (50%) | x1.00 | x1.60 |" in text
    assert "132 GFLOP/s in float32, 264 in bfloat16" in text
    encode = {"settings": {"num_documents": 2000, "document_length": 128, "batch": 256,
                           "rounds": 5},
              "rows": [{"encoder": "BERT tiny", "implementation": "sentence-transformers",
                        "skipped": reason}]}
    assert reason in "\n".join(peers_encode.render(encode))


def test_quick_search_runs_with_or_without_faiss(tmp_path, monkeypatch):
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM"):
        monkeypatch.setenv(name, "1" if name != "TOKENIZERS_PARALLELISM" else "false")
    import peers

    for module in (m, peers):  # no 1-second samples of /proc/stat in a unit test
        monkeypatch.setattr(module, "busy_cores", lambda seconds=1.0: 0.0)
    assert peers.parse_args(["--quick"]).output == peers.REPO / "runs" / "peers_quick" / \
        "performance"  # a smoke run never replaces results/performance.*
    out = tmp_path / "perf"
    peers.main(["--quick", "--sections", "search", "--synthetic", "--num-queries", "20",
                "--max-candidates", "2000", "--rounds", "1", "--output", str(out)])
    results = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    part = results["sections"]["search"]
    assert part["quick"] and set(results["sections"]) == {"search"}
    synthetic = part["embeddings"]["synthetic"]
    assert (synthetic["num_candidates"], synthetic["num_queries"]) == (2000, 20)
    rows = {r["method"]: r for r in synthetic["rows"]}
    assert rows["tt_zoo brute force"]["recall_at_10"] == 1.0  # the reference itself
    assert rows["tt_zoo brute force"]["median_qps"] > 0
    scann = [r for r in synthetic["rows"] if r["method"] == "ScaNN (tt_zoo)"]
    assert any(r["settings"].get("default") for r in scann)
    assert all(0 <= r["recall_at_10"] <= 1 for r in synthetic["rows"])
    report = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "smoke run" in report and "| tt_zoo brute force |" in report
    if m.missing_modules(["faiss"]):
        assert "pip install -e .[bench]" in synthetic["skipped"]["FAISS Flat, IVF-PQ, HNSW"]
        assert "faiss not installed" in report
    else:
        assert {"FAISS Flat", "FAISS IVF-PQ", "FAISS HNSW"} <= set(rows)
        assert rows["FAISS Flat"]["recall_at_10"] > 0.99  # exact too (ties aside)
