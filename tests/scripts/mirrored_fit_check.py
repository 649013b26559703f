"""The pretraining input path under MirroredStrategy over 2 logical CPUs, against one device.

For the BERT and the BoW-MLP towers: the same weights, the same tokenized pairs; one device
trains on `step_batches` (global batches), the strategy on `distribute_step_batches`
(`distribute_datasets_from_function`, per-replica batch = global / 2, cross-replica negatives).
Checks that the summed per-replica loss equals the single-device loss of the global batch, that
`fit` logs that same global loss, and that three steps leave the same weights. Prints
MIRRORED_FIT_OK; exits non-zero otherwise. A separate process, because logical devices must be
configured before TensorFlow initialises.
"""

import pathlib
import sys

import tt_zoo  # noqa: F401  (first: the package sets Keras 2 as tf.keras)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/, for helpers
from helpers import tiny_model  # noqa: E402
from tt_zoo.data import features as F  # noqa: E402
from tt_zoo.training.step_data import distribute_step_batches, step_batches, tokenize_pair_set  # noqa: E402

N, GLOBAL_BATCH, STEPS = 8, 4, 3
PAIRS = tf.data.Dataset.from_tensor_slices({
    F.QUERY: [f"who discovered penicillin {i}?" for i in range(N)],
    F.DOC_TITLE: ["penicillin", "paris", "seine", "water"] * 2,
    F.DOC_TEXT: [f"the seine flows through paris {i}." for i in range(N)],
    # d0 twice: on different replicas in some batches, so only global gathering can mask it.
    F.DOC_ID: ["d0", "d1", "d2", "d3", "d4", "d5", "d0", "d7"],
    F.DOC_SAMPLING_PROB: [0.1] * N})
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2


def compiled(model):
    model.build_by_calling()
    # SGD: Adam divides each update by the gradient's size, so float-rounding differences in
    # near-zero gradients would become full-size steps and hide whether the gradients agree.
    model.compile(optimizer=tf.keras.optimizers.SGD(0.5))
    return model


for encoder in ("bert", "bow_mlp"):
    single = compiled(tiny_model(encoder, dropout_rate=0.0, pooling="mean"))
    with strategy.scope():
        mirrored = compiled(tiny_model(encoder, dropout_rate=0.0, pooling="mean"))
    mirrored.set_weights(single.get_weights())
    arrays = tokenize_pair_set(single, PAIRS, log=lambda *_: None)

    first = next(iter(step_batches(arrays, GLOBAL_BATCH, seed=0, start_step=0)))
    single_loss = float(single.compute_loss(first))
    distributed = distribute_step_batches(strategy, arrays, GLOBAL_BATCH, seed=0, start_step=0)
    distributed_first = next(iter(distributed))
    per_replica = strategy.run(tf.function(mirrored.compute_loss), args=(distributed_first,))
    sizes = [int(x[F.DOC_ID].shape[0]) for x in
             strategy.experimental_local_results(distributed_first)]
    assert sizes == [GLOBAL_BATCH // 2] * 2, sizes
    distributed_loss = float(strategy.reduce("sum", per_replica, axis=None))
    print(f"{encoder}: single-device loss {single_loss:.6f}, 2 replicas {distributed_loss:.6f}")
    np.testing.assert_allclose(distributed_loss, single_loss, rtol=1e-5)

    single_history = single.fit(
        step_batches(arrays, GLOBAL_BATCH, seed=0, start_step=0, end_step=STEPS),
        steps_per_epoch=STEPS, verbose=0)
    mirrored_history = mirrored.fit(
        distribute_step_batches(strategy, arrays, GLOBAL_BATCH, seed=0, start_step=0,
                                end_step=STEPS), steps_per_epoch=STEPS, verbose=0)
    for name in ("loss", "in_batch_top1"):
        np.testing.assert_allclose(mirrored_history.history[name], single_history.history[name],
                                   rtol=1e-4, err_msg=name)
    for a, b in zip(single.get_weights(), mirrored.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    print(f"{encoder}: {STEPS} fit steps give the same weights; logged loss "
          f"{mirrored_history.history['loss'][-1]:.6f} = {single_history.history['loss'][-1]:.6f}")
print("MIRRORED_FIT_OK")
