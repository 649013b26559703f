"""tt_zoo.training.finetuning and `tt-zoo finetune`: early stopping, batch clamping, q(d), end to end."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import data_file
from helpers import load_recipe, tiny_vocab
from tt_zoo.data import features as F
from tt_zoo.training import finetuning
from tt_zoo.evaluation import reqa as reqa_lib
from tt_zoo.modeling.models import build_two_tower_model
from tt_zoo.modeling.pair_model import with_sequence_lengths

COMMAND = [sys.executable, "-m", "tt_zoo.cli", "finetune"]  # as `tt-zoo finetune`
TINY_SHAPE = dict(num_layers=1, hidden_size=16, num_attention_heads=2, inner_dim=32)


@pytest.fixture(scope="module")
def recipe():
    """The recipe as a module, to run ``main(argv)`` in-process (no second TensorFlow start)."""
    return load_recipe("finetune")


def run_recipe(*args, timeout=300):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=timeout)


def one_sentence_squad(pairs):
    """A SQuAD object with one one-sentence passage per distinct passage text; ``pairs`` is a list
    of (question id, question, passage), the answer being the passage's first word."""
    paragraphs = {}
    for qid, question, passage in pairs:
        par = paragraphs.setdefault(passage, {"context": passage, "qas": []})
        par["qas"].append({"id": qid, "question": question,
                           "answers": [{"text": passage.split()[0], "answer_start": 0}]})
    return {"data": [{"title": "t", "paragraphs": list(paragraphs.values())}]}


PASSAGES = ["paris is the capital of france.", "the river seine flows through paris.",
            "london is a city in england.", "water boils at degrees."]
QUESTIONS = ["what is the capital of france?", "what river flows through paris?",
             "what city is in england?", "when does water boil?"]


@pytest.fixture
def swapped_reqa():
    """Training questions t0..t3 answer from passages 0..3; validation questions v0..v3 have the
    same texts but answer from passage i+1: learning the training pairs raises the validation
    loss, so the best validation step is an early one."""
    pairs = [(f"t{i}", QUESTIONS[i], PASSAGES[i]) for i in range(4)]
    pairs += [(f"v{i}", QUESTIONS[i], PASSAGES[(i + 1) % 4]) for i in range(4)]
    reqa = reqa_lib.build_reqa_from_squad(one_sentence_squad(pairs), source="swapped")
    split = reqa_lib.Split(train=[f"t{i}" for i in range(4)],
                           validation=[f"v{i}" for i in range(4)], test=[])
    return reqa, split


def tiny_model(encoder="bert", **kwargs):
    tf.keras.utils.set_random_seed(0)
    shape = TINY_SHAPE if encoder == "bert" else {}
    model = build_two_tower_model(tiny_vocab(), encoder=encoder, size=None, embedding_dim=8,
                                  query_length=16, document_length=24, dropout_rate=0.0,
                                  bow_token_embedding_dim=8, bow_hidden_dim=16,
                                  **{**shape, **kwargs})
    model.build_by_calling()
    return model


def test_early_stopping_restores_the_best_weights(swapped_reqa, tmp_path):
    reqa, split = swapped_reqa
    model = tiny_model(encoder="bow_mlp")
    result = finetuning.finetune(model, reqa, split, steps=40, batch_size=64, learning_rate=3e-2,
                                 eval_every=2, patience=3, seed=0, log_dir=tmp_path,
                                 progress=False)
    # The batch (64) is clamped to the 4 training pairs, and the log says so.
    assert result["batch_size"] == 4 and result["requested_batch_size"] == 64
    assert any("clamped to 4" in n for n in result["notes"])
    records = [r for r in result["history"] if r["step"] > 0]
    val = [r["val_loss"] for r in records]
    # Training learnt the training pairs, and the swapped validation loss rose past its best.
    assert records[-1]["loss"] < records[0]["loss"]
    assert max(val[val.index(min(val)):]) > min(val) + 0.05
    assert result["stopped_early"] and result["steps_run"] < 40
    assert result["best_value"] == pytest.approx(min(val))
    assert result["best_step"] == records[val.index(min(val))]["step"]
    # The weights now in the model are those of the best step, not of the last one.
    val_ds = finetuning.reqa_pairs(reqa, split.validation).batch(4)
    now = model.evaluate(val_ds, verbose=0, return_dict=True)["loss"]
    assert now == pytest.approx(result["best_value"], rel=1e-4)
    assert abs(now - val[-1]) > 0.05
    saved = json.loads((tmp_path / finetuning.HISTORY_FILE).read_text())
    assert saved["best_step"] == result["best_step"]
    assert (tmp_path / finetuning.LOG_FILE).read_text().startswith("epoch")


def test_finetune_runs_exactly_the_steps_without_validation(swapped_reqa):
    reqa, split = swapped_reqa
    split = reqa_lib.Split(train=split.train, validation=[], test=split.validation)
    model = tiny_model(encoder="bow_mlp")
    result = finetuning.finetune(model, reqa, split, steps=5, batch_size=2, eval_every=2,
                                 learning_rate=1e-2, progress=False)
    assert result["steps_run"] == 5 and [r["step"] for r in result["history"]] == [2, 4, 5]
    assert result["monitor"] is None and any("no validation" in n for n in result["notes"])
    assert int(model.optimizer.iterations) == 5


def test_finetune_rejects_bad_settings(swapped_reqa):
    reqa, split = swapped_reqa
    model = tiny_model(encoder="bow_mlp")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        finetuning.finetune(model, reqa, split, batch_size=0)
    with pytest.raises(ValueError, match="validation_metric must be 'loss' or one of"):
        finetuning.finetune(model, reqa, split, validation_metric="R@3")
    with pytest.raises(ValueError, match="no training questions"):
        finetuning.finetune(model, reqa, reqa_lib.Split([], [], split.test), steps=1)


def test_reqa_pairs_carry_gold_ids_and_gold_frequencies():
    # Questions a and b share their gold (sentence, passage); c has its own.
    reqa = reqa_lib.build_reqa_from_squad(one_sentence_squad(
        [("a", "q a?", PASSAGES[0]), ("b", "q b?", PASSAGES[0]), ("c", "q c?", PASSAGES[1])]))
    rows = list(finetuning.reqa_pairs(reqa, ["a", "b", "c"]).as_numpy_iterator())
    assert [r[F.DOC_ID] for r in rows] == [b"0", b"0", b"1"]
    np.testing.assert_allclose([r[F.DOC_SAMPLING_PROB] for r in rows], [2 / 3, 2 / 3, 1 / 3])
    plain = next(finetuning.reqa_pairs(reqa, ["c"], sampling_correction=False).as_numpy_iterator())
    assert F.DOC_SAMPLING_PROB not in plain and plain[F.DOC_ID] == b"1"


def test_with_sequence_lengths_keeps_the_weights():
    model = tiny_model()
    longer = with_sequence_lengths(model, query_length=20, document_length=20)
    assert (longer.query_preprocessor.seq_length, longer.document_preprocessor.seq_length) == (
        20, 20)
    # Short texts fit both budgets; padding is masked, so the embeddings agree.
    np.testing.assert_allclose(longer.encode_queries(["who discovered penicillin?"]),
                               model.encode_queries(["who discovered penicillin?"]), atol=1e-5)
    assert with_sequence_lengths(model) is model
    with pytest.raises(ValueError, match="covers at most 24 positions"):
        with_sequence_lengths(model, document_length=64)


def squad_slice(tmp_path, articles=2, paragraphs=4):
    """The first paragraphs of the first SQuAD dev articles, as a small SQuAD file."""
    squad = json.loads(data_file("squad/dev-v1.1.json").read_text(encoding="utf-8"))
    data = [{"title": a["title"], "paragraphs": a["paragraphs"][:paragraphs]}
            for a in squad["data"][:articles]]
    path = tmp_path / "squad_slice.json"
    path.write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")
    return path


def tiny_recipe_args(tmp_path, squad, export=True):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n", encoding="utf-8")
    return ["--init", "none", "--vocab", vocab, "--num-layers", 1, "--hidden-size", 16,
            "--num-attention-heads", 2, "--inner-dim", 32, "--embedding-dim", 8,
            "--query-length", 16, "--document-length", 32, "--squad", squad,
            "--limit-questions", 60, "--train-fraction", 0.5, "--seed", 3, "--steps", 3,
            "--batch-size", 8, "--eval", "--quiet", "--split-out", tmp_path / "split.json",
            "--json-out", tmp_path / "result.json"] + (
                ["--output", tmp_path / "model"] if export else [])


def check_recipe_outputs(tmp_path, export=True):
    import tt_zoo

    result = json.loads((tmp_path / "result.json").read_text())
    split = json.loads((tmp_path / "split.json").read_text())
    # 60 questions: 30 in the training part (3 held out for validation), 30 test.
    assert (len(split["train"]), len(split["validation"]), len(split["test"])) == (27, 3, 30)
    assert result["num_questions"] == 30 and result["finetune"]["steps_run"] == 3
    assert result["finetune"]["batch_size"] == 8
    model_row, bm25_row = result["rows"]
    assert model_row["pretraining"] == "none" and bm25_row["encoder"] == "BM25"
    for row in result["rows"]:
        values = [row[c] for c in ("R@1", "R@5", "R@10", "R@50", "R@100")]
        assert all(0.0 <= v <= 1.0 for v in values) and values == sorted(values)
        assert 0.0 <= row["MRR"] <= 1.0
    if not export:
        assert not (tmp_path / "model").exists()
        return result
    loaded = tt_zoo.load(str(tmp_path / "model"))
    assert loaded.pretraining == "none"
    assert loaded.metadata["train_steps"] == 3
    assert loaded.encode_queries(["who discovered penicillin?"]).shape == (1, 8)
    return result


def test_recipe_end_to_end_in_process(tmp_path, recipe):
    squad = squad_slice(tmp_path)
    argv = [str(a) for a in tiny_recipe_args(tmp_path, squad, export=False)]
    result = recipe.main(argv)
    check_recipe_outputs(tmp_path, export=False)
    assert result["run_config"] == recipe.parse_args(argv).to_dict()  # the whole config
    assert result["rows"][0]["R@100"] == json.loads(
        (tmp_path / "result.json").read_text())["rows"][0]["R@100"]


@pytest.mark.slow  # ~30-90 s: a fresh interpreter imports TensorFlow and exports a SavedModel
def test_recipe_end_to_end_subprocess_with_export(tmp_path, recipe):
    squad = squad_slice(tmp_path)
    proc = run_recipe(*tiny_recipe_args(tmp_path, squad))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "BM25" in proc.stdout and "R@100" in proc.stdout and "Wall time" in proc.stdout
    check_recipe_outputs(tmp_path)
    # The export fine-tunes again through --model PATH, with a shorter document budget, on
    # negatives the export itself mines from other passages (Maillard et al. 2021, Sec. 4.4)
    # and one BM25 negative beside each.
    again = recipe.main(["--model", str(tmp_path / "model"), "--squad", str(squad),
                         "--limit-questions", "40", "--train-fraction", "0.5", "--steps", "2",
                         "--batch-size", "4", "--document-length", "24", "--quiet",
                         "--hard-negatives", "1", "--hard-negatives-from", str(tmp_path / "model"),
                         "--hard-negatives-other-passages", "--bm25-negatives", "1",
                         "--output", str(tmp_path / "model2")])
    assert again["model"]["document_length"] == 24 and again["finetune"]["steps_run"] == 2
    assert again["model"]["base_model"] == str(tmp_path / "model")
    import tt_zoo
    reloaded = tt_zoo.load(str(tmp_path / "model2"))
    assert reloaded.keras_model.document_preprocessor.seq_length == 24
    lineage = reloaded.metadata["base_model"]  # the card names what it was fine-tuned from
    assert reloaded.metadata["run_config"]["data"]["limit_questions"] == 40
    assert lineage["path"] == str(tmp_path / "model") and lineage["sha256"]
    mined = reloaded.metadata["finetune"]["hard_negatives"]
    assert mined["counts"]["questions"] == 18 and "skipped_gold_passage" in mined["counts"]
    assert "skipping the gold passage's sentences" in mined["source"]
    assert mined["mined_with"]["sha256"] == lineage["sha256"]  # the very export that mined
    assert mined["num_negatives"] == 2 and mined["counts"]["bm25_extra"]["questions"] == 18
    with pytest.raises(ValueError, match="covers at most 32 positions"):
        recipe.main(["--model", str(tmp_path / "model"), "--squad", str(squad),
                     "--train-fraction", "0.5", "--steps", "1", "--document-length", "64"])


def test_recipe_bad_inputs_give_clear_errors(tmp_path):
    missing = tmp_path / "nope.json"
    proc = run_recipe("--init", "none", "--squad", missing, "--train-fraction", 0.01, timeout=60)
    assert proc.returncode == 2 and f"SQuAD file {missing} does not exist" in proc.stderr
    proc = run_recipe("--init", "none", "--train-fraction", 1.5, timeout=60)
    assert proc.returncode == 2 and "argument --train-fraction: must be a finite number in (0, 1)" in proc.stderr
    assert "1.5" in proc.stderr
    proc = run_recipe("--train-fraction", 0.01, timeout=60)
    assert proc.returncode == 2 and "--model" in proc.stderr and "--init" in proc.stderr
