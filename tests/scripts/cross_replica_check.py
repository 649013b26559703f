"""Runs the loss on a global batch under MirroredStrategy(2 logical CPUs) and on one device.

Prints CROSS_REPLICA_OK when the summed per-replica loss and the aggregated gradients equal the
single-device ones (allclose); exits non-zero otherwise. Run as a separate process because
logical devices must be configured before TensorFlow initialises.
"""

import sys

import tt_zoo  # noqa: F401  (first: the package sets Keras 2 as tf.keras)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss  # noqa: E402

rng = np.random.default_rng(0)
GLOBAL_BATCH, DIM = 8, 4
features = {
    "query": rng.normal(size=[GLOBAL_BATCH, DIM]).astype("float32"),
    "doc": rng.normal(size=[GLOBAL_BATCH, DIM]).astype("float32"),
    # Documents 1 and 6 are the same passage: on different replicas, so only global gathering
    # can mask them.
    "ids": np.array([b"p0", b"p1", b"p2", b"p3", b"p4", b"p5", b"p1", b"p7"]),
    "prob": rng.uniform(0.01, 0.2, size=[GLOBAL_BATCH]).astype("float32"),
}
hard = rng.normal(size=[2, DIM]).astype("float32")


def build():
    tf.keras.utils.set_random_seed(1)
    dense = tf.keras.layers.Dense(DIM, kernel_initializer="glorot_uniform")
    dense.build([None, DIM])
    return dense, CorrectedSampledSoftmaxLoss()


def loss_and_grads(dense, loss_layer, batch):
    with tf.GradientTape() as tape:
        doc_embeddings = dense(batch["doc"])
        loss = loss_layer(batch["query"], doc_embeddings, document_ids=batch["ids"],
                          sampling_probabilities=batch["prob"],
                          hard_negative_embeddings=dense(tf.constant(hard)),
                          hard_negative_ids=tf.constant([b"h0", b"h1"]))
    return loss, tape.gradient(loss, dense.trainable_variables)


# One device, the whole batch (hard negatives duplicated once per replica, as in the
# distributed run where every replica contributes its own copy).
dense, loss_layer = build()
single_batch = {k: tf.constant(v) for k, v in features.items()}
with tf.GradientTape() as tape:
    doc_embeddings = dense(single_batch["doc"])
    hard_embeddings = dense(tf.constant(np.concatenate([hard, hard])))
    single_loss = loss_layer(single_batch["query"], doc_embeddings,
                             document_ids=single_batch["ids"],
                             sampling_probabilities=single_batch["prob"],
                             hard_negative_embeddings=hard_embeddings,
                             hard_negative_ids=tf.constant([b"h0", b"h1", b"h0", b"h1"]))
single_grads = tape.gradient(single_loss, dense.trainable_variables)

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2
with strategy.scope():
    dense_d, loss_layer_d = build()
dataset = tf.data.Dataset.from_tensor_slices(features).batch(GLOBAL_BATCH)
batch = next(iter(strategy.experimental_distribute_dataset(dataset)))


@tf.function
def step(batch):
    def replica_fn(b):
        loss, grads = loss_and_grads(dense_d, loss_layer_d, b)
        context = tf.distribute.get_replica_context()
        return loss, [context.all_reduce("sum", g) for g in grads]
    return strategy.run(replica_fn, args=(batch,))


per_replica_loss, per_replica_grads = step(batch)
distributed_loss = strategy.reduce("sum", per_replica_loss, axis=None)
distributed_grads = [strategy.experimental_local_results(g)[0] for g in per_replica_grads]
for w_single, w_dist in zip(dense.trainable_variables, dense_d.trainable_variables):
    np.testing.assert_allclose(w_single.numpy(), w_dist.numpy())

print("single-device loss", float(single_loss), "cross-replica loss", float(distributed_loss))
np.testing.assert_allclose(float(single_loss), float(distributed_loss), rtol=1e-5)
for g_single, g_dist in zip(single_grads, distributed_grads):
    np.testing.assert_allclose(g_single.numpy(), g_dist.numpy(), rtol=1e-4, atol=1e-6)

# Without gathering, each replica sees only its own 4 documents: a different loss.
with strategy.scope():
    local_only = CorrectedSampledSoftmaxLoss(cross_replica_negatives=False)


@tf.function
def local_step(batch):
    return strategy.run(lambda b: local_only(b["query"], b["doc"], document_ids=b["ids"],
                                             sampling_probabilities=b["prob"]), args=(batch,))


local_loss = float(strategy.reduce("sum", local_step(batch), axis=None))
# (Not normalised by the global batch: each replica divides by its own size, so sum/2 is the
# local-only mean.)
assert abs(local_loss / 2 - float(single_loss)) > 1e-3, (local_loss, float(single_loss))
print("CROSS_REPLICA_OK")
sys.exit(0)
