"""What test modules share: the one round-trip test case for every layer and model, a tiny
model and its pairs, hand-made data. Test modules import from here (and fixtures come from
conftest.py), never from one another."""

import functools
import importlib
import importlib.util
import json
import os
import pathlib
import signal
import string
import subprocess
import sys
import time
from typing import NamedTuple

import numpy as np

from tt_zoo.data import features as F

# TensorFlow is imported inside the functions that need it: modules that only use the data here
# (BM25, ReQA, metrics) collect in a fraction of a second.

RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a of in is who what where when was by discovered penicillin fleming alexander "
         "paris capital france city river seine flows through london england water boils at "
         "degrees").split()


def tiny_vocab():
    """A small WordPiece vocabulary: reserved tokens, a few words, all letters and ## letters."""
    letters = [c for c in string.ascii_lowercase + string.digits + "?.,!'-" if c not in WORDS]
    return RESERVED + WORDS + letters + ["##" + c for c in string.ascii_lowercase + string.digits]


def json_round_trip(config):
    """Passes a config through JSON text, as a saved artifact does."""
    return json.loads(json.dumps(config))


def assert_same_outputs(expected, actual):
    """Nested outputs agree: exactly for integer, bool and string tensors, else allclose."""
    import tensorflow as tf

    def check(a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "biuSOU":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    tf.nest.map_structure(check, expected, actual)


def assert_layer_round_trip(layer, inputs, cls=None, **call_kwargs):
    """The shared test case for a layer: get_config -> JSON -> from_config gives the same config;
    with the weights copied, the clone gives the same outputs (exact for ids, else allclose); and
    when the layer has trainable weights, one Keras `fit` step of a tiny model around the clone
    gives a finite loss. `call_kwargs` go to every call (e.g. a loss layer's second input).
    Returns the clone."""
    cls = cls or type(layer)
    expected = layer(inputs, **call_kwargs)
    clone = cls.from_config(json_round_trip(layer.get_config()))
    assert clone.get_config() == layer.get_config()
    clone(inputs, **call_kwargs)
    clone.set_weights(layer.get_weights())
    assert_same_outputs(expected, clone(inputs, **call_kwargs))
    if clone.trainable_weights:
        assert_one_fit_step(clone, inputs)
    return clone


def assert_one_fit_step(layer, inputs):
    """A tiny Keras model (inputs -> layer) fits one step towards zeros with a finite loss
    (eagerly: tracing a train step would cost more than the rest of a layer test)."""
    import tensorflow as tf

    def symbolic(x):
        return tf.keras.Input(shape=x.shape[1:], dtype=x.dtype, batch_size=x.shape[0])
    model_inputs = tf.nest.map_structure(symbolic, inputs)
    model = tf.keras.Model(model_inputs, layer(model_inputs))
    model.compile(optimizer=tf.keras.optimizers.SGD(1e-3), loss="mse", run_eagerly=True)
    targets = tf.nest.map_structure(tf.zeros_like, model(inputs))
    history = model.fit(inputs, targets, batch_size=len(tf.nest.flatten(inputs)[0]), epochs=1,
                        verbose=0)
    assert np.isfinite(history.history["loss"]).all(), history.history


# The models that load by name on a fresh `make setup`; the optional teacher (`make teacher`:
# mpnet_base_768) adds one once imported into the cache.
SETUP_MODELS = 23


def loadable_models() -> int:
    """How many names `tt_zoo.list_models()` lists on this machine: `SETUP_MODELS`, plus the
    teacher when its import step has run."""
    from tt_zoo.zoo import imported, registry
    return SETUP_MODELS + imported.is_imported(registry.get_spec("mpnet_base_768"))


# ---------------------------------------------------------------- a tiny two-tower model

PAIRS = {
    F.QUERY: ["who discovered penicillin?", "what is the capital of france?",
              "what river flows through paris?", "when does water boil?"],
    F.DOC_TITLE: ["penicillin", "paris", "seine", "water"],
    F.DOC_TEXT: ["alexander fleming discovered penicillin.", "paris is the capital of france.",
                 "the seine flows through paris.", "water boils at 100 degrees."],
    F.DOC_ID: ["d0", "d1", "d2", "d3"],
    F.DOC_SAMPLING_PROB: [0.25, 0.25, 0.25, 0.25],
}


def tiny_model(encoder="bert", **kwargs):
    """A seeded two-tower model small enough to build, fit and export in seconds."""
    import tensorflow as tf
    from tt_zoo.modeling.models import build_two_tower_model
    tf.keras.utils.set_random_seed(0)
    return build_two_tower_model(tiny_vocab(), encoder=encoder, size=None, num_layers=1,
                                 hidden_size=16, num_attention_heads=2, inner_dim=32,
                                 embedding_dim=8, query_length=16, document_length=24,
                                 bow_token_embedding_dim=8, bow_hidden_dim=16, **kwargs)


def pair_dataset():
    """PAIRS as one batch of 4."""
    import tensorflow as tf
    return tf.data.Dataset.from_tensor_slices(PAIRS).batch(4)


class TinyExport(NamedTuple):
    """What conftest's `exported` fixture gives: the model, its export folder, the metadata."""
    model: object
    path: pathlib.Path
    meta: dict


class ModelRoundTrip(NamedTuple):
    clone: object  # TwoTowerModel.from_config(JSON of the config), built
    reloaded: object  # load_keras_model of the export, after one fit step
    path: pathlib.Path  # the export


def assert_model_round_trip(model, path, *, exported=False,
                            run_eagerly=True) -> ModelRoundTrip:
    """The shared test case for a `TwoTowerModel`: get_config -> JSON -> from_config gives the
    same config; `export_saved_model` + `load_keras_model` (the one model format) give the same
    query and document embeddings (allclose); and the reloaded model fits one step of plain
    Keras with a finite loss. With `exported=True`, `path` already holds this model's export.

    The fit step runs eagerly by default (0.6 s instead of ~12 s tracing a train step per
    call); `run_eagerly=False` traces it as training does (test_models does this once)."""
    import tensorflow as tf

    from tt_zoo.artifacts.export import export_saved_model, load_keras_model
    from tt_zoo.modeling.models import TwoTowerModel
    path = pathlib.Path(path)
    model.build_by_calling()
    expected_q = model.encode_queries(PAIRS[F.QUERY])
    expected_d = model.encode_documents(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE])

    clone = TwoTowerModel.from_config(json_round_trip(model.get_config()))
    clone.build_by_calling()
    assert json_round_trip(clone.get_config()) == json_round_trip(model.get_config())

    if not exported:
        export_saved_model(model, path)
    reloaded = load_keras_model(path)
    assert json_round_trip(reloaded.get_config()) == json_round_trip(model.get_config())
    np.testing.assert_allclose(reloaded.encode_queries(PAIRS[F.QUERY]), expected_q, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(
        reloaded.encode_documents(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE]), expected_d,
        rtol=1e-5, atol=1e-6)
    # The reloaded model fine-tunes with plain Keras: one step, a finite loss.
    reloaded.compile(optimizer=tf.keras.optimizers.Adam(1e-3), run_eagerly=run_eagerly)
    history = reloaded.fit(pair_dataset(), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all(), history.history
    return ModelRoundTrip(clone, reloaded, path)


# ---------------------------------------------------------------- a hand-made SQuAD file

P0 = "The cat sat on the mat. It was happy. The cat sat on the mat."
P1 = "Paris is the capital of France."
P2 = "The dog barked. It was happy."


def _qa(qid, question, context, answer, occurrence=0):
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(answer, start + 1)
    return {"id": qid, "question": question, "answers": [{"text": answer, "answer_start": start}]}


def hand_made_squad():
    """Hand-checked gold candidates (sentence spans by blingfire):

    P0 = [0,23) "The cat sat on the mat." | [24,37) "It was happy." | [38,61) repeat of sentence 1
    candidates: 0 = (P0 s1), 1 = (P0 "It was happy."), 2 = (P1), 3 = (P2 "The dog barked."),
                4 = (P2 "It was happy.")  -- same sentence text as 1, other passage: distinct.
    q_first: answer_start 0, the first char of sentence 1           -> 0
    q_last:  answer "." at 36, the last char of "It was happy."     -> 1
    q_repeat: "mat" in the repeated third sentence (start 57)        -> 0 (deduplicated)
    q_one:   the one-sentence passage                                -> 2
    q_dup_passage: P0 again in another article                       -> 1, no new candidates
    q_other_passage: "happy" in P2                                   -> 4, not 1
    """
    return {"version": "1.1", "data": [
        {"title": "Alpha", "paragraphs": [
            {"context": P0, "qas": [
                _qa("q_first", "Who sat on the mat?", P0, "The"),
                {"id": "q_last", "question": "How did it end?",
                 "answers": [{"text": ".", "answer_start": 36}]},
                _qa("q_repeat", "Where did the cat sit again?", P0, "mat", occurrence=1),
            ]},
            {"context": P1, "qas": [_qa("q_one", "What is the capital of France?", P1, "Paris")]},
        ]},
        {"title": "Beta", "paragraphs": [
            {"context": P0, "qas": [_qa("q_dup_passage", "Was it happy?", P0, "happy")]},
            {"context": P2, "qas": [_qa("q_other_passage", "Was the dog happy?", P2, "happy")]},
        ]},
    ]}


def write_squad(tmp_path, obj, name="squad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


class LookupEncoder:
    """One-hot embeddings: a query points at a chosen candidate; a document at its candidate.

    With ``passage_only=True`` the document embedding ignores the sentence, so all sentences of
    a passage tie (and the tie goes to the lowest candidate id).
    """

    def __init__(self, reqa, targets, passage_only=False):
        self.reqa, self.targets, self.passage_only = reqa, targets, passage_only
        self.dim = len(reqa.candidates)
        self.key_to_index = {(c.sentence, c.passage): i for i, c in enumerate(reqa.candidates)}
        self.first_of_passage = {}
        for i, c in enumerate(reqa.candidates):
            self.first_of_passage.setdefault(c.passage, i)

    def encode_queries(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            out[row, self.targets[text]] = 1.0
        return out

    def encode_documents(self, texts, titles):
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, (passage, sentence) in enumerate(zip(texts, titles)):
            col = (self.first_of_passage[passage] if self.passage_only
                   else self.key_to_index[(sentence, passage)])
            out[row, col] = 1.0
        return out



# ---------------------------------------------------------------- clustered embeddings

def gaussian_mixture(*args, **kwargs):
    """Seeded candidates and queries from one mixture of Gaussians: the draw of
    benchmarks.peers' synthetic search set (--synthetic), one definition for both. Imported
    when called: the scripts of tests/scripts/ import this module from their own process,
    where the repository root (and so `benchmarks`) is not on the path."""
    from benchmarks.peers.embeddings import gaussian_mixture as draw  # noqa: PLC0415

    return draw(*args, **kwargs)


def load_recipe(name: str):
    """The module of a `tt-zoo` command (`tt_zoo.cli.NAME`), to call its main() in-process."""
    return importlib.import_module(f"tt_zoo.cli.{name}")


GOLDEN_DIR = pathlib.Path(__file__).resolve().parent / "golden"


def read_golden(name: str) -> dict:
    """tests/golden/NAME.json: fixed texts and a shipped model's pinned outputs for them."""
    path = GOLDEN_DIR / f"{name}.json"
    assert path.is_file(), f"no golden file for {name}: run tests/golden/regenerate.py"
    return json.loads(path.read_text())


def assert_matches_golden(golden: dict, query_embeddings, document_embeddings):
    """The embeddings of the golden texts equal the pinned ones (first 8 dims, all scores)."""
    q, d = np.asarray(query_embeddings), np.asarray(document_embeddings)
    np.testing.assert_allclose(q[:, :8], golden["query_embeddings_first8"], atol=1e-5)
    np.testing.assert_allclose(d[:, :8], golden["document_embeddings_first8"], atol=1e-5)
    np.testing.assert_allclose(q @ d.T, golden["scores"], atol=1e-5)


def assert_matches_token_golden(golden: dict, query_tokens, document_tokens, scores):
    """A late-interaction model's outputs for the golden texts equal the pinned ones: the token
    counts, the first 3 token vectors' first 8 dims, every MaxSim score."""
    assert [len(v) for v in query_tokens] == golden["query_token_counts"]
    assert [len(v) for v in document_tokens] == golden["document_token_counts"]
    for got, pinned in ((query_tokens, golden["query_tokens_first3x8"]),
                        (document_tokens, golden["document_tokens_first3x8"])):
        for vectors, expected in zip(got, pinned):
            np.testing.assert_allclose(np.asarray(vectors)[:3, :8], expected, atol=1e-5)
    np.testing.assert_allclose(scores, golden["scores"], atol=1e-4)


def assert_matches_term_golden(golden: dict, term_weights, atol: float = 2e-4):
    """A term-weight model's `TermWeights` of the golden passages equal the pinned ones: the
    same terms, each weight within `atol` (pinned to 4 decimals), and the pinned top terms first
    (a term whose weight ties the last of them within `atol` may stand in for it)."""
    assert len(term_weights) == len(golden["terms"])
    for weights, pinned, top in zip(term_weights, golden["terms"], golden["top_terms"]):
        got = dict(weights.weights)
        assert sorted(got) == [t for t, _ in pinned]
        np.testing.assert_allclose([got[t] for t, _ in pinned], [w for _, w in pinned],
                                   atol=atol)
        ranked = sorted(got, key=lambda t: (-got[t], t))
        floor = got[ranked[len(top) - 1]] - atol
        assert set(top) <= {t for t in got if got[t] >= floor}, (top, ranked[:len(top)])


def golden_regenerator():
    """tests/golden/regenerate.py as a module (its `golden_of`, `main(argv)`)."""
    spec = importlib.util.spec_from_file_location("golden_regenerate",
                                                  GOLDEN_DIR / "regenerate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_colbert(embedding_dim: int = 8, **kwargs):
    """A seeded late-interaction (ColBERT) model: 1 layer, hidden 16, token vectors of
    `embedding_dim`, queries 12, documents 24."""
    import tensorflow as tf
    from tt_zoo.modeling.late_interaction_model import build_late_interaction_model
    tf.keras.utils.set_random_seed(0)
    return build_late_interaction_model(tiny_vocab(), embedding_dim=embedding_dim, size=None,
                                        num_layers=1, hidden_size=16, num_attention_heads=2,
                                        inner_dim=32, query_length=12, document_length=24,
                                        **kwargs)


def run_as_a_user(args, *, cwd=None, timeout: int = 600, **env) -> subprocess.CompletedProcess:
    """`python ARGS` in a fresh interpreter as a user runs it: none of the TF_* variables the
    test run sets (tt_zoo's own defaults apply), plus `env`; output captured as text."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    environment.update(env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          env=environment, cwd=cwd, timeout=timeout)


def kill_at_first_checkpoint(command, checkpoints: pathlib.Path) -> int:
    """Starts `command` (a pretraining run) and SIGKILLs it once its first checkpoint is complete:
    a real kill, no cleanup and no final save. Returns the process's exit code."""
    import tensorflow as tf

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        # The manager writes the checkpoint files, then the "checkpoint" state file naming them.
        if (checkpoints / "checkpoint").exists() and tf.train.latest_checkpoint(str(checkpoints)):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait(timeout=60)
    return proc.returncode


BATCH_WORDS = "the a of in is who what paris france river water london city seine".split()


def tokenized_batch(model, hard_negatives=0):
    """8 tokenized pairs (d0 twice: an accidental hit to mask), optionally with
    `hard_negatives` tokenized hard negatives per example (flattened, as features.py says)."""
    import tensorflow as tf

    from tt_zoo.modeling.losses import hash_ids
    from tt_zoo.training.step_data import tokenize_on_host

    rng = np.random.default_rng(0)
    raw = {F.QUERY: [" ".join(rng.choice(BATCH_WORDS, 5)) for _ in range(8)],
           F.DOC_TITLE: [str(rng.choice(BATCH_WORDS)) for _ in range(8)],
           F.DOC_TEXT: [" ".join(rng.choice(BATCH_WORDS, 9)) for _ in range(8)],
           F.DOC_ID: ["d0", "d1", "d2", "d3", "d4", "d0", "d6", "d7"],
           F.DOC_SAMPLING_PROB: rng.uniform(0.05, 0.3, 8).astype("float32")}
    inputs = tokenize_on_host(model, {k: tf.constant(v) for k, v in raw.items()})
    if hard_negatives:
        n = 8 * hard_negatives
        inputs[F.HARD_NEGATIVE_INPUTS] = model.document_preprocessor((
            tf.constant([str(rng.choice(BATCH_WORDS)) for _ in range(n)]),
            tf.constant([" ".join(rng.choice(BATCH_WORDS, 7)) for _ in range(n)])))
        inputs[F.HARD_NEGATIVE_IDS] = hash_ids(tf.constant([f"h{i}" for i in range(n)]))
        inputs[F.HARD_NEGATIVE_SAMPLING_PROBS] = tf.constant(
            rng.uniform(0.05, 0.3, n).astype("float32"))
    return inputs


_OP_LAYERS_SCRIPT = """
import json
import os
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api
def registered():
    buffer = c_api.TF_GetAllOpList()
    ops = op_def_pb2.OpList.FromString(c_api.TF_GetBuffer(buffer))
    c_api.TF_DeleteBuffer(buffer)
    return {op.name for op in ops.op}
core = registered()
import tensorflow_text
text = registered() - core
import scann
scann_ops = registered() - core - text
print(json.dumps({"core": sorted(core), "text": sorted(text), "scann": sorted(scann_ops)}))
"""


@functools.lru_cache(maxsize=None)
def registered_op_layers() -> dict:
    """The ops a fresh process registers, layer by layer: {"core": TensorFlow's own, "text":
    those `import tensorflow_text` adds, "scann": those `import scann` adds after it} (sets of
    op names; found once per test process)."""
    proc = subprocess.run([sys.executable, "-c", _OP_LAYERS_SCRIPT], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {k: set(v) for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def saved_model_graph(saved_model_dir):
    """``(ops, signatures)`` of a SavedModel read from its saved_model.pb, without loading it:
    the op names its graph and function library use (calls of its own functions left out) and
    its ``{name: SignatureDef}``."""
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel.FromString(
        (pathlib.Path(saved_model_dir) / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    used = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    used -= {f.signature.name for f in graph.library.function}
    return used, dict(proto.meta_graphs[0].signature_def)


def graph_ops(saved_model_dir) -> dict:
    """The ops of a SavedModel's graphs outside TensorFlow core: {"text": those tensorflow-text
    registers, "other": the rest (the stock TF Serving ModelServer, which links tensorflow-text's
    ops, serves a graph whose "other" is empty), "signatures": its names}."""
    used, signatures = saved_model_graph(saved_model_dir)
    layers = registered_op_layers()
    return {"other": sorted(used - layers["core"] - layers["text"]),
            "text": sorted(used & layers["text"]), "signatures": sorted(signatures)}
