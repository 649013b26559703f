"""GradCache (tt_zoo.training.grad_cache): the full-batch gradients, one chunk at a time."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from helpers import BATCH_WORDS as WORDS
from helpers import load_recipe, tiny_model, tiny_vocab, tokenized_batch
from tt_zoo.data import features as F
from tt_zoo.modeling.models import TwoTowerModel
from tt_zoo.modeling.towers import BowMlpTower, masked_mean
from tt_zoo.training import loop
from tt_zoo.training.grad_cache import (GradCacheError, GradCacheStep, grad_cache_gradients,
                                        use_grad_cache)

BATCH, CHUNK, HARD = 8, 3, 2  # chunks of 3, 3 and 2 examples: the last one is short


def rows(inputs, start, end):
    """Examples [start, end) of a batch (hard negatives: their rows start * H ... end * H)."""
    def cut(t):
        per_example = t.shape[0] // BATCH
        return t[start * per_example:end * per_example]
    return tf.nest.map_structure(cut, inputs)


def chunked_reference(model, inputs, chunk):
    """The plain gradient of the loss of embeddings computed chunk by chunk, all under one tape
    (the activations of every chunk live at once): what GradCache must equal."""
    with tf.GradientTape() as tape:
        parts = [model.embed_for_loss(rows(inputs, s, min(s + chunk, BATCH)), training=True)
                 for s in range(0, BATCH, chunk)]
        embeddings = {k: tf.concat([p[k] for p in parts], 0) for k in parts[0]}
        loss = model.loss_from_embeddings(inputs, embeddings)
    return loss, tape.gradient(loss, model.trainable_variables)


def full_batch(model, inputs):
    with tf.GradientTape() as tape:
        loss = model.compute_loss(inputs, training=True)
    return loss, tape.gradient(loss, model.trainable_variables)


def assert_same_gradients(expected, actual):
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert (e is None) == (a is None)
        if e is not None:
            np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(e),
                                       rtol=1e-4, atol=1e-6)


def without_names(config):
    """A config without its "name" entries (Keras numbers each new layer's name)."""
    if isinstance(config, dict):
        return {k: without_names(v) for k, v in config.items() if k != "name"}
    if isinstance(config, list):
        return [without_names(v) for v in config]
    return config


@pytest.fixture
def checkpointable_randomness():
    """Dropout from tf.random.Generators (as pretraining sets it up), for this test only."""
    loop.enable_checkpointable_randomness(0)
    yield
    tf.keras.backend.experimental.disable_tf_random_generator()


# Eagerly (tf.while_loop runs its body as Python) where the point is the arithmetic: tracing
# the two chunk loops costs ~10 s. The dropout, `fit`, CLI and MirroredStrategy tests run the
# step as training does, in a tf.function.

@pytest.mark.parametrize("encoder", ["bert", "bow_mlp"])
def test_gradients_equal_the_full_batch_gradients(encoder):
    model = tiny_model(encoder, dropout_rate=0.0)
    if encoder == "bert":  # a trainable variable the loss does not use: the encoder's pooler
        model.query_tower.encoder.pooler_layer.trainable = True
    inputs = tokenized_batch(model)
    expected_loss, expected = full_batch(model, inputs)
    result = grad_cache_gradients(model, inputs, CHUNK)
    assert float(result.loss) == pytest.approx(float(expected_loss), rel=1e-5)
    assert_same_gradients(expected, result.gradients)
    # An unused variable's gradient is None, as a tape gives, not zeros.
    assert any(g is None for g in expected) == (encoder == "bert")


def test_gradients_with_hard_negatives():
    model = tiny_model("bert", dropout_rate=0.0, pooling="mean")
    inputs = tokenized_batch(model, hard_negatives=HARD)
    expected_loss, expected = full_batch(model, inputs)
    result = grad_cache_gradients(model, inputs, CHUNK)
    assert float(result.loss) == pytest.approx(float(expected_loss), rel=1e-5)
    assert_same_gradients(expected, result.gradients)
    # The hard negatives count: without them the loss is another number.
    plain = {k: v for k, v in inputs.items() if not k.startswith("hard_negative")}
    assert abs(float(model.compute_loss(plain, training=True)) - float(expected_loss)) > 1e-3


def test_raw_string_batches_with_hard_negatives():
    """Untokenized pairs, hard negatives as HARD_NEGATIVE_TITLES/TEXTS [batch, H] strings."""
    model = tiny_model("bow_mlp")
    rng = np.random.default_rng(1)
    inputs = {F.QUERY: tf.constant([" ".join(rng.choice(WORDS, 5)) for _ in range(BATCH)]),
              F.DOC_TITLE: tf.constant([str(rng.choice(WORDS)) for _ in range(BATCH)]),
              F.DOC_TEXT: tf.constant([" ".join(rng.choice(WORDS, 9)) for _ in range(BATCH)]),
              F.HARD_NEGATIVE_TITLES: tf.constant(rng.choice(WORDS, [BATCH, HARD])),
              F.HARD_NEGATIVE_TEXTS: tf.constant(rng.choice(WORDS, [BATCH, HARD]))}
    expected_loss, expected = full_batch(model, inputs)
    result = grad_cache_gradients(model, inputs, CHUNK)
    assert float(result.loss) == pytest.approx(float(expected_loss), rel=1e-5)
    assert_same_gradients(expected, result.gradients)


class DropoutBowTower(BowMlpTower):
    """The BoW-MLP tower with dropout on its pooled vector: dropout in a tower that traces in
    a second (the BERT tower's chunk loops take ~30 s to trace on a busy machine)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dropout = tf.keras.layers.Dropout(0.5)

    def call(self, inputs, training=None):
        pooled = masked_mean(self.token_embeddings(inputs["input_word_ids"]),
                             inputs["input_mask"])
        return self.output_layer(self.hidden(self.dropout(pooled, training=training)))


def dropout_bow_model():
    base = tiny_model("bow_mlp")
    tower = DropoutBowTower(base.query_preprocessor.vocab_size, 8, token_embedding_dim=8,
                            hidden_dim=16)
    return TwoTowerModel(base.query_preprocessor, base.document_preprocessor, tower)


@pytest.mark.parametrize("encoder", ["bert", "dropout_bow"])
def test_dropout_masks_are_replayed(encoder, checkpointable_randomness):
    """With dropout, each chunk's second pass must draw the first pass's masks: GradCache then
    equals the gradient of the chunked forward, and leaves the generators where it left them.
    The BERT tower eagerly; a BoW tower with dropout in a tf.function (as `fit` runs it), where
    only the graph's ordering puts each restore before its chunk's pass."""
    model = (tiny_model("bert", dropout_rate=0.3) if encoder == "bert"
             else dropout_bow_model())
    model.build_by_calling()
    generators = loop.dropout_generators(model)
    assert generators
    start = [g.state.numpy() for g in generators]
    inputs = tokenized_batch(model, hard_negatives=HARD)

    expected_loss, expected = chunked_reference(model, inputs, CHUNK)
    after_reference = [g.state.numpy() for g in generators]
    for g, s in zip(generators, start):
        g.state.assign(s)
    step = grad_cache_gradients if encoder == "bert" else tf.function(grad_cache_gradients)
    result = step(model, inputs, CHUNK)
    assert float(result.loss) == pytest.approx(float(expected_loss), rel=1e-5)
    assert_same_gradients(expected, result.gradients)
    for s, expected_state in zip(generators, after_reference):
        np.testing.assert_array_equal(s.state.numpy(), expected_state)

    # Dropout is really on: the same chunks with other masks give other gradients.
    _, other = chunked_reference(model, inputs, CHUNK)
    assert not np.allclose(tf.convert_to_tensor(other[0]), tf.convert_to_tensor(expected[0]))


def test_legacy_dropout_is_refused():
    model = tiny_model("bert", dropout_rate=0.1)  # without checkpointable randomness
    with pytest.raises(GradCacheError, match="enable_checkpointable_randomness"):
        grad_cache_gradients(model, tokenized_batch(model), CHUNK)


def test_bad_chunk_sizes_are_refused():
    model = tiny_model("bow_mlp")
    for bad in (0, -2, 2.5, True):
        with pytest.raises(GradCacheError, match="chunk size"):
            use_grad_cache(model, bad)
    assert model.gradient_step is None


def test_fit_step_equals_the_full_batch_step_and_config_is_unchanged():
    """`use_grad_cache` (a gradient step training sets on the model): two `fit` steps give the
    full-batch steps' weights and logs; the model's config (what exports and `tt_zoo.load`
    rebuild from, with the loss layer's recorded input shapes) and its tracked objects are
    those of the ordinary model."""
    models = [tiny_model("bow_mlp") for _ in range(2)]
    for model in models:
        model.build_by_calling()
    models[1].set_weights(models[0].get_weights())
    logs = []
    for model, chunk in zip(models, (None, CHUNK)):
        use_grad_cache(model, chunk)
        model.compile(optimizer=tf.keras.optimizers.SGD(0.5))
        data = tf.data.Dataset.from_tensors(tokenized_batch(model, hard_negatives=HARD))
        logs.append(model.fit(data.repeat(2), epochs=1, verbose=0).history)
    assert models[1].gradient_step == GradCacheStep(CHUNK) and models[0].gradient_step is None
    for name in ("loss", "in_batch_top1"):
        np.testing.assert_allclose(logs[1][name], logs[0][name], rtol=1e-5, err_msg=name)
    for a, b in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    configs = [json.dumps(without_names(m.get_config())) for m in models]
    assert configs[1] == configs[0] and "grad_cache" not in configs[1]
    # Nothing new is tracked, so checkpoints and SavedModels hold the same objects.
    children = [sorted(tf.train.TrackableView(m).children(m)) for m in models]
    assert children[1] == children[0]


@pytest.mark.slow  # ~30-70 s: a fresh interpreter imports TensorFlow and traces 2 replicas
def test_mirrored_strategy_grad_cache_step_equals_the_full_batch_step():
    """MirroredStrategy over 2 logical CPUs with GradCache (cross-replica and hard negatives)
    against one device's full-batch step (tests/scripts/grad_cache_mirrored_check.py, its own
    process: logical devices must be set before TensorFlow initialises)."""
    script = pathlib.Path(__file__).parent / "scripts" / "grad_cache_mirrored_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "GRAD_CACHE_MIRRORED_OK" in result.stdout, result.stdout


@pytest.fixture
def pair_dir(tmp_path):
    from tt_zoo.data.pairs_io import write_pair_shards
    from tt_zoo.data.pretraining_tasks import Pair
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    rng = np.random.default_rng(0)
    pairs = [Pair(query=" ".join(rng.choice(WORDS, 6)), doc_title=str(rng.choice(WORDS)),
                  doc_text=" ".join(rng.choice(WORDS, 12)), doc_id=f"d{i}", task="ict")
             for i in range(16)]
    write_pair_shards(pairs, str(tmp_path / "pairs"), num_shards=1)
    return tmp_path, vocab


def pretrain_args(root, vocab, *extra):
    return ["--variant", "bow_mlp_ict_bfs_wlp_512", "--pairs", str(root / "pairs"), "--vocab",
            str(vocab), "--steps", "1", "--batch-size", "8", "--query-length", "16",
            "--document-length", "24", "--workdir", str(root / "run"),
            "--token-cache", "", "--no-progress", *extra]


def test_cli_flag_trains_and_is_recorded(pair_dir, checkpointable_randomness):
    root, vocab = pair_dir
    recipe = load_recipe("pretrain")
    assert recipe.main(pretrain_args(root, vocab, "--grad-cache-chunk", "4")) == 0
    settings = json.loads((root / "run" / "checkpoints" / "run_settings.json").read_text())
    summary = json.loads((root / "run" / "train_summary.json").read_text())
    assert settings["grad_cache_chunk"] == 4 and summary["grad_cache_chunk"] == 4
    assert np.isfinite(summary["final_loss"])


def test_cli_refuses_a_chunk_that_does_not_divide_the_batch(pair_dir, checkpointable_randomness):
    root, vocab = pair_dir
    recipe = load_recipe("pretrain")
    with pytest.raises(SystemExit, match=r"--grad-cache-chunk 3.*batch of 8"):
        recipe.main(pretrain_args(root, vocab, "--grad-cache-chunk", "3"))
    with pytest.raises(SystemExit, match="without XLA"):
        recipe.main(pretrain_args(root, vocab, "--grad-cache-chunk", "4", "--jit-compile", "yes"))
    # Off (the default): not in the run settings, so checkpoints from before the flag resume.
    from tt_zoo.training.pretrain_run import run_settings
    model = tiny_model("bow_mlp")
    off, on = (run_settings(model, recipe.parse_args(pretrain_args(root, vocab, *extra)),
                            8, 1e-4, 0.1, 1)
               for extra in ((), ("--grad-cache-chunk", "4")))
    assert "grad_cache_chunk" not in off and on["grad_cache_chunk"] == 4
    assert {k: v for k, v in on.items() if k != "grad_cache_chunk"} == off
