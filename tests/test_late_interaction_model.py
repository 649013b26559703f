"""Late interaction (ColBERT, Khattab & Zaharia 2020): MaxSim, masks, training, CLI, export."""

import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tt_zoo
from helpers import PAIRS, graph_ops, json_round_trip, load_recipe, pair_dataset, tiny_model, \
    tiny_vocab, tokenized_batch
from tt_zoo.data import features as F
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.late_interaction import (AugmentedQueryPreprocessor, LateInteractionTower,
                                              punctuation_ids)
from tt_zoo.modeling.late_interaction_model import (LateInteractionModel,
                                                    build_late_interaction_model,
                                                    warm_start_from, warm_start_options)
from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
from tt_zoo.modeling.models import TwoTowerModel
from tt_zoo.modeling.pair_model import PairModel
from tt_zoo.modeling.maxsim import MASK, TOKEN_VECTORS, maxsim_candidate_scores, maxsim_scores
from tt_zoo.training.grad_cache import GradCacheError, use_grad_cache

REPO = pathlib.Path(__file__).resolve().parents[1]
VOCAB = tiny_vocab()


def softmax_xent(row, label):
    return -(row[label] - math.log(sum(math.exp(v) for v in row)))


def tiny_colbert(**kwargs):
    """A seeded ColBERT: 1 layer, hidden 16, token vectors of 8, queries 12, documents 24."""
    tf.keras.utils.set_random_seed(0)
    return build_late_interaction_model(VOCAB, embedding_dim=8, size=None, num_layers=1,
                                        hidden_size=16, num_attention_heads=2, inner_dim=32,
                                        query_length=12, document_length=24, **kwargs)


def tokens(ids):
    return [VOCAB[i] for i in np.asarray(ids).tolist()]


# ---------------------------------------------------------------- MaxSim, by hand

# Two queries of 2 tokens, four documents of 3 tokens (dim 2); masked tokens in brackets:
#   q0 = [1, 0], [0, 1]             q1 = [.6, .8], ([1, 0])
#   d0 = [1, 0], [.6, .8], ([0, 1])   (the padding would be q0's second token's best: 1 > .8)
#   d1 = [0, 1], [-1, 0], ([0, 0])
#   d2 = [-1, 0], ([0, 0]), ([0, 0])  (every real dot product < 0: a zeroed pad must not win)
#   d3 = ([1, 0]), ([0, 1]), ([1, 0]) (no token: scores 0)
# S(q, d) = sum over q's tokens of the max dot product with d's tokens:
#   S(q0, d0) = max(1, .6) + max(0, .8) = 1.8      S(q1, d0) = max(.6, .36 + .64) = 1.0
#   S(q0, d1) = max(0, -1) + max(1, 0)  = 1.0      S(q1, d1) = max(.8, -.6)       = 0.8
#   S(q0, d2) = -1 + 0                  = -1.0     S(q1, d2) = -.6
#   S(q0, d3) = 0                                  S(q1, d3) = 0
QUERY_VECTORS = tf.constant([[[1.0, 0.0], [0.0, 1.0]], [[0.6, 0.8], [1.0, 0.0]]])
QUERY_MASK = tf.constant([[1, 1], [1, 0]])
DOC_VECTORS = tf.constant([[[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]],
                           [[0.0, 1.0], [-1.0, 0.0], [0.0, 0.0]],
                           [[-1.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
                           [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]])
DOC_MASK = tf.constant([[1, 1, 0], [1, 1, 0], [1, 0, 0], [0, 0, 0]])
EXPECTED_SCORES = [[1.8, 1.0, -1.0, 0.0], [1.0, 0.8, -0.6, 0.0]]


def test_maxsim_by_hand():
    scores = maxsim_scores(QUERY_VECTORS, QUERY_MASK, DOC_VECTORS, DOC_MASK)
    np.testing.assert_allclose(scores.numpy(), EXPECTED_SCORES, atol=1e-6)
    with pytest.raises(ValueError, match="3D"):
        maxsim_scores(QUERY_VECTORS[0], QUERY_MASK, DOC_VECTORS, DOC_MASK)


def test_maxsim_of_each_query_with_its_own_candidates_by_hand():
    """A distillation batch's scores: q0 with its candidates d0, d1 and q1 with d2, d3 (rows
    b * K ...), the hand-worked numbers above: S(q0, d0), S(q0, d1), S(q1, d2), S(q1, d3)."""
    queries = {TOKEN_VECTORS: QUERY_VECTORS, MASK: QUERY_MASK}
    candidates = {TOKEN_VECTORS: DOC_VECTORS, MASK: DOC_MASK}
    np.testing.assert_allclose(maxsim_candidate_scores(queries, candidates).numpy(),
                               [[1.8, 1.0], [-0.6, 0.0]], atol=1e-6)
    first = {TOKEN_VECTORS: DOC_VECTORS[::2], MASK: DOC_MASK[::2]}  # K = 1: d0 and d2
    np.testing.assert_allclose(maxsim_candidate_scores(queries, first).numpy(),
                               [[1.8], [-0.6]], atol=1e-6)


def test_a_colbert_student_distils_by_maxsim():
    """`PairModel.distillation_loss` on a ColBERT model scores each query's candidates by
    MaxSim (its document, then its hard negatives), as `DistillationLoss` takes them."""
    from tt_zoo.modeling.distillation import DistillationLoss

    model = tiny_colbert()
    loss = DistillationLoss("kl", temperature=0.5, student_temperature=1.0)
    model.set_distillation(loss)
    queries = {TOKEN_VECTORS: QUERY_VECTORS, MASK: QUERY_MASK}
    embeddings = {"query": queries,
                  "document": {TOKEN_VECTORS: DOC_VECTORS[::2], MASK: DOC_MASK[::2]},
                  "hard_negative": {TOKEN_VECTORS: DOC_VECTORS[1::2], MASK: DOC_MASK[1::2]}}
    teacher = tf.constant([[0.9, 0.1], [0.7, 0.2]])
    student = tf.constant([[1.8, 1.0], [-0.6, 0.0]])  # S(q0, d0), S(q0, d1); S(q1, d2), S(q1, d3)
    np.testing.assert_allclose(model.distillation_loss(teacher, embeddings).numpy(),
                               loss(student, teacher).numpy(), atol=1e-6)


def test_maxsim_loss_by_hand():
    # Positives d0, d1; d2 a hard negative for both queries. Scores (rows q0, q1; columns
    # d0, d1, d2) from above: [[1.8, 1.0, -1.0], [1.0, 0.8, -0.6]].
    #   row 0: -log(e^1.8 / (e^1.8 + e^1 + e^-1)) = -log(6.0496 / 9.1358) = 0.41220
    #   row 1: -log(e^0.8 / (e^1 + e^0.8 + e^-0.6)) = -log(2.2255 / 5.4926) = 0.90341
    layer = CorrectedSampledSoftmaxLoss(remove_accidental_hits=False, similarity="maxsim")
    loss = layer({"token_vectors": QUERY_VECTORS, "mask": QUERY_MASK},
                 {"token_vectors": DOC_VECTORS[:2], "mask": DOC_MASK[:2]},
                 hard_negative_embeddings={"token_vectors": DOC_VECTORS[2:3],
                                           "mask": DOC_MASK[2:3]})
    row0, row1 = softmax_xent([1.8, 1.0, -1.0], 0), softmax_xent([1.0, 0.8, -0.6], 1)
    assert row0 == pytest.approx(0.41220, abs=1e-4) and row1 == pytest.approx(0.90341, abs=1e-4)
    assert float(loss) == pytest.approx((row0 + row1) / 2, abs=1e-5)
    # The in-batch top-1 metric saw the MaxSim scores: q0's positive wins, q1's does not.
    top1 = [m for m in layer.metrics if m.name == "in_batch_top1"]
    assert len(top1) == 1 and float(top1[0].result()) == pytest.approx(0.5)


def as_tokens(vectors):
    """[batch, dim] embeddings as one-token token vectors: MaxSim is then the dot product."""
    vectors = tf.constant(vectors)
    return {"token_vectors": vectors[:, tf.newaxis], "mask": tf.ones([len(vectors), 1], tf.int32)}


@pytest.mark.parametrize("options", [
    dict(), dict(temperature=0.5), dict(sampling_correction=False),
    dict(remove_accidental_hits=False)])
def test_maxsim_loss_is_the_dot_loss_on_one_token(options):
    """With one token per text MaxSim is the inner product, so the MaxSim path (the score
    matrix through `ScoredRetrieval.call_on_scores`) gives the single-vector loss (TFRS's
    `Retrieval.call`), corrections and all: test_losses' hand-worked example, where
    q0 = [1, 0], q1 = [0, 1], d0 = [2, 1], d1 = [1, 3], hard negative h = [0, 0], q(d) = .5, .25,
    q(h) = 1, and d0, d1 are one passage (id "a" twice): an accidental hit."""
    queries, documents, hard = [[1.0, 0.0], [0.0, 1.0]], [[2.0, 1.0], [1.0, 3.0]], [[0.0, 0.0]]
    args = dict(document_ids=tf.constant(["a", "a"]), sampling_probabilities=tf.constant([.5, .25]),
                hard_negative_ids=tf.constant(["h"]),
                hard_negative_sampling_probabilities=tf.constant([1.0]))
    dot = CorrectedSampledSoftmaxLoss(**options)(
        tf.constant(queries), tf.constant(documents), hard_negative_embeddings=tf.constant(hard),
        **args)
    maxsim = CorrectedSampledSoftmaxLoss(similarity="maxsim", **options)(
        as_tokens(queries), as_tokens(documents), hard_negative_embeddings=as_tokens(hard),
        **args)
    assert float(maxsim) == pytest.approx(float(dot), abs=1e-6)
    if not options:  # test_losses' numbers: masked rows [[2.6931, 0], [4.3863, 0]]
        assert float(maxsim) == pytest.approx((0.06548 + 0.01237) / 2, abs=1e-4)
    if options == dict(remove_accidental_hits=False):
        assert float(maxsim) == pytest.approx((0.58969 + 0.07707) / 2, abs=1e-4)


def test_loss_config_and_bad_inputs():
    layer = CorrectedSampledSoftmaxLoss(similarity="maxsim", temperature=0.2)
    config = json_round_trip(layer.get_config())
    assert config["similarity"] == "maxsim"
    assert CorrectedSampledSoftmaxLoss.from_config(config).similarity == "maxsim"
    # The single-vector loss's config is what it was (exports and run settings compare it).
    assert "similarity" not in CorrectedSampledSoftmaxLoss().get_config()
    with pytest.raises(ValueError, match="similarity"):
        CorrectedSampledSoftmaxLoss(similarity="cosine")
    with pytest.raises(ValueError, match="token_vectors"):
        CorrectedSampledSoftmaxLoss(similarity="maxsim", remove_accidental_hits=False)(
            QUERY_VECTORS, {"token_vectors": DOC_VECTORS, "mask": DOC_MASK})


def test_cross_replica_maxsim_loss_equals_single_device_loss():
    """MirroredStrategy over 2 logical CPUs: token vectors and masks are gathered across
    replicas; the same loss and gradients as one device on the global batch."""
    script = pathlib.Path(__file__).parent / "scripts" / "cross_replica_maxsim_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "CROSS_REPLICA_MAXSIM_OK" in result.stdout, result.stdout


# ---------------------------------------------------------------- the tower's masks

def test_query_augmentation_marker_and_mask_positions():
    model = tiny_colbert()
    packed = model.query_preprocessor(tf.constant(["who discovered penicillin?"]))
    assert tokens(packed["input_word_ids"][0]) == (
        ["[CLS]", "who", "discovered", "penicillin", "?", "[SEP]"] + ["[MASK]"] * 6)
    assert packed["input_mask"].numpy().tolist() == [[1] * 12]  # [MASK]s attended
    assert packed["input_type_ids"].numpy().tolist() == [[2] * 12]  # the query marker
    vectors = model.encode_query_tokens(["who discovered penicillin?", "who?"])
    assert [v.shape for v in vectors] == [(12, 8), (12, 8)]  # [MASK]s scored
    np.testing.assert_allclose(np.linalg.norm(vectors[0], axis=1), 1.0, atol=1e-5)

    # The same weights without augmentation: 6 tokens, and different vectors for them, since
    # the [MASK]s are no longer attended.
    plain = tiny_colbert(mask_augmentation=False)
    plain.build_by_calling()
    plain.set_weights(model.get_weights())
    plain_vectors = plain.encode_query_tokens(["who discovered penicillin?"])[0]
    assert plain_vectors.shape == (6, 8)
    # (A random tiny BERT attends almost uniformly: the change is small, far above rounding.)
    assert np.abs(plain_vectors - vectors[0][:6]).max() > 1e-4


def test_document_masks_padding_and_punctuation():
    model = tiny_colbert()
    assert [VOCAB[i] for i in model.tower.punctuation_ids] == ["?", ".", ",", "!", "'", "-"]
    titles, texts = ["paris", "water"], ["paris, france.", "water boils at 100 degrees!"]
    packed = model.document_preprocessor((tf.constant(titles), tf.constant(texts)))
    assert tokens(packed["input_word_ids"][0][:8]) == [
        "[CLS]", "paris", "[SEP]", "paris", ",", "france", ".", "[SEP]"]
    full = model.tower(packed, training=False)  # no punctuation masking: padding only
    assert full["mask"].numpy()[0].tolist() == [1] * 8 + [0] * 16
    encoded = model.encode_document_tokens(texts, titles=titles)
    assert encoded[0].shape == (6, 8)  # [CLS] paris [SEP] paris france [SEP]
    np.testing.assert_allclose(encoded[0], full["token_vectors"].numpy()[0][[0, 1, 2, 3, 5, 7]],
                               atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(encoded[1], axis=1), 1.0, atol=1e-5)
    # Padding is masked in attention too: the full-length batch gives the same vectors.
    unbucketed = model.encode_document_tokens(texts, titles=titles, bucketing=False)
    for a, b in zip(encoded, unbucketed):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert model.encode_document_tokens([]) == []


def test_punctuation_ids_of_the_project_vocabulary():
    from tt_zoo.data.text import load_vocab
    vocab = load_vocab(REPO / "saved_models" / "vocab" / "vocab.txt")
    ids = punctuation_ids(vocab)
    names = {vocab[i] for i in ids}
    assert {".", ",", "(", ")", "?", "\"", "'", "-", "$"} <= names
    assert not names & {"a", "the", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "1", "##s"}
    assert 30 <= len(ids) <= 300, len(ids)


def test_score_matches_maxsim_of_the_token_vectors():
    model = tiny_colbert()
    q = model.encode_query_tokens(PAIRS[F.QUERY])
    d = model.encode_document_tokens(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE])
    expected = [[(qi @ dj.T).max(axis=1).sum() for dj in d] for qi in q]
    scores = model.score(PAIRS[F.QUERY], PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE])
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- training

def test_a_few_training_steps_lower_the_loss():
    model = tiny_colbert()
    model.build_by_calling()
    batch = next(iter(pair_dataset()))
    before = float(model.compute_loss(batch))
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2), run_eagerly=True)
    history = model.fit(pair_dataset().repeat(), steps_per_epoch=12, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert float(model.compute_loss(batch)) < before - 0.1, before


def test_tokenized_batch_with_hard_negatives_trains():
    model = tiny_colbert()
    model.build_by_calling()
    inputs = tokenized_batch(model, hard_negatives=1)
    # The host tokenization is the augmented query packing.
    assert (inputs[F.QUERY_INPUTS]["input_type_ids"].numpy() == 2).all()
    with tf.GradientTape() as tape:
        loss = model.compute_loss(inputs, training=True)
    gradients = tape.gradient(loss, model.tower.projection.trainable_variables)
    assert np.isfinite(float(loss)) and all(float(tf.norm(g)) > 0 for g in gradients)


def test_unsupported_options_fail_clearly():
    model = tiny_colbert()
    with pytest.raises(GradCacheError, match="--grad-cache-chunk"):
        use_grad_cache(model, 4)
    use_grad_cache(model, None)  # off is fine
    with pytest.raises(ValueError, match="similarity='maxsim'"):
        LateInteractionModel(model.query_preprocessor, model.document_preprocessor, model.tower,
                             loss=CorrectedSampledSoftmaxLoss())
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        AugmentedQueryPreprocessor([t for t in VOCAB if t != "[MASK]"], seq_length=8)
    with pytest.raises(ValueError, match="punctuation_ids"):
        LateInteractionTower(len(VOCAB), 8, size="tiny", punctuation_ids=[len(VOCAB)])


def test_shares_the_pair_model_not_the_two_tower_encoders():
    """A late-interaction model is a `PairModel` beside `TwoTowerModel`, not one of them: it has
    no single-vector encoder (not one that raises), and its one tower is both sides'."""
    model = tiny_colbert()
    assert isinstance(model, PairModel) and not isinstance(model, TwoTowerModel)
    for method in ("encode_queries", "encode_documents", "encode_document_inputs", "_finish"):
        assert not hasattr(model, method), method
    assert model.query_tower is model.tower is model.document_tower and model.share_towers
    assert model.normalize_embeddings  # what run settings record (its token vectors are unit)


# ---------------------------------------------------------------- export and tt_zoo.load

@pytest.fixture(scope="module")
def colbert_export(tmp_path_factory):
    from tt_zoo.artifacts.export import export_saved_model
    model = tiny_colbert()
    model.build_by_calling()
    path = tmp_path_factory.mktemp("colbert") / "export"
    meta = export_saved_model(model, path, {"name": "colbert_tiny_test", "encoder": "colbert",
                                            "pretraining": "none"})
    return model, path, meta


def test_export_signatures_ops_and_metadata(colbert_export):
    from tt_zoo.artifacts.export import verify_export
    model, path, meta = colbert_export
    assert meta["signatures"] == ["serving_default", "encode_query_tokens",
                                  "encode_document_tokens"]
    assert meta["scoring"] == "maxsim" and meta["embedding_dim"] == 8
    assert meta["late_interaction"]["query_augmentation"] == "[MASK]"
    assert meta["late_interaction"]["document_punctuation_tokens_masked"] == 6
    assert verify_export(path) == meta
    card = (path / "MODEL_CARD.md").read_text()
    assert "ColBERT" in card and "encode_query_tokens" in card and "index(" not in card
    # The op whitelist: every op that is not core TensorFlow is a tensorflow-text kernel (TF
    # Serving with tensorflow-text serves it).
    found = graph_ops(path)
    assert found["other"] == [] and found["text"], found

    serving = tf.saved_model.load(str(path))
    assert set(serving.signatures) == set(meta["signatures"])
    out = serving.signatures["encode_query_tokens"](query=tf.constant(PAIRS[F.QUERY]))
    assert out["token_vectors"].shape == (4, 12, 8) and (out["mask"].numpy() == 1).all()
    expected = model.encode_query_tokens(PAIRS[F.QUERY])
    np.testing.assert_allclose(out["token_vectors"].numpy(), np.stack(expected), atol=1e-5)
    out = serving.signatures["encode_document_tokens"](
        title=tf.constant(PAIRS[F.DOC_TITLE]), passage=tf.constant(PAIRS[F.DOC_TEXT]))
    expected = model.encode_document_tokens(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE])
    vectors, mask = out["token_vectors"].numpy(), out["mask"].numpy().astype(bool)
    assert vectors.shape[1] == max(len(t) for t in tokens_per_document(model)) < 24  # cut
    for i, e in enumerate(expected):
        np.testing.assert_allclose(vectors[i][mask[i]], e, atol=1e-5)
        assert not vectors[i][~mask[i]].any()  # masked positions are zero vectors


def tokens_per_document(model):
    packed = model.document_preprocessor((tf.constant(PAIRS[F.DOC_TITLE]),
                                          tf.constant(PAIRS[F.DOC_TEXT])))
    return [row[row > 0] for row in packed["input_word_ids"].numpy()]


def test_export_round_trip_through_tt_zoo_load(colbert_export):
    model, path, _ = colbert_export
    clone = LateInteractionModel.from_config(json_round_trip(model.get_config()))
    clone.build_by_calling()
    assert json_round_trip(clone.get_config()) == json_round_trip(model.get_config())

    loaded = tt_zoo.load(path)
    assert isinstance(loaded.keras_model, LateInteractionModel)
    assert json_round_trip(loaded.keras_model.get_config()) == json_round_trip(model.get_config())
    # Golden-style: the first token vectors' leading dims and every MaxSim score agree.
    queries, docs, titles = PAIRS[F.QUERY], PAIRS[F.DOC_TEXT], PAIRS[F.DOC_TITLE]
    expected_q, got_q = model.encode_query_tokens(queries), loaded.encode_query_tokens(queries)
    expected_d = model.encode_document_tokens(docs, titles=titles)
    got_d = loaded.encode_document_tokens(docs, titles=titles)
    for e, g in zip(expected_q + expected_d, got_q + got_d):
        assert e.shape == g.shape and g.dtype == np.float32
        np.testing.assert_allclose(g[:4], e[:4], atol=1e-5)
    np.testing.assert_allclose(loaded.score(queries, docs, titles=titles),
                               model.score(queries, docs, titles=titles), atol=1e-5)
    hits = loaded.index(docs, titles=titles).search(queries[0], k=2)  # its card's best mode
    assert 0 < len(hits) <= 2 and all(0 <= int(h.id) < len(docs) for h in hits)
    # The reloaded model fine-tunes with plain Keras.
    loaded.compile(optimizer=tf.keras.optimizers.Adam(1e-3), run_eagerly=True)
    history = loaded.fit(pair_dataset(), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


# ---------------------------------------------------------------- registry, warm start, CLI

def test_registered_colbert_variants():
    from tt_zoo.zoo.registry import REGISTRY
    from tt_zoo.zoo.build import build_untrained
    spec = REGISTRY["colbert_ict_bfs_wlp_crop_span_qgen_64"]
    assert (spec.encoder, spec.tower_size, spec.embedding_dim) == ("colbert", "tiny", 64)
    assert (spec.query_length, spec.document_length) == (32, 128)
    assert "--init-from saved_models/ict_bfs_wlp_512 " in spec.recipe_command()  # its run's
    assert "--init-from ict_bfs_wlp_512 " in REGISTRY["colbert_ict_64"].recipe_command()
    assert {f"colbert_ict_bfs_wlp_{m}" for m in (32, 64, 128)} <= set(REGISTRY)
    assert "colbert_mlm_64" not in REGISTRY and "colbert_none_64" not in REGISTRY
    model = build_untrained(spec, VOCAB, document_length=24,
                            tower_shape=dict(num_layers=1, hidden_size=16, num_attention_heads=2))
    assert isinstance(model, LateInteractionModel) and model.retrieval_loss.temperature is None
    assert model.encode_query_tokens(["who?"])[0].shape == (32, 64)


def test_warm_start_from_the_shipped_flagship():
    source = tt_zoo.load("ict_bfs_wlp_512").keras_model
    model = build_late_interaction_model(source.query_preprocessor.vocabulary, embedding_dim=64,
                                         query_length=32, document_length=128)
    record = warm_start_from(model, source)
    assert record["new"] == ["token_projection"] and "shared tower" in record["copied"]
    for ours, theirs in zip(model.tower.encoder.weights, source.query_tower.encoder.weights):
        if "type_embeddings" in ours.name:
            np.testing.assert_array_equal(ours.numpy()[2], theirs.numpy()[0])  # query marker
            np.testing.assert_array_equal(np.delete(ours.numpy(), 2, 0),
                                          np.delete(theirs.numpy(), 2, 0))
        else:
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    longer = build_late_interaction_model(source.query_preprocessor.vocabulary,
                                          embedding_dim=64, document_length=160)
    with pytest.raises(TtZooError, match="max_sequence_length"):
        warm_start_from(longer, source)


def test_warm_start_from_an_imported_checkpoints_shape():
    """A source shaped as an imported checkpoint (all-MiniLM-L6-v2: two segment rows, 512
    positions) warm-starts a ColBERT tower whose query marker needs a third segment row and
    which covers fewer positions: segment rows copied and the rest from row 0, positions cut to
    the tower's first rows, every other weight as is."""
    from tt_zoo.modeling.models import build_two_tower_model

    tf.keras.utils.set_random_seed(1)
    source = build_two_tower_model(VOCAB, size=None, num_layers=1, hidden_size=16,
                                   num_attention_heads=2, inner_dim=32, embedding_dim=8,
                                   query_length=16, document_length=24, max_sequence_length=64,
                                   type_vocab_size=2, share_towers=True, pooling="mean",
                                   inner_activation="gelu")
    with pytest.raises(TtZooError, match="activation is 'gelu', this tower's 'gelu_approx"):
        warm_start_from(tiny_colbert(), source)  # the same weights would compute otherwise
    assert warm_start_options(source) == {"inner_activation": "gelu"}
    model = tiny_colbert(**warm_start_options(source))
    record = warm_start_from(model, source)
    assert record["fitted"] == ["position_embedding: the first 24 of 64 rows",
                                "type_embeddings: 2 rows, 14 more copied from row 0"]
    assert record["query_marker"] == "type embedding row 2 initialised from row 0"
    pairs = list(zip(model.tower.encoder.weights, source.query_tower.encoder.weights))
    assert len(pairs) == len(source.query_tower.encoder.weights)
    for ours, theirs in pairs:
        ours, name, theirs = ours.numpy(), ours.name, theirs.numpy()
        if "type_embeddings" in name:
            np.testing.assert_array_equal(ours[:2], theirs)
            np.testing.assert_array_equal(ours[2:], np.repeat(theirs[:1], len(ours) - 2, 0))
        elif "position_embedding" in name:
            np.testing.assert_array_equal(ours, theirs[:24])
        else:
            np.testing.assert_array_equal(ours, theirs)
    wider = build_two_tower_model(VOCAB, size=None, num_layers=1, hidden_size=32,
                                  num_attention_heads=2, inner_dim=32, embedding_dim=8,
                                  query_length=16, document_length=24, share_towers=True)
    with pytest.raises(TtZooError, match="BERT shape must be the source's"):
        warm_start_from(tiny_colbert(), wider)
    assert warm_start_options(tiny_model("bow_mlp")) == {}


@pytest.fixture(scope="module")
def pretrain_inputs(tmp_path_factory):
    """96 pairs of the tiny vocabulary, and a tiny single-vector export to warm-start from
    (shared tower of the CLI's --tower-shape 1,16,2: inner size 64, 24 positions)."""
    from tt_zoo.data.pairs_io import write_pair_shards
    from tt_zoo.data.pretraining_tasks import Pair
    from tt_zoo.modeling.models import build_two_tower_model
    from tt_zoo.artifacts.export import export_saved_model
    root = tmp_path_factory.mktemp("colbert_pretrain")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    words = "the a of in is who what paris france river water london city".split()
    rng = np.random.default_rng(0)
    pairs = [Pair(query=" ".join(rng.choice(words, 6)), doc_title=str(rng.choice(words)),
                  doc_text=" ".join(rng.choice(words, 12)) + ".", doc_id=f"d{i % 40}",
                  task=("ict", "bfs", "wlp")[i % 3]) for i in range(96)]
    write_pair_shards(pairs, str(root / "pairs"), num_shards=2)
    tf.keras.utils.set_random_seed(0)
    single = build_two_tower_model(VOCAB, size=None, num_layers=1, hidden_size=16,
                                   num_attention_heads=2, inner_dim=64, embedding_dim=16,
                                   query_length=16, document_length=24, share_towers=True,
                                   pooling="mean", normalize_embeddings=True)
    single.build_by_calling()
    export_saved_model(single, root / "single", {"name": "single_tiny", "pretraining": "ict"})
    return root, vocab


def pretrain_args(root, vocab, *extra):
    return ["--variant", "colbert_ict_bfs_wlp_32", "--pairs", str(root / "pairs"),
            "--vocab", str(vocab), "--batch-size", "8", "--tower-shape", "1,16,2",
            "--query-length", "8", "--document-length", "24", "--learning-rate", "1e-3",
            "--token-cache", str(root / "token_cache"), "--no-progress", *extra]


def test_pretrain_cli_trains_a_colbert_variant_and_exports(pretrain_inputs, capsys):
    root, vocab = pretrain_inputs
    export = root / "colbert_export"
    pretrain = load_recipe("pretrain")
    assert pretrain.main(pretrain_args(
        root, vocab, "--steps", "3", "--checkpoint-every", "2", "--workdir", str(root / "run"),
        "--init-from", str(root / "single"), "--export", str(export))) == 0
    out = capsys.readouterr().out
    assert "trained to step 3" in out, out
    loaded = tt_zoo.load(export)
    meta = loaded.metadata
    assert meta["encoder"] == "colbert" and meta["train_steps"] == 3
    assert meta["scoring"] == "maxsim" and meta["embedding_dim"] == 32
    assert meta["warm_start"]["from"] == str(root / "single")
    assert meta["warm_start"]["new"] == ["token_projection"]
    assert meta["warm_start"]["query_marker"] == "type embedding row 2 initialised from row 0"
    assert [v.shape for v in loaded.encode_query_tokens(["who?", "paris"])] == [(8, 32)] * 2
    settings = json.loads((root / "run" / "checkpoints" / "run_settings.json").read_text())
    assert settings["loss"]["similarity"] == "maxsim"


def test_token_cache_tells_augmented_queries_from_plain_ones(pretrain_inputs, tmp_path):
    from helpers import tiny_model
    from tt_zoo.training.step_data import cached_tokenize_pair_set
    root, _ = pretrain_inputs
    single, colbert = tiny_model(), build_late_interaction_model(
        VOCAB, embedding_dim=8, size=None, num_layers=1, hidden_size=16, num_attention_heads=2,
        query_length=16, document_length=24)  # the same vocabulary and lengths
    plain = cached_tokenize_pair_set(single, str(root / "pairs"), str(tmp_path), log=print)
    augmented = cached_tokenize_pair_set(colbert, str(root / "pairs"), str(tmp_path), log=print)
    assert len(list(tmp_path.glob("tokens-*.npz"))) == 2  # two cache files, not one
    assert (plain[F.QUERY_INPUTS]["input_type_ids"] == 0).all()
    assert (augmented[F.QUERY_INPUTS]["input_type_ids"] == 2).all()
    assert (augmented[F.QUERY_INPUTS]["input_mask"] == 1).all()


def test_late_interaction_zoo_model_has_no_single_vector(colbert_export):
    _, path, _ = colbert_export
    loaded = tt_zoo.load(path)
    with pytest.raises(TtZooError, match="no single query vector: use encode_query_tokens"):
        loaded.encode_queries(["who?"])
    with pytest.raises(TtZooError, match="no single document vector: use encode_document_tokens"):
        loaded.encode_documents(["a passage"])


def test_single_vector_zoo_model_has_no_token_vectors(pretrain_inputs):
    root, _ = pretrain_inputs
    with pytest.raises(TtZooError, match="single-vector"):
        tt_zoo.load(root / "single").encode_query_tokens(["who?"])


@pytest.mark.parametrize("extra, message", [
    (("--grad-cache-chunk", "4"), "--grad-cache-chunk 4: GradCache"),
    (("--cluster-every", "2"), "--cluster-every: colbert_ict_bfs_wlp_32 is a late-interaction"),
    (("--pooling", "mean"), "--pooling: colbert_ict_bfs_wlp_32 is a late-interaction")])
def test_pretrain_cli_refuses_single_vector_options(pretrain_inputs, tmp_path, extra, message):
    root, vocab = pretrain_inputs
    with pytest.raises(SystemExit, match=message):
        load_recipe("pretrain").main(pretrain_args(root, vocab, "--steps", "2", "--workdir",
                                                   str(tmp_path / "run"), *extra))
