"""The late-interaction (ColBERT) tower: one L2-normalised vector per token, not one per text.

Khattab & Zaharia, "ColBERT: Efficient and Effective Passage Search via Contextualized Late
Interaction over BERT", SIGIR 2020, Sec. 3.2:

* one BERT encodes both sides; every token's final state goes through a linear layer without
  bias to m dimensions (m = 128 in the paper; 32-128 here) and is L2-normalised;
* queries are marked as queries and padded with [MASK] to a fixed length (32): the *query
  augmentation*, whose [MASK] positions are attended and scored, so BERT can re-weigh or expand
  the query;
* documents are marked as documents; their padding and punctuation tokens are dropped from the
  scoring (they are still attended).

The markers: ColBERT prefixes the token [Q] or [D] (two of BERT's unused vocabulary rows). The
project's 7,964-token vocabulary has no unused rows, so the marker is BERT's segment (type)
embedding instead: every query token has type `QUERY_TYPE_ID` (2), documents keep BERT's pair
types (0 for the title or sentence, 1 for the passage). The vocabulary, the positions and the
encoder's shape are the single-vector models' own, so a shipped export warm-starts the tower
exactly (`tt_zoo.modeling.late_interaction_model.warm_start_from`), and the marker adds
information to every token rather than one position.

Scoring is MaxSim (`tt_zoo.modeling.maxsim`).
"""

from __future__ import annotations

import unicodedata
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tt_zoo.data.text import TextPreprocessor
from tt_zoo.modeling import bert_inference
from tt_zoo.modeling.maxsim import MASK, TOKEN_VECTORS
from tt_zoo.modeling.towers import BertTower

QUERY_TYPE_ID = 2  # the segment id that marks query tokens (ColBERT's [Q]); see the docstring
DEFAULT_QUERY_LENGTH = 32  # ColBERT's N_q
PACKED_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def is_punctuation(char: str) -> bool:
    """BERT's notion of punctuation (Devlin et al. 2019, `tokenization._is_punctuation`): every
    non-alphanumeric printable ASCII character, and any Unicode character of category P*. Its
    basic tokenizer splits each of them into a word of its own."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def punctuation_ids(vocabulary: Sequence[str]) -> List[int]:
    """Ids of the vocabulary's punctuation tokens: those made only of punctuation characters
    (`is_punctuation`; a "##" continuation prefix aside), e.g. ".", ",", "(", "«".

    ColBERT masks the tokens of Python's `string.punctuation` on the document side (Sec. 3.2);
    this is the same set for ASCII and also covers Unicode punctuation. Special tokens such as
    [CLS] and [SEP] are not punctuation and stay scored, as in ColBERT.
    """
    ids = []
    for i, token in enumerate(vocabulary):
        body = token[2:] if token.startswith("##") and len(token) > 2 else token
        if body and all(is_punctuation(c) for c in body):
            ids.append(i)
    return ids


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class AugmentedQueryPreprocessor(TextPreprocessor):
    """`TextPreprocessor` for ColBERT queries: the query marker and [MASK] augmentation.

    Packs ``[CLS] query [SEP]`` to `seq_length` (truncating longer queries), then, with
    `mask_augmentation`, replaces the padding by [MASK] and sets ``input_mask`` to 1 everywhere,
    so the [MASK] positions are attended and scored (Khattab & Zaharia 2020, Sec. 3.2, "query
    augmentation"); every token's ``input_type_ids`` is `marker_type_id` (the query marker).

    Args:
      vocabulary: as `TextPreprocessor`; must hold [MASK] when `mask_augmentation`.
      seq_length: the fixed query length N_q (ColBERT: 32).
      lower_case: as `TextPreprocessor`.
      marker_type_id: the segment id of every query token (`QUERY_TYPE_ID`).
      mask_augmentation: pad with attended [MASK] tokens (True) or with [PAD] (False).
      **kwargs: passed to `TextPreprocessor`.

    Example:
      >>> pre = AugmentedQueryPreprocessor(vocab, seq_length=8)
      >>> pre(tf.constant(["who?"]))["input_word_ids"]   # [CLS] who ? [SEP] [MASK] x 4

    References:
      Khattab & Zaharia, SIGIR 2020, Sec. 3.2 (query encoder).
    """

    def __init__(self, vocabulary, seq_length: int = DEFAULT_QUERY_LENGTH, lower_case=True,
                 marker_type_id: int = QUERY_TYPE_ID, mask_augmentation: bool = True,
                 **kwargs):
        super().__init__(vocabulary, seq_length=seq_length, lower_case=lower_case, **kwargs)
        if mask_augmentation and self.mask_id is None:
            raise ValueError("Query augmentation pads with [MASK], which the vocabulary lacks; "
                             "add it or pass mask_augmentation=False.")
        if isinstance(marker_type_id, bool) or not isinstance(marker_type_id, int) or \
                marker_type_id < 0:
            raise ValueError(f"marker_type_id must be a segment id >= 0 (got {marker_type_id!r}).")
        self.marker_type_id = marker_type_id
        self.mask_augmentation = bool(mask_augmentation)

    def call(self, inputs):
        """queries: [batch] tf.string -> int32 [batch, seq_length] `input_word_ids`,
        `input_mask` (all 1 with augmentation), `input_type_ids` (all `marker_type_id`)."""
        if isinstance(inputs, (tuple, list)):
            raise ValueError("AugmentedQueryPreprocessor packs single-segment queries (got "
                             f"{len(inputs)} segments).")
        packed = super().call(inputs)
        ids, mask = packed["input_word_ids"], packed["input_mask"]
        if self.mask_augmentation:
            ids = tf.where(mask > 0, ids, tf.cast(self.mask_id, ids.dtype))
            mask = tf.ones_like(mask)
        types = tf.fill(tf.shape(ids), tf.constant(self.marker_type_id, ids.dtype))
        return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}

    def get_config(self):
        config = super().get_config()
        config.update(marker_type_id=self.marker_type_id,
                      mask_augmentation=self.mask_augmentation)
        return config


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class LateInteractionTower(BertTower):
    """A BERT tower that keeps every token: a linear map (no bias) of each final state to
    `embedding_dim`, L2-normalised, zero where masked.

    The encoder is `BertTower`'s (the Model Garden's `BertEncoderV2`, same shapes and
    checkpoint loading); only the head differs: no pooling, a token projection without bias
    (ColBERT's linear layer). The output mask is ``input_mask`` (padding dropped; a query
    augmented with [MASK] keeps every position), and with ``mask_punctuation=True`` (the
    document side) also drops the `punctuation_ids` (ColBERT's skiplist).

    Args:
      vocab_size, size, num_layers, hidden_size, num_attention_heads, inner_dim,
        max_sequence_length, dropout_rate, init_checkpoint: as `BertTower`.
      embedding_dim: m, the size of each token vector (ColBERT: 128; here 32-128).
      punctuation_ids: vocabulary ids dropped on the document side (`punctuation_ids`).
      **kwargs: passed to `tf.keras.layers.Layer`.

    Example:
      >>> tower = LateInteractionTower(vocab_size=100, embedding_dim=8, size="tiny",
      ...                              punctuation_ids=[5, 6])
      >>> out = tower({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
      ...             mask_punctuation=True)
      >>> out["token_vectors"].shape, out["mask"].shape
      (TensorShape([2, 24, 8]), TensorShape([2, 24]))

    References:
      Khattab & Zaharia, SIGIR 2020, Sec. 3.2 (query and document encoders).
    """

    def __init__(self, vocab_size: int, embedding_dim: int = 128, size: Optional[str] = "tiny",
                 num_layers: Optional[int] = None, hidden_size: Optional[int] = None,
                 num_attention_heads: Optional[int] = None, inner_dim: Optional[int] = None,
                 max_sequence_length: int = 512, dropout_rate: float = 0.1,
                 punctuation_ids: Sequence[int] = (), init_checkpoint: Optional[str] = None,
                 **kwargs):
        kwargs.pop("pooling", None)  # (BertTower's; a token tower has none)
        super().__init__(vocab_size, embedding_dim, size=size, num_layers=num_layers,
                         hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                         inner_dim=inner_dim, max_sequence_length=max_sequence_length,
                         dropout_rate=dropout_rate, init_checkpoint=init_checkpoint, **kwargs)
        self.pooling = None  # every token is kept
        ids = sorted({int(i) for i in punctuation_ids})
        if ids and (ids[0] < 0 or ids[-1] >= vocab_size):
            raise ValueError(f"punctuation_ids must be vocabulary ids in [0, {vocab_size}) (got "
                             f"{ids[0]} .. {ids[-1]}).")
        self.punctuation_ids = tuple(ids)  # (a tuple of ints: Keras does not track it)
        skip = np.zeros([vocab_size], bool)
        skip[ids] = True
        self._punctuation_table = skip  # numpy: not a Keras weight, rebuilt from the config
        # Replaces BertTower's pooled projection (never built, so it leaves no weights).
        self.projection = tf.keras.layers.Dense(
            embedding_dim, use_bias=False,
            kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=0.02),
            name="token_projection")

    def call(self, inputs, training=None, mask_punctuation: bool = False):
        """Encodes packed inputs into token vectors.

        Args:
          inputs: dict with `input_word_ids`, `input_mask`, `input_type_ids`: [batch, length].
          training: dropout on or off (off: the plain inference forward,
            `tt_zoo.modeling.bert_inference.sequence_output`).
          mask_punctuation: drop the punctuation tokens from the output mask (documents).

        Returns:
          dict: "token_vectors" float32 [batch, length, embedding_dim], unit length where
          "mask" int32 [batch, length] is 1 and zero where it is 0.
        """
        states = bert_inference.sequence_output(
            self.encoder, {k: inputs[k] for k in PACKED_KEYS}, training)
        projected = self.projection(states)
        # Normalised in float32 under a mixed bfloat16 policy (scores and the loss are float32).
        vectors = tf.math.l2_normalize(tf.cast(projected, tf.float32), axis=-1)
        mask = tf.cast(inputs["input_mask"], tf.int32)
        if mask_punctuation and self.punctuation_ids:
            punctuation = tf.gather(tf.constant(self._punctuation_table), inputs["input_word_ids"])
            mask = mask * tf.cast(tf.logical_not(punctuation), tf.int32)
        vectors = vectors * tf.cast(mask, tf.float32)[:, :, tf.newaxis]
        return {TOKEN_VECTORS: vectors, MASK: mask}

    def get_config(self):
        config = super().get_config()
        config.pop("pooling", None)
        config["punctuation_ids"] = list(self.punctuation_ids)
        return config
