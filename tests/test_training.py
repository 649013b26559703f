"""tt_zoo.training.loop: settings recorded and checked on resume, the zero-shot curve callback."""

import gc
import json
import logging

import numpy as np
import pytest
import tensorflow as tf

from helpers import PAIRS, hand_made_squad, tiny_model
from tt_zoo.training import loop as training
from tt_zoo.evaluation.reqa import build_reqa_from_squad
from tt_zoo.training.step_data import distribute_step_batches, step_batches, tokenize_pair_set


def test_settings_are_recorded_then_checked(tmp_path):
    settings = {"batch_size": 128, "learning_rate": 1e-3, "steps": 100, "tower": {"layers": 2}}
    training.check_run_settings(str(tmp_path), settings, resuming=False)
    assert json.loads((tmp_path / training.SETTINGS_FILE).read_text()) == settings
    training.check_run_settings(str(tmp_path), dict(settings), resuming=True)  # the same
    other = {**settings, "batch_size": 256, "tower": {"layers": 4}}
    with pytest.raises(training.SettingsMismatchError) as error:
        training.check_run_settings(str(tmp_path), other, resuming=True)
    message = str(error.value)
    assert "batch_size: checkpoint 128, now 256" in message
    assert "tower: checkpoint {'layers': 2}, now {'layers': 4}" in message
    assert "learning_rate" not in message  # only what differs is named


def test_train_resumable_resumes_in_one_fit_and_records_the_curve(tmp_path, caplog):
    reqa = build_reqa_from_squad(hand_made_squad())
    model = tiny_model(pooling="mean", share_towers=True)
    model.build_by_calling()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2))
    arrays = tokenize_pair_set(model, tf.data.Dataset.from_tensor_slices(PAIRS),
                               log=lambda *_: None)
    curve = training.ZeroShotReqaCurve(reqa, every_steps=3, num_questions=4, global_batch=4,
                                       output=str(tmp_path / "curve.jsonl"), log=lambda *_: None)
    settings = {"steps": 6, "batch_size": 4}
    make = lambda start: step_batches(arrays, 4, seed=0, start_step=start, end_step=6)  # noqa
    result = training.train_resumable(model, make, steps=6, global_batch=4,
                                      checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=3,
                                      settings=settings, progress=False, callbacks=[curve],
                                      log=lambda *_: None)
    assert (result.steps_done, result.resumed_from, len(result.step_seconds)) == (6, 0, 6)
    assert result.pairs_per_s_over(first=True) > 0 and np.isfinite(result.final_loss)
    # The optimizer's slots exist before fit (`build_optimizer`): the step traced once, not
    # once creating them and again without.
    assert model.train_function.experimental_get_tracing_count() == 1
    assert len(model.optimizer.variables) == 1 + 2 * len(model.trainable_variables)
    points = [json.loads(line) for line in (tmp_path / "curve.jsonl").read_text().splitlines()]
    assert [p["step"] for p in points] == [0, 3, 6]
    assert points[1]["pairs_seen"] == 12 and points[0]["loss"] is None
    assert points[0]["num_questions"] == 4 and points[0]["num_candidates"] == len(reqa.candidates)
    assert all(0 <= p["R@1"] <= p["R@5"] <= p["R@100"] <= 1 for p in points)
    again = training.train_resumable(model, make, steps=6, global_batch=4,
                                     checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=3,
                                     settings=settings, progress=False, log=lambda *_: None)
    assert again.final_loss is None and again.steps_done == 6  # nothing left to do
    # A fresh model on the finished run (a rerun of the command): nothing to do, and no
    # warnings about the optimizer's slots it never built when the checkpoint is deleted.
    fresh = tiny_model(pooling="mean", share_towers=True)
    fresh.build_by_calling()
    fresh.compile(optimizer=tf.keras.optimizers.Adam(1e-2))
    with caplog.at_level(logging.WARNING):
        rerun = training.train_resumable(fresh, make, steps=6, global_batch=4,
                                         checkpoint_dir=str(tmp_path / "ckpt"),
                                         checkpoint_every=3, settings=settings, progress=False,
                                         log=lambda *_: None)
        np.testing.assert_array_equal(fresh.get_weights()[0], model.get_weights()[0])
        del fresh  # the restored objects go, as at the command's exit
        gc.collect()
    assert rerun.steps_done == 6 and rerun.resumed_from == 6
    assert not [r for r in caplog.records if "unrestored" in r.getMessage()
                or "could not be found" in r.getMessage()]
    # The run's training time is kept beside its checkpoints: a run resumed at its end reports
    # the first segment's time and rate, not 0 s.
    recorded = json.loads((tmp_path / "ckpt" / training.TRAIN_TIME_FILE).read_text())
    assert recorded["step"] == 6 and 0 < recorded["seconds"] <= result.wall_time_s + 1e-3
    assert again.earlier_wall_time_s == pytest.approx(recorded["seconds"])
    assert again.total_wall_time_s == pytest.approx(recorded["seconds"] + again.wall_time_s)
    assert again.pairs_per_s == pytest.approx(6 * 4 / recorded["seconds"])
    with pytest.raises(training.SettingsMismatchError, match="steps: checkpoint 6, now 9"):
        training.train_resumable(model, make, steps=9, global_batch=4,
                                 checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=3,
                                 settings={**settings, "steps": 9}, progress=False,
                                 log=lambda *_: None)


@pytest.mark.parametrize("encoder", [
    pytest.param("bert", marks=pytest.mark.slow),  # ~18 s of XLA compilation (BoW-MLP: fast)
    "bow_mlp"])
def test_the_training_step_compiles_with_xla_and_lowers_the_loss(tmp_path, encoder):
    """The stand-in for a TPU's compilation: tokenized batches (no strings in the step) train
    under `compile(jit_compile=True)`, through the same resumable loop and distributed input
    (`distribute_step_batches`) as recipes/pretrain.py."""
    model = tiny_model(encoder, pooling="mean", share_towers=True)
    model.build_by_calling()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2), jit_compile=True)
    arrays = tokenize_pair_set(model, tf.data.Dataset.from_tensor_slices(PAIRS),
                               log=lambda *_: None)
    batch = next(iter(step_batches(arrays, 4, seed=0, start_step=0)))
    before = float(model.compute_loss(batch))
    result = training.train_resumable(
        model, lambda start: distribute_step_batches(tf.distribute.get_strategy(), arrays, 4,
                                                     seed=0, start_step=start, end_step=10),
        steps=10, global_batch=4, checkpoint_dir=str(tmp_path), checkpoint_every=5,
        progress=False, log=lambda *_: None)
    after = float(model.compute_loss(batch))
    assert model._jit_compile and result.steps_done == 10
    assert after < before, (before, after)
