"""Multi-task training (tt_zoo.training.multi_task; Maillard et al. 2021): task markers,
task-specific query towers (Sec. 4.3), the batch order, q(d), confounders, and exact resume."""

import json

import numpy as np
import pytest
import tensorflow as tf

from helpers import tiny_colbert, tiny_model
from tt_zoo.data import features as F
from tt_zoo.data.tasks import Document, Task, TaskExample, marker_token, with_marker
from tt_zoo.modeling.pair_model import with_sequence_lengths
from tt_zoo.training import loop, multi_task


def doc(i, title="paris"):
    return Document(f"d{i}", title, f"the city of paris {i}")


def task(name, n, task_class="qa", negatives=True, first=0):
    return Task(name, task_class, tuple(
        TaskExample(f"what is {i} ?", (doc(first + i),),
                    (doc(first + i + 100, "london"),) if negatives else ())
        for i in range(n)))


def test_markers_grow_the_vocabulary_and_keep_every_old_output():
    model = tiny_model("bow_mlp")
    model.build_by_calling()
    queries = ["who discovered penicillin ?", "what is the capital of france ?"]
    before = model.encode_queries(queries)
    docs_before = model.encode_documents(["the seine flows through paris"], titles=["paris"])
    grown, markers = multi_task.add_task_markers(model, ["qa", "self_supervised", "qa"])
    assert markers == {"qa": "ttzootaskqa", "self_supervised": "ttzootaskselfsupervised"}
    size = len(model.query_preprocessor.vocabulary)
    vocabulary = grown.query_preprocessor.vocabulary
    assert list(vocabulary[:size]) == list(model.query_preprocessor.vocabulary)
    assert list(vocabulary[size:]) == ["ttzootaskqa", "ttzootaskselfsupervised"]
    assert grown.document_preprocessor.vocabulary == vocabulary
    # The marker is one token, right after [CLS].
    ids = grown.query_preprocessor(tf.constant([with_marker("who is paris", "qa")]))
    assert ids["input_word_ids"].numpy()[0, :2].tolist() == [grown.query_preprocessor.cls_id,
                                                            size]
    np.testing.assert_allclose(grown.encode_queries(queries), before, atol=1e-6)
    np.testing.assert_allclose(
        grown.encode_documents(["the seine flows through paris"], titles=["paris"]),
        docs_before, atol=1e-6)
    assert not np.allclose(grown.encode_queries([with_marker(queries[0], "qa")]), before[:1])
    again, _ = multi_task.add_task_markers(grown, ["qa"])
    assert again is grown  # nothing new to add


QUERIES = ["who discovered penicillin ?", "what is the capital of france ?"]
MARKED = {c: [with_marker(q, c) for q in QUERIES] for c in ("qa", "sentence_qa")}


def encode_all(model):
    """The model's query embeddings unmarked and with each marker, and a document's."""
    return {"plain": model.encode_queries(QUERIES),
            **{c: model.encode_queries(q) for c, q in MARKED.items()},
            "documents": model.encode_documents(["the seine flows through paris"],
                                                titles=["paris"])}


@pytest.mark.parametrize("encoder, share_towers", [("bow_mlp", True), ("bert", False)])
def test_task_query_towers_start_as_the_shared_tower(encoder, share_towers):
    from tt_zoo.modeling.routed_tower import TaskRoutedTower

    model = tiny_model(encoder, share_towers=share_towers)
    model.build_by_calling()
    model, markers = multi_task.add_task_markers(model, ["qa", "sentence_qa"])
    before = encode_all(model)
    split = multi_task.with_task_query_towers(model, markers, "qa")
    tower = split.query_tower
    assert isinstance(tower, TaskRoutedTower) and not split.share_towers
    assert tower.task_classes == ["qa", "sentence_qa"] and tower.default_index == 0
    vocabulary = list(model.query_preprocessor.vocabulary)
    assert tower.marker_ids == [vocabulary.index("ttzootaskqa"),
                                vocabulary.index("ttzootasksentenceqa")]
    assert [t.name for t in tower.towers] == ["query_tower_qa", "query_tower_sentence_qa"]
    assert type(split.document_tower) is type(model.query_tower)
    after = encode_all(split)
    for key, value in before.items():
        np.testing.assert_allclose(after[key], value, atol=1e-6, err_msg=key)
    # Every sub-tower holds its own copy: changing one leaves the document side and the
    # other class as they were.
    for w in tower.towers[1].trainable_weights:
        w.assign(w + 0.5)
    changed = encode_all(split)
    assert np.abs(changed["sentence_qa"] - before["sentence_qa"]).max() > 1e-3
    for key in ("plain", "qa", "documents"):
        np.testing.assert_allclose(changed[key], before[key], atol=1e-6, err_msg=key)
    for key, value in encode_all(model).items():  # the model split from is untouched
        np.testing.assert_allclose(value, before[key], atol=1e-6, err_msg=key)
    # A config round trip (as an export's config.json) rebuilds the routing.
    clone = type(split).from_config(json.loads(json.dumps(split.get_config())))
    clone.build_by_calling()
    clone.set_weights(split.get_weights())
    np.testing.assert_allclose(clone.encode_queries(MARKED["sentence_qa"]),
                               changed["sentence_qa"], atol=1e-6)
    # Other token budgets keep the routing and the weights; a BERT sub-tower's positions bound
    # them.
    shorter = with_sequence_lengths(split, query_length=12)
    np.testing.assert_allclose(shorter.encode_queries(MARKED["sentence_qa"]),
                               changed["sentence_qa"], atol=1e-6)
    if encoder == "bert":
        with pytest.raises(ValueError, match="The query tower covers at most 24 positions"):
            with_sequence_lengths(split, document_length=64)
    # Splitting again with the same markers is a no-op; with others it is refused.
    assert multi_task.with_task_query_towers(split, markers, "qa") is split
    with pytest.raises(ValueError, match="already route classes \\['qa', 'sentence_qa'\\] "
                                         "\\(default 'qa'\\); asked for"):
        multi_task.with_task_query_towers(split, markers, "sentence_qa")


def test_untying_a_shared_tower_keeps_the_outputs_and_trains_the_sides_apart():
    model = tiny_model("bow_mlp", share_towers=True)
    model.build_by_calling()
    before = encode_all(model)
    untied = multi_task.untie_towers(model)
    assert model.share_towers and not untied.share_towers
    assert untied.document_tower is not untied.query_tower
    assert len(untied.weights) == 2 * len(model.weights)
    for key, value in encode_all(untied).items():
        np.testing.assert_allclose(value, before[key], atol=1e-6, err_msg=key)
    for w in untied.document_tower.trainable_weights:  # the document side alone moves
        w.assign(w + 0.5)
    moved = encode_all(untied)
    assert np.abs(moved["documents"] - before["documents"]).max() > 1e-3
    np.testing.assert_allclose(moved["plain"], before["plain"], atol=1e-6)
    assert multi_task.untie_towers(untied) is untied  # two towers already: as it is


def test_task_query_towers_refuse_colbert_one_class_and_missing_markers():
    two = {"qa": marker_token("qa"), "sentence_qa": marker_token("sentence_qa")}
    colbert = tiny_colbert()
    with pytest.raises(ValueError, match="a late-interaction \\(ColBERT\\) model has one token "
                                         "tower"):
        multi_task.with_task_query_towers(colbert, two, "qa")
    model = tiny_model("bow_mlp")
    with pytest.raises(ValueError, match="at least two task classes \\(got \\['qa'\\]\\); one "
                                         "class is the shared tower"):
        multi_task.with_task_query_towers(model, {"qa": "ttzootaskqa"}, "qa")
    with pytest.raises(ValueError, match="markers \\['ttzootaskqa', 'ttzootasksentenceqa'\\] "
                                         "are not in the model's vocabulary"):
        multi_task.with_task_query_towers(model, two, "qa")
    with pytest.raises(ValueError, match="default class 'fact' has no marker"):
        multi_task.with_task_query_towers(model, two, "fact")


def test_sampling_probability_is_the_expected_share_of_slots_hand_worked():
    # Task a: 2 examples, one with doc "x". Task b: 4 examples, two with doc "x".
    # Default weights (sizes) 2/6 and 4/6: q(x) = 1/3 * 1/2 + 2/3 * 2/4 = 1/2.
    x = Document("x", "t", "shared passage")
    a = Task("a", "qa", (TaskExample("q1", (x,), (doc(1),)), TaskExample("q2", (doc(2),), (doc(3),))))
    b = Task("b", "qa", tuple(TaskExample(f"q{i}", (x if i < 2 else doc(10 + i),), (doc(50),))
                              for i in range(4)))
    w = multi_task.task_weights([a, b])
    np.testing.assert_allclose(w, [1 / 3, 2 / 3])
    features, task_of, counts = multi_task.example_table([a, b], w)
    assert task_of.tolist() == [0, 0, 1, 1, 1, 1]
    np.testing.assert_allclose(features[F.DOC_SAMPLING_PROB],
                               [0.5, 1 / 6, 0.5, 0.5, 1 / 6, 1 / 6], rtol=1e-6)
    assert counts == {"negatives_borrowed": 0}
    # Weights 1:1: q(x) = 1/2 * 1/2 + 1/2 * 2/4 = 1/2; q(doc 2) = 1/2 * 1/2 = 1/4.
    features, _, _ = multi_task.example_table([a, b], multi_task.task_weights([a, b], [1, 1]))
    np.testing.assert_allclose(features[F.DOC_SAMPLING_PROB][:2], [0.5, 0.25], rtol=1e-6)


def test_examples_without_a_confounder_borrow_another_positive_of_their_task():
    t = task("a", 3, negatives=False)
    features, _, counts = multi_task.example_table([t], multi_task.task_weights([t]), seed=1)
    assert counts == {"negatives_borrowed": 3}
    for own, negative in zip(features[F.DOC_ID], features[F.HARD_NEGATIVE_IDS][:, 0]):
        assert negative != own and negative in {"d0", "d1", "d2"}
    lonely = Task("b", "qa", (TaskExample("q", (doc(0),)),))
    with pytest.raises(ValueError, match="Task 'b': example 0 has no confounder"):
        multi_task.example_table([lonely], np.ones(1))


def test_markers_are_prepended_per_task_class_and_a_missing_class_is_an_error():
    tasks = [task("a", 2), task("b", 2, "self_supervised", first=10)]
    markers = {"qa": marker_token("qa"), "self_supervised": marker_token("self_supervised")}
    features, _, _ = multi_task.example_table(tasks, multi_task.task_weights(tasks), markers)
    assert features[F.QUERY].tolist() == [
        "ttzootaskqa what is 0 ?", "ttzootaskqa what is 1 ?",
        "ttzootaskselfsupervised what is 0 ?", "ttzootaskselfsupervised what is 1 ?"]
    with pytest.raises(ValueError, match="class 'self_supervised', which has no marker"):
        multi_task.example_table(tasks, np.ones(2) / 2, {"qa": "ttzootaskqa"})


def test_the_order_follows_the_weights_and_is_a_function_of_the_step():
    task_of = np.array([0] * 5 + [1] * 20)
    only_first = multi_task.TaskMixtureOrder(task_of, np.array([1.0, 0.0]), 4, seed=0)
    for step in range(5):
        rows = only_first.rows(step)
        assert len(rows) == 4 and len(set(rows.tolist())) == 4 and rows.max() < 5
    mixed = multi_task.TaskMixtureOrder(task_of, np.array([0.2, 0.8]), 10, seed=3)
    drawn = np.concatenate([mixed.rows(s) for s in range(400)])
    assert abs(np.mean(drawn < 5) - 0.2) < 0.02  # 4,000 slots: the share follows the weight
    assert mixed.rows(7).tolist() == multi_task.TaskMixtureOrder(
        task_of, np.array([0.2, 0.8]), 10, seed=3).rows(7).tolist()
    homogeneous = multi_task.TaskMixtureOrder(task_of, np.array([0.5, 0.5]), 4, seed=0,
                                              batching="homogeneous")
    kinds = {tuple(sorted(set((homogeneous.rows(s) >= 5).tolist()))) for s in range(30)}
    assert kinds == {(False,), (True,)}  # every batch is one task's, both tasks occur
    with pytest.raises(ValueError, match="batching must be one of"):
        multi_task.TaskMixtureOrder(task_of, np.array([0.5, 0.5]), 4, seed=0, batching="x")
    with pytest.raises(ValueError, match="weights must be 2 non-negative numbers"):
        multi_task.task_weights([task("a", 2), task("b", 2)], [1, -1])


@pytest.mark.parametrize("per_class", [  # per-class towers resume as the shared one does (slow)
    False, pytest.param(True, marks=pytest.mark.slow)], ids=["shared", "per-class"])
def test_training_resumes_exactly(tmp_path, per_class):
    tasks = [task("a", 6), task("b", 4, "self_supervised", first=20)]

    class Killed(Exception):
        pass

    class KillAtStep2(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if int(self.model.optimizer.iterations.numpy()) == 2:
                raise Killed()  # after the step-2 checkpoint, as a kill would

    def run(workdir, callbacks=()):
        loop.enable_checkpointable_randomness(0)  # before the model: dropout checkpointed
        model = tiny_model("bert")
        model.build_by_calling()
        model, markers = multi_task.add_task_markers(model, ["qa", "self_supervised"])
        if per_class:
            model = multi_task.with_task_query_towers(model, markers, "qa")
        summary = multi_task.train_multi_task(
            model, tasks, steps=4, batch_size=4, learning_rate=1e-2, workdir=str(workdir),
            markers=markers, checkpoint_every=2, progress=False, callbacks=callbacks,
            log=lambda *a: None)
        return model, summary

    straight, summary = run(tmp_path / "straight")
    assert summary["steps_done"] == 4 and summary["resumed_from"] == 0
    assert [t["name"] for t in summary["tasks"]] == ["a", "b"]
    assert summary["tasks"][0]["marker"] == "ttzootaskqa"
    assert summary["settings"].get("query_towers") == ("per-class" if per_class else None)
    if per_class:  # each class's tower trained on its own rows: they part
        qa, selfsup = straight.query_tower.towers
        assert not np.allclose(qa.get_weights()[0], selfsup.get_weights()[0])
    with pytest.raises(Killed):
        run(tmp_path / "cut", [KillAtStep2()])
    resumed, summary = run(tmp_path / "cut")
    assert summary["resumed_from"] == 2
    for a, b in zip(straight.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)
    untrained = tiny_model("bert")
    untrained.build_by_calling()
    assert not np.allclose(straight.get_weights()[0][:5], untrained.get_weights()[0][:5])


def test_a_per_class_model_exports_its_routing(tmp_path):
    """Trained per class, exported: the SavedModel's encode_query routes a query by the marker
    it carries, as the model in memory does, and `ZooModel.encode_queries(task_class=...)`
    adds the marker that picks the tower."""
    from tt_zoo.artifacts.export import export_saved_model
    from tt_zoo.zoo.loading import load

    tasks = [task("a", 6), task("b", 4, "sentence_qa", first=20)]
    model = tiny_model("bow_mlp", share_towers=True)
    model.build_by_calling()
    model, markers = multi_task.add_task_markers(model, ["qa", "sentence_qa"])
    model = multi_task.with_task_query_towers(model, markers, "qa")
    with pytest.raises(ValueError, match="the tasks' classes \\['qa', 'sentence_qa'\\] have no "
                                         "such marker"):
        multi_task.train_multi_task(model, tasks, steps=1, batch_size=4, learning_rate=1e-2,
                                    workdir=str(tmp_path / "unmarked"), progress=False,
                                    log=lambda *a: None)
    multi_task.train_multi_task(model, tasks, steps=3, batch_size=4, learning_rate=5e-2,
                                workdir=str(tmp_path / "work"), markers=markers,
                                progress=False, log=lambda *a: None)
    memory = encode_all(model)
    assert np.abs(memory["qa"] - memory["sentence_qa"]).max() > 1e-3
    export_saved_model(model, tmp_path / "export", {
        "name": "routed", "task_markers": markers, "default_task_class": "qa"})
    signature = tf.saved_model.load(str(tmp_path / "export")).signatures["encode_query"]
    for key in ("qa", "sentence_qa", "plain"):
        texts = QUERIES if key == "plain" else MARKED[key]
        served = signature(query=tf.constant(texts))["embedding"].numpy()
        np.testing.assert_allclose(served, memory[key], atol=1e-5, err_msg=key)
    loaded = load(str(tmp_path / "export"))
    np.testing.assert_allclose(loaded.encode_queries(QUERIES, task_class="sentence_qa"),
                               memory["sentence_qa"], atol=1e-5)
    np.testing.assert_allclose(loaded.encode_queries(QUERIES), memory["qa"], atol=1e-5)
