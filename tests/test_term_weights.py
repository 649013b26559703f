"""HDCT term weights: the loss, the targets, pseudo term frequencies, the weighted BM25 index,
the weighting of documents, the export and its signature, and resumed training."""

import json

import bm25s
import numpy as np
import pytest
import tensorflow as tf

from helpers import graph_ops, json_round_trip, tiny_model
from tt_zoo.data.pairs_io import write_pair_shards
from tt_zoo.data.pretraining_tasks import Pair
from tt_zoo.data.term_weight_targets import merge_word_pieces, token_targets, word_start_flags
from tt_zoo.data.terms import TermSpace
from tt_zoo.errors import ArtifactError
from tt_zoo.modeling.term_weights import TARGET_MASK, TARGETS, TermWeightModel, masked_mse
from tt_zoo.retrieval.bm25 import BM25Retriever, TermWeights, pseudo_term_frequency

DOCS = ["The cat sat on the mat with another cat.",
        "A dog barks at the postman every morning.",
        "Paris is the capital and largest city of France, a city of cats."]


# ------------------------------------------------------------------------------------ the loss

def test_masked_mse_by_hand():
    targets = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    predictions = [[0.5, 0.2, 0.9], [0.1, 0.6, 0.3]]
    mask = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    # Squared errors under the mask: 0.25, 0.04 | 0.01, 0.16, 0.09 -> 0.55 / 5 positions.
    assert float(masked_mse(targets, predictions, mask)) == pytest.approx(0.11)
    assert float(masked_mse(targets, predictions, np.zeros((2, 3)))) == 0.0  # no position


# --------------------------------------------------------------------------------- the targets

def test_targets_on_a_hand_checked_pair():
    tokens = ["[CLS]", "penicillin", "[SEP]", "fleming", "discovered", "the", "m", "##o", "##l",
              "##d", "s", ",", "[SEP]", "[PAD]"]
    # Query terms: "discov" (discovers), "mold" (molds); "who" and "the" are stop words.
    targets, mask = token_targets(tokens, "Who discovers the molds?", TermSpace())
    #                 CLS pen SEP fle disc the  m  ##o ##l ##d  s   ,  SEP PAD
    assert targets.tolist() == [0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    assert mask.tolist() == [0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    words, word_of = merge_word_pieces(tokens)
    assert words == ["penicillin", "fleming", "discovered", "the", "mold", "s", ","]
    assert word_of.tolist() == [-1, 0, -1, 1, 2, 3, 4, 4, 4, 4, 5, 6, -1, -1]
    assert np.flatnonzero(word_start_flags(tokens)).tolist() == [1, 3, 4, 5, 6, 10, 11]
    # A word with an unknown piece has no term; a window that starts inside a word.
    assert merge_word_pieces(["[UNK]", "##s", "##o"])[0] == ["[UNK]"]
    assert merge_word_pieces(["##o", "##n", "x"])[0] == ["on", "x"]


# ------------------------------------------------------------------- pseudo term frequencies

def test_pseudo_term_frequency_formula():
    # round(100 sqrt(y)): 100, 50, 10, 0, 70.71 -> 71, and half up: 10 sqrt(0.0625) = 2.5 -> 3.
    assert pseudo_term_frequency([1.0, 0.25, 0.01, 0.0, 0.5]).tolist() == [100, 50, 10, 0, 71]
    assert pseudo_term_frequency([0.0625], scale=10).tolist() == [3]
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        pseudo_term_frequency([1.5])


# ---------------------------------------------------------------------- the weighted index

def test_no_weights_is_plain_bm25s():
    queries = ["capital of France", "which animal sat on a mat", "cats"]
    ours = BM25Retriever(DOCS)
    stemmer = TermSpace().stemmer
    plain = bm25s.BM25()
    plain.index(bm25s.tokenize(DOCS, stopwords="en", stemmer=stemmer, show_progress=False),
                show_progress=False)
    for query in queries:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, return_ids=False,
                                show_progress=False)[0]
        np.testing.assert_allclose(ours.retriever.get_scores(tokens), plain.get_scores(tokens))
    assert ours.weighted_fraction is None


def test_weights_that_read_nothing_leave_plain_counts():
    # Every term weighted 0 (pseudo tf 0) but none of its occurrences read: plain tf, so the
    # pseudo documents are the texts and every score is plain BM25's.
    terms = TermSpace().tokenize(DOCS)
    weights = [TermWeights({t: 0.0 for t in doc}, {t: 0 for t in doc}) for doc in terms]
    weighted, plain = BM25Retriever(DOCS, weights=weights), BM25Retriever(DOCS)
    for query in (["cat"], ["citi", "cat"], ["dog", "morn"]):
        np.testing.assert_allclose(weighted.retriever.get_scores(query),
                                   plain.retriever.get_scores(query), rtol=1e-6)
    assert weighted.weighted_fraction == 0.0


def test_a_heavily_weighted_term_ranks_its_document_first():
    texts = ["cat dog", "cat bird"]
    assert np.ptp(BM25Retriever(texts).search(["cat"], k=2).scores) == 0  # plain BM25: a tie
    weights = [TermWeights({"cat": 0.01, "dog": 1.0}), TermWeights({"cat": 1.0, "bird": 0.01})]
    result = BM25Retriever(texts, weights=weights).search(["cat"], k=2)
    # Pseudo tf: A cat 10, dog 100; B cat 100, bird 10; both lengths 110 = the average.
    # idf(cat) = ln(1 + (2 - 2 + 0.5) / (2 + 0.5)) = ln 1.2 = 0.182322
    # B: 0.182322 * 100 / (1.5 + 100) = 0.179627;  A: 0.182322 * 10 / (1.5 + 10) = 0.158541
    assert result.rows[0].tolist() == [1, 0]
    np.testing.assert_allclose(result.scores[0], [0.179627, 0.158541], rtol=1e-5)


def test_occurrences_the_weighting_did_not_read_keep_their_count():
    # "zebra cat cat": cat weighted 0.25 (pseudo tf round(10 * 0.5) = 5) with one of its two
    # occurrences read -> tf 5 + 1 = 6; zebra unweighted -> 1; length 7 = the average.
    # idf = ln(1 + 0.5 / 1.5) = 0.287682; cat: 0.287682 * 6 / (1.5 + 6) = 0.230146.
    retriever = BM25Retriever(["zebra cat cat"], weight_scale=10,
                              weights=[TermWeights({"cat": 0.25, "lion": 1.0}, {"cat": 1})])
    np.testing.assert_allclose(retriever.search(["cats"], k=1).scores[0], [0.230146],
                               rtol=1e-5)
    assert retriever.search(["lion"], k=1).empty[0]  # a weight never adds a term
    assert retriever.weighted_fraction == pytest.approx(1 / 3)


def test_unread_occurrences_can_count_as_weighted_ones():
    # The same document with unread="weighted": cat's pseudo tf 5 for 1 read occurrence of 2
    # -> tf round(5 * 2 / 1) = 10; length 11 = the average.
    # cat: 0.287682 * 10 / (1.5 + 10) = 0.250158.
    retriever = BM25Retriever(["zebra cat cat"], weight_scale=10, unread="weighted",
                              weights=[TermWeights({"cat": 0.25}, {"cat": 1})])
    np.testing.assert_allclose(retriever.search(["cats"], k=1).scores[0], [0.250158],
                               rtol=1e-5)
    with pytest.raises(ValueError, match="unread must be one of"):
        BM25Retriever(["zebra"], unread="ignored")


def test_bad_weights_are_named():
    with pytest.raises(ValueError, match="one TermWeights per text"):
        BM25Retriever(DOCS, weights=[TermWeights({})])
    with pytest.raises(ValueError, match=r"weights\[1\] must be a TermWeights"):
        BM25Retriever(DOCS[:2], weights=[TermWeights({}), {"dog": 1.0}])
    with pytest.raises(ValueError, match=r"weights\[0\]: Term weights must be in \[0, 1\]"):
        BM25Retriever(DOCS[:1], weights=[TermWeights({"cat": 2.0})])


# ------------------------------------------------------------- the model and its weighting

@pytest.fixture(scope="module")
def model():
    two_tower = tiny_model()
    two_tower.build_by_calling()
    return TermWeightModel.from_two_tower(two_tower)


def test_model_round_trip_and_starts_from_the_encoder(model):
    two_tower = tiny_model()  # the same seed: the same encoder weights
    two_tower.build_by_calling()
    for ours, theirs in zip(model.tower.encoder.get_weights(),
                            two_tower.document_tower.encoder.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    packed = model.preprocessor((tf.constant(["paris", ""]),
                                 tf.constant(["the seine flows through paris.", "water"])))
    # The round trip (as helpers.assert_model_round_trip does for two-tower models): the config
    # through JSON, the same outputs with the weights copied, one plain Keras fit step.
    clone = TermWeightModel.from_config(json_round_trip(model.get_config()))
    clone.build_by_calling()
    assert json_round_trip(clone.get_config()) == json_round_trip(model.get_config())
    clone.set_weights(model.get_weights())
    weights = clone(packed).numpy()
    np.testing.assert_allclose(weights, model(packed).numpy(), rtol=1e-6)
    assert weights.shape == (2, 24) and ((weights > 0) == (packed["input_mask"].numpy() > 0)).all()
    targets = tf.cast(packed["input_word_ids"] == 20, tf.float32)  # "paris" is the query term
    batch = {**packed, TARGETS: targets, TARGET_MASK: tf.cast(packed["input_mask"], tf.float32)}
    clone.compile(optimizer=tf.keras.optimizers.Adam(1e-2), run_eagerly=True)
    before = float(masked_mse(targets, clone(packed), batch[TARGET_MASK]))
    history = clone.fit(tf.data.Dataset.from_tensors(batch).repeat(3), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert float(masked_mse(targets, clone(packed), batch[TARGET_MASK])) < before
    with pytest.raises(TypeError, match="needs a BertTower"):
        TermWeightModel(model.preprocessor, tf.keras.layers.Dense(1))


def test_weighter_windows_and_terms(model):
    from tt_zoo.retrieval.term_weighting import TermWeighter

    weighter = TermWeighter(model, max_title_tokens=4, batch_size=3)
    # Room for 24 - 3 - 1 (title) = 20 pieces a window; "found" is f ##o ##u ##n ##d, at
    # pieces 19-23: the cut moves back to its first piece.
    cut = weighter._windows(["paris"], ["paris " * 19 + "found"])
    assert [len(w[2]) for w in cut] == [19, 5]
    passage = "alexander fleming discovered penicillin in london " * 5  # 30 one-piece words
    windows = weighter._windows(["paris"], [passage])
    assert [len(w[2]) for w in windows] == [20, 10]
    assert [w[3] for w in windows] == [True, False] and all(len(w[1]) == 1 for w in windows)
    (doc,) = weighter.weigh(["paris"], [passage])
    assert set(doc.weights) == {"pari", "alexand", "fleme", "discov", "penicillin", "london"}
    assert doc.seen["pari"] == 1 and doc.seen["penicillin"] == 5  # the title is read once
    # A term's weight is the largest y of its words' first pieces over both windows.
    ids, mask, types = weighter._pack(windows)
    y = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}).numpy()
    assert doc.weights["penicillin"] == pytest.approx(y[ids == 17].max())
    assert doc.weights["pari"] == pytest.approx(y[ids == 20].max())
    # Under XLA (fixed shapes: padded rows and positions), the same weights.
    xla = TermWeighter(model, max_title_tokens=4, jit_compile=True).weigh(["paris"], [passage])
    assert_same_weights(xla[0], doc)
    # max_windows caps what is read: the rest is not seen.
    capped = TermWeighter(model, max_title_tokens=4, max_windows=1).weigh(["paris"], [passage])
    assert capped[0].seen["penicillin"] == 3 and capped[0].seen["pari"] == 1


def test_weigh_corpus_deduplicates_caches_and_resumes(model, tmp_path):
    from tt_zoo.retrieval.term_weighting import TermWeighter, weigh_corpus

    weighter = TermWeighter(model)
    titles = ["paris", "paris", "water", "seine"]
    passages = ["paris is the capital of france.", "paris is the capital of france.",
                "water boils at 100 degrees.", "the seine flows through paris."]
    first = weigh_corpus(weighter, titles, passages, cache_dir=tmp_path, chunk_size=2,
                         progress=False, log=None)
    assert len(first) == 4 and first.num_rows == 3 and first[0] == first[1]
    # (Alone, the document is padded less: the same weights up to float rounding.)
    assert_same_weights(first[2], weighter.weigh(["water"], [passages[2]])[0])
    (folder,) = tmp_path.glob("term-weights-*")
    parts = sorted(folder.glob("part-*.npz"))
    assert len(parts) == 2
    parts[1].unlink()  # a run killed before its last chunk: the rerun weighs only that one
    messages = []
    again = weigh_corpus(weighter, titles, passages, cache_dir=tmp_path, chunk_size=2,
                         progress=False, log=messages.append)
    assert "weighted 1 distinct documents" in messages[0]
    for i in range(4):
        assert_same_weights(again[i], first[i])
    retriever = BM25Retriever([t + " " + p for t, p in zip(titles, passages)], weights=again)
    assert retriever.weighted_fraction == 1.0  # every term occurrence of "title passage" read


def assert_same_weights(a: TermWeights, b: TermWeights):
    assert a.seen == b.seen and a.weights.keys() == b.weights.keys()
    np.testing.assert_allclose([a.weights[t] for t in a.weights],
                               [b.weights[t] for t in a.weights], atol=1e-6)


# ------------------------------------------------------------------------------ the export

def test_export_round_trip_signature_and_ops(model, exported, tmp_path):
    from tt_zoo.artifacts.export import verify_export
    from tt_zoo.artifacts.term_weight_export import (export_term_weight_model,
                                                   load_term_weight_model, load_term_weighter)

    path = tmp_path / "tw"
    meta = export_term_weight_model(model, path, {"name": "tiny_tw"})
    assert verify_export(path) == meta and meta["kind"] == "term_weights"
    assert meta["weight_scale"] == 100 and meta["term_space"]["stemmer"] == "english"
    reloaded = load_term_weight_model(path)
    titles, passages = tf.constant(["paris", "water"]), tf.constant(
        ["the seine flows through paris.", "found"])
    expected = model.weigh(titles, passages)["weights"].numpy()
    np.testing.assert_allclose(reloaded.weigh(titles, passages)["weights"], expected, atol=1e-6)

    served = tf.saved_model.load(str(path)).signatures["term_weights"](title=titles,
                                                                        passage=passages)
    tokens = served["tokens"].numpy().astype(str)
    assert tokens[1].tolist()[:9] == ["[CLS]", "water", "[SEP]", "f", "##o", "##u", "##n",
                                      "##d", "[SEP]"]
    assert served["word_start"].numpy()[1, :9].tolist() == [False, True, False, True, False,
                                                            False, False, False, False]
    np.testing.assert_allclose(served["weights"], expected, atol=1e-6)
    np.testing.assert_array_equal(served["word_start"].numpy(),
                                  np.stack([word_start_flags(r.tolist()) for r in tokens]))
    assert tokens[1, -1] == ""  # padding of the shorter row
    assert load_term_weighter(path).weigh(["water"], ["found"])[0].weights.keys() == {
        "water", "found"}
    with pytest.raises(ArtifactError, match="not a term-weight export"):
        load_term_weight_model(exported.path)  # a two-tower export
    # The op whitelist (as tests/test_reliability.py checks the two-tower exports): only
    # TensorFlow core and tensorflow-text ops in the graph.
    found = graph_ops(path)
    assert found["other"] == [] and found["text"], found


# ------------------------------------------------------------------------------ training

def test_training_command_resumes_after_a_kill(exported, tmp_path, monkeypatch, capsys):
    from tt_zoo.cli import train_term_weights as command
    from tt_zoo.artifacts.term_weight_export import load_term_weight_model
    from tt_zoo.training import term_weights as training

    rng = np.random.default_rng(0)
    words = "the who discovered penicillin fleming paris capital france river seine".split()
    pairs = [Pair(query=" ".join(rng.choice(words, 4)), doc_title=str(rng.choice(words)),
                  doc_text=" ".join(rng.choice(words, 10)), doc_id=f"d{i}", task="ict")
             for i in range(16)]
    write_pair_shards(pairs, str(tmp_path / "pairs"), num_shards=1, progress=False)
    argv = ["--pairs", str(tmp_path / "pairs"), "--init-from", str(exported.path),
            "--steps", "4", "--batch-size", "4", "--checkpoint-every", "2",
            "--learning-rate", "1e-3", "--export", str(tmp_path / "export"),
            "--workdir", str(tmp_path / "work"), "--token-cache", str(tmp_path / "cache"),
            "--no-progress"]

    record = training._CpuTime.record

    def killed_after_step_2(self, step):
        record(self, step)
        if step == 2:
            raise KeyboardInterrupt("killed")
    monkeypatch.setattr(training._CpuTime, "record", killed_after_step_2)
    with pytest.raises(KeyboardInterrupt):
        command.main(argv)
    monkeypatch.setattr(training._CpuTime, "record", record)
    assert command.main(argv) == 0
    out = capsys.readouterr().out
    assert "resuming from" in out and "trained to step 4 (resumed from 2)" in out
    assert "read the targets of 16 pairs" in out  # the targets were cached by the first run
    meta = json.loads((tmp_path / "export" / "metadata.json").read_text())
    assert meta["train_steps"] == 4 and meta["resumed_from"] == 2
    assert meta["train_cpu_seconds"] > 0 and meta["init"]["sha256"] == exported.meta["sha256"]
    assert np.isfinite(meta["final_loss"])
    trained = load_term_weight_model(tmp_path / "export")  # trained from the init's encoder
    start = exported.model.document_tower.encoder.get_weights()
    moved = [not np.allclose(a, b) for a, b in zip(trained.tower.encoder.get_weights(), start)]
    assert any(moved) and all(a.shape == b.shape for a, b in
                              zip(trained.tower.encoder.get_weights(), start))


def test_task_pairs_take_first_positives_and_drop_the_titles_asked(tmp_path):
    from tt_zoo.data.tasks import Document, Task, TaskExample
    from tt_zoo.training.term_weights import task_pairs

    sentence = Document("s1", "Fleming found penicillin.", "In 1928 Fleming found penicillin.")
    wiki = Document("p7", "Paris", "Paris is the capital of France.")
    reqa = Task("reqa", "qa", (TaskExample("who found penicillin?", (sentence, wiki)),))
    web = Task("web", "qa", (TaskExample("capital of france?", (wiki,)),))
    rows = list(task_pairs([reqa, web], untitled={"reqa"}).as_numpy_iterator())
    assert [(r["query"], r["doc_title"], r["doc_text"]) for r in rows] == [
        (b"who found penicillin?", b"", b"In 1928 Fleming found penicillin."),
        (b"capital of france?", b"Paris", b"Paris is the capital of France.")]


def test_training_on_a_labelled_task_continues_a_term_weight_export(model, tmp_path, capsys):
    """--task jsonl:PATH with --init-from a term-weight export: the head trains on from the
    export's weights, the card lists the task, and bad task flags exit naming them."""
    from tt_zoo.cli import train_term_weights as command
    from tt_zoo.data.tasks import Document, Task, TaskExample, write_task_jsonl
    from tt_zoo.artifacts.term_weight_export import (export_term_weight_model,
                                                   load_term_weight_model)

    start = tmp_path / "start"
    export_term_weight_model(model, start, {"name": "tiny_tw"})
    docs = [Document(f"d{i}", "Paris", f"Paris is the capital of France {i}.") for i in range(6)]
    task = Task("capitals", "qa", tuple(TaskExample(f"capital of france {i}?", (d,))
                                        for i, d in enumerate(docs)))
    path = write_task_jsonl(task, tmp_path / "capitals.jsonl")
    argv = ["--task", f"jsonl:{path}", "--untitled", "capitals", "--init-from", str(start),
            "--steps", "2", "--batch-size", "3", "--checkpoint-every", "2",
            "--export", str(tmp_path / "export"), "--workdir", str(tmp_path / "work"),
            "--token-cache", "", "--no-progress"]
    assert command.main(argv) == 0
    assert "term weights on 6 pairs" in capsys.readouterr().out
    meta = json.loads((tmp_path / "export" / "metadata.json").read_text())
    assert meta["init"]["copied"].startswith("the whole term-weight model")
    assert meta["training_data"] == "the questions of capitals (6, untitled)"
    assert [t["name"] for t in meta["multi_task"]["tasks"]] == ["capitals"]
    trained = load_term_weight_model(tmp_path / "export")
    moved = [not np.allclose(a, b) for a, b in zip(trained.get_weights(), model.get_weights())]
    assert any(moved)
    for bad, message in ((["--untitled", "nope"], "--untitled 'nope': no task of that name"),
                         (["--task", "pairs:x"], "are read with --pairs DIR")):
        with pytest.raises(SystemExit, match=message):
            command.main(argv[:4] + bad + argv[4:])
    with pytest.raises(SystemExit, match="nothing to train on"):
        command.main(argv[4:])
