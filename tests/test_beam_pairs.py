"""The Beam pipeline gives the same pairs as the single-machine path, in the same layout."""

import collections
import os

import pytest

from tt_zoo.data import beam_pairs, features, pairs_io, pretraining_tasks
from tt_zoo.data.wikispeedia import read_wikispeedia

from conftest import data_file

# Paris <-> France, London -> Paris and France, Fungus -> Bacteria: WLP has real candidates.
TITLES = ["Paris", "France", "London", "Fungus", "Bacteria"]
CONFIG = pretraining_tasks.TaskConfig(pairs_per_article=6, seed=7)


@pytest.fixture(scope="module")
def articles():
    source = data_file("wikispeedia")
    found = list(read_wikispeedia(source, progress=False, titles=TITLES))
    assert sorted(a.title for a in found) == sorted(TITLES)
    return found


@pytest.fixture(scope="module")
def local_dir(articles, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    counters = collections.Counter()
    pairs_io.write_pair_shards(pretraining_tasks.generate_pairs(articles, CONFIG, counters),
                               out, 3, progress=False)
    return out, dict(counters)


def _records(path):
    return sorted(tuple(sorted(r.items())) for r in pairs_io.iter_pair_records(path))


def test_beam_matches_local(articles, local_dir, tmp_path):
    local, counters = local_dir
    manifest = beam_pairs.run_beam_pipeline(articles, tmp_path, CONFIG, 3)
    assert sorted(os.listdir(tmp_path)) == ["manifest.json"] + [
        f"pairs-{i:05d}-of-00003.tfrecord" for i in range(3)]
    beam_records = _records(tmp_path)
    assert beam_records == _records(local)
    tasks = collections.Counter(dict(r)[features.TASK] for r in beam_records)
    assert set(tasks) == {"ict", "bfs", "wlp"}, tasks
    assert manifest["num_records"] == len(beam_records)
    assert manifest["generator_counters"] == counters
    assert manifest["read_report"] == {"kept": 5, "skipped": {}}
    assert manifest["config"]["seed"] == 7
    # Pages outside the 5 link to these titles' neighbours; their candidates are counted.
    assert manifest["beam_counters"]["wlp_candidates_without_target_article"] > 0
    pairs_io.read_manifest(tmp_path, verify="sha256")


def test_write_to_tfrecord_sink(articles, local_dir, tmp_path, monkeypatch):
    """``beam.io.WriteToTFRecord`` (needs a CRC32C library; TensorBoard's pure-Python one here)."""
    if not beam_pairs.crc32c_library_available():
        from apache_beam.io import tfrecordio
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c
        monkeypatch.setattr(tfrecordio._default_crc32c_fn, "fn", crc32c)
    manifest = beam_pairs.run_beam_pipeline(articles[:3], tmp_path, CONFIG, 2, sink="beam")
    assert manifest["sink"] == "beam"
    assert [s["name"] for s in manifest["shards"]] == [
        "pairs-00000-of-00002.tfrecord", "pairs-00001-of-00002.tfrecord"]
    expected = sorted(tuple(sorted(r.items())) for r in _local_records(articles[:3], tmp_path))
    assert _records(tmp_path) == expected


def _local_records(articles, tmp_path):
    out = tmp_path.parent / (tmp_path.name + "_local3")
    pairs_io.write_pair_shards(pretraining_tasks.generate_pairs(articles, CONFIG), out, 1,
                               progress=False)
    return pairs_io.iter_pair_records(out)


def test_failed_pipeline_leaves_no_manifest(articles, tmp_path, monkeypatch):
    pairs_io.write_pair_shards(pretraining_tasks.generate_pairs(articles[:2], CONFIG), tmp_path,
                               2, progress=False)  # an older complete run in the same place

    def broken(*args, **kwargs):
        raise RuntimeError("task logic exploded")

    monkeypatch.setattr(pretraining_tasks, "pairs_for_article", broken)
    with pytest.raises(Exception, match="task logic exploded"):
        beam_pairs.run_beam_pipeline(articles[:2], tmp_path, CONFIG, 2)
    with pytest.raises(pairs_io.IncompleteOutputError, match="incomplete output"):
        pairs_io.read_pairs(tmp_path)


@pytest.mark.slow
def test_path_source_multiprocessing_matches_local(tmp_path):
    """The reader inside the pipeline, two worker processes, 40 articles."""
    source = data_file("wikispeedia")
    manifest = beam_pairs.run_beam_pipeline(
        str(source), tmp_path / "beam", CONFIG, 4, limit=40,
        pipeline_args=["--direct_num_workers=2", "--direct_running_mode=multi_processing"])
    assert manifest["read_report"]["kept"] == 40
    import itertools
    articles = list(itertools.islice(read_wikispeedia(source, progress=False), 40))
    pairs_io.write_pair_shards(pretraining_tasks.generate_pairs(articles, CONFIG),
                               tmp_path / "local", 4, progress=False)
    assert _records(tmp_path / "beam") == _records(tmp_path / "local")


def test_jsonl_source_read_in_parallel(articles, tmp_path):
    """A ``*.jsonl`` source goes through ``ReadFromText``; a broken line is skipped and counted."""
    import json
    path = tmp_path / "articles.jsonl"
    lines = [json.dumps(a.to_json()) for a in articles[:3]]
    path.write_text("\n".join(lines[:2] + ["{not json"] + lines[2:]) + "\n")
    manifest = beam_pairs.run_beam_pipeline(str(path), tmp_path / "beam", CONFIG, 2)
    assert manifest["read_report"] == {"kept": 3, "skipped": {"invalid_jsonl_line": 1}}
    assert _records(tmp_path / "beam") == sorted(
        tuple(sorted(r.items())) for r in _local_records(articles[:3], tmp_path / "x"))
