"""Quiet by default: a plain process that imports tt_zoo, loads a model, indexes with ScaNN and
fine-tunes prints no native-library noise (TensorFlow's CUDA probe and oneDNN notes, ScaNN's absl
lines, Keras' warning about the BERT encoder's unused pooler), while a user who sets
TF_CPP_MIN_LOG_LEVEL gets the lines that level asks for."""

import pytest

from helpers import run_as_a_user

# Tree-partitioned ScaNN indexes (their k-means logs; given settings, as 1,200 candidates are
# below `MIN_PARTITIONED_SIZE`) in-process and in the `retrieve` module, two fit steps of the tiny BERT export (the pooler
# warning comes from the first step).
SCRIPT = """
import sys
import numpy as np
import tt_zoo
model = tt_zoo.load(sys.argv[1])
rng = np.random.default_rng(0)
words = "paris seine river capital penicillin fleming water boils degrees".split()
texts = [" ".join(rng.choice(words, 6)) for _ in range(1200)]
embeddings = model.encode_documents(texts, show_progress_bar=False)
model.encode_documents(texts[:8], show_progress_bar=False, jit_compile=True)  # XLA's first log
index = model.index(texts, backend="scann", embeddings=embeddings)
assert len(index.search(["who discovered penicillin?"], k=3)[0]) == 3
from tt_zoo.retrieval.index import EmbeddingIndex, ScannConfig
tree = ScannConfig(num_leaves=35, num_leaves_to_search=7)
ids = [str(i) for i in range(len(texts))]
assert EmbeddingIndex(embeddings, ids, scann_config=tree).search(embeddings[:2], k=3).rows.shape == (2, 3)
# The `retrieve` SavedModel's index: ScaNN's TensorFlow ops, which log through TensorFlow's absl.
from tt_zoo.serving.export import QueryEncoder
from tt_zoo.serving.retrieve import build_retrieval_module
build_retrieval_module(QueryEncoder(model.keras_model), embeddings, ids, k=3, backend="scann",
                       scann_config=tree)
import tensorflow as tf
pairs = tf.data.Dataset.from_tensor_slices(
    {"query": texts[:16], "doc_title": texts[16:32], "doc_text": texts[32:48]})
model.compile(optimizer=tf.keras.optimizers.Adam(1e-3))
model.fit(pairs.batch(8), epochs=1, verbose=0)
print("done")
"""

NOISE = ("cuInit", "cuda_platform", "oneDNN supports", "absl::InitializeLog",
         "partitioner_factory_base", "kmeans_tree_partitioner", "gmm_utils",
         "Gradients do not exist", "pooler_transform", "device_compiler", "Compiled cluster")


def run(path, **env):
    """SCRIPT in a fresh interpreter with none of the TF_* variables the test run sets."""
    return run_as_a_user(["-c", SCRIPT, str(path)], **env)


@pytest.fixture(scope="module")
def plain_run(exported):
    return run(exported.path)


def test_import_load_index_fit_print_no_native_noise(plain_run):
    assert plain_run.returncode == 0, plain_run.stderr[-3000:]
    assert plain_run.stdout.strip() == "done"
    noisy = [line for line in plain_run.stderr.splitlines() if any(n in line for n in NOISE)]
    assert noisy == [], "\n".join(noisy)
    assert plain_run.stderr.strip() == "", plain_run.stderr[-3000:]


def test_a_user_set_log_level_is_respected(exported):
    """TF_CPP_MIN_LOG_LEVEL=0 asks for everything: ScaNN's INFO lines show (tt_zoo sets its
    level only when the user did not)."""
    verbose = run(exported.path, TF_CPP_MIN_LOG_LEVEL="0")
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "partitioner_factory_base" in verbose.stderr
