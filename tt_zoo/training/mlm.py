"""The MLM baseline: pretrain the BERT encoder with masked-language modelling, then use it to
initialise both towers.

Chang et al. 2020, Sec. 5 / Table 3: token-level MLM pretraining (as in BERT) gives only
marginal gains for retrieval over no pretraining, unlike the paragraph-level tasks. Examples
come from `tt_zoo.data.pretraining_tasks.mlm_examples` (packed by the towers' `TextPreprocessor`;
15% of WordPiece tokens, 80/10/10).
"""

from __future__ import annotations

import os

import tensorflow as tf
from official.nlp.modeling import layers as nlp_layers

from tt_zoo.training import loop as training
from tt_zoo.training.step_data import arrays_from_dataset, step_batches
from tt_zoo.modeling.towers import BertTower

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


class MaskedLMPretrainer(tf.keras.Model):
    """A BERT encoder with a masked-LM head whose output embedding is tied to the input one.

    Args:
      encoder: the Model Garden `BertEncoderV2` to pretrain (shared, not copied).

    Inputs (a dict): `input_word_ids`, `input_mask`, `input_type_ids`: [batch, seq_length];
    `masked_lm_positions`, `masked_lm_ids`: [batch, max_predictions];
    `masked_lm_weights`: [batch, max_predictions] (0 for padding predictions).
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.masked_lm = nlp_layers.MaskedLM(
            embedding_table=encoder.get_embedding_table(), activation="gelu",
            initializer=tf.keras.initializers.TruncatedNormal(stddev=0.02), output="logits",
            name="masked_lm")

    def call(self, inputs, training=None):
        sequence = self.encoder({k: inputs[k] for k in ENCODER_INPUTS},
                                training=training)["sequence_output"]
        return self.masked_lm(sequence, masked_positions=inputs["masked_lm_positions"])

    def masked_lm_loss(self, inputs, training=None):
        """Mean cross-entropy over the real (weighted) masked positions."""
        logits = self(inputs, training=training)
        losses = tf.keras.losses.sparse_categorical_crossentropy(
            inputs["masked_lm_ids"], logits, from_logits=True)
        weights = tf.cast(inputs["masked_lm_weights"], losses.dtype)
        return tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = self.masked_lm_loss(data, training=True)
        variables = self.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return {"loss": loss}


def pretrain_mlm(model, examples_dir: str, *, steps: int, batch: int, learning_rate: float,
                 warmup_fraction: float, strategy, workdir: str, checkpoint_every: int,
                 seed: int = 0, progress: bool = True) -> training.TrainResult:
    """MLM-pretrains the query tower's encoder, then copies it into the document tower.

    Args:
      model: a `TwoTowerModel` with BERT towers (built).
      examples_dir: MLM shards from `tt-zoo make-pairs --tasks mlm` (same vocabulary).
    """
    from tt_zoo.data.pairs_io import read_mlm_examples

    if not isinstance(model.query_tower, BertTower):
        raise ValueError(f"MLM pretraining needs a BERT tower (got "
                         f"{type(model.query_tower).__name__}).")
    with strategy.scope():
        pretrainer = MaskedLMPretrainer(model.query_tower.encoder)
        schedule = training.paper_learning_rate(learning_rate, steps, warmup_fraction)
        pretrainer.compile(optimizer=tf.keras.optimizers.Adam(schedule))

    # MLM examples are already ids: held in memory, served by step (no replay on resume).
    arrays = arrays_from_dataset(read_mlm_examples(examples_dir).batch(4096))
    result = training.train_resumable(
        pretrainer, lambda start: step_batches(arrays, batch, seed=seed, start_step=start,
                                               end_step=steps),
        steps=steps, global_batch=batch,
        settings={"batch_size": batch, "learning_rate": learning_rate, "steps": steps,
                  "warmup_fraction": warmup_fraction, "seed": seed,
                  "examples": os.path.abspath(examples_dir),
                  "encoder": model.query_tower.get_config(),
                  "vocabulary_sha256": model.query_preprocessor.vocabulary_sha256},
        checkpoint_dir=f"{workdir}/mlm_checkpoints", checkpoint_every=checkpoint_every,
        log_dir=f"{workdir}/mlm_logs", progress=progress)
    if not model.share_towers:
        model.document_tower.encoder.set_weights(model.query_tower.encoder.get_weights())
    return result
