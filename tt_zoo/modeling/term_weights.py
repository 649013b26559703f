"""HDCT's term-weight model: a BERT encoder and a linear head predicting a weight per token.

Dai & Callan, *Context-Aware Document Term Weighting for Ad-Hoc Search* (HDCT, WWW 2020),
Sec. 3.2: BERT reads a passage; a linear layer on each token's final state predicts the term's
importance y in [0, 1]; trained by mean squared error against target weights (Sec. 3.4). Here
the encoder is the Model Garden BERT of `tt_zoo.modeling.towers.BertTower` (only its encoder is
used: its pooling and projection stay unbuilt), so the model can start from a pretrained
two-tower export (`TermWeightModel.from_two_tower`) and fine-tune in minutes.

Inputs are the packed (title, passage) ids of `tt_zoo.data.text.TextPreprocessor`; the targets
come from `tt_zoo.data.term_weight_targets`; documents become BM25 term weights in
`tt_zoo.retrieval.term_weighting`; the serving export is `tt_zoo.artifacts.term_weight_export`.
"""

from __future__ import annotations

import tensorflow as tf

from tt_zoo.data.text import TextPreprocessor
from tt_zoo.modeling import bert_inference
from tt_zoo.modeling.inference import PACKED_KEYS, cut_to_longest
from tt_zoo.modeling.towers import BertTower

TARGETS = "term_weight_targets"  # float32 [batch, seq_length], in [0, 1]
TARGET_MASK = "term_weight_mask"  # float32 [batch, seq_length]: 1 where the loss counts


def masked_mse(targets: tf.Tensor, predictions: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Mean squared error over the positions where `mask` is 1 (HDCT Sec. 3.4's loss).

    Args:
      targets, predictions, mask: [batch, seq_length] (any float dtype; computed in float32).

    Returns:
      scalar: sum(mask * (predictions - targets)^2) / sum(mask); 0 when the mask is empty.
    """
    targets, predictions, mask = (tf.cast(x, tf.float32) for x in (targets, predictions, mask))
    squared = tf.square(predictions - targets) * mask
    return tf.math.divide_no_nan(tf.reduce_sum(squared), tf.reduce_sum(mask))


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class TermWeightModel(tf.keras.Model):
    """A BERT encoder with a per-token linear head and a sigmoid: y in [0, 1] per WordPiece.

    Trains with plain Keras `fit` on batches of packed ids with `TARGETS` and `TARGET_MASK`
    (`tt_zoo.training.term_weights` builds them from pair sets), minimising `masked_mse`.

    Args:
      preprocessor: the `TextPreprocessor` of (title, passage) documents.
      tower: a `BertTower`; its encoder's final token states feed the head.
      **kwargs: passed to `tf.keras.Model`.

    Example:
      >>> model = TermWeightModel.from_two_tower(tt_zoo.load("ict_bfs_wlp_512").keras_model)
      >>> model.compile(tf.keras.optimizers.Adam(1e-4))
      >>> model.fit(batches, steps_per_epoch=100)
      >>> model.weigh(tf.constant(["Penicillin"]), tf.constant(["Fleming found it."]))

    References:
      Dai & Callan, WWW 2020 (HDCT), Sec. 3.2 (the model), Sec. 3.4 (MSE on target weights).
    """

    def __init__(self, preprocessor: TextPreprocessor, tower: BertTower, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(tower, BertTower):
            raise TypeError(f"TermWeightModel needs a BertTower (got {type(tower).__name__}): the "
                            "head reads each token's final state, which a BoW-MLP has not.")
        if preprocessor.seq_length > tower.max_sequence_length:
            raise ValueError(f"The preprocessor's length {preprocessor.seq_length} exceeds the "
                             f"tower's {tower.max_sequence_length} positions.")
        self.preprocessor = preprocessor
        self.tower = tower
        self.head = tf.keras.layers.Dense(
            1, kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=0.02),
            name="term_weight_head")

    @property
    def seq_length(self) -> int:
        return int(self.preprocessor.seq_length)

    def call(self, inputs, training=None):
        """Packed ids -> weights.

        Args:
          inputs: dict with `input_word_ids`, `input_mask`, `input_type_ids`: [batch, length]
            (other keys, e.g. the targets, are ignored).

        Returns:
          float32 [batch, length]: y = sigmoid(w . h_i + b) per token, 0 on padding.
        """
        packed = {k: inputs[k] for k in PACKED_KEYS}
        states = bert_inference.sequence_output(self.tower.encoder, packed, training)
        weights = tf.sigmoid(tf.cast(self.head(states)[:, :, 0], tf.float32))
        return weights * tf.cast(packed["input_mask"], tf.float32)

    def weigh(self, titles: tf.Tensor, passages: tf.Tensor, cut_padding: bool = True) -> dict:
        """tf.string [batch] titles and passages -> the packed ids and "weights" [batch, L]
        (L = the batch's longest row with `cut_padding`, else the preprocessor's length)."""
        packed = self.preprocessor((titles, passages))
        if cut_padding:
            packed = cut_to_longest(packed)
        return {**packed, "weights": self(packed, training=False)}

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = masked_mse(data[TARGETS], self(data, training=True), data[TARGET_MASK])
        self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
        return {"loss": loss}

    def test_step(self, data):
        return {"loss": masked_mse(data[TARGETS], self(data, training=False), data[TARGET_MASK])}

    # -- building and config -----------------------------------------------------------------
    @classmethod
    def from_two_tower(cls, two_tower, name: str = "term_weight_model") -> "TermWeightModel":
        """A term-weight model on a `TwoTowerModel`'s document tower: the same vocabulary and
        document length, the encoder's weights copied (the head starts fresh)."""
        tower = two_tower.document_tower
        if not isinstance(tower, BertTower):
            raise TypeError(f"The two-tower model's document tower is a {type(tower).__name__}; "
                            "term weights need a BertTower.")
        if not two_tower.built:
            two_tower.build_by_calling()
        model = cls(tf.keras.layers.deserialize(tf.keras.layers.serialize(
            two_tower.document_preprocessor)), tf.keras.layers.deserialize(
            tf.keras.layers.serialize(tower)), name=name)
        model.build_by_calling()
        model.tower.encoder.set_weights(tower.encoder.get_weights())
        return model

    def build_by_calling(self) -> None:
        """Creates every variable with one tiny forward pass (before loading weights)."""
        self.weigh(tf.constant(["a"]), tf.constant(["a"]))

    def build_from_config(self, config):
        self.build_by_calling()

    def get_config(self):
        return {"name": self.name,
                "preprocessor": tf.keras.layers.serialize(self.preprocessor),
                "tower": tf.keras.layers.serialize(self.tower)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("preprocessor", "tower"):
            config[key] = tf.keras.layers.deserialize(config[key])
        return cls(**config)

    def artifact_config(self) -> dict:
        """The serialized model without its compile state (as `TwoTowerModel.artifact_config`)."""
        config = tf.keras.layers.serialize(self)
        config.pop("compile_config", None)
        return config


def build_term_weight_model(vocabulary, *, seq_length: int = 128, size="tiny",
                            dropout_rate: float = 0.1, **bert_shape) -> TermWeightModel:
    """A term-weight model with a fresh BERT encoder (tests; real runs start from an export)."""
    preprocessor = TextPreprocessor(vocabulary, seq_length=seq_length,
                                    name="document_preprocessor")
    tower = BertTower(preprocessor.vocab_size, embedding_dim=1, size=size,
                      max_sequence_length=seq_length, dropout_rate=dropout_rate,
                      name="document_tower", **bert_shape)
    return TermWeightModel(preprocessor, tower)
