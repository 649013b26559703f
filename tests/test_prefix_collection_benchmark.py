"""benchmarks/prefix_collection: a cut-off encoding of a collection becomes the complete index of
its first whole articles, under the names `tt-zoo odqa --limit-articles N` reads."""

import json

import numpy as np
import pytest

from benchmarks import prefix_collection


def test_the_rows_done_become_the_first_whole_articles_cache(tmp_path):
    from tt_zoo.data.passage_collection import passage_collection
    from tt_zoo.evaluation.document_embeddings import encode_documents_to_file

    articles = tmp_path / "articles.jsonl"
    articles.write_text("".join(json.dumps({"title": f"city{i}", "sections": [{
        "heading": "", "paragraphs": [f"city{i} is a city on the river river{i}."]}]}) + "\n"
        for i in range(6)), encoding="utf-8")
    full = passage_collection(str(articles), 5)
    assert len(full) == 12  # two passages an article: 5 words, then 3
    cache = tmp_path / "cache" / "passages-abc-12.npy"
    cache.parent.mkdir()
    rows = np.random.default_rng(0).normal(size=(12, 4)).astype(np.float32)
    np.save(cache, rows)
    # 7 rows done: articles 0-2 whole (rows 0-5), article 3 cut after its first passage.
    state = {"shape": [12, 4], "model": "m", "encoder": "abc", "done": 7}
    cache.with_suffix(".json").write_text(json.dumps(state))
    out = prefix_collection.main(["--cache", str(cache), "--articles", str(articles),
                                  "--words", "5", "--output", str(tmp_path / "prefix")])
    assert (out["limit_articles"], out["passages"], out["of"]) == (3, 6, 12)
    written = tmp_path / "prefix" / "passages-abc-6.npy"
    np.testing.assert_array_equal(np.load(written), rows[:6])
    record = json.loads(written.with_suffix(".json").read_text())
    assert record["done"] == 6 and record["shape"] == [6, 4] and record["encoder"] == "abc"

    class Model:  # what encode_documents_to_file asks of a model: it must not encode again
        name, path = "m", "m"
        metadata = {"sha256": "abc"}

        class keras_model:
            embedding_dim = 4

        def encode_documents(self, *a, **k):
            raise AssertionError("the prefix cache is complete: nothing to encode")

    prefix = passage_collection(str(articles), 5, limit_articles=3)
    np.testing.assert_array_equal(encode_documents_to_file(
        Model(), prefix.texts, prefix.titles, written, progress=False), rows[:6])


def test_a_cache_of_another_collection_is_refused(tmp_path):
    articles = tmp_path / "articles.jsonl"
    articles.write_text(json.dumps({"title": "a", "sections": [{"heading": "", "paragraphs": [
        "one two three"]}]}) + "\n", encoding="utf-8")
    cache = tmp_path / "passages-abc-9.npy"
    np.save(cache, np.zeros((9, 2), np.float32))
    cache.with_suffix(".json").write_text(json.dumps({"shape": [9, 2], "done": 9}))
    with pytest.raises(SystemExit, match="holds \\[9, 2\\] rows, not the 1 passages"):
        prefix_collection.main(["--cache", str(cache), "--articles", str(articles),
                                "--output", str(tmp_path / "out")])
