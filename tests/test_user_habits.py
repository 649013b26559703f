"""Habits users bring from sentence-transformers, Keras and the shell: `model.encode` (never a
passage cut to the query budget), hub names, `tt_zoo.util.semantic_search`, `evaluate(...,
return_dict=True)`, Keras 3 optimizers, Ctrl-C, a closed pipe, and the commands' help."""

import json
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from tt_zoo import cli
from tt_zoo.zoo import registry

from conftest import REPO_ROOT


@pytest.fixture(scope="module")
def loaded(exported):
    import tt_zoo
    return tt_zoo.load(exported.path)


# ------------------------------------------------------------------------ sentence-transformers

def test_encode_is_the_document_side_unless_told_query(loaded):
    passage = " ".join(["alexander fleming discovered penicillin in london"] * 8)  # > 16 tokens
    loaded._warned_encode = False
    with pytest.warns(UserWarning, match="prompt_name='query'"):
        as_document = loaded.encode([passage])
    np.testing.assert_allclose(as_document, loaded.encode_documents([passage]), rtol=1e-6)
    assert not np.allclose(as_document, loaded.encode_queries([passage]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once a model
        loaded.encode(["again"])
        np.testing.assert_allclose(loaded.encode(["who?"], prompt_name="query"),
                                   loaded.encode_queries(["who?"]), rtol=1e-6)
    unit = loaded.encode(["a", "b"], prompt_name="document", normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
    assert loaded.encode("a", prompt_name="document").shape == (8,)
    assert type(loaded.encode(["a"], prompt_name="document", convert_to_tensor=True)).__name__ \
        == "EagerTensor"
    listed = loaded.encode(["a", "b"], prompt_name="document", convert_to_numpy=False)
    assert isinstance(listed, list) and listed[0].shape == (8,)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['device'\]"):
        loaded.encode(["a"], device="cuda")
    with pytest.raises(ValueError, match="prompt_name must be 'query', 'document'"):
        loaded.encode(["a"], prompt_name="question")


def test_a_hub_name_loads_its_imported_model():
    for name in ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2",
                 "ALL-minilm-l6-v2"):
        assert registry.registered_name(name) == "minilm_l6_384"
        assert not registry.looks_like_path(name)
        assert registry.model_name_problem(name) is None
        assert registry.get_spec(name).name == "minilm_l6_384"
    assert "Did you mean 'minilm_l6_384'" in registry.unknown_model_message(
        "sentence-transformers/all-MiniLM-L6-v3")


def test_semantic_search_is_sentence_transformers_over_arrays():
    import tt_zoo

    rng = np.random.default_rng(0)
    queries, corpus = rng.normal(size=(5, 8)), rng.normal(size=(40, 8))
    found = tt_zoo.util.semantic_search(queries, corpus, top_k=3, corpus_chunk_size=7)
    unit = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    for query, hits in zip(queries, found):
        cosines = unit @ (query / np.linalg.norm(query))
        assert [h["corpus_id"] for h in hits] == list(np.argsort(-cosines)[:3])
        assert hits[0]["score"] == pytest.approx(cosines.max(), rel=1e-5)
    dot = tt_zoo.util.semantic_search(queries[:1], corpus, top_k=1,
                                      score_function=tt_zoo.util.dot_score)
    assert dot[0][0]["corpus_id"] == int(np.argmax(corpus @ queries[0]))


# ------------------------------------------------------------------------------------- Keras

def test_keras_habits_evaluate_return_dict_and_a_keras_3_optimizer(exported):
    import keras
    import tt_zoo
    from helpers import PAIRS

    model = tt_zoo.load(exported.path)
    pairs = list(zip(PAIRS["query"], PAIRS["doc_title"], PAIRS["doc_text"]))
    result = model.evaluate(pairs, batch_size=4, return_dict=True)
    assert isinstance(result, dict) and "loss" in result
    optimizer = keras.optimizers.Adam(learning_rate=1e-3, beta_1=0.8)  # Keras 3's
    model.compile(optimizer=optimizer)
    assert type(model.keras_model.optimizer).__module__.startswith("tf_keras")
    assert model.keras_model.optimizer.get_config()["beta_1"] == pytest.approx(0.8)
    history = model.fit(model_pairs(PAIRS), steps_per_epoch=1, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def model_pairs(pairs):
    import tensorflow as tf
    return tf.data.Dataset.from_tensor_slices(pairs).batch(4).repeat()


# ------------------------------------------------------------------------------------- shell

def test_ctrl_c_stops_a_search_within_a_second_with_one_line(exported, tmp_path):
    passages = tmp_path / "many.txt"
    passages.write_text("alexander fleming discovered penicillin in london\n" * 200_000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tt_zoo.cli", "search", str(passages), "--model",
         str(exported.path), "--query", "who?", "--no-progress"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's
    time.sleep(6)
    assert proc.poll() is None, proc.communicate()
    start = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.perf_counter() - start < 1.5
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["tt-zoo search: interrupted"]


def test_a_closed_pipe_ends_quietly_with_status_0(monkeypatch, capsys):
    def cut_short(argv):
        raise BrokenPipeError
    monkeypatch.setattr(cli, "_main", cut_short)
    assert cli.main(["list"]) == 0
    done = subprocess.run(f"{sys.executable} -m tt_zoo.cli list --include-recipes | head -1",
                          shell=True, capture_output=True, text=True, executable="/bin/bash")
    assert done.returncode == 0 and done.stderr == "" and len(done.stdout.splitlines()) == 1


def test_the_commands_help_writes_nothing_into_shipped_models_and_index_corpus_is_quiet():
    for name in cli.COMMANDS:
        doc = cli.command_module(name).__doc__
        for flag in ("--export saved_models", "--output saved_models"):
            assert flag not in doc, f"tt-zoo {name}'s help: {flag}"
    from tt_zoo.cli import index_corpus
    assert index_corpus.parse_args(["--model", "minilm_l6_384", "--passages", "p.jsonl",
                                    "--output", "o", "--no-progress"]).no_progress


def test_the_default_search_model_is_shipped_and_better_than_the_papers():
    from tt_zoo.cli.common import DEFAULT_SEARCH_MODEL, FLAGSHIP

    default, paper = registry.get_spec(DEFAULT_SEARCH_MODEL), registry.get_spec(FLAGSHIP)
    assert default.shipped
    def odqa(spec):
        return next(v for k, v in spec.metrics if k.startswith("ODQA validation R@20"))
    assert odqa(default) > odqa(paper) + 10  # 56.6 against 40.3
    doc = cli.command_module("search").__doc__ + cli.command_module("index").__doc__
    assert "passages.jsonl" not in doc and "examples/squad_sample" in doc
    assert (REPO_ROOT / "examples" / "squad_sample" / "corpus.jsonl").is_file()
    json.loads((REPO_ROOT / "examples" / "squad_sample" / "queries.jsonl").read_text()
               .splitlines()[0])


def test_list_shipped_and_the_readme_show_each_models_own_search(capsys):
    from tt_zoo.zoo.own_search import term_weight_label

    assert cli.main(["list", "--shipped"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    # HDCT's index is BM25 with k1 10 (unread plain): 52.97, not the k1 1.5 row's 52.75.
    assert "ODQA R@20 52.97" in lines["hdct_ict_bfs_wlp_crop_span_qgen"]
    # ColBERT's index re-ranks BM25@100, its card's best mode: 54.45, not the token index's.
    assert "ODQA R@20 54.45" in lines["colbert_ict_bfs_wlp_crop_span_qgen_64"]
    assert "ReQA R@100 80% test 93.85" in lines["multitask_static_minilm_l6_384"]
    readme = (REPO_ROOT / "README.md").read_text()
    assert term_weight_label() in readme and "k1 1.5" not in readme
    assert "| ColBERT re-ranking BM25@100 |" in readme


def test_evaluate_rows_are_labelled_by_the_model_name():
    from tt_zoo.evaluation.tables import COLUMNS, format_table

    rows = [{"encoder": "BM25", "pretraining": "-", "search": "exact", **dict.fromkeys(COLUMNS, .5)},
            {"model": "multitask_static_minilm_l6_384", "encoder": "bow_mlp", "pretraining":
             "distilled", "search": "exact", **dict.fromkeys(COLUMNS, .25)}]
    head, _, bm25, model = format_table(rows).splitlines()
    assert head.split()[:4] == ["model", "encoder", "pretraining", "search"]
    assert bm25.startswith("BM25 ") and model.startswith("multitask_static_minilm_l6_384 ")
