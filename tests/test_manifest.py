"""The one per-file manifest (tt_zoo.manifest) that models, indexes and pair directories share."""

import hashlib
import json

import pytest

from tt_zoo.errors import ArtifactError
from tt_zoo.manifest import describe_file, describe_files, manifest_digest, verify_files

ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2


def test_describe_file_is_size_and_sha256(tmp_path):
    (tmp_path / "abc").write_bytes(b"abc")
    assert describe_file(tmp_path / "abc") == {"size": 3, "sha256": ABC_SHA256}


def test_describe_files_keys_posix_paths_and_skips(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "abc").write_bytes(b"abc")
    (tmp_path / "metadata.json").write_text("{}")
    assert describe_files(tmp_path, skip=("metadata.json",)) == {
        "sub/abc": {"size": 3, "sha256": ABC_SHA256}}
    assert list(describe_files(tmp_path, names=["metadata.json"])) == ["metadata.json"]


def test_manifest_digest_is_the_sha256_of_canonical_json():
    files = {"b": {"sha256": "00", "size": 1}, "a": {"size": 2, "sha256": "11"}}
    canonical = '{"a":{"sha256":"11","size":2},"b":{"sha256":"00","size":1}}'
    assert manifest_digest(files) == hashlib.sha256(canonical.encode()).hexdigest()
    assert manifest_digest(dict(reversed(list(files.items())))) == manifest_digest(files)


@pytest.mark.parametrize("damage, match", [
    ("delete", "abc listed in manifest.json is missing"),
    ("truncate", "abc is corrupted or truncated: it has 2 bytes, the manifest says 3"),
    ("flip", "abc is corrupted or truncated: its sha256"),
])
def test_verify_names_the_damaged_file(tmp_path, damage, match):
    (tmp_path / "abc").write_bytes(b"abc")
    files = describe_files(tmp_path)
    verify_files(tmp_path, files, listed_in="manifest.json")
    if damage == "delete":
        (tmp_path / "abc").unlink()
    else:
        (tmp_path / "abc").write_bytes(b"ab" if damage == "truncate" else b"abd")
    with pytest.raises(ArtifactError, match=match):
        verify_files(tmp_path, files, listed_in="manifest.json")
    if damage == "flip":  # same size: only the content check sees it
        verify_files(tmp_path, files, listed_in="manifest.json", check="size")


def test_an_index_saved_before_sizes_were_recorded_still_loads(tmp_path):
    import numpy as np
    from tt_zoo.retrieval.index import EmbeddingIndex
    embeddings = np.eye(4, dtype=np.float32)
    path = EmbeddingIndex(embeddings, list("abcd"), backend="brute_force").save(tmp_path / "i")
    config = json.loads((path / "index.json").read_text())
    config["format_version"] = 1
    config["files"] = {name: entry["sha256"] for name, entry in config["files"].items()}
    (path / "index.json").write_text(json.dumps(config))
    assert EmbeddingIndex.load(path).search(embeddings[:1], k=1).ids == (("a",),)
