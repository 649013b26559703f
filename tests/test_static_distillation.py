"""Static distillation (`tt_zoo.modeling.static_distillation`, model2vec): hand-worked SIF
weights and PCA, each token's row is the Transformer's embedding of it alone, a text is the
normalised mean of its weighted rows, and the static model round-trips like any model."""

import numpy as np
import pytest

from helpers import assert_model_round_trip, tiny_model


def test_sif_weights_by_hand():
    from tt_zoo.modeling.static_distillation import sif_weights
    # p = [0, 0.25, 0.75]; a / (a + p) with a = 0.25: [1, 0.5, 0.25]
    np.testing.assert_allclose(sif_weights([0, 1, 3], a=0.25), [1.0, 0.5, 0.25])
    with pytest.raises(ValueError, match="positive total"):
        sif_weights([0, 0])


def test_pca_keeps_the_leading_axes():
    from tt_zoo.modeling.static_distillation import pca
    rng = np.random.default_rng(0)
    # Variance 9, 4, 1 along three orthogonal directions, rotated.
    basis, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    x = (rng.standard_normal((4000, 3)) * [3.0, 2.0, 1.0]) @ basis.T + 5.0
    reduced = pca(x, 2)
    assert reduced.shape == (4000, 2)
    np.testing.assert_allclose(reduced.var(0), [9.0, 4.0], rtol=0.1)
    assert abs(np.corrcoef(reduced.T)[0, 1]) < 0.05
    with pytest.raises(ValueError, match="PCA dimension"):
        pca(x, 4)


def test_rows_are_each_token_alone_and_texts_their_weighted_mean(tmp_path):
    import tensorflow as tf
    from tt_zoo.modeling.static_distillation import (distill_static_model, pca, sif_weights,
                                                     token_vectors)
    teacher = tiny_model(pooling="mean", normalize_embeddings=True)
    teacher.build_by_calling()
    pre = teacher.query_preprocessor
    vectors = token_vectors(teacher, batch_size=7)
    who = pre.vocabulary.index("who")
    alone = teacher.query_tower({"input_word_ids": tf.constant([[pre.cls_id, who, pre.sep_id]]),
                                 "input_mask": tf.ones([1, 3], tf.int32),
                                 "input_type_ids": tf.zeros([1, 3], tf.int32)}, training=False)
    np.testing.assert_allclose(vectors[who], alone.numpy()[0], atol=1e-6)

    counts = np.arange(pre.vocab_size) % 5
    static, stats = distill_static_model(teacher, counts, dim=4)
    assert 0 < stats["pca_variance_kept"] <= 1
    table = pca(vectors, 4) * sif_weights(counts)[:, None]
    ids = [pre.cls_id, who, pre.vocabulary.index("discovered"), pre.sep_id]
    want = table[ids].mean(0)
    np.testing.assert_allclose(static.encode_queries("who discovered"),
                               want / np.linalg.norm(want), atol=1e-5)
    assert_model_round_trip(static, tmp_path / "static")


def test_counts_must_cover_the_vocabulary():
    from tt_zoo.modeling.static_distillation import distill_static_model
    teacher = tiny_model()
    teacher.build_by_calling()
    with pytest.raises(ValueError, match="one entry per vocabulary token"):
        distill_static_model(teacher, np.ones(3), dim=4)
