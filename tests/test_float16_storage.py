"""float16 storage of an export's weights (`tt_zoo.artifacts.float16_storage`): the compact
artifact, its float32 copy materialised on load, and what is refused."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import tt_zoo
from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.artifacts import float16_storage
from tt_zoo.artifacts.export import export_saved_model, load_keras_model, verify_export
from tt_zoo.artifacts import download

QUERIES = ["who discovered penicillin?", "what is the capital of france?"]
PASSAGES = ["Fleming discovered penicillin in 1928.", "Paris is the capital of France."]
TITLES = ["Penicillin", "Paris"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def compact(exported, tmp_path):
    path = tmp_path / "tiny_float16"
    path.mkdir()
    float16_storage.write_float16(exported.path, path)
    return path


def data_bytes(folder):
    return sum(f.stat().st_size for f in folder.glob("variables.data-*"))


def test_the_compact_artifact_holds_the_float32_weights_cast_to_float16(exported, compact):
    meta = verify_export(compact)  # its own manifest, which a registry entry would record
    storage = meta["storage"]
    assert storage["weights"] == "float16"
    assert storage["float32_sha256"] == exported.meta["sha256"] != meta["sha256"]
    reader = tf.train.load_checkpoint(str(exported.path / "variables" / "variables"))
    float32_keys = [k for k, d in reader.get_variable_to_dtype_map().items() if d == tf.float32]
    assert storage["arrays"] == len(float32_keys) >= len(exported.model.get_weights())
    compact_reader = tf.train.load_checkpoint(str(compact / "variables_float16" / "variables"))
    assert {k: compact_reader.get_variable_to_dtype_map()[k] for k in float32_keys} == {
        k: tf.float16 for k in float32_keys}
    key = float32_keys[0]
    np.testing.assert_array_equal(compact_reader.get_tensor(key),
                                  reader.get_tensor(key).astype(np.float16))
    assert not (compact / "variables").exists()
    assert "variables_float16/variables.index" in meta["files"]
    shapes = reader.get_variable_to_shape_map()
    float32_values = sum(int(np.prod(shapes[k])) for k in float32_keys)
    # Two bytes fewer per float32 value; everything else as it was.
    assert (data_bytes(exported.path / "variables") - data_bytes(compact / "variables_float16")
            == 2 * float32_values)
    assert "Weights stored in float16" in (compact / "MODEL_CARD.md").read_text()
    with pytest.raises(ArtifactError, match="stores its weights in float16.*tt_zoo.load"):
        load_keras_model(compact)
    with pytest.raises(TtZooError, match="float16 already; give the float32 export"):
        float16_storage.write_float16(compact, compact.parent / "again")


def test_load_materialises_the_float32_copy_once(exported, compact, home):
    model = tt_zoo.load(compact)
    copy = float16_storage.materialised_path(compact, verify_export(compact))
    assert model.path == copy and copy.is_relative_to(home)
    assert verify_export(copy)["storage"]["materialised_from"] == verify_export(compact)[
        "sha256"]
    # Each weight is the float32 one rounded to float16, exactly.
    for got, original in zip(model.keras_model.get_weights(), exported.model.get_weights()):
        np.testing.assert_array_equal(got, original.astype(np.float16).astype(np.float32))
    # ... so the embeddings move by float16's rounding only.
    original = tt_zoo.load(exported.path)
    for ours, theirs in ((model.encode_queries(QUERIES), original.encode_queries(QUERIES)),
                         (model.encode_documents(PASSAGES, titles=TITLES),
                          original.encode_documents(PASSAGES, titles=TITLES))):
        cosines = np.sum(ours * theirs, axis=1) / (np.linalg.norm(ours, axis=1)
                                                   * np.linalg.norm(theirs, axis=1))
        assert cosines.min() > 0.999 and not np.array_equal(ours, theirs)
    # Loaded again: the copy is taken as it is, not written anew.
    stamp = (copy / "metadata.json").stat().st_mtime_ns
    assert tt_zoo.load(compact).path == copy
    assert (copy / "metadata.json").stat().st_mtime_ns == stamp


def test_a_damaged_copy_is_built_again_and_a_damaged_artifact_refused(compact, home):
    copy = tt_zoo.load(compact).path
    data = next((copy / "variables").glob("variables.data-*"))
    data.write_bytes(data.read_bytes()[:-4] + b"\0\0\0\0")
    assert tt_zoo.load(compact).path == copy
    verify_export(copy)  # whole again

    shutil.rmtree(copy)
    data = next((compact / "variables_float16").glob("variables.data-*"))
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="variables_float16/variables.data"):
        tt_zoo.load(compact)
    assert not copy.exists() and not any((home / "float32").glob("*tmp*"))


def test_a_weight_beyond_float16s_range_is_refused(tmp_path):
    from helpers import tiny_model
    model = tiny_model()
    model.build_by_calling()
    weights = model.get_weights()
    weights[0] = weights[0].copy()
    weights[0].flat[0] = 1e6
    model.set_weights(weights)
    export_saved_model(model, tmp_path / "big", {"name": "big"})
    (tmp_path / "out").mkdir()
    with pytest.raises(TtZooError, match="beyond float16's range.*float32"):
        float16_storage.write_float16(tmp_path / "big", tmp_path / "out")


def test_a_plain_export_loads_from_where_it_is(exported, home):
    assert float16_storage.loadable(exported.path) == exported.path
    assert not (home / "float32").exists()
    assert json.loads((exported.path / "metadata.json").read_text()).get("storage") is None
    assert os.path.isdir(exported.path / "variables")


def test_a_float16_artifact_is_not_reexported_in_place(compact):
    from tt_zoo.zoo import shipping

    before = sorted(p.name for p in compact.rglob("*"))
    with pytest.raises(TtZooError, match=r"tiny_float16 stores its weights in float16 "
                                         r"\(variables_float16/\); re-export the float32 export"):
        shipping.reexport(compact, "a test", log=lambda line: None)
    assert sorted(p.name for p in compact.rglob("*")) == before


def test_arrays_another_model_holds_are_shared_not_stored_again(tmp_path, home):
    """A query-adapted model (its own query tower, its base's document tower) written with
    share_with stores its query tower only; materialised, it is the same float32 model as the
    artifact written without sharing. A base that changed since is named."""
    from helpers import tiny_model
    from tt_zoo.training.multi_task import untie_towers

    base, base_model = tmp_path / "base_float32", tiny_model(share_towers=True)
    base_model.build_by_calling()
    export_saved_model(base_model, base, {"name": "tiny_base"})
    adapted = untie_towers(base_model)
    adapted.query_tower.set_weights([w + 0.01 for w in adapted.query_tower.get_weights()])
    export_saved_model(adapted, tmp_path / "adapted", {"name": "tiny_adapted"})
    whole, shared = tmp_path / "whole16", tmp_path / "shared16"
    whole.mkdir()
    shared.mkdir()
    float16_storage.write_float16(tmp_path / "adapted", whole)
    meta = float16_storage.write_float16(tmp_path / "adapted", shared, share_with=str(base))
    storage = meta["storage"]
    reader = tf.train.load_checkpoint(str(tmp_path / "adapted" / "variables" / "variables"))
    shapes = reader.get_variable_to_shape_map()
    large = {k for k in shapes if k.startswith("model/document_tower/")
             and np.prod(shapes[k]) >= float16_storage.MIN_SHARED_VALUES}
    assert large and set(storage["shared_arrays"]) == large  # the query tower's all changed
    assert storage["shared_from"] == str(base)
    assert storage["shared_sha256"] == verify_export(base)["sha256"]
    stored = tf.train.load_checkpoint(str(shared / "variables_float16" / "variables"))
    assert not set(storage["shared_arrays"]) & set(stored.get_variable_to_dtype_map())
    assert data_bytes(shared / "variables_float16") < data_bytes(whole / "variables_float16")
    a, b = tt_zoo.load(str(whole)), tt_zoo.load(str(shared))
    for encode in ("encode_queries", "encode_documents"):
        np.testing.assert_array_equal(getattr(a, encode)(QUERIES), getattr(b, encode)(QUERIES))
    # The shared model re-exported with other weights: the artifact refuses to mix them.
    base_model.query_tower.set_weights([w + 1.0 for w in base_model.query_tower.get_weights()])
    shutil.rmtree(base)
    export_saved_model(base_model, base, {"name": "tiny_base"})
    shutil.rmtree(float16_storage.materialised_path(shared, meta))
    with pytest.raises(ArtifactError, match="ship the two together"):
        tt_zoo.load(str(shared))
    with pytest.raises(TtZooError, match="nothing to share"):
        other = tmp_path / "other16"
        other.mkdir()
        float16_storage.write_float16(tmp_path / "adapted", other, share_with=str(base))
