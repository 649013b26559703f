"""benchmarks/term_weights.py on the hand-made SQuAD file: a tiny term-weight export weighs
ReQA's distinct passages, or with --reqa-documents candidate each (sentence, passage)."""

from conftest import DATA_DIR
from helpers import hand_made_squad, tiny_model, write_squad
from test_fusion_benchmark import BENCHMARKS


def test_reqa_documents_passage_or_candidate(exported, tmp_path, monkeypatch):
    from benchmarks import measure
    from benchmarks import term_weights

    from tt_zoo.modeling.term_weights import TermWeightModel
    from tt_zoo.artifacts.term_weight_export import export_term_weight_model

    assert term_weights.__file__.startswith(str(BENCHMARKS))  # the script, not a namesake
    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    two_tower = tiny_model()
    two_tower.build_by_calling()
    export_term_weight_model(TermWeightModel.from_two_tower(two_tower), tmp_path / "tw",
                             {"name": "tiny_tw"})
    base = ["--term-model", str(tmp_path / "tw"), "--model", str(exported.path),
            "--benchmarks", "reqa",
            "--squad", str(write_squad(tmp_path, hand_made_squad())), "--split-fraction", "0.5",
            "--data-dir", str(DATA_DIR), "--no-progress", "--work", str(tmp_path / "work")]
    plain = "HDCT-weighted BM25 (k1 1.5, b 0.75)"
    # 5 candidates in 3 distinct passages (helpers.hand_made_squad).
    for documents, distinct, partner in (("passage", 3, "tiny_test"),
                                         ("candidate", 5, str(exported.path))):
        # (the partner by its name, then by its export path: both are the --model's row)
        out = term_weights.main(base + ["--partner", partner, "--reqa-documents", documents,
                                        "--output", str(tmp_path / documents / "tw")])
        row = out["results"]["reqa"][plain]
        assert row["settings"]["distinct_documents"] == distinct, documents
        assert out["settings"]["reqa_documents"] == documents
        assert "convex(HDCT-weighted BM25, tiny_test)" in out["results"]["reqa"]
    assert "each candidate its own weights" in (tmp_path / "candidate" / "tw.md").read_text()
