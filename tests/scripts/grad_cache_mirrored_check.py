"""GradCache under MirroredStrategy over 2 logical CPUs, against one device's full-batch step.

The same weights and global batches (8 tokenized pairs with accidental hits, 2 hard negatives
each); one device trains with the ordinary step on the global batch, the strategy with GradCache
on 4 pairs per replica in chunks of 2 and of 3 (a short last chunk), with cross-replica in-batch
and hard negatives. Checks that `fit` logs the same loss and in-batch top-1 and that two steps
leave the same weights. Prints GRAD_CACHE_MIRRORED_OK; exits non-zero otherwise. A separate
process, because logical devices must be configured before TensorFlow initialises.
"""

import pathlib
import sys

import tt_zoo  # noqa: F401  (first: the package sets Keras 2 as tf.keras)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/, for helpers
from helpers import tiny_model, tokenized_batch  # noqa: E402
from tt_zoo.training.grad_cache import use_grad_cache  # noqa: E402

GLOBAL_BATCH, HARD, STEPS = 8, 2, 2
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2


def replica_part(batch, replica):
    """Replica r's examples of the global batch (hard negatives: their H rows each)."""
    half = GLOBAL_BATCH // 2

    def cut(t):
        per_example = t.shape[0] // GLOBAL_BATCH
        return t[replica * half * per_example:(replica + 1) * half * per_example]
    return tf.nest.map_structure(cut, batch)


def compiled(model, chunk=None):
    model.build_by_calling()
    use_grad_cache(model, chunk)
    # SGD: Adam divides each update by the gradient's size, so float-rounding differences in
    # near-zero gradients would become full-size steps and hide whether the gradients agree.
    model.compile(optimizer=tf.keras.optimizers.SGD(0.5))
    return model


single = compiled(tiny_model("bow_mlp"))
initial_weights = single.get_weights()
batch = tokenized_batch(single, hard_negatives=HARD)
single_history = single.fit(tf.data.Dataset.from_tensors(batch).repeat(STEPS), verbose=0)

for chunk in (2, 3):
    with strategy.scope():
        mirrored = compiled(tiny_model("bow_mlp"), chunk)
    mirrored.set_weights(initial_weights)

    def per_replica_batches(context):
        parts = [tf.data.Dataset.from_tensors(replica_part(batch, r)) for r in range(2)]
        return parts[0].concatenate(parts[1]).repeat(STEPS)  # replica 0's, replica 1's, ...

    history = mirrored.fit(strategy.distribute_datasets_from_function(per_replica_batches),
                           steps_per_epoch=STEPS, verbose=0)
    for name in ("loss", "in_batch_top1"):
        np.testing.assert_allclose(history.history[name], single_history.history[name],
                                   rtol=1e-5, err_msg=name)
    for a, b in zip(single.get_weights(), mirrored.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    print(f"chunk {chunk}: {STEPS} GradCache steps on 2 replicas give the full-batch weights; "
          f"logged loss {history.history['loss']} = {single_history.history['loss']}")
print("GRAD_CACHE_MIRRORED_OK")
