"""The public face (issue 47, items 2 and 4): `list_models()` lists what loads and nothing else,
`dir(tt_zoo)` shows the API, a bad name gets one clear error, and a loaded model does what a
Keras or sentence-transformers user reaches for (evaluate, predict, encode, summary,
embedding_dim, max_seq_length, similarity)."""

import types

import numpy as np
import pytest

import tt_zoo
from helpers import PAIRS, loadable_models
from tt_zoo.data import features as F
from tt_zoo.zoo import registry

# ------------------------------------------------------------------------------ listing


def test_list_models_is_exactly_the_names_load_accepts_without_training():
    """Every registered name: listed <=> found without training (shipped, downloadable or an
    imported checkpoint); every other one is a recipe whose error gives its command."""
    from tt_zoo.modeling.kinds import KINDS
    from tt_zoo.zoo.loading import find_artifact

    listed = tt_zoo.list_models()
    accepted = []
    for name in tt_zoo.list_models(include_recipes=True):
        try:
            path, spec = find_artifact(name, kinds=KINDS)
        except FileNotFoundError as e:
            assert "Train it with" in str(e) and name not in listed, (name, e)
            continue
        except tt_zoo.TtZooError as e:  # the optional teacher, its packages not installed
            assert "`make teacher`" in str(e) and name not in listed, (name, e)
            continue
        assert spec.name == name and path.is_dir(), name
        accepted.append(name)
    assert listed == accepted and len(listed) == loadable_models(), listed
    assert "minilm_l6_384" in listed and "bert_base_ict_512" not in listed


def test_the_recipe_catalogue_is_a_flag_and_the_old_spelling_still_works():
    everything = tt_zoo.list_models(include_recipes=True)
    assert everything == sorted(registry.REGISTRY) and len(everything) > 100
    assert tt_zoo.list_models(shipped_only=True) == tt_zoo.list_models()
    assert tt_zoo.list_models(shipped_only=False) == everything
    assert tt_zoo.list_models("ict_bfs_wlp_[0-9]*") == [
        "ict_bfs_wlp_128", "ict_bfs_wlp_256", "ict_bfs_wlp_512"]
    assert tt_zoo.list_models(kind="term_weights") == ["hdct_ict_bfs_wlp_crop_span_qgen"]
    with pytest.raises(TypeError, match="pattern must be a glob string"):
        tt_zoo.list_models(3)


def test_dir_shows_the_public_api():
    assert dir(tt_zoo) == sorted(tt_zoo.__all__)
    assert {"load", "load_term_weighter", "list_models", "get_spec",
            "UnknownModelError"} <= set(dir(tt_zoo))
    assert "zoo" not in dir(tt_zoo) and "_keras_env" not in dir(tt_zoo)


# ------------------------------------------------------------------------------- errors

def test_an_unknown_name_is_one_clear_error_with_a_case_change_suggested():
    with pytest.raises(tt_zoo.UnknownModelError) as caught:
        tt_zoo.load("ICT_BFS_WLP_512")
    message = str(caught.value)
    # Printed as written (a bare KeyError quoted it twice: "'\'ICT...'"), one suggestion.
    assert message.startswith("'ICT_BFS_WLP_512' is not a tt_zoo model. Did you mean "
                              f"'ict_bfs_wlp_512'? tt_zoo.list_models() lists the "
                              f"{loadable_models()} models")
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, tt_zoo.TtZooError)
    with pytest.raises(KeyError, match="Did you mean 'ict_bfs_wlp_512'"):
        tt_zoo.get_spec("ict_bfs_wlp_51")


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_name_says_a_name_or_directory_is_needed(name):
    with pytest.raises(tt_zoo.UnknownModelError,
                       match="A model name or an export directory is needed") as caught:
        tt_zoo.load(name)
    assert ". is not" not in str(caught.value)


def test_a_name_is_checked_without_tensorflow():
    assert registry.model_name_problem("ict_bfs_wlp_512") is None
    assert registry.model_name_problem("./some/export") is None  # a path: the loader checks it
    assert "Did you mean 'ict_bfs_wlp_512'" in registry.model_name_problem("ict_bfs_wlp_51")
    recipe = registry.model_name_problem("bert_base_ict_512", where="'tt-zoo list'")
    assert "recipe without weights" in recipe and "tt-zoo pretrain --variant bert_base_ict_512" \
        in recipe and "'tt-zoo list'" in recipe


# ------------------------------------------------------------------ ARCH.TAG names (timm's)

def test_every_registered_name_has_one_arch_tag_that_finds_the_same_entry():
    """Each model's ARCH.TAG is unique and every lookup takes it where it takes the name."""
    arch_tags = [spec.arch_tag for spec in registry.REGISTRY.values()]
    assert len(set(arch_tags)) == len(arch_tags) == len(registry.ARCH_TAGS)
    for name, spec in registry.REGISTRY.items():
        assert spec.arch_tag == f"{spec.architecture}.{spec.tag}" and spec.architecture
        assert tt_zoo.get_spec(spec.arch_tag) is tt_zoo.get_spec(name) is spec, name
        assert registry.registered_name(spec.arch_tag) == registry.registered_name(name) == name
        assert ((registry.model_name_problem(spec.arch_tag) is None)
                == (registry.model_name_problem(name) is None) == registry.loads_by_name(spec))
        assert not registry.looks_like_path(spec.arch_tag)
    assert registry.registered_name("bert_tiny_512.nothing") is None


@pytest.mark.parametrize("name, arch_tag", [
    ("ict_bfs_wlp_512", "bert_tiny_512.ict_bfs_wlp"),
    ("mlm_128", "bert_tiny_128.mlm"),
    ("bert_base_ict_256", "bert_base_256.ict"),
    ("bow_mlp_ict_bfs_wlp_512", "bow_mlp_512.ict_bfs_wlp"),
    ("colbert_ict_bfs_wlp_crop_span_qgen_64", "colbert_tiny_64.ict_bfs_wlp_crop_span_qgen"),
    ("hdct_ict_bfs_wlp_crop_span_qgen", "hdct_tiny.ict_bfs_wlp_crop_span_qgen"),
    ("multitask_bow_mlp_ict_bfs_wlp_512", "bow_mlp_512.multitask_ict_bfs_wlp"),
    ("multitask_lexical_bow_mlp_ict_bfs_wlp_crop_span_qgen_512",
     "bow_mlp_512.multitask_lexical_ict_bfs_wlp_crop_span_qgen"),
    ("multitask_colbert_ict_bfs_wlp_crop_span_qgen_64",
     "colbert_tiny_64.multitask_ict_bfs_wlp_crop_span_qgen"),
    ("minilm_l6_384", "minilm_l6_384.imported"),
    ("multitask_minilm_l6_384", "minilm_l6_384.multitask_imported"),
    ("static_minilm_l6_384", "static_minilm_l6_384.distilled"),
    ("multitask_static_minilm_l6_384", "static_minilm_l6_384.multitask_distilled"),
])
def test_arch_tag_is_the_architecture_then_how_the_weights_were_made(name, arch_tag):
    assert tt_zoo.get_spec(name).arch_tag == arch_tag


def test_list_models_matches_and_lists_either_name():
    assert tt_zoo.list_models("bert_tiny_*.ict_bfs_wlp", arch_tag=True) == [
        "bert_tiny_128.ict_bfs_wlp", "bert_tiny_256.ict_bfs_wlp", "bert_tiny_512.ict_bfs_wlp"]
    # A pattern over the architectures lists the registered names by default.
    assert tt_zoo.list_models("bert_tiny_*.ict_bfs_wlp") == [
        "ict_bfs_wlp_128", "ict_bfs_wlp_256", "ict_bfs_wlp_512"]
    bow = tt_zoo.list_models("bow_mlp_512.*", include_recipes=True)
    assert "multitask_lexical_bow_mlp_ict_bfs_wlp_crop_span_qgen_512" in bow
    assert all(tt_zoo.get_spec(n).architecture == "bow_mlp_512" for n in bow)
    assert sorted(tt_zoo.get_spec(n).arch_tag for n in tt_zoo.list_models()) == \
        tt_zoo.list_models(arch_tag=True)


def test_every_model_that_loads_is_found_by_its_arch_tag():
    from tt_zoo.cli.parsing import model_name_or_path
    from tt_zoo.modeling.kinds import KINDS
    from tt_zoo.zoo.loading import find_artifact

    for name in tt_zoo.list_models():
        arch_tag = tt_zoo.get_spec(name).arch_tag
        assert find_artifact(arch_tag, kinds=KINDS) == find_artifact(name, kinds=KINDS), name
        assert model_name_or_path(arch_tag) == arch_tag  # every command's --model takes it
    with pytest.raises(tt_zoo.UnknownModelError,
                       match="Did you mean 'bert_tiny_512.ict_bfs_wlp'"):
        tt_zoo.get_spec("bert_tiny_512.ict_bfs_wl")


def test_a_shipped_model_loaded_by_its_arch_tag_gives_the_same_vectors():
    from helpers import assert_matches_golden, read_golden

    model = tt_zoo.load("bert_tiny_128.ict_bfs_wlp")
    golden = read_golden("ict_bfs_wlp_128")  # what the model loaded by its name gives
    assert_matches_golden(golden, model.encode_queries(golden["queries"]),
                          model.encode_documents(golden["passages"], titles=golden["titles"]))
    assert model.spec is tt_zoo.get_spec("ict_bfs_wlp_128")
    assert model.metadata["name"] == "ict_bfs_wlp_128"  # the card keeps the registered name


# ------------------------------------------------------------------ a Keras-complete model

@pytest.fixture(scope="module")
def zoo(exported):
    model = tt_zoo.load(exported.path)
    model.compile(run_eagerly=True)  # evaluate and predict without tracing a step (seconds)
    return model


def test_sizes_and_summary(zoo, capsys):
    assert (zoo.embedding_dim, zoo.get_sentence_embedding_dimension()) == (8, 8)
    assert (zoo.query_length, zoo.document_length, zoo.max_seq_length) == (16, 24, 24)
    zoo.summary()
    out = capsys.readouterr().out
    assert "query_tower" in out and "Total params" in out


def test_encode_takes_its_side_and_predict_gives_both_towers(zoo):
    queries = PAIRS[F.QUERY]  # encode is the document side unless told (tests/test_user_habits)
    np.testing.assert_allclose(zoo.encode(queries, prompt_name="query"),
                               zoo.encode_queries(queries))
    np.testing.assert_allclose(zoo.encode(queries, prompt_name="document"),
                               zoo.encode_documents(queries))
    assert zoo.encode("one query", prompt_name="query").shape == (8,)
    predicted = zoo.predict(list(zip(PAIRS[F.QUERY], PAIRS[F.DOC_TITLE], PAIRS[F.DOC_TEXT])))
    assert sorted(predicted) == ["document_embeddings", "query_embeddings"]
    np.testing.assert_allclose(predicted["query_embeddings"], zoo.encode_queries(queries),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        predicted["document_embeddings"],
        zoo.encode_documents(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE]), rtol=1e-5,
        atol=1e-6)


def test_evaluate_gives_the_in_batch_loss_and_top1_the_scores_imply(zoo):
    """Keras' evaluate on four pairs (one batch): the loss is the mean softmax cross-entropy of
    each query's own document among the batch's four, and in_batch_top1 the share of queries
    whose own document scores highest: both recomputed here from the model's embeddings."""
    result = zoo.evaluate(PAIRS, batch_size=4)
    scores = zoo.similarity(zoo.encode_queries(PAIRS[F.QUERY]),
                            zoo.encode_documents(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE]))
    logits = scores / (zoo.keras_model.retrieval_loss.temperature or 1.0)
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert result["loss"] == pytest.approx(-np.mean(np.diag(log_softmax)), abs=1e-4)
    assert result["in_batch_top1"] == pytest.approx(np.mean(scores.argmax(1) == np.arange(4)))
    # The same pairs as (query, title, passage) tuples give the same numbers.
    tuples = list(zip(PAIRS[F.QUERY], PAIRS[F.DOC_TITLE], PAIRS[F.DOC_TEXT]))
    assert zoo.evaluate(tuples, batch_size=4)["loss"] == pytest.approx(result["loss"], abs=1e-6)


def test_evaluate_names_bad_pairs(zoo):
    with pytest.raises(ValueError, match=r"without \['doc_text'\]"):
        zoo.evaluate({"query": ["a"]})
    with pytest.raises(TypeError, match="pairs must be a batched tf.data.Dataset"):
        zoo.evaluate("who discovered penicillin?")
    with pytest.raises(ValueError, match="of one length"):
        zoo.evaluate({"query": ["a", "b"], "doc_text": ["c"]})
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        zoo.evaluate(PAIRS, batch_size=0)


def stub(normalize: bool, tokens: bool = False):
    """A ZooModel whose Keras model only says how it scores (similarity reads nothing else)."""
    from tt_zoo.zoo.loading import ZooModel

    keras_model = types.SimpleNamespace(normalize_embeddings=normalize, embedding_dim=2)
    if tokens:
        keras_model.encode_query_tokens = None
    return ZooModel(keras_model, metadata={"name": "stub"})


def test_similarity_by_hand():
    a = [[3.0, 4.0], [1.0, 0.0]]
    b = [[1.0, 0.0], [0.0, 2.0]]
    # dot: [[3*1 + 4*0, 3*0 + 4*2], [1, 0]] = [[3, 8], [1, 0]]
    np.testing.assert_allclose(stub(False).similarity(a, b), [[3.0, 8.0], [1.0, 0.0]])
    # cosine: rows over their norms: a -> [[0.6, 0.8], [1, 0]], b -> [[1, 0], [0, 1]]
    np.testing.assert_allclose(stub(True).similarity(a, b), [[0.6, 0.8], [1.0, 0.0]],
                               rtol=1e-6)
    assert stub(True).similarity_fn_name == "cosine" and stub(False).similarity_fn_name == "dot"
    assert stub(False).similarity([3.0, 4.0], b).shape == (1, 2)  # one [dim] vector: one row


def test_similarity_names_bad_inputs():
    with pytest.raises(TypeError, match="must be embeddings, not texts"):
        stub(True).similarity(["a question"], [[1.0, 0.0]])
    with pytest.raises(ValueError, match="same embedding size"):
        stub(True).similarity([[1.0, 0.0]], [[1.0, 0.0, 0.0]])
    with pytest.raises(tt_zoo.TtZooError, match="late-interaction model: score texts"):
        stub(True, tokens=True).similarity([[1.0, 0.0]], [[1.0, 0.0]])


def test_a_text_index_has_a_repr(zoo):
    index = zoo.index(PAIRS[F.DOC_TEXT], titles=PAIRS[F.DOC_TITLE], backend="brute_force")
    assert repr(index) == ("TextIndex(model='tiny_test', passages=4, backend='brute_force', "
                           "dim=8)")


def test_a_fine_tuned_card_names_its_base_model_without_a_machine_path(exported, tmp_path):
    """A model loaded by name records the name only (its folder is the clone's or the cache's);
    the card's table shows the base model and the fine-tuning as text, not as dicts."""
    from tt_zoo.artifacts.card_rendering import render_card
    from tt_zoo.artifacts.model_card import ModelCard

    base = {"name": "ict_bfs_wlp_512", "sha256": "82a998fa049e55a3", "train_steps": 3500,
            "path": "/home/someone/tt_zoo/saved_models/ict_bfs_wlp_512"}
    card = ModelCard.from_dict({"name": "m_ft", "base_model": base,
                                "fine_tuning": {"optimizer_steps": 5,
                                                "finished": "2026-01-01T00:00:00+00:00"}})
    text = render_card(card)
    assert "| base_model | ict_bfs_wlp_512 (sha256 82a998fa049e…, 3,500 steps) |" in text
    assert "| fine_tuning | 5 optimizer steps, finished 2026-01-01T00:00:00+00:00 |" in text
    assert "/home/someone" not in text and "{'" not in text

    import tensorflow as tf

    model = tt_zoo.load(exported.path)
    model.spec = registry.REGISTRY["ict_bfs_wlp_512"]  # as if loaded by that name
    model.compile(optimizer=tf.keras.optimizers.SGD(1e-3), run_eagerly=True)
    model.fit(tf.data.Dataset.from_tensor_slices(PAIRS).batch(4), epochs=1, verbose=0)
    meta = model.export(tmp_path / "ft")
    assert meta["base_model"]["name"] == "ict_bfs_wlp_512" and "path" not in meta["base_model"]
