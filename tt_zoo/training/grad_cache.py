"""GradCache: a large batch's in-batch negatives with a small batch's activation memory.

Gao, Zhang, Han & Callan 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited
Setup" (RepL4NLP; arXiv 2101.06983, Sec. 3; the `GradCache` of Tevatron). The sampled-softmax loss
(Chang et al. 2020, Sec. 2) couples the examples of a batch only through their embeddings, so its
gradient splits at the embeddings:

  1. graph-less forward: embed the batch chunk by chunk without recording a tape, keeping only
     the embeddings (never a chunk's activations);
  2. representation gradient: the loss on all the embeddings (with every in-batch, cross-replica
     and hard negative) and its gradient g with respect to each embedding, cached;
  3. sub-batch gradient accumulation: embed each chunk again under a tape and back-propagate the
     cached g (the surrogate sum(stop_gradient(g) * e), whose parameter gradient is g . de/dw),
     summing the parameter gradients over chunks.

The result is the gradient of the loss of embeddings computed chunk by chunk: without dropout,
the full-batch gradient (up to float rounding). With dropout, each chunk's second pass restores
the dropout generators' states recorded before its first pass (`loop.dropout_generators`), so it
draws the same masks as the first (the masks differ from those of one pass over the whole batch,
but are drawn alike). Peak activation memory is that of one chunk: both passes are
`tf.while_loop`s with ``parallel_iterations=1``, so one chunk's forward (and backward) is live at
a time. Under `tf.distribute` the loss of step 2 gathers candidates across replicas as the
ordinary step does; steps 1 and 3 are local to each replica. The loops do not compile with XLA
(their arrays grow chunk by chunk), so GradCache runs with ``jit_compile=False``.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, NamedTuple, Optional

import tensorflow as tf

from tt_zoo.data import features as F
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.late_interaction_model import LateInteractionModel

# The features `PairModel.embed_for_loss` reads: the ones a chunk is cut from.
EMBEDDED_FEATURES = (F.QUERY_INPUTS, F.DOCUMENT_INPUTS, F.HARD_NEGATIVE_INPUTS, F.QUERY,
                     F.DOC_TITLE, F.DOC_TEXT, F.HARD_NEGATIVE_TITLES, F.HARD_NEGATIVE_TEXTS)


class GradCacheError(TtZooError):
    """A GradCache setting or model that cannot give the full-batch gradient."""


def check_chunk_size(chunk_size) -> int:
    """`chunk_size` as a positive int (examples per chunk); raises `GradCacheError` otherwise."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
        raise GradCacheError(f"The GradCache chunk size must be a positive number of examples "
                             f"(got {chunk_size!r}).")
    return chunk_size


def use_grad_cache(model, chunk_size: Optional[int]) -> None:
    """Trains `model` (a `TwoTowerModel`) with GradCache: its `train_step` takes the full
    batch's loss and gradients with the activation memory of `chunk_size` examples
    (`GradCacheStep`, set with `TwoTowerModel.set_gradient_step`); None turns it off.

    Raises:
      GradCacheError: `chunk_size` is not a positive int, or the model is a late-interaction
        one (its token vectors are not one embedding per example, which the chunked passes
        cache).
    """
    if chunk_size is None:
        model.set_gradient_step(None)
        return
    chunk_size = check_chunk_size(chunk_size)
    if isinstance(model, LateInteractionModel):
        raise GradCacheError(
            "GradCache (--grad-cache-chunk) does not support late-interaction (token "
            "vector) models yet: its chunked passes cache one embedding per example. Train "
            "without it (a smaller --batch-size bounds the memory).")
    model.set_gradient_step(GradCacheStep(chunk_size))


@dataclasses.dataclass(frozen=True)
class GradCacheStep:
    """A `TwoTowerModel` gradient step with GradCache over chunks of `chunk_size` examples
    (`grad_cache_train_step`); `use_grad_cache` sets it on a model."""

    chunk_size: int

    def __call__(self, model, inputs: dict) -> Dict[str, tf.Tensor]:
        return grad_cache_train_step(model, inputs, self.chunk_size)


class GradCacheResult(NamedTuple):
    loss: tf.Tensor                  # scalar: the retrieval loss of the whole (replica's) batch
    regularization_loss: tf.Tensor   # scalar: the model's weight-regularization losses
    gradients: List[Optional[tf.Tensor]]  # d(loss + regularization) / d trainable_variables


def grad_cache_gradients(model, inputs: dict, chunk_size: int,
                         training: bool = True) -> GradCacheResult:
    """The loss of a `TwoTowerModel` batch and its parameter gradients, one chunk at a time.

    Args:
      model: a `TwoTowerModel` (its `embed_for_loss` and `loss_from_embeddings`).
      inputs: a training batch (tokenized or raw, optionally with hard negatives; see
        `tt_zoo.data.features`): this replica's batch under `tf.distribute`.
      chunk_size: examples embedded at once; the last chunk may be smaller.
      training: passed to the towers (dropout).

    Returns:
      `GradCacheResult`; gradients are dense tensors aligned with `model.trainable_variables`,
      None where the loss does not depend on a variable (as a tape would give).
    """
    chunk_size = check_chunk_size(chunk_size)
    variables = list(model.trainable_variables)
    generators = _dropout_generators(model)
    with tf.GradientTape() as tape:
        # Weight regularizers only: losses added during a call (activity regularizers) would
        # belong to the chunk loops' graphs.
        regularization_loss = tf.reduce_sum([tf.reduce_sum(x) for x in model.losses])
    regularization_gradients = (tape.gradient(regularization_loss, variables)
                                if model.losses else [None] * len(variables))

    batch = _batch_size(inputs)
    num_chunks = (batch + chunk_size - 1) // chunk_size
    embedded = {k: v for k, v in inputs.items() if k in EMBEDDED_FEATURES}

    def chunk_of(tensor, i, rows_of_batch):
        """Rows of chunk i of a feature with `rows_of_batch` rows (r rows per example)."""
        rows_per_example = rows_of_batch // batch
        start = i * chunk_size
        size = tf.minimum(chunk_size, batch - start)
        return tensor[start * rows_per_example:(start + size) * rows_per_example]

    def chunk_inputs(i):
        return tf.nest.map_structure(lambda t: chunk_of(t, i, tf.shape(t)[0]), embedded)

    # 1. Graph-less forward; record each chunk's dropout-generator states first.
    keys = _embedding_keys(inputs)
    dim = model.embedding_dim

    def forward(i, embeddings, states):
        states = [ta.write(i, g.state.read_value()) for ta, g in zip(states, generators)]
        with tf.control_dependencies([ta.flow for ta in states]):
            chunk = model.embed_for_loss(chunk_inputs(i), training=training)
        embeddings = {k: embeddings[k].write(i, chunk[k]) for k in keys}
        return i + 1, embeddings, states

    _, arrays, states = tf.while_loop(
        lambda i, *_: i < num_chunks, forward,
        (tf.constant(0), {k: _array(tf.float32, [None, dim]) for k in keys},
         [_array(g.state.dtype, g.state.shape) for g in generators]),
        parallel_iterations=1, name="grad_cache_forward")
    embeddings = {k: arrays[k].concat() for k in keys}
    for k in keys:  # the static shapes the ordinary step gives (the loss layer records them)
        embeddings[k].set_shape([_static_rows(inputs, k), dim])
    final_states = [g.state.read_value() for g in generators]

    # 2. The loss on every embedding, and its gradient with respect to each embedding.
    with tf.GradientTape() as tape:
        tape.watch(embeddings)
        loss = model.loss_from_embeddings(inputs, embeddings)
    cached = tape.gradient(loss, embeddings, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    # 3. Each chunk again, under a tape, with the same dropout masks; back-propagate the cache.
    rows = {k: tf.shape(cached[k])[0] for k in keys}
    connected = [False] * len(variables)

    def backward(i, sums):
        with tf.control_dependencies([g.state.assign(ta.read(i), read_value=False)
                                      for g, ta in zip(generators, states)]):
            with tf.GradientTape() as chunk_tape:
                chunk = model.embed_for_loss(chunk_inputs(i), training=training)
                surrogate = tf.add_n([
                    tf.reduce_sum(tf.stop_gradient(chunk_of(cached[k], i, rows[k])) * chunk[k])
                    for k in keys])
        gradients = chunk_tape.gradient(surrogate, variables)
        for j, g in enumerate(gradients):  # traced once: which variables the loss reaches
            connected[j] = connected[j] or g is not None
        return i + 1, [s if g is None else s + tf.convert_to_tensor(g)
                       for s, g in zip(sums, gradients)]

    _, sums = tf.while_loop(
        lambda i, _: i < num_chunks, backward,
        (tf.constant(0), [tf.zeros_like(v) for v in variables]),
        parallel_iterations=1, name="grad_cache_backward")
    # The generators end where the first pass left them (the second pass drew the same numbers).
    with tf.control_dependencies(sums):
        restored = [g.state.assign(s, read_value=False)
                    for g, s in zip(generators, final_states)]
    with tf.control_dependencies(restored):
        gradients = [_add(tf.identity(s) if c else None, r)
                     for s, c, r in zip(sums, connected, regularization_gradients)]
    return GradCacheResult(tf.identity(loss), regularization_loss, gradients)


def grad_cache_train_step(model, inputs: dict, chunk_size: int) -> Dict[str, tf.Tensor]:
    """`tfrs.Model.train_step` with GradCache gradients: applies them with the model's optimizer
    and returns the same logs (the model's metrics, loss, regularization_loss, total_loss)."""
    if getattr(model, "jit_compile", False):
        raise GradCacheError("GradCache's chunk loops do not compile with XLA (their arrays "
                             "grow chunk by chunk): compile the model with jit_compile=False.")
    result = grad_cache_gradients(model, inputs, chunk_size, training=True)
    model.optimizer.apply_gradients(
        [(g, v) for g, v in zip(result.gradients, model.trainable_variables) if g is not None])
    metrics = {metric.name: metric.result() for metric in model.metrics}
    metrics["loss"] = result.loss
    metrics["regularization_loss"] = result.regularization_loss
    metrics["total_loss"] = result.loss + result.regularization_loss
    return metrics


def _dropout_generators(model) -> list:
    """The dropout generators whose states a chunk's second pass restores; raises when a random
    layer draws from TF1 stateful ops, whose masks cannot be replayed."""
    from tt_zoo.training.loop import dropout_generators

    for layer in model._flatten_layers(include_self=False, recursive=True):
        generator = getattr(layer, "_random_generator", None)
        if (getattr(layer, "rate", 0)
                and getattr(generator, "_rng_type", None) == "legacy_stateful"):
            raise GradCacheError(
                f"GradCache replays each chunk's dropout masks, but layer {layer.name!r} draws "
                "them from stateful ops that cannot be replayed: call "
                "tt_zoo.training.loop.enable_checkpointable_randomness(seed) before building "
                "the model, or train without dropout.")
    return dropout_generators(model)


def _batch_size(inputs) -> tf.Tensor:
    """The number of examples (queries) in a batch, raw or tokenized."""
    queries = inputs[F.QUERY_INPUTS]["input_word_ids"] if F.QUERY_INPUTS in inputs else inputs[
        F.QUERY]
    return tf.shape(queries)[0]


def _embedding_keys(inputs) -> list:
    """The keys of `PairModel.embed_for_loss`'s result for this batch."""
    hard = F.HARD_NEGATIVE_INPUTS in inputs or F.HARD_NEGATIVE_TEXTS in inputs
    return ["query", "document"] + (["hard_negative"] if hard else [])


def _static_rows(inputs, key: str) -> Optional[int]:
    """The static number of `key` embeddings of a batch (None when the shapes are dynamic)."""
    if key == "hard_negative":
        if F.HARD_NEGATIVE_INPUTS in inputs:
            return tf.nest.flatten(inputs[F.HARD_NEGATIVE_INPUTS])[0].shape[0]
        return inputs[F.HARD_NEGATIVE_TEXTS].shape.num_elements()
    feature = F.QUERY_INPUTS if F.QUERY_INPUTS in inputs else F.QUERY
    return tf.nest.flatten(inputs[feature])[0].shape[0]


def _array(dtype, element_shape) -> tf.TensorArray:
    return tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False,
                          element_shape=element_shape)


def _add(a, b):
    if a is None or b is None:
        return b if a is None else a
    return a + tf.convert_to_tensor(b)
