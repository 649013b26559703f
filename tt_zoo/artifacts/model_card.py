"""What an export records about itself, typed: `ModelCard`, the schema of its metadata.json.

The one place that names every key of an export's ``metadata.json``, in the manner of
sentence-transformers' ``SentenceTransformerModelCardData`` (a dataclass holding what the card
says, kept apart from the template that renders it). The fields are grouped by what they
describe:

- `Architecture`: what the weights are (encoder, sizes, lengths, signatures, task markers; the
  exporter derives the sizes from the model);
- `Training`: what the run trained on and with (task mix, pairs, steps, batch, learning rate,
  a multi-task run's tasks, the command and the whole run config);
- `TrainingResult`: what the run measured while training (wall time, throughput, final loss);
- `Lineage`: the export a model started from (warm start, initialisation, base model) and
  its fine-tuning;
- `TermWeighting`: a term-weight (HDCT, Dai & Callan, WWW 2020) export's term space and scale;
- `Evaluation`: measured tables and which runs measured them;
- `Provenance`: what the exporter stamps (format version, library versions, date, file
  manifest and its sha256, re-exports).

metadata.json stays flat, as every export has written it: a group is this module's, not a
JSON object, and each field is named as its key (``card.training.train_steps`` is
``"train_steps"``). JSON objects that are records of their own (``pairs``, ``warm_start``,
``late_interaction``, ``reexported`` notes, ...) are typed records.

Old exports load unchanged: `ModelCard.from_dict` takes the metadata of any export; a key this
module does not name is kept in ``extra`` (of the card or of its record) and written back; a
key recorded as null stays null; so ``ModelCard.from_dict(meta).to_dict() == meta``. A value
of the wrong type raises `TtZooError` naming the field (``warm_start.train_steps``).

The card also says what a Hugging Face model card's YAML front matter holds
(`ModelCard.front_matter`: ``library_name``, ``license``, ``base_model``, ``datasets``,
``metrics``, ``tags``). MODEL_CARD.md, the text a reader sees, is rendered from the card by
`tt_zoo.artifacts.card_rendering.render_card`.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import posixpath
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from tt_zoo.errors import TtZooError
from tt_zoo.modeling.kinds import KINDS, LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER

MAXSIM = "maxsim"  # ``scoring`` of a late-interaction (ColBERT) export
# TF Serving's REST API uses this signature when a request names none (the export's first).
DEFAULT_SIGNATURE = "serving_default"
LIBRARY_NAME = "tt_zoo"  # the card's ``library_name`` and first tag
# An export's files that hold the card (here, where modules that must not import TensorFlow read
# them from; `tt_zoo.artifacts.export` writes them).
METADATA_FILE = "metadata.json"
MODEL_CARD_FILE = "MODEL_CARD.md"


def _key(f: dataclasses.Field) -> str:
    """The JSON key of a field (its name, unless the key is no Python name: ``from``)."""
    return f.metadata.get("key", f.name)


def _as(key: str):
    """A field stored under another JSON key (``source`` is ``"from"``)."""
    return field(default=None, metadata={"key": key})


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


@dataclass
class _Read:
    """What a record or card keeps of the JSON object it was read from: the keys it does not
    name (``extra``), the keys in their order (``read_keys``) and those that were null
    (``read_nulls``), so `to_dict` writes it back as it was (a field that is None is left out
    unless it was read as null). Keyword-only, after the fields."""

    extra: Dict[str, Any] = field(default_factory=dict, repr=False, kw_only=True)
    read_keys: tuple = field(default=(), repr=False, compare=False, kw_only=True)
    read_nulls: frozenset = field(default=frozenset(), repr=False, compare=False, kw_only=True)


_HIDDEN = tuple(f.name for f in dataclasses.fields(_Read))  # the fields that are no key


@dataclass
class _Record(_Read):
    """A JSON object of metadata.json whose keys are the dataclass's fields."""

    @classmethod
    def _named(cls) -> list:
        return [f for f in dataclasses.fields(cls) if f.name not in _HIDDEN]

    @classmethod
    def from_dict(cls, data: dict, where: str = ""):
        """The record of a JSON object; `where` (``"warm_start."``) prefixes field names in
        errors."""
        if not isinstance(data, dict):
            raise _bad(where.rstrip(".") or cls.__name__, "a JSON object", data)
        named = {_key(f): f for f in cls._named()}
        hints = _hints(cls)
        values = {f.name: _load(data[key], hints[f.name], where + key)
                  for key, f in named.items() if key in data}
        return cls(**values, extra={k: v for k, v in data.items() if k not in named},
                   **_read(data))

    def to_dict(self) -> dict:
        return _in_order({_key(f): getattr(self, f.name) for f in self._named()}, self)

    def check(self, where: str = "") -> None:
        """Raises `TtZooError` naming the first field whose value has the wrong type."""
        hints = _hints(type(self))
        for f in self._named():
            setattr(self, f.name, _load(getattr(self, f.name), hints[f.name], where + _key(f)))


def _read(data: dict) -> dict:
    """``read_keys`` and ``read_nulls`` of a JSON object read."""
    return {"read_keys": tuple(data), "read_nulls": frozenset(k for k, v in data.items()
                                                             if v is None)}


def _in_order(values: dict, read) -> dict:
    """The JSON object of named `values` (None ones only when `read` as null) and the `read`
    record's or card's extra keys, the keys it was read with first, in their order."""
    out = {k: _dump(v) for k, v in values.items() if v is not None or k in read.read_nulls}
    out.update(read.extra)
    first = [k for k in read.read_keys if k in out]
    return {k: out[k] for k in first + [k for k in out if k not in read.read_keys]}


# -- records: JSON objects inside metadata.json ---------------------------------------------

@dataclass
class PairSet(_Record):
    """``pairs``: the pair set a run trained on (`tt_zoo.data.pairs_io` manifest)."""
    num_pairs: Optional[int] = None
    num_distinct_docs: Optional[int] = None
    max_pairs: Optional[int] = None  # the run read the first N pairs
    make_pairs_config: Optional[Dict[str, Any]] = None  # tt-zoo make-pairs' settings


@dataclass
class Origin(_Record):
    """``warm_start``, ``init``, ``base_model``: the export a model's weights started from
    (name or path, its sha256 and training), and what was copied from it."""
    source: Optional[str] = _as("from")  # the name or path the run was given
    name: Optional[str] = None
    path: Optional[str] = None
    sha256: Optional[str] = None
    pretraining: Optional[str] = None
    train_steps: Optional[int] = None
    batch_size: Optional[int] = None
    pairs_seen: Optional[int] = None
    training_data: Optional[str] = None
    copied: Optional[str] = None  # which weights were copied
    new: Optional[List[str]] = None  # layers that start fresh
    query_marker: Optional[str] = None  # how a late-interaction query marker was initialised
    fitted: Optional[List[str]] = None  # tables copied with other row counts, and how
    revision: Optional[str] = None  # an imported public checkpoint's revision
    license: Optional[str] = None  # an imported public checkpoint's licence


@dataclass
class FineTuning(_Record):
    """``fine_tuning``: steps a loaded model took since loading, and when it finished
    (`tt_zoo.zoo.zoo_model.ZooModel.export`)."""
    optimizer_steps: Optional[int] = None
    finished: Optional[str] = None


@dataclass
class FinetuneRun(_Record):
    """``finetune``: a ReQA fine-tuning run (tt-zoo finetune; `tt_zoo.training.finetuning`)."""
    steps: Optional[int] = None
    steps_run: Optional[int] = None
    best_step: Optional[int] = None
    best_value: Optional[float] = None
    monitor: Optional[str] = None
    batch_size: Optional[int] = None
    requested_batch_size: Optional[int] = None
    learning_rate: Optional[float] = None
    seconds: Optional[float] = None
    train_pairs_per_s: Optional[float] = None
    hard_negatives: Optional[Dict[str, Any]] = None  # the miner's settings and counts


@dataclass
class TaskRecord(_Record):
    """One entry of ``multi_task.tasks``: a task the model was trained on
    (`tt_zoo.data.tasks.Task.describe`) and its share of the batches."""
    name: Optional[str] = None
    task_class: Optional[str] = None  # "qa", "self_supervised", ...: one marker per class
    examples: Optional[int] = None  # after any few-shot subsampling
    weight: Optional[float] = None  # normalised sampling weight (the union: size / total)
    knowledge_source: Optional[str] = None
    validation: Optional[List[str]] = None  # question sets it is validated on, never trained on
    negatives: Optional[str] = None  # how its confounders were made
    stats: Optional[Dict[str, Any]] = None  # how the examples were made (`Task.stats`)


@dataclass
class Distillation(_Record):
    """``multi_task.distillation``: how the distillation tasks trained (tt-zoo multitask --task
    distill:FILE; `tt_zoo.modeling.distillation`): the loss ("kl", RocketQAv2's listwise KL, or
    "margin_mse", Hofstätter et al. 2020), K candidates an example a step, the teacher's and the
    student's temperatures (kl), the teachers, and per task the teacher-scores file (path, size,
    sha256) with the teacher and the student that mined its candidates."""
    loss: Optional[str] = None
    candidates: Optional[int] = None
    temperature: Optional[float] = None
    student_temperature: Optional[float] = None
    teachers: Optional[List[str]] = None
    files: Optional[List[Dict[str, Any]]] = None


@dataclass
class MultiTaskRun(_Record):
    """``multi_task``: a multi-task training run (tt-zoo multitask; Maillard et al. 2021,
    Sec. 3-4; `tt_zoo.training.multi_task`): its tasks, the task-marker words ({class: word},
    null without markers), how batches were drawn, the query towers (Sec. 4.3: "shared", or
    "per-class": one per task class, picked by its marker word), and the model that re-mined
    the confounders (Sec. 4.4), if one did."""
    tasks: Optional[List[TaskRecord]] = None
    markers: Optional[Dict[str, str]] = None
    batching: Optional[str] = None  # "mixed" or "homogeneous"
    query_towers: Optional[str] = None  # `tt_zoo.data.tasks.QUERY_TOWERS`; absent: shared
    negatives_borrowed: Optional[int] = None  # examples without a confounder of their own
    remined_with: Optional[Origin] = None
    distillation: Optional[Distillation] = None


@dataclass
class LateInteractionSettings(_Record):
    """``late_interaction``: a ColBERT export's token size, query augmentation and markers,
    how many punctuation tokens its document side drops, and its query-token weights' record
    (`tt_zoo.modeling.query_token_weights`; None: every query token counts once)."""
    token_dim: Optional[int] = None
    query_augmentation: Optional[str] = None
    query_marker: Optional[str] = None
    document_marker: Optional[str] = None
    document_punctuation_tokens_masked: Optional[int] = None
    query_token_weights: Optional[dict] = None


@dataclass
class Reexport(_Record):
    """One note of ``reexported``: an export redone from its own weights
    (`tt_zoo.zoo.shipping.reexport`)."""
    date: Optional[str] = None
    by: Optional[str] = None
    reason: Optional[str] = None
    weights: Optional[str] = None
    previous_sha256: Optional[str] = None
    previous_exported: Optional[str] = None


@dataclass
class WeightAverage(_Record):
    """``averaged``: the exports whose weights were averaged (name, path, sha256, training;
    `tt_zoo.zoo.weight_averaging`, Wortsman et al. 2022) and each one's weight (summing to 1)."""
    models: Optional[List[Origin]] = None
    weights: Optional[List[float]] = None


@dataclass
class Storage(_Record):
    """``storage``: how an export's weights are stored, when not as the float32 SavedModel
    variables (`tt_zoo.artifacts.float16_storage`): ``weights`` "float16" for a compact artifact
    (its float32 arrays cast, made from the export whose sha256 is ``float32_sha256``), or
    "float32" for the copy materialised from one (``materialised_from``: that artifact's
    sha256); ``arrays``: how many arrays were cast. A compact artifact may leave out the
    arrays another shipped model holds already (``shared_from``, whose float32 SavedModel's
    sha256 is ``shared_sha256``; ``shared_arrays``: {key here: key there}), e.g. a
    query-adapted model's document tower and token table, its base model's."""
    weights: Optional[str] = None  # "float16" or "float32"
    arrays: Optional[int] = None
    float32_sha256: Optional[str] = None
    materialised_from: Optional[str] = None
    shared_from: Optional[str] = None
    shared_sha256: Optional[str] = None
    shared_arrays: Optional[Dict[str, str]] = None


@dataclass
class Measurement(_Record):
    """One entry of ``measured_by``: the tables a source (a benchmark) recorded, when, from
    which results file, and its headline numbers (`tt_zoo.zoo.shipping.record_tables`)."""
    tables: Optional[List[str]] = None
    recorded: Optional[str] = None
    results: Optional[str] = None
    summary: Optional[List[str]] = None


# -- groups: the card's fields by what they describe (flat in metadata.json) ----------------

@dataclass
class Architecture:
    """What the weights are. The exporter sets the sizes, lengths, signatures and the
    late-interaction settings from the model; the run records encoder, size and options."""
    encoder: Optional[str] = None  # "bert", "bow_mlp", "colbert"
    tower_size: Optional[str] = None
    embedding_dim: Optional[int] = None
    scoring: Optional[str] = None  # MAXSIM: a late-interaction model
    late_interaction: Optional[LateInteractionSettings] = None
    model_options: Optional[Dict[str, Any]] = None  # the registry's ModelOptions
    # Task markers (Maillard et al. 2021, Sec. 4.3): {task class: word in the vocabulary}; a
    # query is encoded with its class's word first, the default class's when none is named
    # (`tt_zoo.zoo.zoo_model.ZooModel.encode_queries`).
    task_markers: Optional[Dict[str, str]] = None
    default_task_class: Optional[str] = None
    query_length: Optional[int] = None
    document_length: Optional[int] = None
    vocab_size: Optional[int] = None
    vocabulary: Optional[str] = None  # the vocab.txt a model built from scratch used
    parameters: Optional[int] = None
    signatures: Optional[List[str]] = None


@dataclass
class Training:
    """What the run trained on and with."""
    pretraining: Optional[str] = None  # the task mix: "ict_bfs_wlp", "mlm", "none", ...
    training_data: Optional[str] = None
    pairs: Optional[PairSet] = None
    train_steps: Optional[int] = None
    batch_size: Optional[int] = None
    learning_rate: Optional[float] = None
    warmup_fraction: Optional[float] = None
    seed: Optional[int] = None
    strategy: Optional[str] = None
    dtype_policy: Optional[str] = None  # the Keras policy the towers trained under
    # The CPU's matrix units when it trained (`tt_zoo.hardware.matrix_units`: flags, whether
    # AMX was used, the default precision); `tt_zoo.training.precision.card_record`.
    matrix_units: Optional[Dict[str, Any]] = None
    pairs_seen: Optional[int] = None
    grad_cache_chunk: Optional[int] = None
    hard_negatives: Optional[Dict[str, Any]] = None  # the miner's settings and counts
    clustered_batches: Optional[Dict[str, Any]] = None  # the clustered order's settings
    multi_task: Optional[MultiTaskRun] = None  # tt-zoo multitask's tasks, markers, batching
    command: Optional[str] = None  # the command line that trained it
    run_config: Optional[Dict[str, Any]] = None  # the command's whole typed run config
    checkpoint: Optional[str] = None  # the checkpoint exported (tt-zoo export --checkpoint)


@dataclass
class TrainingResult:
    """What the run measured while training (absent when a rerun trained nothing)."""
    resumed_from: Optional[int] = None
    train_wall_time_s: Optional[float] = None
    train_pairs_per_s: Optional[float] = None
    train_pairs_per_s_first_100: Optional[float] = None
    train_pairs_per_s_last_100: Optional[float] = None
    train_steps_per_s_last_100: Optional[float] = None
    train_cpu_seconds: Optional[float] = None  # all runs of a resumed training
    final_loss: Optional[float] = None
    train_clustered_batches: Optional[Dict[str, Any]] = None  # the clustering's cost


@dataclass
class Lineage:
    """Where the weights started, and their fine-tuning."""
    warm_start: Optional[Origin] = None  # tt-zoo pretrain --init-from
    init: Optional[Origin] = None  # a term-weight model's encoder
    # A loaded model trained further, then exported; a bare name or path is kept as given (what a
    # caller of export_saved_model writes, e.g. {"base_model": "ict_bfs_wlp_512"}).
    base_model: Optional[Union[Origin, str]] = None
    fine_tuning: Optional[FineTuning] = None
    finetune: Optional[FinetuneRun] = None  # tt-zoo finetune's run
    # The export whose document side (tower and preprocessor) this model's is, unchanged (a
    # query-adapted model, `tt_zoo.training.query_adaptation`): its passage embeddings are this
    # model's (`tt_zoo.evaluation.document_embeddings.model_tag`).
    document_encoder: Optional[Origin] = None
    # Weights that are the weighted mean of other exports' (tt-zoo average; a model soup,
    # `tt_zoo.zoo.weight_averaging`): each export and its weight.
    averaged: Optional[WeightAverage] = None


@dataclass
class TermWeighting:
    """A term-weight export's targets, term space and pseudo-tf scale N (HDCT:
    tf = round(N sqrt(y)))."""
    targets: Optional[str] = None
    term_space: Optional[Dict[str, Any]] = None  # `tt_zoo.data.terms.TermSpace.settings`
    weight_scale: Optional[int] = None
    weighting: Optional[Dict[str, Any]] = None  # words from pieces, terms from words


@dataclass
class Evaluation:
    """Measured tables (title -> ``{column: value}`` or ``{row: {column: value}}``) and the
    sources that recorded them."""
    metrics: Optional[Dict[str, Any]] = None
    measured_by: Optional[Dict[str, Measurement]] = None


@dataclass
class Provenance:
    """What the exporter stamps: the layout's version, library versions, the date, the file
    manifest and its sha256 (`tt_zoo.manifest`), and each re-export."""
    format_version: Optional[int] = None
    versions: Optional[Dict[str, str]] = None
    exported: Optional[str] = None
    files: Optional[Dict[str, Any]] = None
    sha256: Optional[str] = None
    reexported: Optional[List[Reexport]] = None
    storage: Optional[Storage] = None


_GROUPS = {"architecture": Architecture, "training": Training, "result": TrainingResult,
           "lineage": Lineage, "term_weighting": TermWeighting, "evaluation": Evaluation,
           "provenance": Provenance}


# The licence line of weights tt_zoo trains: the package's own licence, and what the text was.
WEIGHTS_LICENSE = "Apache-2.0 (weights trained on CC BY-SA text)"


@dataclass
class ModelCard(_Read):
    """An export's metadata, typed: every key of metadata.json, by group.

    Args:
      name: the model's name (a registered name, or what the run called it).
      kind: ``"term_weights"`` for a term-weight export; absent for the others
        (`artifact_kind` tells two-tower from late interaction by ``scoring``).
      license: the weights' license, with a note on the training text.
      notes: prose the card prints after the command.
      architecture, training, result, lineage, term_weighting, evaluation, provenance:
        the groups (see the module docstring).
      extra: keys this module does not name (an export written by another version), kept
        and written back.
      read_keys, read_nulls: the keys of the metadata read (`from_dict`), in order, and those
        that were null: `to_dict` writes them in that order, a null read back as null; a field
        that is None is left out otherwise.

    Example:
      >>> card = ModelCard(name="m", training=Training(train_steps=3, batch_size=8))
      >>> card.to_dict()
      {'name': 'm', 'train_steps': 3, 'batch_size': 8}
      >>> ModelCard.from_dict({"name": "m", "train_steps": "abc"})
      Traceback (most recent call last):
      ...
      tt_zoo.errors.TtZooError: metadata field 'train_steps' must be an integer (got 'abc').

    References:
      sentence-transformers ``SentenceTransformerModelCardData`` (model_card.py); the
      Hugging Face model card metadata (YAML front matter: library_name, license,
      base_model, datasets, metrics, tags).
    """
    name: Optional[str] = None
    kind: Optional[str] = field(default=None, metadata={"choices": KINDS})
    license: Optional[str] = None
    notes: Optional[str] = None
    architecture: Architecture = field(default_factory=Architecture)
    training: Training = field(default_factory=Training)
    result: TrainingResult = field(default_factory=TrainingResult)
    lineage: Lineage = field(default_factory=Lineage)
    term_weighting: TermWeighting = field(default_factory=TermWeighting)
    evaluation: Evaluation = field(default_factory=Evaluation)
    provenance: Provenance = field(default_factory=Provenance)

    def __post_init__(self):
        self.check()

    # -- the keys ------------------------------------------------------------------------

    @classmethod
    def metadata_keys(cls) -> Dict[str, tuple]:
        """Every top-level key of metadata.json: key -> (group name or None, the field)."""
        return _top_level_keys()

    @staticmethod
    def format_version_of(metadata: dict):
        """The layout version an export's metadata records (None before there was one), read
        alone: checked before the rest, which a later layout may hold differently."""
        return metadata.get("format_version")

    @classmethod
    def from_dict(cls, metadata: dict) -> "ModelCard":
        """The card of an export's metadata (any export's, old ones included); raises
        `TtZooError` naming a field whose value has the wrong type."""
        if not isinstance(metadata, dict):
            raise _bad("metadata", "a JSON object", metadata)
        keys = cls.metadata_keys()
        top, groups = {}, {name: {} for name in _GROUPS}
        for key, value in metadata.items():
            if key not in keys:
                continue
            group, f = keys[key]
            owner = _hints(cls) if group is None else _hints(_GROUPS[group])
            loaded = _load(value, owner[f.name], key)
            (top if group is None else groups[group])[f.name] = loaded
        return cls(**top, **{name: _GROUPS[name](**values) for name, values in groups.items()},
                   extra={k: v for k, v in metadata.items() if k not in keys},
                   **_read(metadata))

    def to_dict(self) -> dict:
        """metadata.json's object: the fields that are set (and the nulls recorded), then the
        extra keys, the recorded ones in their order; checked first."""
        self.check()
        return _in_order({key: getattr(self if group is None else getattr(self, group), f.name)
                          for key, (group, f) in self.metadata_keys().items()}, self)

    def check(self) -> None:
        """Raises `TtZooError` naming the first field whose value has the wrong type (records
        given as dicts become records)."""
        for key, (group, f) in self.metadata_keys().items():
            owner = self if group is None else getattr(self, group)
            hint = _hints(type(owner))[f.name]
            setattr(owner, f.name, _load(getattr(owner, f.name), hint, key))
            choices = f.metadata.get("choices")
            if choices and getattr(owner, f.name) not in (None, *choices):
                raise TtZooError(f"metadata field {key!r} must be one of {list(choices)} "
                                 f"(got {getattr(owner, f.name)!r}).")

    def fine_tuned(self, *, name: str, base_name: str, base_path: Optional[str], steps: int,
                   finished: str) -> "ModelCard":
        """The card of weights trained further from this card's (a loaded model fitted, then
        exported: `tt_zoo.zoo.zoo_model.ZooModel.export`): the facts such training does not
        change (encoder, size, options, task markers, pretraining, license), the steps taken,
        and the lineage (this model's name, sha256, path and training); none of this card's
        metrics, which were not measured on the new weights."""
        arch, training = self.architecture, self.training
        return ModelCard(
            name=name, license=self.license,
            architecture=Architecture(encoder=arch.encoder, tower_size=arch.tower_size,
                                      model_options=arch.model_options,
                                      task_markers=arch.task_markers,
                                      default_task_class=arch.default_task_class),
            training=Training(pretraining=training.pretraining, train_steps=steps),
            lineage=Lineage(
                base_model=Origin(name=base_name, sha256=self.provenance.sha256, path=base_path,
                                  train_steps=training.train_steps,
                                  training_data=training.training_data),
                fine_tuning=FineTuning(optimizer_steps=steps, finished=finished)))

    # -- what the card says --------------------------------------------------------------

    @property
    def artifact_kind(self) -> str:
        """`TERM_WEIGHTS` (``kind``), `LATE_INTERACTION` (MaxSim ``scoring``), else
        `TWO_TOWER`."""
        if self.kind == TERM_WEIGHTS:
            return TERM_WEIGHTS
        return LATE_INTERACTION if self.architecture.scoring == MAXSIM else TWO_TOWER

    @property
    def base_model(self) -> Optional[str]:
        """The name of the export these weights started from (fine-tuned from, warm-started
        from, or initialised from), the last part of a path; None for weights trained from
        scratch."""
        lineage = self.lineage
        for origin in (lineage.base_model, lineage.warm_start, lineage.init):
            named = origin if isinstance(origin, str) else origin and (origin.name or origin.source)
            if named:
                return posixpath.basename(str(named).rstrip("/")) or str(named)
        return None

    @property
    def datasets(self) -> List[str]:
        """What the weights were trained on, by name: the pair set's source (its last path
        part: "wikispeedia") and, for a ReQA fine-tuning run, "squad"."""
        names = []
        config = (self.training.pairs and self.training.pairs.make_pairs_config) or {}
        source = config.get("source")
        if source:
            names.append(posixpath.basename(str(source).rstrip("/")) or str(source))
        if self.lineage.finetune is not None:
            names.append("squad")  # ReQA-SQuAD (Ahmad et al. 2019)
        return list(dict.fromkeys(names))

    @property
    def metric_names(self) -> List[str]:
        """The metrics the measured tables hold: "recall" (R@k), "mrr", others lower-cased."""
        names = []
        for table in (self.evaluation.metrics or {}).values():
            for values in (table_rows(table) or {}).values():
                for column in values:
                    head = str(column).partition("@")[0]
                    names.append("recall" if head == "R" else str(column).lower())
        return list(dict.fromkeys(names))

    @property
    def tags(self) -> List[str]:
        tags = [LIBRARY_NAME, self.artifact_kind.replace("_", "-")]
        if self.architecture.encoder:
            tags.append(self.architecture.encoder)
        if self.training.pretraining:
            tags.append(f"pretraining:{self.training.pretraining}")
        return tags

    def front_matter(self) -> dict:
        """The Hugging Face card metadata (YAML front matter): library_name, license (its
        identifier, lower-cased: "apache-2.0"), base_model, datasets, metrics, tags; empty
        ones left out."""
        license_id = self.license.split()[0].lower() if self.license else None
        matter = {"library_name": LIBRARY_NAME, "license": license_id,
                  "base_model": self.base_model, "datasets": self.datasets,
                  "metrics": self.metric_names, "tags": self.tags}
        return {k: v for k, v in matter.items() if v not in (None, [])}


@functools.lru_cache(maxsize=None)
def _top_level_keys() -> Dict[str, tuple]:
    keys = {}
    owners = [(None, ModelCard)] + list(_GROUPS.items())
    for group, cls in owners:
        for f in dataclasses.fields(cls):
            if cls is ModelCard and (f.name in _GROUPS or f.name in _HIDDEN):
                continue
            key = _key(f)
            if key in keys:
                raise AssertionError(f"metadata key {key!r} is named twice")
            keys[key] = (group, f)
    return keys


# -- types ----------------------------------------------------------------------------------

_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
               dict: "a JSON object", list: "a list"}


def _bad(where: str, expected: str, value) -> TtZooError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return TtZooError(f"metadata field {where!r} must be {expected} (got {shown}).")


def _load(value, hint, where: str):
    """`value` checked against the field's type `hint`; JSON objects of a record type become
    records. Raises `TtZooError` naming `where`."""
    if value is None:
        return None
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Union:  # Optional[X], or Optional[Union[Record, str]]
        if str in args and isinstance(value, str):
            return value  # the shorthand: a bare name or path, kept as given
        hint = next((a for a in args if a is not str), args[0])
        args = [a for a in typing.get_args(hint)]
    origin = typing.get_origin(hint) or hint
    if isinstance(origin, type) and issubclass(origin, _Record):
        if isinstance(value, origin):
            value.check(where + ".")
            return value
        return origin.from_dict(value, where + ".")
    if origin is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise _bad(where, _TYPE_NAMES[int], value)
        return value
    if origin is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise _bad(where, _TYPE_NAMES[float], value)
        return value
    if origin in (str, bool):
        if not isinstance(value, origin):
            raise _bad(where, _TYPE_NAMES[origin], value)
        return value
    if origin is list:
        if not isinstance(value, list):
            raise _bad(where, _TYPE_NAMES[list], value)
        item = args[0] if args else Any
        return value if item is Any else [_load(v, item, f"{where}[{i}]")
                                          for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _bad(where, _TYPE_NAMES[dict], value)
        item = args[1] if len(args) == 2 else Any
        return value if item is Any else {k: _load(v, item, f"{where}.{k}")
                                          for k, v in value.items()}
    return value  # Any


def _dump(value):
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


# -- measured tables ----------------------------------------------------------------------

def table_rows(table) -> Optional[dict]:
    """The rows of a measured table of ``metrics``: ``{row label: {column: value}}`` for a
    table of several rows (e.g. one per retriever), ``{"": {column: value}}`` for a one-row
    table (``{column: value}``), None for anything else (a note)."""
    if not isinstance(table, dict) or not table:
        return None
    if all(isinstance(v, dict) for v in table.values()):
        return table
    return {"": table}
