"""`tt-zoo index-corpus` on the DirectRunner: a tiny export encodes a small corpus into shards
whose embeddings are the signature's, a rerun writes nothing twice, a killed worker's half shard
is not taken as complete, duplicate ids are named, and the shards search as exact search does."""

import json
import pathlib
import shutil

import numpy as np
import pytest

from helpers import PAIRS, run_as_a_user
from tt_zoo.data import features as F
from tt_zoo.data.text_files import TextFileError
from tt_zoo.errors import ArtifactError
from tt_zoo.retrieval import embedding_shards as shards
from tt_zoo.retrieval.embedding_storage import EmbeddingStorage
from tt_zoo.retrieval.search import ExactSearcher
from tt_zoo.retrieval.sharded_index import ShardedIndex

pytest.importorskip("apache_beam")
from tt_zoo.serving import corpus_index  # noqa: E402

NUM_SHARDS = 3
WORDS = "the seine flows through paris capital of france water boils at degrees".split()


def _passages():
    """24 passages of 3-14 words, every third without a title, ids p00..p23."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(24):
        title = "" if i % 3 == 0 else PAIRS[F.DOC_TITLE][i % 4]
        text = " ".join(rng.choice(WORDS, 3 + i % 12))
        out.append({"id": f"p{i:02d}", "title": title, "text": text})
    return out


def _write_jsonl(path: pathlib.Path, records, blank_line=True) -> str:
    lines = [json.dumps(r) for r in records]
    if blank_line:
        lines.insert(5, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _write_jsonl(tmp_path_factory.mktemp("corpus") / "passages.jsonl", _passages())


@pytest.fixture(scope="module")
def reference(exported):
    """{id: embedding} straight from the export's encode_document signature, one call."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    passages = _passages()
    encode = tf.saved_model.load(str(exported.path)).signatures["encode_document"]
    out = encode(title=tf.constant([p["title"] for p in passages]),
                 passage=tf.constant([p["text"] for p in passages]))["embedding"].numpy()
    return {p["id"]: row for p, row in zip(passages, out)}


@pytest.fixture(scope="module")
def float32_run(exported, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("float32") / "corpus"
    manifest = corpus_index.index_corpus(corpus, out, str(exported.path), num_shards=NUM_SHARDS,
                                         batch_size=5)
    return manifest, out


def _stored(out, storage):
    """{id: decoded embedding} of every shard."""
    stored = {}
    for s in range(NUM_SHARDS):
        ids, emb = shards.read_shard(out, shards.shard_name(s, NUM_SHARDS), storage)
        assert all(shards.shard_of(i, NUM_SHARDS) == s for i in ids)
        assert ids == sorted(ids)
        stored.update(zip(ids, emb))
    return stored


def _stamps(folder: pathlib.Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.name != "manifest.json"}


def test_embeddings_are_the_signatures_and_encode_documents(float32_run, reference, exported):
    manifest, out = float32_run
    assert manifest["num_passages"] == 24
    assert manifest["counters"] == {"passages/encoded": 24, "passages/read": 24,
                                    "shards/written": NUM_SHARDS}
    assert manifest["settings"]["model_sha256"] == exported.meta["sha256"]
    assert [s["num_passages"] for s in manifest["shards"]] == [
        sum(shards.shard_of(f"p{i:02d}", NUM_SHARDS) == s for i in range(24))
        for s in range(NUM_SHARDS)]
    shards.read_manifest(out)
    stored = _stored(out, EmbeddingStorage())
    assert sorted(stored) == sorted(reference)
    for passage_id, row in reference.items():
        np.testing.assert_allclose(stored[passage_id], row, atol=1e-5)
    passages = _passages()
    library = exported.model.encode_documents([p["text"] for p in passages],
                                              titles=[p["title"] for p in passages])
    for p, row in zip(passages, library):
        np.testing.assert_allclose(stored[p["id"]], row, atol=1e-5)


@pytest.mark.parametrize("storage", [EmbeddingStorage("float16"), EmbeddingStorage("int8")],
                         ids=str)
def test_float16_and_int8_within_their_bounds(storage, exported, corpus, reference, tmp_path):
    corpus_index.index_corpus(corpus, tmp_path, str(exported.path), num_shards=NUM_SHARDS,
                              storage=storage)
    stored = _stored(tmp_path, storage)
    for passage_id, x in reference.items():
        error = np.abs(stored[passage_id] - x)
        if storage.dtype == "float16":
            bound = np.abs(x) * 2.0 ** -11 + 2.0 ** -25 + 1e-5  # + the signature's own 1e-5
        else:
            bound = np.abs(x).max() / 127 / 2 + 1e-5
        assert (error <= bound).all(), (passage_id, error.max())


def test_rerun_writes_no_shard_twice(float32_run, exported, corpus):
    manifest, out = float32_run
    before = _stamps(out)
    again = corpus_index.index_corpus(corpus, out, str(exported.path), num_shards=NUM_SHARDS)
    assert _stamps(out) == before  # same inodes and mtimes: nothing rewritten
    assert again["counters"] == {"passages/read": 24, "shards/reused": NUM_SHARDS}
    assert len(again["shards_reused"]) == NUM_SHARDS
    assert again["sha256"] == manifest["sha256"] and again["files"] == manifest["files"]


def test_a_half_written_shard_is_written_again(float32_run, exported, corpus, reference,
                                               tmp_path):
    out = tmp_path / "corpus"
    shutil.copytree(float32_run[1], out)
    (out / "manifest.json").unlink()  # the run was killed before its end
    killed = out / "shard-00001-of-00003"
    debris = out / ".shard-00001-of-00003.tmp-x1y2"  # what the killed worker left
    killed.rename(debris)
    (debris / "shard.json").unlink()
    (debris / "embeddings.npy").write_bytes(b"\x93NUMPY")
    kept = {s: _stamps(out / s) for s in ("shard-00000-of-00003", "shard-00002-of-00003")}
    with pytest.raises(ArtifactError, match="manifest.json is missing"):
        ShardedIndex.load(out)
    manifest = corpus_index.index_corpus(corpus, out, str(exported.path), num_shards=NUM_SHARDS)
    assert manifest["counters"]["shards/written"] == 1
    assert manifest["counters"]["shards/reused"] == 2
    assert {s: _stamps(out / s) for s in kept} == kept
    assert not debris.exists()
    stored = _stored(out, EmbeddingStorage())
    for passage_id, row in reference.items():
        np.testing.assert_allclose(stored[passage_id], row, atol=1e-5)

    # The corpus changed since: a complete shard would hold other passages. Refused, untouched.
    changed = _passages()
    changed[0]["id"] = "p99"
    path = _write_jsonl(tmp_path / "changed.jsonl", changed)
    with pytest.raises(Exception, match="differ from the"):
        corpus_index.index_corpus(path, out, str(exported.path), num_shards=NUM_SHARDS)
    assert {s: _stamps(out / s) for s in kept} == kept


def test_duplicate_ids_are_an_error_naming_the_id(exported, tmp_path):
    records = _passages()[:6] + [dict(_passages()[4], text="another text")]
    path = _write_jsonl(tmp_path / "dup.jsonl", records)
    with pytest.raises(Exception, match="passage id 'p04' occurs 2 times"):
        corpus_index.index_corpus(path, tmp_path / "out", str(exported.path), num_shards=2)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_passage_lines_are_read_as_the_cli_reads_them():
    parse = corpus_index.parse_passage_line
    assert list(parse(("p.jsonl", '{"id": 7, "text": "x"}'))) == [("7", "", "x")]
    assert list(parse(("p.jsonl", "  "))) == []
    with pytest.raises(TextFileError, match=r"p.jsonl \(line '\{\"text\": \"x\"\}'\): no \"id\""):
        list(parse(("p.jsonl", '{"text": "x"}')))
    with pytest.raises(TextFileError, match="p.jsonl .*not valid JSON"):
        list(parse(("p.jsonl", '{"id": "a", "text": ')))
    with pytest.raises(TextFileError, match="expected a .jsonl file"):
        corpus_index.check_passages("passages.tsv")


def test_sharded_index_search_equals_exact_search(float32_run, exported):
    _, out = float32_run
    stored = _stored(out, EmbeddingStorage())
    queries = exported.model.encode_queries(PAIRS[F.QUERY])
    for merge in (False, True):
        index = ShardedIndex.load(out, merge=merge)
        exact = ExactSearcher(np.stack([stored[i] for i in index.ids]), index.ids)
        for k in (1, 5, 24):
            got, expected = index.search(queries, k), exact.search(queries, k)
            assert got.ids == expected.ids, (merge, k)
            np.testing.assert_allclose(got.scores, expected.scores, atol=1e-6)


def test_cli_int8_per_dimension(exported, corpus, reference, tmp_path, capsys):
    from tt_zoo import cli
    out = tmp_path / "corpus"
    code = cli.main(["index-corpus", "--model", str(exported.path), "--passages", corpus,
                     "--output", str(out), "--num-shards", str(NUM_SHARDS), "--dtype", "int8",
                     "--int8-scale", "dimension", "--batch-size", "8", "--",
                     "--direct_num_workers=1"])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("24 passages in 3 shards (3 written, 0 complete already), 8-d "
                              "int8 (per-dimension scale)"), printed
    storage = EmbeddingStorage("int8", "dimension")
    stored = _stored(out, storage)
    for s in range(NUM_SHARDS):
        name = shards.shard_name(s, NUM_SHARDS)
        scales = np.load(out / name / "scales.npy")
        ids = (out / name / "ids.txt").read_text().split()
        peaks = np.abs(np.stack([reference[i] for i in ids])).max(axis=0)
        np.testing.assert_allclose(scales, peaks / 127, rtol=1e-4, atol=1e-7)
        for i in ids:
            assert (np.abs(stored[i] - reference[i]) <= scales / 2 + 1e-5).all()
    assert len(ShardedIndex.load(out)) == 24


def test_cli_refusals(exported, corpus, tmp_path, capsys):
    from tt_zoo import cli
    base = ["index-corpus", "--model", str(exported.path), "--passages", corpus, "--output",
            str(tmp_path / "o")]
    assert cli.main(base + ["--int8-scale", "dimension"]) == 2
    assert "--int8-scale goes with --dtype int8" in capsys.readouterr().err
    assert cli.main(base + ["--project", "p"]) == 2  # Beam options only after --
    capsys.readouterr()
    assert cli.main(base[:2] + ["colbert_ict_bfs_wlp_crop_span_qgen_64"] + base[3:]) == 1
    assert "late-interaction model: index-corpus needs a two-tower export" in \
        capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_help_constants_match_the_package():
    from tt_zoo.cli import index_corpus as command
    from tt_zoo.retrieval import embedding_storage, index
    assert command.DTYPES == embedding_storage.DTYPES
    assert command.INT8_SCALES == embedding_storage.SCALES
    assert command.BACKENDS == index.BACKENDS
    assert command.DEFAULT_BATCH_SIZE == corpus_index.DEFAULT_BATCH_SIZE


def test_the_command_imports_beam_without_its_cloud_warnings():
    # A fresh interpreter, as a user's: Beam warns at its first import when the Google Cloud
    # packages are absent (they are, here), unless the command keeps those lines off.
    proc = run_as_a_user(["-c", "from tt_zoo.cli.index_corpus import import_pipeline; "
                                "import_pipeline(); print('imported')"], timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "imported" in proc.stdout
    assert "GCSFileSystem" not in proc.stderr and "apitools" not in proc.stderr, proc.stderr
