"""Quiet by default: a plain process that imports tt_zoo, loads a model, indexes with ScaNN and
fine-tunes prints no native-library noise (TensorFlow's CUDA probe and oneDNN notes, ScaNN's absl
lines, Keras' warning about the BERT encoder's unused pooler), while a user who sets
TF_CPP_MIN_LOG_LEVEL gets the lines that level asks for. The same holds when TensorFlow is
imported before tt_zoo (the command line's export with an index and retrieve model is checked
quiet in tests/test_export_recipe.py)."""

import json

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
from tt_zoo.artifacts.export import QueryEncoder
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


@pytest.mark.slow  # ~20 s: the whole script again, at the user's log level
def test_a_user_set_log_level_is_respected(exported):
    """TF_CPP_MIN_LOG_LEVEL=0 asks for everything: ScaNN's INFO lines show (tt_zoo sets its
    level only when the user did not)."""
    verbose = run(exported.path, TF_CPP_MIN_LOG_LEVEL="0")
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "partitioner_factory_base" in verbose.stderr


# -- The other import order, and the command line's normal runs (issue 47) -----------------
MARK = "-- tensorflow imported; tt_zoo next --"
TENSORFLOW_FIRST = f"""
import sys
import tensorflow as tf
sys.stderr.write({MARK!r} + "\\n"); sys.stderr.flush()
import tt_zoo
from tt_zoo import cli
model = tt_zoo.load(sys.argv[1])
model.encode_documents(["water boils at 100 degrees."] * 3, show_progress_bar=False)
model.encode_documents(["water boils at 100 degrees."], show_progress_bar=False, jit_compile=True)
assert cli.main(["export", "--model", sys.argv[1], "--corpus", sys.argv[2], "--index-output",
                 sys.argv[3] + "/index", "--retrieve-output", sys.argv[3] + "/retrieve",
                 "--backend", "scann", "-k", "2", "--no-progress"]) == 0
print("done", tf.keras.__name__)
"""


def corpus_file(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in (
        ("penicillin", "alexander fleming discovered penicillin."),
        ("paris", "paris is the capital of france."),
        ("seine", "the seine flows through paris."))))
    return path


@pytest.mark.slow  # ~22 s: a load, an XLA encode and `tt-zoo export` in a subprocess
def test_tensorflow_imported_first_then_tt_zoo_is_as_quiet(exported, tmp_path):
    """`import tensorflow as tf; import tt_zoo` (the order most Keras code has): Keras 2 as
    tf.keras, and after tt_zoo's import no C++ line (TensorFlow read its log level at its own
    import, before tt_zoo could set it) and no WARNING:tensorflow line from a load, an XLA
    encode and `tt-zoo export` with an index and a retrieve model."""
    proc = run_as_a_user(["-c", TENSORFLOW_FIRST, str(exported.path), str(corpus_file(tmp_path)),
                          str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1].startswith("done tf_keras"), proc.stdout
    after = proc.stderr.split(MARK + "\n", 1)[1]
    assert after == "", after[-3000:]


def test_a_fifth_model_in_one_process_prints_no_retracing_warning(exported, caplog):
    """Each loaded model traces its own encode functions once; TensorFlow counted them
    together (one lambda's code object) and warned of "excessive retracing" at the fifth."""
    import logging

    import tensorflow as tf

    from tt_zoo.modeling.inference import EncodeCache, EncodeOptions

    model = exported.model
    queries = tf.constant(["who discovered penicillin?"])
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        for _ in range(5):  # TensorFlow warns at the fifth trace of one function
            cache = EncodeCache(model)
            packed = cache.pack_queries(queries)
            cache.pack_documents(queries, queries)
            cache.tower_fn("query", EncodeOptions())(
                {k: packed[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    retracing = [r.getMessage() for r in caplog.records if "retracing" in r.getMessage()]
    assert retracing == [], retracing[:1]


def test_a_fifth_late_interaction_model_prints_no_retracing_warning(caplog):
    """The same for a ColBERT model's token towers (~4 s: five traces of a tiny tower)."""
    import logging

    from helpers import tiny_colbert

    colbert = tiny_colbert()
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        for _ in range(5):
            colbert.__dict__.pop("_tt_zoo_token_fns", None)  # as a newly loaded model has
            colbert.encode_query_tokens(["who discovered penicillin?"])
    retracing = [r.getMessage() for r in caplog.records if "retracing" in r.getMessage()]
    assert retracing == [], retracing[:1]
