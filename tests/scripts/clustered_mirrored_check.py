"""Clustered batches under MirroredStrategy over 2 logical CPUs, against one device.

The same tiny BoW-MLP model and pairs trained 13 steps through `train_resumable`, clustered
every 4 steps: one device on `step_batches`, the strategy on `distribute_step_batches` (each
replica its half of the global batch; the clustering embeds with the mirrored weights). Checks
that both runs wrote the same order for every round and end with the same weights. Prints
MIRRORED_CLUSTERED_OK; exits non-zero otherwise. A separate process, because logical devices
must be configured before TensorFlow initialises.
"""

import pathlib
import sys
import tempfile

import tt_zoo  # noqa: F401  (first: the package sets Keras 2 as tf.keras)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/, for helpers
from helpers import tiny_model  # noqa: E402
from tt_zoo.data import features as F  # noqa: E402
from tt_zoo.training import loop as training  # noqa: E402
from tt_zoo.training.clustered_batches import ClusteredStepOrder  # noqa: E402
from tt_zoo.training.step_data import (distribute_step_batches, step_batches,  # noqa: E402
                                       tokenize_pair_set)

N, BATCH, EVERY, STEPS = 120, 8, 4, 13
TOPICS = [words.split() for words in ("penicillin fleming alexander discovered",
                                      "paris capital france city", "river seine flows through",
                                      "water boils degrees london")]
rng = np.random.default_rng(0)
topic = rng.integers(0, len(TOPICS), N)
PAIRS = tf.data.Dataset.from_tensor_slices({
    F.QUERY: [" ".join(rng.choice(TOPICS[t], 3)) for t in topic],
    F.DOC_TITLE: [TOPICS[t][0] for t in topic],
    F.DOC_TEXT: [" ".join(rng.permutation(TOPICS[t])) for t in topic],
    F.DOC_ID: [f"d{i}" for i in range(N)], F.DOC_SAMPLING_PROB: [1.0 / N] * N})
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2

root = pathlib.Path(tempfile.mkdtemp())
runs = {}
for name in ("single", "mirrored"):
    with (strategy if name == "mirrored" else tf.distribute.get_strategy()).scope():
        model = tiny_model("bow_mlp", dropout_rate=0.0)
        model.build_by_calling()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.5))
    arrays = tokenize_pair_set(model, PAIRS, log=lambda *_: None)
    order = ClusteredStepOrder(arrays, BATCH, seed=0, every=EVERY, num_clusters=3,
                               directory=str(root / name / "clusters"), log=lambda *_: None)
    if name == "single":
        make = lambda start: step_batches(arrays, BATCH, seed=0, start_step=start,  # noqa: E731
                                          end_step=STEPS, order=order)
    else:
        make = lambda start: distribute_step_batches(  # noqa: E731
            strategy, arrays, BATCH, seed=0, start_step=start, end_step=STEPS, order=order)
    training.train_resumable(model, make, steps=STEPS, global_batch=BATCH,
                             checkpoint_dir=str(root / name), checkpoint_every=EVERY,
                             progress=False, log=lambda *_: None,
                             data_callbacks=[order.callback()])
    assert order.stats["rounds_clustered"] == 3, order.stats
    runs[name] = model.get_weights()
    for r in (1, 2, 3):
        with np.load(root / name / "clusters" / f"round-{r}.npz") as stored:
            runs[name, r] = stored["rows"]
for r in (1, 2, 3):
    np.testing.assert_array_equal(runs["mirrored", r], runs["single", r], err_msg=f"round {r}")
for a, b in zip(runs["single"], runs["mirrored"]):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
print("MIRRORED_CLUSTERED_OK")
