"""What an export records about itself, typed: `ModelCard`, and the MODEL_CARD.md it renders.

The one place that names every key of an export's ``metadata.json``, in the manner of
sentence-transformers' ``SentenceTransformerModelCardData`` (a dataclass holding what the card
says, rendered with the YAML front matter of a Hugging Face model card). The fields are grouped
by what they describe:

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

MODEL_CARD.md (`ModelCard.render`): YAML front matter as the Hugging Face Hub reads it
(``library_name``, ``license``, ``base_model``, ``datasets``, ``metrics``, ``tags``), then
what the model is, a table of what it records, the command that trained it, the measured
tables and how to use it.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import posixpath
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

import yaml

from tt_zoo.errors import TtZooError
from tt_zoo.modeling.kinds import KINDS, LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER

MAXSIM = "maxsim"  # ``scoring`` of a late-interaction (ColBERT) export
# TF Serving's REST API uses this signature when a request names none (the export's first).
DEFAULT_SIGNATURE = "serving_default"
LIBRARY_NAME = "tt_zoo"  # the card's ``library_name`` and first tag
# An export's files that hold the card (here, where modules that must not import TensorFlow read
# them from; `tt_zoo.serving.export` writes them).
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
    revision: Optional[str] = None  # an imported public checkpoint's revision
    license: Optional[str] = None  # an imported public checkpoint's licence


@dataclass
class FineTuning(_Record):
    """``fine_tuning``: steps a loaded model took since loading, and when it finished
    (`tt_zoo.zoo.loading.ZooModel.export`)."""
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
    # (`tt_zoo.zoo.loading.ZooModel.encode_queries`).
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
    dtype_policy: Optional[str] = None
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
        exported: `tt_zoo.zoo.loading.ZooModel.export`): the facts such training does not
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

    def render(self) -> str:
        """MODEL_CARD.md: the front matter, then the body for the export's kind."""
        matter = yaml.safe_dump(self.front_matter(), sort_keys=False, allow_unicode=True,
                                default_flow_style=False)
        kind = self.artifact_kind
        body = (_term_weight_body(self) if kind == TERM_WEIGHTS
                else _two_tower_body(self, tokens=kind == LATE_INTERACTION))
        return f"---\n{matter}---\n\n{body}"


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


# -- the body of MODEL_CARD.md -------------------------------------------------------------

# The fields each card's table shows, in this order, when recorded.
TWO_TOWER_TABLE = (
    "base_model", "fine_tuning", "encoder", "tower_size", "pretraining", "embedding_dim",
    "scoring", "late_interaction", "model_options", "task_markers", "default_task_class",
    "query_length", "document_length",
    "vocab_size", "parameters", "training_data", "pairs", "warm_start", "train_steps",
    "batch_size", "pairs_seen", "learning_rate", "dtype_policy", "grad_cache_chunk",
    "clustered_batches", "hard_negatives", "train_wall_time_s", "train_pairs_per_s",
    "final_loss", "license", "exported")
TERM_WEIGHT_TABLE = (
    "init", "training_data", "targets", "pairs", "train_steps", "batch_size", "learning_rate",
    "warmup_fraction", "train_cpu_seconds", "train_wall_time_s", "final_loss",
    "document_length", "vocab_size", "parameters", "term_space", "weight_scale", "weighting",
    "license", "exported")


def _or(value, default):
    return default if value is None else value


def _origin_text(origin: dict) -> str:
    """A fine-tuned card's ``base_model`` for a reader: its name (a path's last part: no
    machine path), a sha256 prefix and its steps, e.g. "ict_bfs_wlp_512 (sha256 82a998fa049e…,
    800 steps)"; its training data is on its own card."""
    named = origin.get("name") or origin.get("from") or origin.get("path") or "?"
    text = posixpath.basename(str(named).replace("\\", "/").rstrip("/")) or str(named)
    facts = [f"sha256 {origin['sha256'][:12]}…" if origin.get("sha256") else None,
             f"{origin['train_steps']:,} steps" if origin.get("train_steps") else None]
    facts = [f for f in facts if f]
    return f"{text} ({', '.join(facts)})" if facts else text


def _fine_tuning_text(fine_tuning: dict) -> str:
    """``fine_tuning`` for a reader: "5 optimizer steps, finished 2026-01-01T00:00:00+00:00"."""
    parts = [f"{fine_tuning['optimizer_steps']:,} optimizer steps"
             if fine_tuning.get("optimizer_steps") is not None else None,
             f"finished {fine_tuning['finished']}" if fine_tuning.get("finished") else None]
    return ", ".join(p for p in parts if p) or "?"


# Fields whose recorded object reads better as a sentence in the card's table.
_TABLE_TEXT = {"base_model": _origin_text, "fine_tuning": _fine_tuning_text}


def _table(card: ModelCard, keys) -> list:
    """``| key | value |`` rows of the recorded `keys` (values as metadata.json holds them;
    a base model and a fine-tuning record as text: `_TABLE_TEXT`)."""
    meta = card.to_dict()

    def value(key):
        shown = meta[key]
        return _TABLE_TEXT[key](shown) if key in _TABLE_TEXT and isinstance(shown, dict) else shown
    return ["| field | value |", "| --- | --- |"] + [
        f"| {key} | {value(key)} |" for key in keys if key in meta]


def _command_lines(card: ModelCard) -> list:
    command = card.training.command
    return ["", "Trained with:", "", "```bash", str(command), "```"] if command else []


def _two_tower_body(card: ModelCard, tokens: bool) -> str:
    """A two-tower or late-interaction export's card below the front matter."""
    name = _or(card.name, "tt_zoo model")
    about = ("A late-interaction (ColBERT: Khattab & Zaharia, SIGIR 2020) retrieval model from "
             "tt_zoo: one L2-normalised vector per token, scored by MaxSim, pretrained with the "
             "tasks of Chang et al., ICLR 2020." if tokens else
             "A two-tower retrieval model from tt_zoo (Chang et al., *Pre-training Tasks for "
             "Embedding-based Large-scale Retrieval*, ICLR 2020).")
    lines = [f"# {name}", "", about, "", *_table(card, TWO_TOWER_TABLE)]
    lines += multi_task_lines(card)
    lines += _command_lines(card)
    if card.notes:
        lines += ["", str(card.notes)]
    lines += reexport_lines(card)
    lines += measured_quality_lines(card)
    if tokens:
        use = ["query_vectors = model.encode_query_tokens([\"a question\"])  # [n_i, m] each",
               "document_vectors = model.encode_document_tokens(passages, titles=titles)",
               "scores = model.score([\"a question\"], passages, titles=titles)  # MaxSim"]
    else:
        use = ["index = model.index(passages)", "hits = index.search([\"a question\"], k=10)"]
    default = card.architecture.default_task_class
    if card.architecture.task_markers and default:
        use.append(f"# queries get the {default!r} task marker; pick another class with "
                   "encode_queries(texts, task_class=...)")
    lines += ["", "## Use", "", "```python", "import tt_zoo",
              f"model = tt_zoo.load({name!r})", *use, "```", "",
              "Serving: `saved_model_cli show --dir . --all` lists the signatures"
              f"{_signature_list(card)}; they take raw "
              "strings and tokenize in the graph with tensorflow-text ops, so a process that "
              "loads this SavedModel with `tf.saved_model.load` must `import tensorflow_text` "
              "first; the stock TF Serving ModelServer links tensorflow-text's ops, so it "
              "serves this export: take the release of the TensorFlow version it was "
              f"exported with ({_tensorflow_version(card)}).", ""]
    return "\n".join(lines)


def _term_weight_body(card: ModelCard) -> str:
    """A term-weight export's card below the front matter."""
    name = _or(card.name, "term weights")
    served = [s for s in card.architecture.signatures or [] if s != DEFAULT_SIGNATURE]
    lines = [f"# {name}", "",
             "Learned term weights after HDCT (Dai & Callan, WWW 2020): a BERT encoder and a "
             "linear head give each WordPiece a weight y in [0, 1]; BM25 indexes a term with "
             f"the pseudo term frequency round(N sqrt(y)), N = "
             f"{card.term_weighting.weight_scale}.", "", *_table(card, TERM_WEIGHT_TABLE)]
    lines += _command_lines(card)
    lines += reexport_lines(card)
    lines += measured_quality_lines(card)
    lines += ["", "## Use", "", "```python",
              "import tt_zoo",
              "from tt_zoo.retrieval.bm25 import BM25Retriever",
              "from tt_zoo.retrieval.term_weighting import weigh_corpus",
              f"weighter = tt_zoo.load_term_weighter({_or(card.name, 'path')!r})  # or a path",
              "weights = weigh_corpus(weighter, titles, passages, cache_dir='runs/term_weights')",
              "bm25 = BM25Retriever([t + ' ' + p for t, p in zip(titles, passages)], "
              "weights=weights)", "```", "",
              f"Serving: the signature `{served[0] if served else DEFAULT_SIGNATURE}` "
              f"(= {DEFAULT_SIGNATURE}) takes `title` and "
              "`passage` strings and returns `tokens`, `weights` and `word_start`; it tokenizes "
              "with tensorflow-text ops, so `import tensorflow_text` before "
              "`tf.saved_model.load`.", ""]
    return "\n".join(lines)


def _signature_list(card: ModelCard) -> str:
    """" NAME (= FIRST), FIRST, ...": the signatures the export records, so a card never
    promises one its SavedModel lacks ("" when none are recorded)."""
    recorded = list(card.architecture.signatures or [])
    first = next((n for n in recorded if n != DEFAULT_SIGNATURE), None)
    names = ", ".join(f"{n} (= {first})" if n == DEFAULT_SIGNATURE and first else n
                      for n in recorded)
    return f" {names}" if names else ""


def _tensorflow_version(card: ModelCard) -> str:
    return str((card.provenance.versions or {}).get("tensorflow", "see metadata.json"))


def reexport_lines(card: ModelCard) -> list:
    """The card's lines for each time the export was redone from its own weights
    (``reexported``, written by `tt_zoo.zoo.shipping.reexport`); [] for none."""
    lines = []
    for note in card.provenance.reexported or []:
        lines += ["", f"Re-exported {_or(note.date, '?')} by {_or(note.by, 'tt_zoo')}, "
                      f"{_or(note.reason, '')} (weights {_or(note.weights, '?')}; the "
                      f"export before had sha256 {str(note.previous_sha256)[:12]}…, "
                      f"exported {_or(note.previous_exported, '?')})."]
    return lines


def multi_task_lines(card: ModelCard) -> list:
    """The card's "## Tasks" section for a multi-task model (``multi_task``, Maillard et al.
    2021): a table of its tasks (name, class, examples, weight), then its markers and
    batching; [] for any other model."""
    run = card.training.multi_task
    if run is None or not run.tasks:
        return []
    lines = ["", "## Tasks", "", "Trained on the union of these tasks (multi-task retrieval, "
             "Maillard et al. 2021); weight: the task's share of the batches.", "",
             "| name | class | examples | weight |",
             "| --- | --- | --- | --- |"]
    for task in run.tasks:
        examples = f"{task.examples:,}" if task.examples is not None else "?"
        lines.append(f"| {_or(task.name, '?')} | {_or(task.task_class, '?')} | {examples} | "
                     f"{_fmt(task.weight) if task.weight is not None else '?'} |")
    markers = ", ".join(f"`{word}` ({task_class})"
                        for task_class, word in (run.markers or {}).items())
    lines += ["", f"Task markers: {markers or 'none'}; batches: {_or(run.batching, '?')}."]
    lines += query_tower_lines(card)
    if run.remined_with is not None:
        origin = run.remined_with
        lines.append(f"Confounders re-mined with {_or(origin.source or origin.name, '?')} "
                     "(Maillard et al. 2021, Sec. 4.4).")
    return lines


def query_tower_lines(card: ModelCard) -> list:
    """The Tasks section's line on the query towers (``multi_task.query_towers``, Maillard et
    al. 2021, Sec. 4.3): one shared tower, or which tower each task class uses; [] when the
    card does not record them."""
    run = card.training.multi_task
    if run.query_towers is None:
        return []
    if run.query_towers != "per-class":
        return [f"Query towers: {run.query_towers} (one query tower for every task)."]
    default = card.architecture.default_task_class
    uses = []
    for task_class, word in (run.markers or {}).items():
        tasks = ", ".join(_or(t.name, "?") for t in run.tasks if t.task_class == task_class)
        uses.append(f"`{word}` → the {task_class} tower ({tasks or 'no task'})")
    return [f"Query towers: per-class (Maillard et al. 2021, Sec. 4.3): one per task class, "
            f"each started from the same query tower, picked in the graph by the query's marker "
            f"word: {'; '.join(uses)}; a query without a marker → the "
            f"{_or(default, 'default class')} tower. One document tower for every task."]


def table_rows(table) -> Optional[dict]:
    """The rows of a measured table of ``metrics``: ``{row label: {column: value}}`` for a
    table of several rows (e.g. one per retriever), ``{"": {column: value}}`` for a one-row
    table (``{column: value}``), None for anything else (a note)."""
    if not isinstance(table, dict) or not table:
        return None
    if all(isinstance(v, dict) for v in table.values()):
        return table
    return {"": table}


def measured_quality_lines(card: ModelCard) -> list:
    """The card's "## Measured quality" section: each table of ``metrics`` under its title (a
    one-row table as it is; a table of rows with a first column naming each row,
    `table_rows`), then which runs measured them (``measured_by``, written by
    `tt_zoo.zoo.shipping.record_tables`). [] when nothing was measured."""
    metrics = card.evaluation.metrics or {}
    if not metrics:
        return []
    lines = ["", "## Measured quality", ""]
    for table_name, table in metrics.items():
        lines += [f"**{table_name}**", ""]
        rows = table_rows(table)
        if rows is None:
            lines.append(str(table))
        else:
            keys = _column_order(dict.fromkeys(k for values in rows.values() for k in values))
            labelled = list(rows) != [""]
            head = (["row"] if labelled else []) + keys
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + " --- |" * len(head))
            for label, values in rows.items():
                cells = [_fmt(values[k]) if k in values else "–" for k in keys]
                lines.append("| " + " | ".join(([label] if labelled else []) + cells) + " |")
        lines.append("")
    for source, about in (card.evaluation.measured_by or {}).items():
        results = f" ({about.results})" if about.results else ""
        lines.append(f"Measured by `{source}`{results}, recorded {_or(about.recorded, '?')}: "
                     f"{len(about.tables or [])} table(s) above.")
        lines.append("")
    return lines


def _column_order(keys) -> list:
    """Metric columns as people read them: R@k by k, then the others in their order (MRR...);
    metadata.json stores each table with sorted keys (R@1, R@100, R@20, R@5)."""
    keys = list(keys)

    def k_of(key: str):
        head, _, k = key.partition("@")
        return int(k) if head == "R" and k.isdigit() else None

    recalls = sorted((key for key in keys if k_of(key) is not None), key=k_of)
    return recalls + [key for key in keys if k_of(key) is None]


def _fmt(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)
