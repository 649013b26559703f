"""benchmarks.peers: the rules that choose its numbers (benchmarks.measure, hand-worked), and its
--quick path, which must work with or without the benchmark-only peers (`pip install -e .[bench]`)."""

import json
import sys

import pytest

from benchmarks import measure as m


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
    from benchmarks.peers.report import merge_section

    first = merge_section(None, "train", {"rows": [1]})
    both = merge_section(first, "search", {"rows": [2]})
    assert both["sections"] == {"train": {"rows": [1]}, "search": {"rows": [2]}}
    again = merge_section(both, "train", {"rows": [3]})
    assert again["sections"]["train"] == {"rows": [3]} and first["sections"] == {
        "train": {"rows": [1]}}
    with pytest.raises(ValueError, match="refusing"):
        merge_section({"results": []}, "train", {})


def test_a_missing_peer_is_named_with_its_install_command():
    assert m.unavailable_reason(["json"]) is None
    reason = m.unavailable_reason(["json", "no_such_module_for_peers_test"])
    assert "no_such_module_for_peers_test" in reason and "json" not in reason
    assert "pip install -e .[bench]" in reason


def test_skipped_peers_render_with_their_reason():
    from benchmarks.peers import encode as peers_encode
    from benchmarks.peers import train as peers_train

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
    from benchmarks.peers import __main__ as peers

    # no 1-second samples of /proc/stat in a unit test
    monkeypatch.setattr(m, "busy_cores", lambda seconds=1.0: 0.0)
    assert peers.parse_args(["--quick"]).output == peers.REPO / "runs" / "peers_quick" / \
        "performance"  # a smoke run never replaces results/performance.*
    out = tmp_path / "perf"
    peers.main(["--quick", "--sections", "search", "--synthetic", "--num-queries", "20",
                "--max-candidates", "2000", "--rounds", "1", "--output", str(out),
                "--scann-variants", "sqrt/avq=0.2/soar=1.5"])  # built with ScaNN's builder
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
    soar = [r for r in synthetic["rows"] if r["method"] == "ScaNN sqrt/avq=0.2/soar=1.5"]
    assert soar and "SOAR lambda 1.5" in soar[0]["description"]
    assert soar[0]["num_leaves"] == 45  # round(sqrt(2,000))
    assert all(0 < r["scanned_fraction"] <= 1 for r in soar)
    assert part["settings"]["scann_variants"] == ["sqrt/avq=0.2/soar=1.5"]
    report = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "smoke run" in report and "| tt_zoo brute force |" in report
    if m.missing_modules(["faiss"]):
        assert "pip install -e .[bench]" in synthetic["skipped"]["FAISS Flat, IVF-PQ, HNSW"]
        assert "faiss not installed" in report
    else:
        assert {"FAISS Flat", "FAISS IVF-PQ", "FAISS HNSW"} <= set(rows)
        assert rows["FAISS Flat"]["recall_at_10"] > 0.99  # exact too (ties aside)
        if "scann_against_faiss" in synthetic:  # both reached the target
            assert "FAISS IVF-PQ's queries/s" in report


# -- the search section's sweep, ScaNN variants and embeddings files ------------------------------

def test_knob_ladder_steps_by_at_most_one_and_a_half():
    from benchmarks.peers import indexes as s

    assert s.knob_ladder(100) == [8, 12, 16, 24, 32, 48, 64, 96, 100]
    # sqrt(578,086) = 760 leaves: 512 then every leaf
    assert s.knob_ladder(760)[-4:] == [256, 384, 512, 760]
    assert s.knob_ladder(8) == [8] and s.knob_ladder(5) == [5]
    with pytest.raises(ValueError, match="largest"):
        s.knob_ladder(0)


def test_scann_variants_parse_with_clear_errors():
    from benchmarks.peers import indexes as s

    v = s.ScannVariant.parse("2sqrt/avq=0.2/soar=1.5")
    assert (v.leaves, v.avq, v.soar, v.overretrieve, v.dims_per_block) == ("2sqrt", 0.2, 1.5,
                                                                          None, 2)
    # round(2 * sqrt(578,086)) = round(1520.64); round(sqrt(578,086)) = round(760.32)
    assert v.num_leaves(578_086) == 1521 and s.ScannVariant.parse("sqrt").num_leaves(578_086) == 760
    assert s.ScannVariant.parse("300").num_leaves(100) == 100  # never more leaves than points
    assert v.name == "2sqrt/avq=0.2/soar=1.5"
    assert s.ScannVariant.parse("4sqrt/dims=4/soar=1/over=2").name == "4sqrt/soar=1/over=2/dims=4"
    assert s.ScannVariant.parse("4sqrt/sample=300000").training_sample_size == 300_000
    for bad in ("bogus", "0sqrt", "0", "sqrt/avq=x", "sqrt/avq=0.2/avq=0.3", "sqrt/tavq=1",
                "sqrt/over=2", "sqrt/dims=0", "sqrt/avq", "sqrt/sample=1.5"):
        with pytest.raises(ValueError, match="expected LEAVES"):
            s.ScannVariant.parse(bad)
    assert [x.name for x in s.parse_scann_variants(s.DEFAULT_SCANN_VARIANTS)] == [
        "sqrt/avq=0.2", "2sqrt/avq=0.2", "4sqrt/avq=0.2", "sqrt/avq=0.2/soar=1.5",
        "2sqrt/avq=0.2/soar=1.5"]
    assert s.parse_scann_variants("none") == [] and s.parse_scann_variants("") == []
    with pytest.raises(ValueError, match="twice"):
        s.parse_scann_variants("2sqrt,2sqrt/dims=2")


def test_search_arguments(capsys):
    from benchmarks.peers import __main__ as peers

    args = peers.parse_args(["--sections", "search", "--synthetic"])
    assert [v.name for v in args.scann_variants][:2] == ["sqrt/avq=0.2", "2sqrt/avq=0.2"]
    assert len(peers.parse_args(["--quick", "--sections", "search",
                                 "--synthetic"]).scann_variants) == 2
    assert peers.parse_args(["--sections", "search", "--synthetic", "--scann-variants",
                             "none"]).scann_variants == []
    for argv, message in (
            (["--scann-variants", "2sqrt/avq=big"], "--scann-variants: ScaNN variant"),
            (["--search-embeddings-file", "x.npy", "--synthetic"], "one source"),
            (["--search-model", "bow_mlp_ict_bfs_wlp_512", "--synthetic"],
             "--search-embeddings-file"),
            (["--encode-inputs", "passages,tweets"], "--encode-inputs: unknown ['tweets']"),
            (["--passages", "0"], "--passages must be at least 1")):
        with pytest.raises(SystemExit):
            peers.parse_args(["--sections", "search,encode"] + argv)
        assert message in capsys.readouterr().err
    args = peers.parse_args(["--sections", "encode", "--encode-inputs", "passages"])
    assert args.encode_inputs == ["passages"] and args.wikispeedia.name == "wikispeedia"


def test_an_embeddings_file_must_be_finished_and_name_its_model(tmp_path):
    import numpy as np
    from benchmarks.peers import embeddings as s

    path = tmp_path / "emb.npy"
    np.save(path, np.zeros((4, 3), np.float32))
    meta = path.with_suffix(".json")
    meta.write_text(json.dumps({"shape": [4, 3], "model": "/x/saved_models/m512", "done": 2}))
    with pytest.raises(SystemExit, match="not finished: .*2 of \\[4, 3\\]"):
        s.file_source(path, None)
    meta.write_text(json.dumps({"shape": [4, 3], "model": "/x/saved_models/m512", "done": 4}))
    assert s.file_source(path, None) == ("emb", path, "/x/saved_models/m512")
    assert s.file_source(path, "m512")[2] == "m512"  # the same model, by name
    with pytest.raises(SystemExit, match="not the model that encoded"):
        s.file_source(path, "other_model")
    meta.unlink()
    with pytest.raises(SystemExit, match="--search-model"):
        s.file_source(path, None)
    assert s.file_source(path, "m512")[2] == "m512"
    with pytest.raises(SystemExit, match="existing .npy"):
        s.file_source(tmp_path / "missing.npy", "m512")


def test_scan_cost_and_the_scann_against_faiss_summary_hand_worked():
    from benchmarks.peers import search as s

    # 1,000 of 10,000 leaves over 1M candidates: 100,000 scanned a query; 2 cores at 1,000 q/s
    # spend 2 ms of core time a query: 2e6 ns / 1e5 = 20 ns a candidate.
    row = {"settings": {"nprobe": 1000}, "median_qps": 1000.0}
    assert s.scan_cost(row, 10_000, 1_000_000, 2) == {
        "scanned_fraction": 0.1, "core_ns_per_scanned_candidate": pytest.approx(20.0)}
    assert s.scan_cost({"settings": None, "median_qps": 5.0}, None, 10, 2) == {}
    rows = [{"method": "ScaNN (tt_zoo)", "settings": {"leaves_to_search": 8},
             "median_qps": 300.0, "fastest_reaching_target": True},
            {"method": "ScaNN 2sqrt/avq=0.2", "settings": {"leaves_to_search": 12},
             "median_qps": 600.0, "fastest_reaching_target": True},
            {"method": "ScaNN 4sqrt/avq=0.2", "settings": {"leaves_to_search": 12},
             "median_qps": 900.0},  # did not reach the target
            {"method": "FAISS IVF-PQ", "settings": {"nprobe": 8}, "median_qps": 1200.0,
             "fastest_reaching_target": True}]
    summary = s.scann_against_faiss(rows)
    assert summary["scann_method"] == "ScaNN 2sqrt/avq=0.2"
    assert summary["scann_over_faiss"] == pytest.approx(0.5)
    assert "x0.50 FAISS IVF-PQ's" in "\n".join(s._summary_lines(summary, 0.95))
    assert s.scann_against_faiss(rows[3:]) is None


# -- the encode section: both inputs, rows, and reports written before the passages input --------

def test_encode_rows_compare_within_an_encoder():
    from benchmarks.peers import encode as peers_encode

    measured = {  # 100 documents: 2 s -> 50 docs/s, ...
        "a": ({"encoder": "BERT tiny", "implementation": "tt_zoo encode_documents"}, [2.0, 2.0]),
        "b": ({"encoder": "BERT tiny", "implementation": "tt_zoo signature"}, [1.0, 4.0, 1.0]),
        "c": ({"encoder": "BERT tiny", "implementation": "sentence-transformers encode",
               "same_architecture": True}, [5.0]),
    }
    rows = peers_encode.compare_rows(measured, 100)
    assert [r["median_docs_per_s"] for r in rows] == [50.0, 100.0, 20.0]
    assert [r["vs_tt_zoo"] for r in rows] == [1.0, 2.0, 0.4]
    assert [r.get("vs_sentence_transformers") for r in rows] == [2.5, 5.0, None]


def test_encode_report_labels_each_input_and_reads_old_reports():
    from benchmarks.peers import encode as peers_encode

    row = {"encoder": "BERT tiny", "implementation": "tt_zoo encode_documents",
           "median_docs_per_s": 205.0, "min_docs_per_s": 200.0, "max_docs_per_s": 210.0,
           "vs_tt_zoo": 1.0, "vs_sentence_transformers": 1.5}
    part = {"settings": {"document_length": 128, "batch": 256, "rounds": 5},
            "inputs": {"passages": {"description": peers_encode.INPUTS["passages"],
                                    "num_documents": 2000, "rows": [row],
                                    "packed_agreement": {"ids": 0.95, "length": 0.998}},
                       "reqa": {"description": peers_encode.INPUTS["reqa"],
                                "num_documents": 2000, "rows": [row]}},
            "signature_max_abs_diff_bert": 2e-7}
    text = "\n".join(peers_encode.render(part))
    assert "**Wikispeedia 100-word passages with their article titles" in text
    assert "**ReQA-SQuAD(dev) (sentence, passage) candidates**: the first 2,000." in text
    assert "same token ids for 95.0% of the documents and as many tokens for 99.8%" in text
    assert "| BERT tiny | tt_zoo encode_documents | 205 | 200–210 | x1.00 | x1.50 |" in text
    assert "differ from encode_documents' by at most 2.0e-07" in text
    old = {"settings": {"num_documents": 2000, "document_length": 128, "batch": 256,
                        "rounds": 5}, "rows": [row], "sentence_token_agreement": 0.92}
    text = "\n".join(peers_encode.render(old))
    assert "candidates**: the first 2,000." in text and "92.0% of the sentences" in text


def test_search_without_embeddings_fails_before_measuring_or_smoke_runs_synthetic(tmp_path,
                                                                                capsys):
    from benchmarks.peers import __main__ as peers

    missing = str(tmp_path / "no_open_domain")
    with pytest.raises(SystemExit):
        peers.parse_args(["--embeddings-dir", missing])
    assert "--search-embeddings-file PATH.npy" in capsys.readouterr().err
    assert peers.parse_args(["--quick", "--embeddings-dir", missing]).synthetic
    assert not peers.parse_args(["--sections", "train", "--embeddings-dir", missing]).synthetic


def test_minilm_rows_ratios_and_report_hand_worked():
    from benchmarks.peers import minilm as peers_minilm

    rows = peers_minilm.rows({"tt_zoo": [2.0, 4.0, 2.0], "sentence-transformers": [4.0]}, 100,
                             "sentence-transformers")  # 50 docs/s (median of 50, 25, 50); 25
    assert [r["median_per_s"] for r in rows] == [50.0, 25.0]
    assert [r["vs_peer"] for r in rows] == [2.0, 1.0]
    assert m.min_cosine([[1.0, 0.0], [0.0, 2.0]], [[1.0, 0.0], [1.0, 1.0]]) == \
        pytest.approx(2 ** -0.5)
    part = {"settings": {"rounds": 3, "passages": 100, "queries": 10, "train_batch": 32,
                         "query_length": 64, "document_length": 128, "steps": 5},
            "model": "minilm_l6_384", "batches": {"tt_zoo": 32},
            "identity": {"documents": 100, "same_token_ids": 1.0, "min_cosine": 0.99999,
                         "bfloat16_min_cosine_to_float32": 0.9991},
            "documents": rows}
    text = "\n".join(peers_minilm.render(part))
    assert "token ids the same for 100.0%" in text and "0.999990" in text
    assert "| 50.0 | 25.0–50.0 | x2.00 |" in text


def test_minilm_peer_without_torch_is_named():
    from benchmarks.peers import minilm as peers_minilm

    reason = peers_minilm.peer_reason(sys.executable)
    try:
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        assert reason is None
    except ImportError:
        assert reason.startswith(f"--peer-python {sys.executable} cannot import torch")
