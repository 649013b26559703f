"""Multi-task training (tt_zoo.training.multi_task; Maillard et al. 2021): task markers, the
batch order, q(d), confounders, and exact resume."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import tiny_model
from tt_zoo.data import features as F
from tt_zoo.data.tasks import Document, Task, TaskExample, marker_token, with_marker
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


def test_training_resumes_exactly(tmp_path):
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
        summary = multi_task.train_multi_task(
            model, tasks, steps=4, batch_size=4, learning_rate=1e-2, workdir=str(workdir),
            markers=markers, checkpoint_every=2, progress=False, callbacks=callbacks,
            log=lambda *a: None)
        return model, summary

    straight, summary = run(tmp_path / "straight")
    assert summary["steps_done"] == 4 and summary["resumed_from"] == 0
    assert [t["name"] for t in summary["tasks"]] == ["a", "b"]
    assert summary["tasks"][0]["marker"] == "ttzootaskqa"
    with pytest.raises(Killed):
        run(tmp_path / "cut", [KillAtStep2()])
    resumed, summary = run(tmp_path / "cut")
    assert summary["resumed_from"] == 2
    for a, b in zip(straight.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)
    untrained = tiny_model("bert")
    untrained.build_by_calling()
    assert not np.allclose(straight.get_weights()[0][:5], untrained.get_weights()[0][:5])
