"""BM25 hard negatives (tt_zoo.mining.hard_negatives): the skip rules on a corpus where BM25's
top hit is the positive, the fallback, determinism, the stored file and its sidecar, step_batches
with negatives (also per replica), a pretrain run with them, and the ReQA miner."""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from helpers import load_recipe, tiny_model, tiny_vocab
from tt_zoo.data import features as F
from tt_zoo.data.pairs_io import PairTexts, read_pair_texts, write_pair_shards
from tt_zoo.data.pretraining_tasks import Pair
from tt_zoo.errors import ArtifactError
from tt_zoo.retrieval import bm25
from tt_zoo.mining import hard_negatives as hn
from tt_zoo.evaluation import reqa as reqa_lib
from tt_zoo.training.step_data import (num_rows, step_batches, tokenize_on_host,
                                       tokenize_pair_set)

QUERY = "Fleming discovered penicillin mould."
# (title, text, doc id); BM25 ranks them for QUERY: P (the positive) 1.31, C 1.18, A 0.88,
# V 0.56; U1-U3 share no term with it (checked in the first test).
P = ("Penicillin", "Fleming discovered penicillin in a mould culture in 1928.", "Penicillin#0")
A = ("Penicillin", "Fleming grew penicillin mould cultures for mass production by 1944.",
     "Penicillin#1")  # another passage of P's article
C = ("Mould", "Mould grows on bread and fruit in damp rooms. FLEMING discovered  penicillin\n"
     "mould.", "Mould#0")  # contains the query (other case, other spaces)
V = ("Antibiotics", "Antibiotics such as penicillin were discovered after 1928.", "Antibiotics#0")
U = [("Paris", "Paris is the capital of France.", "Paris#0"),
     ("Seine", "The Seine flows through Paris.", "Seine#0"),
     ("Water", "Water boils at 100 degrees.", "Water#0")]
# Rows: 0 = an ICT pair and 1 = a BFS pair with QUERY and positive P; then one pair per other
# document (its row is the document's row).
ROWS = [(QUERY, P, "ict"), (QUERY, P, "bfs"), ("mass production of antibiotics", A, "ict"),
        ("bread in damp rooms", C, "ict"), ("antibiotics after the war", V, "wlp"),
        ("capital of france", U[0], "ict"), ("a river", U[1], "bfs"), ("boiling", U[2], "ict")]
ROW_OF = {"P": 0, "A": 2, "C": 3, "V": 4, "U": {5, 6, 7}}


def hand_made_pairs() -> PairTexts:
    return PairTexts([q for q, _, _ in ROWS], [d[2] for _, d, _ in ROWS],
                     [d[0] for _, d, _ in ROWS], [d[1] for _, d, _ in ROWS],
                     [t for _, _, t in ROWS])


def quiet(*_):
    pass


def assert_valid(pairs: PairTexts, rows: np.ndarray):
    """No negative is the positive, a passage of a BFS/WLP positive's article, a document or
    BFS/WLP article that another pair gives the same query as its positive, or a document
    holding the query; no example repeats a negative."""
    for i, negatives in enumerate(rows):
        assert len(set(negatives.tolist())) == len(negatives), (i, negatives)
        query = hn.normalize_text(pairs.queries[i])
        same_query = [j for j in range(len(pairs)) if hn.normalize_text(pairs.queries[j]) == query]
        for r in negatives:
            assert pairs.doc_ids[r] != pairs.doc_ids[i], (i, r)
            if pairs.tasks[i] in ("bfs", "wlp"):
                assert pairs.titles[r] != pairs.titles[i], (i, r)
            for j in same_query:
                assert pairs.doc_ids[r] != pairs.doc_ids[j], (i, r, j)
                if pairs.tasks[j] in ("bfs", "wlp"):
                    assert pairs.titles[r] != pairs.titles[j], (i, r, j)
            assert query not in hn.normalize_text(pairs.titles[r] + " " + pairs.texts[r]), (i, r)


def test_the_premise_bm25_ranks_the_positive_first_then_false_negatives():
    docs = [P, C, A, V, *U]
    ranked, scores = bm25.BM25Retriever([t + " " + x for t, x, _ in docs]).top_rows(
        [QUERY], 7)
    assert ranked[0].tolist() == [0, 1, 2, 3, -1, -1, -1]  # P, C, A, V; U unmatched
    assert (np.diff(scores[0, :4]) < 0).all()


def test_skip_rules_with_one_negative():
    mined = hn.mine_pair_negatives(hand_made_pairs(), 1, progress=False, log=quiet)
    # ICT: P is the positive, C holds the query, and A is a passage of the article that row
    # 1 (BFS, the same query) pairs the query with: a positive of it, so V.
    assert mined.rows[0].tolist() == [ROW_OF["V"]]
    # BFS: the positive's whole article is skipped too: A goes, V is next.
    assert mined.rows[1].tolist() == [ROW_OF["V"]]
    assert mined.rows.dtype == np.int32 and mined.rows.shape == (len(ROWS), 1)
    assert_valid(hand_made_pairs(), mined.rows)
    assert mined.counts["pairs"] == 8 and mined.counts["distinct_documents"] == 7
    assert mined.counts["skipped_same_document"] >= 2 and mined.counts["skipped_same_article"] >= 1
    assert mined.counts["skipped_containing_query"] >= 2
    assert mined.counts["skipped_positive_of_same_query"] >= 1


def test_positives_of_the_same_query_elsewhere_are_not_negatives():
    # QUERY is the lead sentence of Penicillin: the query of a BFS pair (positive A, a passage
    # of Penicillin) and of a WLP pair (positive V, from Antibiotics, which links to Penicillin).
    rows = [(QUERY, V, "wlp"), (QUERY, A, "bfs"), ("mould in 1928", P, "ict"),
            ("bread in damp rooms", C, "ict"), *[(f"q{k}", u, "ict") for k, u in enumerate(U)]]
    pairs = PairTexts([q for q, _, _ in rows], [d[2] for _, d, _ in rows],
                      [d[0] for _, d, _ in rows], [d[1] for _, d, _ in rows],
                      [t for _, _, t in rows])
    mined = hn.mine_pair_negatives(pairs, 1, progress=False, log=quiet)
    # BM25 ranks P, C, A, V for QUERY. For the WLP pair, P is neither its positive nor of its
    # positive's article, but it is a passage of Penicillin, the BFS pair's article: skipped, as
    # are C (holds the query), A and V (positives): only an unmatched U document is left.
    assert mined.rows[0, 0] in {4, 5, 6}
    assert mined.rows[1, 0] in {4, 5, 6}
    assert mined.counts["skipped_positive_of_same_query"] >= 2
    assert_valid(pairs, mined.rows)
    assert hn.query_positives(pairs)[hn.normalize_text(QUERY)] == (
        {"Antibiotics#0", "Penicillin#1"}, {"Antibiotics", "Penicillin"})


def test_fallback_fills_at_random_under_the_same_rules_and_is_counted():
    pairs = hand_made_pairs()
    mined = hn.mine_pair_negatives(pairs, 3, progress=False, log=quiet)
    # ICT row 0: V from BM25 (A is a positive of the same query, see above), then two
    # documents that matched nothing (U).
    assert mined.rows[0, 0] == ROW_OF["V"] and set(mined.rows[0, 1:]) <= ROW_OF["U"]
    # BFS row 1: V only, then two distinct U documents.
    assert mined.rows[1, 0] == ROW_OF["V"] and set(mined.rows[1, 1:]) <= ROW_OF["U"]
    assert_valid(pairs, mined.rows)
    assert mined.counts["pairs_with_fallback"] >= 2
    assert mined.counts["fallback_negatives"] >= 3
    # Deterministic, fallback included; another seed may only change the random slots.
    again = hn.mine_pair_negatives(pairs, 3, progress=False, log=quiet)
    np.testing.assert_array_equal(again.rows, mined.rows)
    assert again.counts == mined.counts
    other = hn.mine_pair_negatives(pairs, 3, seed=5, progress=False, log=quiet)
    np.testing.assert_array_equal(other.rows[1, :1], mined.rows[1, :1])
    assert_valid(pairs, other.rows)


def test_too_few_valid_documents_in_the_whole_corpus_is_an_error():
    with pytest.raises(ValueError, match="valid hard negatives in the whole corpus"):
        hn.mine_pair_negatives(hand_made_pairs(), 6, progress=False, log=quiet)
    with pytest.raises(ValueError, match="depth 2 must be at least num_negatives 3"):
        hn.MiningSettings(3, depth=2)


def test_a_document_is_represented_by_its_longest_text():
    pairs = PairTexts(["q1", "q2", "q3"], ["d#0", "d#0", "e#0"], ["d", "d", "e"],
                      ["short", "the whole passage", "other"], ["ict"] * 3)
    assert hn.document_rows(pairs).tolist() == [1, 2]


# ------------------------------------------------------------------ stored with the pairs


def write_pairs(directory, rows=ROWS):
    pairs = [Pair(q, d[0], d[1], d[2], t) for q, d, t in rows]
    write_pair_shards(pairs, str(directory), num_shards=2, progress=False)


def files_of(directory):
    return {p.name: p.read_bytes() for p in pathlib.Path(directory).iterdir() if p.is_file()}


def test_stored_beside_the_pairs_reused_and_refused_when_the_pairs_change(tmp_path):
    pairs_dir = tmp_path / "pairs"
    write_pairs(pairs_dir)
    before = files_of(pairs_dir)
    settings = hn.MiningSettings(2, depth=8)
    first = hn.load_or_mine(str(pairs_dir), settings, progress=False, log=quiet)
    assert not first.reused and files_of(pairs_dir) == before  # pair files untouched
    stored = pairs_dir / "hard_negatives"
    assert sorted(p.name for p in stored.iterdir()) == [
        "bm25-v2-h2-depth8-seed0-all.json", "bm25-v2-h2-depth8-seed0-all.npy"]
    sidecar = json.loads((stored / "bm25-v2-h2-depth8-seed0-all.json").read_text())
    assert sidecar["settings"]["num_negatives"] == 2 and sidecar["shape"] == [8, 2]
    assert sidecar["counts"]["pairs"] == 8 and sidecar["mining_seconds"] >= 0
    # Rows are in read_pairs order (two shards interleave): the rules hold there.
    assert_valid(read_pair_texts(str(pairs_dir)), first.rows)

    again = hn.load_or_mine(str(pairs_dir), settings, progress=False, log=quiet)
    assert again.reused and again.sidecar == first.sidecar
    np.testing.assert_array_equal(again.rows, first.rows)
    first_pairs = hn.load_or_mine(str(pairs_dir), hn.MiningSettings(2, depth=8, max_pairs=5),
                                  progress=False, log=quiet)
    assert first_pairs.rows.shape == (5, 2) and first_pairs.rows.max() < 5

    write_pairs(pairs_dir, ROWS[::-1])  # make-pairs rewrote the directory
    with pytest.raises(hn.HardNegativesMismatchError, match="mined from other pairs"):
        hn.load_or_mine(str(pairs_dir), settings, progress=False, log=quiet)
    # An explicit output directory (a read-only or remote pair directory) works.
    elsewhere = hn.load_or_mine(str(pairs_dir), settings, output_dir=str(tmp_path / "out"),
                                progress=False, log=quiet)
    assert not elsewhere.reused and (tmp_path / "out" / "bm25-v2-h2-depth8-seed0-all.npy").is_file()

    npy = tmp_path / "out" / "bm25-v2-h2-depth8-seed0-all.npy"
    npy.write_bytes(npy.read_bytes()[:-4] + b"\0\0\0\1")  # same size, other content
    with pytest.raises(ArtifactError, match="corrupted"):
        hn.load_or_mine(str(pairs_dir), settings, output_dir=str(tmp_path / "out"),
                        progress=False, log=quiet)
    npy.with_suffix(".json").unlink()  # a .npy without sidecar: an unfinished write, redone
    redone = hn.load_or_mine(str(pairs_dir), settings, output_dir=str(tmp_path / "out"),
                             progress=False, log=quiet)
    assert not redone.reused
    np.testing.assert_array_equal(redone.rows, elsewhere.rows)


def test_mine_negatives_command(tmp_path, capsys):
    pairs_dir = tmp_path / "pairs"
    write_pairs(pairs_dir)
    argv = ["--pairs", str(pairs_dir), "--num-negatives", "1", "--depth", "4",
            "--output", str(tmp_path / "out"), "--no-progress"]
    sidecar = load_recipe("mine_negatives").main(argv)
    assert sidecar["settings"]["depth"] == 4
    assert "mined " in capsys.readouterr().out
    load_recipe("mine_negatives").main(argv)
    assert "reused " in capsys.readouterr().out


# ------------------------------------------------------------------ step_batches


def token_arrays(n=10, length=3):
    """Pair arrays whose document ids spell the row (row r's tokens are all 100 + r)."""
    return {F.QUERY_INPUTS: {"input_word_ids": np.tile(np.arange(n, dtype=np.int32)[:, None],
                                                       (1, length))},
            F.DOCUMENT_INPUTS: {
                "input_word_ids": np.tile(100 + np.arange(n, dtype=np.int32)[:, None],
                                          (1, length)),
                "input_mask": np.ones((n, length), np.int8)},
            F.DOC_ID: 1000 + np.arange(n, dtype=np.int64),
            F.DOC_SAMPLING_PROB: np.linspace(0.1, 1.0, n).astype(np.float32)}


def negatives_of(n=10):
    """Row r's hard negatives: r + 1 and r + 3 (mod n)."""
    rows = np.arange(n)[:, None]
    return ((rows + np.array([[1, 3]])) % n).astype(np.int32)


def check_batch(batch, arrays, negatives):
    rows = batch[F.QUERY_INPUTS]["input_word_ids"][:, 0]
    expected = negatives[rows].reshape(-1)  # example b's negatives at b * H + h
    hard = batch[F.HARD_NEGATIVE_INPUTS]
    assert hard["input_word_ids"].shape == (len(rows) * 2, 3)
    assert hard["input_mask"].dtype == np.int32  # widened like the batch's own documents
    np.testing.assert_array_equal(hard["input_word_ids"][:, 0], 100 + expected)
    np.testing.assert_array_equal(batch[F.HARD_NEGATIVE_IDS], 1000 + expected)
    np.testing.assert_array_equal(batch[F.HARD_NEGATIVE_SAMPLING_PROBS],
                                  arrays[F.DOC_SAMPLING_PROB][expected])
    return rows.tolist()


def test_step_batches_carry_each_examples_hard_negatives():
    arrays, negatives = token_arrays(), negatives_of()
    plain = [b[F.QUERY_INPUTS]["input_word_ids"][:, 0].tolist() for b in step_batches(
        arrays, 4, seed=2, start_step=0, end_step=3).as_numpy_iterator()]
    with_negatives = step_batches(arrays, 4, seed=2, start_step=0, end_step=3,
                                  hard_negatives=negatives)
    assert with_negatives.element_spec[F.HARD_NEGATIVE_INPUTS]["input_word_ids"].shape == (8, 3)
    served = [check_batch(b, arrays, negatives) for b in with_negatives.as_numpy_iterator()]
    assert served == plain  # the same examples, in the same order

    # Two replicas (one input pipeline): each replica's half of the global batch, with the
    # negatives of its own examples.
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                         num_replicas_in_sync=2)
    replicas = [check_batch(b, arrays, negatives) for b in step_batches(
        arrays, 4, seed=2, start_step=0, end_step=3, input_context=context,
        hard_negatives=negatives).as_numpy_iterator()]
    assert [a + b for a, b in zip(replicas[::2], replicas[1::2])] == plain
    assert all(len(r) == 2 for r in replicas)


def test_step_batches_refuse_bad_hard_negatives():
    arrays = token_arrays()
    with pytest.raises(ValueError, match=r"must be \[10, H\] row indices"):
        step_batches(arrays, 4, seed=0, start_step=0, hard_negatives=negatives_of(9))
    with pytest.raises(ValueError, match=r"rows outside \[0, 10\)"):
        step_batches(arrays, 4, seed=0, start_step=0, hard_negatives=negatives_of(10) + 5)
    with pytest.raises(ValueError, match="taken from the arrays"):
        step_batches({"x": np.zeros(10)}, 4, seed=0, start_step=0,
                     hard_negatives=negatives_of(10))


def test_hard_negatives_reach_the_loss():
    """The same batch with negatives has more candidates in the softmax: a larger loss."""
    model = tiny_model(encoder="bow_mlp")
    pairs = tf.data.Dataset.from_tensor_slices(
        {F.QUERY: [q for q, _, _ in ROWS], F.DOC_TITLE: [d[0] for _, d, _ in ROWS],
         F.DOC_TEXT: [d[1] for _, d, _ in ROWS], F.DOC_ID: [d[2] for _, d, _ in ROWS],
         F.DOC_SAMPLING_PROB: [0.125] * len(ROWS)})
    arrays = tokenize_pair_set(model, pairs, log=quiet)
    negatives = hn.mine_pair_negatives(hand_made_pairs(), 1, progress=False, log=quiet).rows
    assert num_rows(arrays) == len(negatives)
    plain = next(iter(step_batches(arrays, 8, seed=0, start_step=0, end_step=1)))
    hard = next(iter(step_batches(arrays, 8, seed=0, start_step=0, end_step=1,
                                  hard_negatives=negatives)))
    assert float(model.compute_loss(hard)) > float(model.compute_loss(plain))


# ------------------------------------------------------------------ pretrain --hard-negatives


def test_pretrain_trains_with_hard_negatives_and_records_them(tmp_path):
    pairs_dir = tmp_path / "pairs"
    write_pairs(pairs_dir)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    workdir = tmp_path / "run"
    argv = ["--variant", "ict_bfs_wlp_128", "--pairs", str(pairs_dir), "--vocab", str(vocab),
            "--steps", "1", "--batch-size", "4", "--tower-shape", "1,16,2",
            "--query-length", "16", "--document-length", "24", "--workdir", str(workdir),
            "--token-cache", "", "--no-progress", "--hard-negatives", "2",
            "--hard-negatives-depth", "8"]
    pretrain = load_recipe("pretrain")
    assert pretrain.main(argv) == 0
    summary = json.loads((workdir / "train_summary.json").read_text())
    assert summary["hard_negatives"]["num_negatives"] == 2
    assert summary["hard_negatives"]["depth"] == 8
    assert summary["hard_negatives"]["mining_seconds"] >= 0 and not summary["hard_negatives"][
        "reused"]
    assert np.isfinite(summary["final_loss"])
    settings = json.loads((workdir / "checkpoints" / "run_settings.json").read_text())
    assert settings["hard_negatives"]["num_negatives"] == 2
    assert (pairs_dir / "hard_negatives" / "bm25-v2-h2-depth8-seed0-all.npy").is_file()

    other = list(argv)
    other[other.index("--hard-negatives") + 1] = "1"
    with pytest.raises(SystemExit, match="hard_negatives: checkpoint"):
        pretrain.main(other)  # resuming with another H is refused


# ------------------------------------------------------------------ ReQA fine-tuning


def reqa_squad():
    """q0's answer "Fleming" is in candidate 0 (gold); candidate 7 (in P4) holds it too.
    Candidates: 0, 1 = passage 0's sentences; 2, 3 = passage 1's; 4, 5; 6; 7 = passage 4."""
    passages = ["Fleming discovered penicillin in 1928. He worked in London.",
                "Penicillin was discovered in 1928 by a Scottish scientist. It changed medicine.",
                "Penicillin is an antibiotic. Penicillin was discovered by accident.",
                "Paris is the capital of France.",
                "Alexander Fleming discovered penicillin in 1928 at St Mary's."]
    qas = {0: [{"id": "q0", "question": "Who discovered penicillin in 1928?",
                "answers": [{"text": "Fleming", "answer_start": 0},
                            {"text": "FLEMING", "answer_start": 0}]}],
           3: [{"id": "q1", "question": "What is the capital of France?",
                "answers": [{"text": "Paris", "answer_start": 0}]}],
           2: [{"id": "q2", "question": "Is penicillin an antibiotic?",
                "answers": [{"text": "an antibiotic", "answer_start": 14}]}]}
    return {"data": [{"title": "t", "paragraphs": [
        {"context": p, "qas": qas.get(i, [])} for i, p in enumerate(passages)]}]}


def test_reqa_miner_skips_gold_and_answer_holding_candidates():
    reqa = reqa_lib.build_reqa_from_squad(reqa_squad())
    assert reqa.question("q0").answers == ("Fleming", "FLEMING")
    assert reqa.candidates[7].sentence.startswith("Alexander Fleming")
    ranking, _ = bm25.BM25Retriever(bm25.candidate_texts(reqa)).top_rows(
        ["Who discovered penicillin in 1928?"], 10)
    assert ranking[0, :4].tolist() == [0, 2, 7, 3]  # gold first, the answer-holder third
    mined = hn.mine_reqa_negatives(reqa, ["q0", "q1", "q2"], 2)
    assert mined.rows[0].tolist() == [2, 3]  # without the gold and the answer-holder
    for q, negatives in zip(reqa.questions_for(["q0", "q1", "q2"]), mined.rows):
        assert q.gold_index not in negatives
        for c in negatives:
            assert not any(a.lower() in reqa.candidates[c].sentence.lower() for a in q.answers)
    assert mined.counts["skipped_gold"] >= 1 and mined.counts["skipped_containing_answer"] >= 1
    np.testing.assert_array_equal(hn.mine_reqa_negatives(reqa, ["q0", "q1", "q2"], 2).rows,
                                  mined.rows)


def test_reqa_miner_takes_any_ranking_and_can_skip_the_gold_passage():
    """Candidates 0, 1 are passage 0's sentences (q0's gold is 0), 2, 3 passage 1's, 7 holds
    q0's answer. A fixed ranking: [0, 1, 7, 3, 2, ...] for every query."""
    reqa = reqa_lib.build_reqa_from_squad(reqa_squad())
    assert [c.passage_index for c in reqa.candidates[:4]] == [0, 0, 1, 1]
    order = np.array([0, 1, 7, 3, 2, 4, 5, 6])
    calls = []

    def rank(queries, depth):
        calls.append((list(queries), depth))
        return np.tile(order[:depth], (len(queries), 1))

    siblings = hn.mine_reqa_negatives(reqa, ["q0"], 2, depth=5, rank=rank)
    assert siblings.rows[0].tolist() == [1, 3]  # the sibling 1 first; 7 holds the answer
    assert calls == [(["Who discovered penicillin in 1928?"], 5)]
    other = hn.mine_reqa_negatives(reqa, ["q0"], 2, depth=5, rank=rank, skip_gold_passage=True)
    assert other.rows[0].tolist() == [3, 2]  # 0 gold, 1 its sibling, 7 the answer-holder
    assert other.counts["skipped_gold"] == 1
    assert other.counts["skipped_gold_passage"] == 1
    assert other.counts["skipped_containing_answer"] == 1
    assert "skipped_gold_passage" not in siblings.counts


def test_finetuning_feeds_string_negatives_tokenized_with_candidate_ids():
    from tt_zoo.modeling.losses import hash_ids
    from tt_zoo.training import finetuning

    reqa = reqa_lib.build_reqa_from_squad(reqa_squad())
    negatives = hn.mine_reqa_negatives(reqa, ["q0", "q1"], 2).rows
    pairs = finetuning.reqa_pairs(reqa, ["q0", "q1"], hard_negatives=negatives)
    first = next(iter(pairs))
    assert [t.decode() for t in first[F.HARD_NEGATIVE_TITLES].numpy()] == [
        reqa.candidates[c].sentence for c in negatives[0]]
    model = tiny_model(encoder="bow_mlp")
    batch = tokenize_on_host(model, next(iter(pairs.batch(2))))
    assert batch[F.HARD_NEGATIVE_INPUTS]["input_word_ids"].shape == (4, 24)
    np.testing.assert_array_equal(
        batch[F.HARD_NEGATIVE_IDS], hash_ids(tf.constant([str(c) for c in negatives.ravel()])))
    assert F.HARD_NEGATIVE_SAMPLING_PROBS not in batch  # the loss uses the batch's mean log q

    split = reqa_lib.Split(train=["q0", "q1", "q2"], validation=[], test=[])
    result = finetuning.finetune(model, reqa, split, steps=2, batch_size=3, eval_every=1,
                                 hard_negatives=2, progress=False)
    assert result["hard_negatives"]["num_negatives"] == 2
    assert result["hard_negatives"]["counts"]["questions"] == 3
    assert np.isfinite(result["history"][-1]["loss"])
    assert result["hard_negatives"]["source"].startswith("BM25")

    mined_by_model = finetuning.finetune(model, reqa, split, steps=1, batch_size=3, eval_every=1,
                                         hard_negatives=1, hard_negatives_model=model,
                                         skip_gold_passage=True, progress=False)
    record = mined_by_model["hard_negatives"]
    assert "exact inner-product search" in record["source"]
    assert record["source"].endswith("skipping the gold passage's sentences")
    assert record["counts"]["questions"] == 3 and "skipped_gold_passage" in record["counts"]

    # Both kinds of negative: the model's from another paragraph, then BM25's (siblings allowed).
    # q0's BM25 negatives are [2, 3] (the test above): the first that the model did not take.
    both, record = finetuning._mine_negatives(reqa, ["q0", "q1", "q2"], 1, 32, model, True, 0,
                                              False, bm25_extra=1)
    assert both.rows.shape == (3, 2) and "then 1 BM25 negative(s)" in record["source"]
    model_pick = both.rows[0, 0]
    assert reqa.candidates[model_pick].passage_index != 0  # not q0's gold passage
    assert both.rows[0, 1] == (2 if model_pick != 2 else 3)
    assert all(row[0] != row[1] for row in both.rows)
    assert both.counts["bm25_extra"]["questions"] == 3
    with pytest.raises(ValueError, match="give hard_negatives >= 1 and hard_negatives_model"):
        finetuning.finetune(model, reqa, split, steps=1, hard_negatives=1, bm25_negatives=1,
                            progress=False)
