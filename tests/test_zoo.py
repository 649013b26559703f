"""The registry, tt_zoo.load, indexing and artifact checks."""

import json

import numpy as np
import pytest

import tt_zoo
from helpers import PAIRS, tiny_vocab
from tt_zoo.data import features as F
from tt_zoo.serving.registry import (EMBEDDING_DIMS, LATE_INTERACTION, PRETRAINING_TASKS,
                                     REGISTRY, SUCCESSOR_PREFIXES, SUCCESSOR_TASKS, TERM_WEIGHTS,
                                     TOKEN_DIMS, TWO_TOWER)
from tt_zoo.serving.zoo import ArtifactError, build_untrained


def test_registry_names_read_like_the_paper():
    for name in ("ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_512", "mlm_128", "none_512",
                 "bert_base_ict_256", "wlp_512", "bfs_512"):
        assert name in REGISTRY
    spec = REGISTRY["bow_mlp_ict_bfs_wlp_512"]
    assert (spec.encoder, spec.pretraining, spec.embedding_dim) == ("bow_mlp", "ict_bfs_wlp", 512)
    assert tt_zoo.list_models("*_ict_bfs_wlp_128") == sorted(
        n for n in REGISTRY if n.endswith("_ict_bfs_wlp_128"))
    assert "ict_bfs_wlp_512" in tt_zoo.list_models("ict_bfs*")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_variant_is_consistent(name):
    spec = REGISTRY[name]
    if spec.shipped:
        assert spec.artifact_path.is_dir() and spec.sha256
    if spec.kind == TERM_WEIGHTS:  # hdct_<tasks>: trained on pairs' query terms
        assert name == f"hdct_{spec.pretraining}" and spec.pretraining not in ("none", "mlm")
        assert (f"recipes/train_term_weights.py --pairs runs/pairs/{spec.pretraining} "
                f"--init-from ict_bfs_wlp_512 ") in spec.recipe_command()
        assert spec.recipe_command().endswith(f"--export saved_models/{name}")
        return
    assert spec.kind == (LATE_INTERACTION if spec.encoder == "colbert" else TWO_TOWER)
    # (late-interaction variants: the size of each token vector)
    assert spec.embedding_dim in (TOKEN_DIMS if spec.encoder == "colbert" else EMBEDDING_DIMS)
    if spec.pretraining in SUCCESSOR_TASKS:  # past the paper: the CPU-scale towers only
        assert name[:-len(f"{spec.pretraining}_{spec.embedding_dim}")] in SUCCESSOR_PREFIXES
        assert f"--tasks {spec.pretraining.replace('_', ',')} " in spec.recipe_command()
    else:
        assert spec.pretraining in PRETRAINING_TASKS
    assert name.endswith(f"{spec.pretraining}_{spec.embedding_dim}")
    assert (spec.tower_size is None) == (spec.encoder == "bow_mlp")
    assert f"--variant {name}" in spec.recipe_command()


@pytest.mark.parametrize("encoder_prefix", ["", "bow_mlp_"])
def test_untrained_variants_build_and_encode(encoder_prefix):
    spec = REGISTRY[f"{encoder_prefix}none_128"]
    model = build_untrained(spec, tiny_vocab(), query_length=16, document_length=24,
                            tower_shape=dict(num_layers=1, hidden_size=16, num_attention_heads=2))
    assert model.encode_queries(["who?"]).shape == (1, 128)


def test_unknown_and_unshipped_names():
    with pytest.raises(KeyError, match="ict_bfs_wlp_512"):
        tt_zoo.load("ict_bfs_wlp_521")
    unshipped = next(n for n, s in REGISTRY.items() if not s.shipped)
    with pytest.raises(FileNotFoundError, match="recipes/pretrain.py --variant"):
        tt_zoo.load(unshipped)
    with pytest.raises(ArtifactError, match="does not exist"):
        tt_zoo.load("./no/such/dir")


def test_load_by_path_encodes_like_the_keras_model(exported):
    model, path, _ = exported
    loaded = tt_zoo.load(path)
    assert loaded.pretraining == "none" and loaded.name == "tiny_test"
    np.testing.assert_allclose(loaded.encode_queries(PAIRS[F.QUERY]),
                               model.encode_queries(PAIRS[F.QUERY]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["scann", "brute_force"])
def test_index_search_and_save(exported, tmp_path, backend):
    loaded = tt_zoo.load(exported.path)
    passages = PAIRS[F.DOC_TEXT]
    index = loaded.index(passages, titles=PAIRS[F.DOC_TITLE], backend=backend)
    hits = index.search(["who discovered penicillin?", "paris"], k=3)
    assert len(hits) == 2 and len(hits[0]) == 3
    scores = [h.score for h in hits[0]]
    assert scores == sorted(scores, reverse=True)
    # The hits are the exact top-3 by inner product (4 candidates: ScaNN scores all of them).
    q = loaded.encode_queries(["who discovered penicillin?"])
    d = loaded.encode_documents(passages, titles=PAIRS[F.DOC_TITLE])
    expected = [passages[i] for i in np.argsort(-(q @ d.T)[0])[:3]]
    assert [h.text for h in hits[0]] == expected
    index.save(tmp_path / "idx")
    again = loaded.load_index(tmp_path / "idx")
    assert [h.id for h in again.search(["paris"], k=3)[0]] == [h.id for h in hits[1]]


def test_fine_tunes_with_keras_fit(exported):
    import tensorflow as tf
    loaded = tt_zoo.load(exported.path)
    loaded.compile(optimizer=tf.keras.optimizers.Adam(1e-3))
    history = loaded.fit(tf.data.Dataset.from_tensor_slices(PAIRS).batch(4), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_corrupted_or_truncated_artifact_is_refused(exported, tmp_path):
    import shutil
    path = exported.path
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    data_file = next((broken / "variables").glob("variables.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:-100])  # truncated weights
    with pytest.raises(ArtifactError, match="corrupted or truncated"):
        tt_zoo.load(broken)
    missing = tmp_path / "missing"
    shutil.copytree(path, missing)
    (missing / "metadata.json").unlink()
    with pytest.raises(ArtifactError, match="metadata.json is missing"):
        tt_zoo.load(missing)


def test_shipped_list_is_read_from_saved_models(tmp_path):
    from tt_zoo.serving import registry

    shipped = registry.read_shipped()
    assert set(shipped) == set(tt_zoo.list_models(shipped_only=True))
    entry = {"artifact": "x", "sha256": "0" * 64, "recipe": {"steps": 10}, "metrics": {"R@1": 0.5}}
    path = tmp_path / "shipped.json"
    path.write_text(json.dumps({"ict_512": entry}))
    fields = registry.read_shipped(path)["ict_512"]
    assert fields["recipe"].steps == 10 and fields["metrics"] == (("R@1", 0.5),)
    for bad in ({"ict_1024": entry}, {"ict_512": {**entry, "weights": "x"}},
                {"ict_512": {"sha256": "0"}}):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match="shipped.json: entry"):
            registry.read_shipped(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        registry.read_shipped(path)
