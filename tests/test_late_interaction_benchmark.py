"""benchmarks/late_interaction.py end to end on tiny data: a tiny ColBERT export and a tiny dense
export, the hand-made SQuAD file, three Wikispeedia articles and a few ODQA questions; the
re-ranking row, the BM25 fusion, the three-way fusion and the re-ranking of the fused list with
--fuse-with, in seconds."""

import pytest

from conftest import DATA_DIR, data_file
from helpers import hand_made_squad, tiny_colbert, write_squad
from test_fusion_benchmark import _jsonl


@pytest.fixture
def colbert_export(tmp_path):
    from tt_zoo.artifacts.export import export_saved_model

    export_saved_model(tiny_colbert(), tmp_path / "colbert", {"name": "colbert_tiny"})
    return tmp_path / "colbert"


@pytest.mark.slow  # ~50 s with its ColBERT export; the fusion rules are tested fast elsewhere
def test_three_way_fusion_row_and_its_weights(exported, colbert_export, tmp_path, monkeypatch):
    data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz")
    from benchmarks import late_interaction
    from benchmarks import measure

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    reported = _jsonl(tmp_path / "reported.jsonl", [
        {"question": "Who founded the Persian Empire?", "answers": ["Cyrus"]},
        {"question": "What is the capital of Ethiopia?", "answer_regex": "Addis Ababa"}])
    held = _jsonl(tmp_path / "held.jsonl", [
        {"question": "Which country borders Ethiopia to the west?", "answers": ["Sudan"]},
        {"question": "Who said Cyrus was named after the sun?", "answers": ["Ctesias"]}])
    base = ["--colbert", str(colbert_export), "--model", str(exported.path),
            "--benchmarks", "reqa,odqa", "--end-to-end", "",
            "--squad", str(write_squad(tmp_path, hand_made_squad())), "--split-fraction", "0.5",
            "--limit-articles", "3", "--odqa-questions", reported, "--odqa-validation", held,
            "--data-dir", str(DATA_DIR), "--no-progress", "--work", str(tmp_path / "work"),
            "--output", str(tmp_path / "out" / "late")]
    with pytest.raises(SystemExit):  # --fuse-with names one of --model
        late_interaction.parse_args(base + ["--fuse-with", "bow_mlp_none_512"])
    out = late_interaction.main(base + ["--fuse-with", str(exported.path)])
    two = "convex(BM25, ColBERT re-ranking BM25@100)"
    three = f"convex({two}, tiny_test)"
    pair = "convex(BM25, tiny_test)"
    rerank_pair = f"ColBERT re-ranking {pair}@100"
    pair_fused = f"convex({pair}, {rerank_pair})"
    for bench in ("reqa", "odqa"):
        rows = list(out["results"][bench])
        assert rows == ["BM25", "tiny_test", "ColBERT re-ranking BM25@100", two, three, pair,
                        rerank_pair, pair_fused], bench
        chosen = out["weights"][bench]
        assert set(chosen) == {two, three, pair, pair_fused}
        assert len(chosen[three]["grid"]) == 21
        assert out["results"][bench][rerank_pair]["settings"]["depth"] == 100
        for row in out["results"][bench].values():
            recalls = [v for k, v in late_interaction.text_rows.main_set(row).items()
                       if k.startswith("R@")]
            assert recalls == sorted(recalls) and all(0 <= v <= 1 for v in recalls)
    # ReQA has 5 candidates: the fused lists hold them all, the gold included.
    assert out["results"]["reqa"][three]["sets"]["all"]["R@5"] == 1.0
    assert three in (tmp_path / "out" / "late.md").read_text()


def test_query_weights_choose_a_setting_per_benchmark(exported, colbert_export, tmp_path,
                                                      monkeypatch):
    from benchmarks import late_interaction
    from benchmarks import measure

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    base = ["--colbert", str(colbert_export), "--model", str(exported.path),
            "--benchmarks", "reqa", "--end-to-end", "",
            "--squad", str(write_squad(tmp_path, hand_made_squad())), "--split-fraction", "0.5",
            "--data-dir", str(DATA_DIR), "--no-progress", "--work", str(tmp_path / "work"),
            "--output", str(tmp_path / "out" / "late")]
    for bad in ("1", "1:-1", "a:b", "1:0:1:1", "1:0:-1"):
        with pytest.raises(SystemExit):
            late_interaction.parse_args(base + ["--query-weights", bad])
    with pytest.raises(SystemExit):  # another model's numbers would go into the card
        late_interaction.parse_args(base + ["--query-weights", "1:0", "--record"])
    out = late_interaction.main(base + ["--query-weights", "0:1,1:0:1"])
    label = "ColBERT (idf-weighted queries) re-ranking BM25@100"
    assert list(out["results"]["reqa"]) == ["BM25", "tiny_test", label,
                                            f"convex(BM25, {label})"]
    chosen = out["query_weights"]["reqa"]
    assert [g[:3] for g in chosen["grid"]] == [(0.0, 1.0, 0.0), (1.0, 0.0, 1.0)]
    best = max(chosen["grid"], key=lambda g: g[3])
    assert (chosen["alpha"], chosen["mask_weight"], chosen.get("beta", 0.0)) == best[:3]
    assert chosen["documents"] == 5 and chosen["scheme"] == "idf"
    # The question log of a setting with beta: the validation questions.
    validation = out["benchmarks"]["reqa"]["validation"]
    assert chosen.get("questions") == (validation["num_queries"] if best[2] else None)
    assert "## Query-token weights" in (tmp_path / "out" / "late.md").read_text()
