"""The two-tower model: fit, config round trip, save/load, encoders, hard negatives."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import PAIRS, assert_model_round_trip, pair_dataset, tiny_model
from tt_zoo.data import features as F
from tt_zoo.errors import ArtifactError
from tt_zoo.artifacts.export import export_saved_model, load_keras_model

@pytest.mark.parametrize("encoder", ["bert", "bow_mlp"])
def test_fit_lowers_the_loss(encoder):
    model = tiny_model(encoder)
    model.build_by_calling()  # as every loaded model is
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2))
    batch = next(iter(pair_dataset()))
    before = float(model.compute_loss(batch, training=False))
    history = model.fit(pair_dataset().repeat(), steps_per_epoch=15, epochs=1, verbose=0)
    after = float(model.compute_loss(batch, training=False))
    assert np.isfinite(history.history["loss"]).all()
    assert after < before, (before, after)
    # `PairModel.fit` builds the optimizer's slots first: the step is traced once, not twice.
    assert model.train_function.experimental_get_tracing_count() == 1


def test_encoders_shapes_and_separate_towers():
    model = tiny_model()
    q = model.encode_queries(["who discovered penicillin?", ""])
    d = model.encode_documents(["paris is the capital."], titles=["paris"])
    assert q.shape == (2, 8) and d.shape == (1, 8) and q.dtype == np.float32
    assert model.encode_queries([]).shape == (0, 8)
    assert model.query_tower is not model.document_tower
    assert model.encode_queries("who?").shape == (8,)  # one string: one text
    with pytest.raises(ValueError, match="differ in length"):
        model.encode_documents(["a", "b"], titles=["a"])


def test_shared_towers_share_weights():
    model = tiny_model(share_towers=True)
    assert model.query_tower is model.document_tower
    # Same text as a query and as an untitled document: same packing apart from length, so the
    # embeddings agree when the text fits both budgets... and the tower weights are one set.
    model.build_by_calling()
    assert len(model.query_tower.weights) == len(model.document_tower.weights)
    # That the sharing survives the config round trip (and the export) is checked on the shared
    # model of test_normalized_embeddings_and_options_round_trip, which round-trips anyway.


def test_config_round_trip_and_save_load(tmp_path):
    # Config through JSON, export + load_keras_model allclose, and one fit step of the reload
    # (here traced as in training, not eagerly).
    assert_model_round_trip(tiny_model(), tmp_path / "m", run_eagerly=False)


def test_load_model_errors(tmp_path):
    with pytest.raises(ArtifactError, match="config.json is missing"):
        load_keras_model(tmp_path)
    model = tiny_model()
    model.build_by_calling()
    export_saved_model(model, tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{not json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        load_keras_model(tmp_path / "m")


def test_hard_negatives_and_missing_ids():
    model = tiny_model()
    batch = dict(next(iter(pair_dataset())))
    base = float(model.compute_loss(batch))
    batch[F.HARD_NEGATIVE_TEXTS] = tf.constant([["london is in england."]] * 4)
    batch[F.HARD_NEGATIVE_TITLES] = tf.constant([["london"]] * 4)
    with_hard = float(model.compute_loss(batch))
    assert with_hard != pytest.approx(base)  # extra candidates change the partition function
    no_ids = {k: v for k, v in batch.items() if k != F.DOC_ID}
    assert np.isfinite(float(model.compute_loss(no_ids)))
    with pytest.raises(ValueError, match="needs features"):
        model.compute_loss({F.QUERY: batch[F.QUERY]})


def test_compiled_model_with_paper_schedule_exports_without_its_optimizer(tmp_path):
    from tt_zoo.training.loop import paper_learning_rate
    model = tiny_model()
    model.compile(optimizer=tf.keras.optimizers.Adam(paper_learning_rate(1e-3, 10, 0.1)))
    model.fit(pair_dataset(), epochs=1, verbose=0)
    assert_model_round_trip(model, tmp_path / "e")
    assert not [v for v in tf.train.list_variables(str(tmp_path / "e" / "variables" / "variables"))
                if "optimizer" in v[0].lower()]


def test_tokenized_batches_train_and_embed_like_raw_strings():
    model = tiny_model(pooling="mean", share_towers=True)
    raw = next(iter(pair_dataset()))
    tokenized = model.tokenize_pairs(raw)
    assert F.QUERY not in tokenized and tokenized[F.QUERY_INPUTS]["input_word_ids"].shape == (4, 16)
    # One tokenizer for training and serving: the same text gives the same ids both ways.
    np.testing.assert_array_equal(tokenized[F.QUERY_INPUTS]["input_word_ids"],
                                  model.query_preprocessor(raw[F.QUERY])["input_word_ids"])
    np.testing.assert_allclose(model.embed_query_inputs(tokenized[F.QUERY_INPUTS]),
                               model.encode_queries(PAIRS[F.QUERY]), rtol=1e-5, atol=1e-6)
    assert float(model.compute_loss(tokenized)) == pytest.approx(float(model.compute_loss(raw)),
                                                                  rel=1e-5)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2))
    before = float(model.compute_loss(tokenized))
    model.fit(tf.data.Dataset.from_tensors(tokenized).repeat(), steps_per_epoch=10, verbose=0)
    assert float(model.compute_loss(tokenized)) < before
    without_ids = {k: v for k, v in tokenized.items() if k != F.DOC_ID}
    with pytest.raises(ValueError, match="needs DOC_ID"):
        model.compute_loss(without_ids)


def test_normalized_embeddings_and_options_round_trip(tmp_path):
    from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
    model = tiny_model(pooling="mean", share_towers=True, normalize_embeddings=True,
                       loss=CorrectedSampledSoftmaxLoss(temperature=0.05))
    q = model.encode_queries(PAIRS[F.QUERY])
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, rtol=1e-5)
    # The shared case checks the reload's embeddings equal q (allclose) and that it fits a step.
    clone, reloaded, _ = assert_model_round_trip(model, tmp_path / "e")
    for restored in (clone, reloaded):
        assert restored.normalize_embeddings and restored.query_tower.pooling == "mean"
        assert restored.share_towers and restored.retrieval_loss.temperature == 0.05
        assert restored.query_tower is restored.document_tower
    # The serving signature gives the same normalised embeddings.
    served = tf.saved_model.load(str(tmp_path / "e")).signatures["encode_query"](
        query=tf.constant(PAIRS[F.QUERY]))["embedding"].numpy()
    np.testing.assert_allclose(served, q, rtol=1e-5, atol=1e-6)
