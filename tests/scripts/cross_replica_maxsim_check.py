"""The MaxSim loss (late interaction) under MirroredStrategy(2 logical CPUs) and on one device.

Prints CROSS_REPLICA_MAXSIM_OK when the summed per-replica loss and the aggregated gradients
equal the single-device ones on the global batch (token vectors and masks gathered across
replicas like single embeddings), and when, without gathering, the loss differs; exits non-zero
otherwise. A separate process: logical devices must be configured before TensorFlow starts.
"""

import sys

import tt_zoo  # noqa: F401  (first: the package sets Keras 2 as tf.keras)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss  # noqa: E402

rng = np.random.default_rng(0)
GLOBAL_BATCH, QUERY_LENGTH, DOC_LENGTH, DIM = 8, 3, 5, 4
doc_mask = (rng.uniform(size=[GLOBAL_BATCH, DOC_LENGTH]) < 0.7).astype("int32")
doc_mask[:, 0] = 1
features = {
    "query": rng.normal(size=[GLOBAL_BATCH, QUERY_LENGTH, DIM]).astype("float32"),
    "doc": rng.normal(size=[GLOBAL_BATCH, DOC_LENGTH, DIM]).astype("float32"),
    "doc_mask": doc_mask,
    # Documents 1 and 6 are the same passage, on different replicas: only gathering masks them.
    "ids": np.array([b"p0", b"p1", b"p2", b"p3", b"p4", b"p5", b"p1", b"p7"]),
    "prob": rng.uniform(0.01, 0.2, size=[GLOBAL_BATCH]).astype("float32"),
}


def build():
    tf.keras.utils.set_random_seed(1)
    dense = tf.keras.layers.Dense(DIM, kernel_initializer="glorot_uniform")
    dense.build([None, DIM])
    return dense, CorrectedSampledSoftmaxLoss(similarity="maxsim", temperature=0.5)


def loss_and_grads(dense, loss_layer, batch):
    with tf.GradientTape() as tape:
        queries = {"token_vectors": tf.math.l2_normalize(batch["query"], -1),
                   "mask": tf.ones(tf.shape(batch["query"])[:2], tf.int32)}
        documents = {"token_vectors": tf.math.l2_normalize(dense(batch["doc"]), -1),
                     "mask": batch["doc_mask"]}
        loss = loss_layer(queries, documents, document_ids=batch["ids"],
                          sampling_probabilities=batch["prob"])
    return loss, tape.gradient(loss, dense.trainable_variables)


dense, loss_layer = build()
single_loss, single_grads = loss_and_grads(dense, loss_layer,
                                           {k: tf.constant(v) for k, v in features.items()})

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2
with strategy.scope():
    dense_d, loss_layer_d = build()
    local_only = CorrectedSampledSoftmaxLoss(similarity="maxsim", temperature=0.5,
                                             cross_replica_negatives=False)
dataset = tf.data.Dataset.from_tensor_slices(features).batch(GLOBAL_BATCH)
batch = next(iter(strategy.experimental_distribute_dataset(dataset)))


@tf.function
def step(batch):
    def replica_fn(b):
        loss, grads = loss_and_grads(dense_d, loss_layer_d, b)
        context = tf.distribute.get_replica_context()
        return loss, [context.all_reduce("sum", g) for g in grads]
    return strategy.run(replica_fn, args=(batch,))


@tf.function
def local_step(batch):
    return strategy.run(lambda b: loss_and_grads(dense_d, local_only, b)[0], args=(batch,))


per_replica_loss, per_replica_grads = step(batch)
distributed_loss = float(strategy.reduce("sum", per_replica_loss, axis=None))
distributed_grads = [strategy.experimental_local_results(g)[0] for g in per_replica_grads]
print("single-device loss", float(single_loss), "cross-replica loss", distributed_loss)
np.testing.assert_allclose(float(single_loss), distributed_loss, rtol=1e-5)
for g_single, g_dist in zip(single_grads, distributed_grads):
    np.testing.assert_allclose(g_single.numpy(), g_dist.numpy(), rtol=1e-4, atol=1e-6)
local_loss = float(strategy.reduce("sum", local_step(batch), axis=None))
assert abs(local_loss / 2 - float(single_loss)) > 1e-3, (local_loss, float(single_loss))
print("CROSS_REPLICA_MAXSIM_OK")
sys.exit(0)
