"""Task-specific query towers routed by the task-marker word (Maillard et al. 2021, Sec. 4.3).

Maillard et al. compare one shared query encoder with one query encoder per task type (the
passage encoder shared) and with task-marker tokens. `TaskRoutedTower` is the task-specific
variant in one layer: it holds one sub-tower per task class and sends each query to the
sub-tower of the marker word it carries (`tt_zoo.data.tasks.marker_token`, prepended by
`tt_zoo.data.tasks.with_marker`), so an exported SavedModel takes text and gives embeddings with
no routing outside the graph. `tt_zoo.training.multi_task.with_task_query_towers` makes one
from a trained model.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from tt_zoo.modeling.towers import BertTower


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class TaskRoutedTower(tf.keras.layers.Layer):
    """One query tower per task class; each query goes to the tower of its marker word.

    A row goes to the sub-tower of the marker id that occurs in its ``input_word_ids`` (the
    leftmost, should a row hold several). Marker words are synthetic
    (``ttzootask<class>``) and never occur in natural text, so a row without one is an unmarked
    query: it goes to the default class's sub-tower. The routing runs in the graph: every
    sub-tower encodes the whole batch and each row keeps its own tower's output. That costs K
    times the query compute (K, the number of task classes, is small) and buys one static graph
    with no gathering and scattering of rows; at training each sub-tower's gradient comes only
    from its own rows (Adam's momentum still moves a tower in a step without its rows). The
    sub-towers see the query as it is, marker included, so a sub-tower copied from a shared
    tower gives that tower's output exactly.

    Any tower of the package may be a sub-tower (`tt_zoo.modeling.towers.BertTower`,
    `tt_zoo.modeling.towers.BowMlpTower`), not another `TaskRoutedTower`; all must give the same
    `embedding_dim`. BERT sub-towers keep their fast plain-matmul inference at
    ``training=False`` (`tt_zoo.modeling.bert_inference`); ``plain_inference=False`` runs their
    layers. The sub-towers take this layer's dtype policy when rebuilt from a config (so a
    ``mixed_bfloat16`` copy of it computes in bfloat16 throughout).

    Args:
      towers: the K sub-towers, one per task class, in the order of `task_classes`.
      marker_ids: the vocabulary id of each class's marker word.
      task_classes: the K class names ("qa", "sentence_qa", ...).
      default_index: the index (into `task_classes`) of the class an unmarked query gets.
      **kwargs: passed to `tf.keras.layers.Layer`.

    Example:
      >>> tower = TaskRoutedTower([qa_tower, sentence_tower], marker_ids=[60, 61],
      ...                         task_classes=["qa", "sentence_qa"], default_index=0)
      >>> tower({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}).shape
      TensorShape([3, 8])

    References:
      Maillard et al. 2021, *Multi-task Retrieval for Knowledge-Intensive Tasks*, Sec. 4.3
      (task-specific query encoders; task markers).
    """

    def __init__(self, towers: Sequence[tf.keras.layers.Layer], marker_ids: Sequence[int],
                 task_classes: Sequence[str], default_index: int = 0, **kwargs):
        super().__init__(**kwargs)
        towers, marker_ids, task_classes = list(towers), list(marker_ids), list(task_classes)
        if len(towers) < 2:
            raise ValueError(f"TaskRoutedTower needs at least two sub-towers, one per task class "
                             f"(got {len(towers)}); one tower for every class is the shared "
                             "tower itself.")
        if not len(towers) == len(marker_ids) == len(task_classes):
            raise ValueError(f"TaskRoutedTower needs one marker id and one task class per "
                             f"sub-tower (got {len(towers)} towers, marker_ids {marker_ids}, "
                             f"task_classes {task_classes}).")
        if len(set(task_classes)) != len(task_classes):
            raise ValueError(f"TaskRoutedTower: task_classes must be distinct (got "
                             f"{task_classes}).")
        if (len(set(marker_ids)) != len(marker_ids)
                or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                           for i in marker_ids)):
            raise ValueError(f"TaskRoutedTower: marker_ids must be distinct non-negative "
                             f"vocabulary ids (got {marker_ids}).")
        if (not isinstance(default_index, int) or isinstance(default_index, bool)
                or not 0 <= default_index < len(towers)):
            raise ValueError(f"TaskRoutedTower: default_index must index task_classes "
                             f"{task_classes} (got {default_index!r}).")
        for task_class, tower, marker_id in zip(task_classes, towers, marker_ids):
            if isinstance(tower, TaskRoutedTower):
                raise ValueError(f"TaskRoutedTower: the sub-tower of class {task_class!r} is "
                                 "itself a TaskRoutedTower; give plain towers.")
            if getattr(tower, "embedding_dim", None) is None:
                raise ValueError(f"TaskRoutedTower: the sub-tower of class {task_class!r} "
                                 f"({type(tower).__name__}) has no embedding_dim.")
            vocab_size = getattr(tower, "vocab_size", None)
            if vocab_size is not None and marker_id >= vocab_size:
                raise ValueError(f"TaskRoutedTower: marker id {marker_id} of class "
                                 f"{task_class!r} is outside its sub-tower's vocabulary of "
                                 f"{vocab_size}.")
        dims = {c: int(t.embedding_dim) for c, t in zip(task_classes, towers)}
        if len(set(dims.values())) != 1:
            raise ValueError(f"TaskRoutedTower: the sub-towers must give one embedding size "
                             f"(got {dims}).")
        self.towers = towers
        self.marker_ids = marker_ids
        self.task_classes = task_classes
        self.default_index = default_index

    @property
    def embedding_dim(self) -> int:
        return int(self.towers[0].embedding_dim)

    def route(self, input_word_ids: tf.Tensor) -> tf.Tensor:
        """input_word_ids: [batch, seq_length] -> int32 [batch], the index of each row's
        sub-tower: the class of its leftmost marker id, `default_index` for a row without."""
        ids = tf.convert_to_tensor(input_word_ids)
        markers = tf.constant(self.marker_ids, dtype=ids.dtype)
        matches = tf.equal(ids[:, :, tf.newaxis], markers)  # [batch, seq_length, K]
        is_marker = tf.reduce_any(matches, axis=-1)  # [batch, seq_length]
        class_at = tf.argmax(tf.cast(matches, tf.int32), axis=-1, output_type=tf.int32)
        first = tf.argmax(tf.cast(is_marker, tf.int32), axis=1, output_type=tf.int32)
        routed = tf.gather(class_at, first, batch_dims=1)  # [batch]
        return tf.where(tf.reduce_any(is_marker, axis=1), routed,
                        tf.constant(self.default_index, tf.int32))

    def call(self, inputs, training=None, plain_inference: bool = True):
        """Encodes packed queries, each by its class's sub-tower.

        Args:
          inputs: dict with `input_word_ids`, `input_mask`, `input_type_ids`: [batch,
            seq_length].
          training: passed to every sub-tower (dropout).
          plain_inference: passed to BERT sub-towers (see `BertTower.call`).

        Returns:
          embeddings: [batch, embedding_dim].
        """
        outputs = []
        for tower in self.towers:
            options = {"plain_inference": plain_inference} if isinstance(tower, BertTower) else {}
            outputs.append(tower(inputs, training=training, **options))
        stacked = tf.stack(outputs, axis=1)  # [batch, K, embedding_dim]
        return tf.gather(stacked, self.route(inputs["input_word_ids"]), batch_dims=1)

    def get_config(self):
        config = super().get_config()
        config.update(towers=[tf.keras.layers.serialize(t) for t in self.towers],
                      marker_ids=list(self.marker_ids), task_classes=list(self.task_classes),
                      default_index=self.default_index)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        dtype: Optional[object] = config.get("dtype")
        towers = []
        for tower in config.pop("towers"):
            tower = {**tower, "config": dict(tower["config"])}
            if dtype is not None:  # the sub-towers compute in this layer's policy
                tower["config"]["dtype"] = dtype
            towers.append(tf.keras.layers.deserialize(tower))
        return cls(towers=towers, **config)
