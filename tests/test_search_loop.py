"""The retrieval user's loop: `tt-zoo index` once, `tt-zoo search --index` many times (a query, or
a topics file to a TREC run), `tt-zoo evaluate --run --qrels`; `tt_zoo.load_index`; BEIR
folders; the sample corpus. With conftest's tiny export, BM25, and the shipped ColBERT and HDCT
models on four passages."""

import json
import pathlib

import numpy as np
import pytest

from tt_zoo import cli
from tt_zoo.data.text_files import TextFileError, read_texts, read_topics
from tt_zoo.evaluation import trec

from conftest import REPO_ROOT

PASSAGES = [{"_id": "d0", "title": "penicillin", "text": "alexander fleming discovered penicillin."},
            {"_id": "d1", "title": "paris", "text": "paris is the capital of france."},
            {"_id": "d2", "title": "seine", "text": "the seine flows through paris."},
            {"_id": "d3", "title": "water", "text": "water boils at 100 degrees."}]
TOPICS = [{"_id": "q1", "text": "who discovered penicillin?"},
          {"_id": "q2", "text": "what river flows through paris?"}]
QRELS = [("q1", "d0", 1), ("q2", "d2", 1)]
SAMPLE = REPO_ROOT / "examples" / "squad_sample"


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def beir(tmp_path):
    """A BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    (folder / "queries.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TOPICS))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in QRELS))
    return folder


# ----------------------------------------------------------------------------- files and runs

def test_a_beir_folder_is_read_as_it_is(beir, tmp_path):
    corpus = read_texts(beir, "passages")
    assert corpus.ids == ["d0", "d1", "d2", "d3"] and corpus.titles[0] == "penicillin"
    assert read_topics(beir) == (["q1", "q2"], [t["text"] for t in TOPICS])
    assert trec.read_qrels(beir) == {"q1": {"d0": 1}, "q2": {"d2": 1}}
    tsv = tmp_path / "topics.tsv"  # MS MARCO's queries: id<TAB>text, no header
    tsv.write_text("7\twho discovered penicillin?\n8\twhen does water boil?\n")
    assert read_topics(tsv) == (["7", "8"], ["who discovered penicillin?", "when does water boil?"])
    tsv.write_text("7\tone\n7\ttwo\n")
    with pytest.raises(TextFileError, match=r"topics.tsv:2: topic id '7' repeats line 1"):
        read_topics(tsv)
    with pytest.raises(TextFileError, match="without queries.jsonl"):
        read_topics(tmp_path)


def test_a_run_is_scored_as_trec_eval_scores_it(tmp_path):
    import pytrec_eval
    from tt_zoo.retrieval.search import Hit

    hits = [[Hit("d1", 0.9, ""), Hit("d0", 0.5, ""), Hit("d3", 0.1, "")],
            [Hit("d2", 0.8, ""), Hit("d1", 0.7, "")],
            [Hit("d3", 0.3, "")]]
    path = tmp_path / "x.run"
    assert trec.write_run(path, ["q1", "q2", "q9"], hits, tag="my model") == 6
    assert path.read_text().splitlines()[0] == "q1 Q0 d1 1 0.9 my_model"
    qrels_path = tmp_path / "qrels.txt"  # TREC's four columns; q3 is judged, not in the run
    qrels_path.write_text("q1 0 d0 1\nq1 0 d3 2\nq2 0 d2 1\nq3 0 d1 1\n")
    scores, counts, table = trec.evaluate_files(path, qrels_path, recall_at=(1, 10))
    # q1: d0 (1) at rank 2, d3 (2) at rank 3; q2: d2 at rank 1; q3: no line, counted 0.
    # MRR@10 = (1/2 + 1 + 0) / 3; R@1 = (0 + 1 + 0) / 3; R@10 = (1 + 1 + 0) / 3.
    assert scores["MRR@10"] == pytest.approx(100 * 1.5 / 3)
    assert scores["R@1"] == pytest.approx(100 / 3) and scores["R@10"] == pytest.approx(200 / 3)
    # trec_eval's nDCG gains are the relevance values: q1's DCG 1/log2(3) + 2/log2(4).
    ideal = 2 / np.log2(2) + 1 / np.log2(3)
    q1 = (1 / np.log2(3) + 2 / np.log2(4)) / ideal
    assert scores["nDCG@10"] == pytest.approx(100 * (q1 + 1 + 0) / 3)
    assert counts == {"queries": 3, "missing_from_run": 1, "unjudged_in_run": 1}
    assert "1 of them absent from the run, counted 0" in table
    # The same numbers as pytrec_eval over the judged queries (q3 added as 0).
    qrels, run_ = trec.read_qrels(qrels_path), trec.read_run(path)
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10"}).evaluate(
        {q: run_[q] for q in qrels if q in run_})
    assert scores["nDCG@10"] == pytest.approx(100 * sum(v["ndcg_cut_10"] for v in direct.values()) / 3)
    assert scores["R@10"] == pytest.approx(100 * sum(v["recall_10"] for v in direct.values()) / 3)


# ------------------------------------------------------------------------ index, search, evaluate

def test_bm25_index_search_topics_run_and_evaluate(beir, tmp_path, capsys):
    index_dir, run_path = tmp_path / "idx", tmp_path / "bm25.run"
    code, out, _ = run(capsys, "index", beir, "--bm25", "--output", index_dir)
    assert code == 0 and "indexed 4 passages (BM25)" in out
    code, out, _ = run(capsys, "search", "--index", index_dir, "--topics", beir, "--run",
                       run_path, "-k", 2)
    assert code == 0 and "wrote a run of 2 topics" in out
    lines = run_path.read_text().splitlines()
    assert lines[0].split()[:4] == ["q1", "Q0", "d0", "1"] and lines[0].endswith(" BM25")
    code, out, _ = run(capsys, "evaluate", "--run", run_path, "--qrels", beir)
    assert code == 0 and "nDCG@10" in out and "MRR@10" in out
    assert out.splitlines()[1].split()[1:] == ["100.00", "100.00", "100.00", "100.00"]


def test_a_dense_index_is_searched_without_encoding_a_passage(exported, beir, tmp_path, capsys,
                                                              monkeypatch):
    import tt_zoo
    from tt_zoo.zoo.zoo_model import ZooModel

    index_dir = tmp_path / "dense"
    code, out, _ = run(capsys, "index", beir, "--model", exported.path, "--backend",
                       "brute_force", "--output", index_dir, "--no-progress")
    assert code == 0, out
    model = tt_zoo.load(exported.path)
    expected = model.index([p["text"] for p in PASSAGES], titles=[p["title"] for p in PASSAGES],
                           ids=[p["_id"] for p in PASSAGES], backend="brute_force").search(
        TOPICS[0]["text"], k=3)

    def no_encoding(*args, **kwargs):
        raise AssertionError("a passage was encoded again")
    monkeypatch.setattr(ZooModel, "encode_documents", no_encoding)
    index = tt_zoo.load_index(index_dir)  # the model loaded by the path the index records
    hits = index.search(TOPICS[0]["text"], k=3)
    assert [h.id for h in hits] == [h.id for h in expected]
    np.testing.assert_allclose([h.score for h in hits], [h.score for h in expected], rtol=1e-5)
    assert hits[0].title and hits[0].text  # one Hit type, text included
    code, out, _ = run(capsys, "search", "--index", index_dir, "--query", TOPICS[0]["text"],
                       "-k", 3)
    assert code == 0 and out.splitlines()[2].split()[2] == expected[0].id


def test_a_hybrid_index_saves_its_parts_and_fuses_them_again(exported, beir, tmp_path, capsys):
    import tt_zoo

    index_dir = tmp_path / "hybrid"
    code, out, _ = run(capsys, "index", beir, "--model", exported.path, "--hybrid", "--weight",
                       0.3, "--output", index_dir, "--no-progress")
    assert code == 0 and "convex(" in out and "BM25, weight 0.3)" in out
    assert (index_dir / "first" / "text_index.json").is_file()
    assert (index_dir / "second" / "passage_index.json").is_file()
    index = tt_zoo.load_index(index_dir)
    assert index.settings["kind"] == "fusion" and index.settings["weight"] == 0.3
    model = tt_zoo.load(exported.path)
    texts, titles, ids = ([p[k] for p in PASSAGES] for k in ("text", "title", "_id"))
    again = tt_zoo.fuse(model.index(texts, titles=titles, ids=ids),
                        tt_zoo.bm25_index(texts, titles=titles, ids=ids), weight=0.3)
    query = [t["text"] for t in TOPICS]
    assert ([[h.id for h in q] for q in index.search_batch(query, 4)]
            == [[h.id for h in q] for q in again.search_batch(query, 4)])


@pytest.mark.parametrize("name", ["colbert_ict_bfs_wlp_crop_span_qgen_64",
                                  "hdct_ict_bfs_wlp_crop_span_qgen"])
def test_colbert_and_hdct_go_through_the_same_commands(name, beir, tmp_path, capsys):
    index_dir, run_path = tmp_path / "idx", tmp_path / "x.run"
    code, out, _ = run(capsys, "index", beir, "--model", name, "--output", index_dir,
                       "--no-progress")
    assert code == 0, out
    code, out, _ = run(capsys, "search", "--index", index_dir, "--topics", beir, "--run",
                       run_path, "-k", 3)
    assert code == 0 and run_path.read_text().startswith("q1 Q0 d0 1 ")
    code, out, _ = run(capsys, "evaluate", "--run", run_path, "--qrels", beir)
    assert code == 0 and "2 judged queries" in out
    if name.startswith("hdct"):  # its term weights are the index: no model, no TensorFlow
        from tt_zoo.retrieval import numpy_queries
        fast = numpy_queries.load_index_without_tensorflow(index_dir)
        _, queries = read_topics(beir)
        import tt_zoo
        slow = tt_zoo.load_index(index_dir)
        for a, b in zip(fast.search_batch(queries, 3), slow.search_batch(queries, 3)):
            assert [(h.id, round(h.score, 5)) for h in a] == [(h.id, round(h.score, 5)) for h in b]


def test_an_interrupted_dense_build_resumes_after_its_last_chunk(exported, tmp_path):
    import tt_zoo
    from tt_zoo.zoo import index_build

    model = tt_zoo.load(exported.path)
    texts, titles, ids = ([p[k] for p in PASSAGES] for k in ("text", "title", "_id"))
    calls = []
    real = model.encode_documents

    def flaky(batch, titles=None, **kwargs):
        calls.append(list(batch))
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed while encoding the second chunk
        return real(batch, titles=titles, **kwargs)
    model.encode_documents = flaky
    output = tmp_path / "idx"
    with pytest.raises(KeyboardInterrupt):
        index_build.build_index(texts, titles, ids, output, model=model, chunk=2,
                                progress=False, log=None)
    assert (index_build.partial_folder(output) / "chunk-00000.npy").is_file()
    logged = []
    index = index_build.build_index(texts, titles, ids, output, model=model, chunk=2,
                                    progress=False, log=logged.append)
    assert calls[2:] == [texts[2:]] and "2 of 4 passages encoded already" in logged[0]
    assert not index_build.partial_folder(output).exists()
    assert [h.id for h in tt_zoo.load_index(output).search(TOPICS[0]["text"], k=4)] == [
        h.id for h in index.search(TOPICS[0]["text"], k=4)]


def test_search_and_index_refuse_flags_that_do_not_go_together(beir, tmp_path, capsys):
    def error(*argv):
        code, _, err = run(capsys, *argv)
        assert code == 2
        return err
    assert "not a folder" in error("search", "--index", tmp_path / "none", "--query", "q")
    (tmp_path / "idx").mkdir()
    assert "--model: the saved index --index fixes how it searches" in error(
        "search", "--index", tmp_path / "idx", "--model", "minilm_l6_384", "--query", "q")
    assert "--run writes a TREC run" in error("search", beir, "--bm25", "--query", "q",
                                              "--run", tmp_path / "r.run")
    assert "--weight is the model's share in a --hybrid" in error(
        "index", beir, "--weight", "0.5", "--output", tmp_path / "o")
    assert "--hybrid is for a model's index" in error("index", beir, "--bm25", "--hybrid",
                                                      "--output", tmp_path / "o")
    assert "--run and --qrels go together" in error("evaluate", "--run", tmp_path / "r.run")
    assert "--weight: " in error("index", beir, "--hybrid", "--weight", "2", "--output", "o")


# ------------------------------------------------------------------------------ sample corpus

def test_the_sample_corpus_is_small_beir_and_made_by_its_script(tmp_path):
    from conftest import data_file

    files = [p for p in SAMPLE.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1_000_000
    corpus, (query_ids, _) = read_texts(SAMPLE, "passages"), read_topics(SAMPLE)
    assert 200 <= len(corpus) <= 400 and len(query_ids) >= 20
    assert set(trec.read_qrels(SAMPLE)) == set(query_ids)
    assert "CC BY-SA 4.0" in (SAMPLE / "README.md").read_text()
    squad = data_file("squad/dev-v1.1.json")  # skips, naming the file, when absent
    import subprocess
    import sys
    subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "make_squad_sample.py"),
                    "--squad", str(squad), "--output", str(tmp_path / "s")], check=True,
                   capture_output=True)
    for path in files:
        if path.name != "README.md":
            assert (tmp_path / "s" / path.relative_to(SAMPLE)).read_bytes() == path.read_bytes()


# ------------------------------------------------------------------- a static model's fast path

TRICKY = ["Who discovered penicillin?", "don't STOP--now!!", "a,b;c (d) [e] {f} 1.5% $3 #x",
          "x" * 150, "  tabs\tand\nnewlines  ", "", "penicillin" * 3, "the" + " the" * 40]


def test_the_numpy_query_tower_is_the_static_models_own(tmp_path):
    from helpers import tiny_model
    from tt_zoo.retrieval import numpy_queries

    model = tiny_model(encoder="bow_mlp", share_towers=True, bow_mlp=False,
                       normalize_embeddings=True)
    model.build_by_calling()
    encoder = numpy_queries.of_model(model, task_markers=False)
    packed = model.query_preprocessor(np.array(TRICKY))
    for text, ids, mask in zip(TRICKY, packed["input_word_ids"].numpy(),
                               packed["input_mask"].numpy()):
        assert encoder.token_ids(text) == list(ids[mask == 1]), text
    np.testing.assert_allclose(encoder.encode(TRICKY), model.encode_queries(TRICKY), rtol=1e-5,
                               atol=1e-6)
    assert encoder.encode(["café"]) is None  # not ASCII: the model encodes it
    for options in ({"pooling": "cls"}, {"pooling": "mean", "normalize_embeddings": True}):
        bert = tiny_model(**options)  # its own tokenizer settings, a projection, [CLS] or mean
        bert.build_by_calling()
        encoder = numpy_queries.of_model(bert, task_markers=False)
        assert encoder.kind == "bert"
        np.testing.assert_allclose(encoder.encode(TRICKY), bert.encode_queries(TRICKY),
                                   rtol=1e-4, atol=1e-5)
        encoder.save(tmp_path / options["pooling"], "embeddings.npy")
        again = numpy_queries.QueryEncoder.load(tmp_path / options["pooling"])
        np.testing.assert_array_equal(again.encode(TRICKY), encoder.encode(TRICKY))


def test_a_static_models_index_is_searched_without_tensorflow(tmp_path, beir):
    import subprocess
    import sys
    import tt_zoo
    from helpers import tiny_model
    from tt_zoo.artifacts.export import export_saved_model

    model = tiny_model(encoder="bow_mlp", share_towers=True, bow_mlp=False,
                       normalize_embeddings=True)
    model.build_by_calling()
    export_saved_model(model, tmp_path / "static", {"name": "tiny_static"})
    index_dir, run_path = tmp_path / "idx", tmp_path / "fast.run"
    assert cli.main(["index", str(beir), "--model", str(tmp_path / "static"), "--output",
                     str(index_dir), "--no-progress"]) == 0
    assert (index_dir / "query_encoder" / "arrays.npz").is_file()
    script = ("import sys; from tt_zoo import cli; code = cli.main(sys.argv[1:]); "
              "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script, "search", "--index", str(index_dir),
                           "--topics", str(beir), "--run", str(run_path), "-k", "4"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    slow = tt_zoo.load_index(index_dir)  # the model's own encoder, through TensorFlow
    _, queries = read_topics(beir)
    expected = [[h.id for h in hits] for hits in slow.search_batch(queries, 4)]
    got = [[line.split()[2] for line in run_path.read_text().splitlines() if line.startswith(q)]
           for q in ("q1", "q2")]
    assert got == expected


def test_load_index_checks_the_model_it_is_given(exported, beir, tmp_path):
    import tt_zoo
    from helpers import tiny_model
    from tt_zoo.artifacts.export import export_saved_model

    texts = [p["text"] for p in PASSAGES]
    tt_zoo.load(exported.path).index(texts).save(tmp_path / "idx")
    other = tiny_model()
    other.build_by_calling()
    other.set_weights([w * 1.5 for w in other.get_weights()])  # the same model, other weights
    export_saved_model(other, tmp_path / "other", {"name": "other"})
    with pytest.raises(tt_zoo.ArtifactError, match="not by the model loading it"):
        tt_zoo.load_index(tmp_path / "idx", model=str(tmp_path / "other"))
    assert len(tt_zoo.load_index(tmp_path / "idx", model=str(exported.path))) == 4
    with pytest.raises(tt_zoo.ArtifactError, match="not a saved tt_zoo index"):
        tt_zoo.load_index(beir)
