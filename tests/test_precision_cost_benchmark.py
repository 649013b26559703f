"""benchmarks/precision_cost.py: the cosine hand-worked, the precision reaching the tower, and a
smoke run on a tiny exported model (the hand-made SQuAD file, the first Wikispeedia passages)."""

import numpy as np

from conftest import DATA_DIR, data_file
from helpers import hand_made_squad, write_squad


def test_smallest_cosine_hand_worked():
    from benchmarks.precision_cost import min_cosine as smallest_cosine

    a = np.array([[1.0, 0.0], [3.0, 4.0]])
    b = np.array([[2.0, 0.0], [4.0, 3.0]])  # cosines 1 and 24/25
    assert abs(smallest_cosine(a, b) - 0.96) < 1e-12


def test_each_precision_reaches_both_towers():
    from benchmarks.precision_cost import AtPrecision

    calls = []

    class Model:
        def encode_queries(self, texts, **options):
            calls.append(("q", options["precision"], options["batch_size"]))
            return np.zeros((len(texts), 2))

        def encode_documents(self, texts, titles=None, **options):
            calls.append(("d", options["precision"], titles))
            return np.zeros((len(texts), 2))

    encoder = AtPrecision(Model(), "bfloat16", 8)
    encoder.encode_queries(("a", "b"))
    encoder.encode_documents(["x"], ["t"])
    assert calls == [("q", "bfloat16", 8), ("d", "bfloat16", ["t"])]


def test_smoke_run_measures_both_precisions_and_reports_the_cost(exported, tmp_path,
                                                                  monkeypatch):
    data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz")
    from benchmarks import measure, precision_cost

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    squad = write_squad(tmp_path, hand_made_squad())
    out = tmp_path / "cost"
    result = precision_cost.main(["--model", str(exported.path), "--squad", str(squad),
                                  "--data-dir", str(DATA_DIR), "--passages", "300",
                                  "--output", str(out)])
    for section in ("reqa", "odqa"):
        rows = result[section]["rows"]
        assert list(rows) == ["float32", "bfloat16"]
        assert 0.9 < result[section]["smallest_cosine"] <= 1.0 + 1e-6
        assert all(0 <= v <= 100 for r in rows.values() for k, v in r.items() if k[0] in "RM")
    assert result["reqa"]["candidates"] == 5 and result["odqa"]["passages"] == 300
    text = (tmp_path / "cost.md").read_text()
    assert "| bfloat16 - float32 |" in text and "ReQA-SQuAD(dev)" in text


def test_smoke_run_measures_float16_storage_against_the_float32_export(exported, tmp_path,
                                                                       monkeypatch):
    """--compare storage: the export against its float16 artifact, both encoding in float32;
    the temp artifact and its materialised copy are gone afterwards."""
    from benchmarks import measure, precision_cost
    from tt_zoo.artifacts import download

    monkeypatch.setattr(measure, "busy_cores", lambda seconds=1.0: 0.0)
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "home"))
    squad = write_squad(tmp_path, hand_made_squad())
    out = tmp_path / "storage"
    result = precision_cost.main(["--compare", "storage", "--model", str(exported.path),
                                  "--squad", str(squad), "--data-dir", str(DATA_DIR),
                                  "--passages", "300", "--output", str(out)])
    for section in ("reqa", "odqa"):
        assert list(result[section]["rows"]) == ["float32 weights", "float16 weights"]
        assert 0.999 < result[section]["smallest_cosine"] <= 1.0
    assert "arrays cast" in result["storage_note"]
    text = (tmp_path / "storage.md").read_text()
    assert "| float16 weights - float32 weights |" in text
    assert "storing the weights in float16" in text and "--compare storage" in text
    assert not list((tmp_path / "home" / "float32").iterdir())


def test_the_int8_tflite_tower_encodes_as_the_float32_one(exported):
    """--compare int8's document tower (dynamic-range int8 TFLite, bucketed batches) gives the
    float32 tower's vectors within int8 round-off, in the order given, and one interpreter per
    batch shape."""
    import tt_zoo
    from benchmarks.precision_cost import TfliteInt8

    model = tt_zoo.load(exported.path)
    texts = [f"passage {i} about {'penicillin ' * (i % 9)}and mould" for i in range(40)]
    titles = [f"title {i}" for i in range(40)]
    int8 = TfliteInt8(model, batch_size=16)
    got = int8.encode_documents(texts, titles)
    want = model.encode_documents(texts, titles, precision="float32")
    cosines = np.sum(got * want, 1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert got.shape == want.shape and 0.98 < cosines.min() and cosines.max() <= 1 + 1e-5
    assert not np.allclose(got, want, atol=1e-6)  # int8 weights: not float32's vectors
    assert 1 <= len(int8.interpreters) <= 3 and "flatbuffer" in int8.note
    np.testing.assert_allclose(int8.encode_queries(["mould"]),
                               model.encode_queries(["mould"], precision="float32"), atol=1e-6)
