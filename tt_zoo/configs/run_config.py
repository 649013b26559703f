"""Typed run configs of the training runs: flags, a JSON file, and the record in the artifact.

A command's settings are a frozen dataclass of argument groups, each group a frozen dataclass
whose fields are the command's flags, in the manner of tevatron's ``ModelArguments`` /
``DataArguments`` / ``TrainingArguments`` (which Hugging Face's ``HfArgumentParser`` turns into
argparse options). A field (`option`) is the one place that holds a flag's type, default,
choices and help; from the fields come

- the argparse groups (`RunConfig.add_arguments`; field ``x_y`` is flag ``--x-y``);
- ``--config FILE``: settings read from a JSON file of `RunConfig.to_dict`'s shape,
  ``{"group": {"field": value}}``, any subset of it. Flags given on the command line override
  the file; an unknown group or field, a value of the wrong type or outside the choices is
  refused with a message naming the file and the key;
- the range of a number (`tt_zoo.numbers.Number`, a field's ``number``), checked on the
  flag as it is parsed and on the file's value alike;
- `RunConfig.to_dict`: the whole config, which the command records in its artifact's metadata
  under `RUN_CONFIG_KEY` and which ``--config`` reads back;
- `RunConfig.command_line`: the command line that gives the config, its settings that are not
  the defaults as flags (a registered model's `recipe_command` is its config's).

A field is a scalar (bool, int, float, str, or Optional of one) or ``Tuple[str, ...]``: a
repeatable flag (``--task a --task b``; a JSON list of strings in a ``--config`` file, which the
flags, when given, replace rather than extend).

The groups that more than one run shares (the training precision, hard negatives, token budgets,
pairs, checkpoints) are here; each run's config is its own module of `tt_zoo.configs`
(`tt_zoo.configs.pretrain.PretrainConfig`, `tt_zoo.configs.finetune.FinetuneConfig`, ...),
below the registry, whose every name holds one as its recipe (`tt_zoo.zoo.registry.ModelSpec`);
the command (`tt_zoo.cli`) parses it and the run's library entry point (`tt_zoo.training`) runs
it. A run that cannot go on
as configured raises `RunError`, whose message names the setting by its flag; the command prints
it and exits. Nothing here imports TensorFlow: ``--help`` stays quick.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import os
import shlex
import sys
import textwrap
import types
import typing
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

from tt_zoo import numbers
from tt_zoo.errors import TtZooError
from tt_zoo.hardware import PRECISION_CHOICES
from tt_zoo.numbers import Number

# The metadata key under which a command records its whole run config (train_summary.json,
# metadata.json of the export, finetune's --json-out).
RUN_CONFIG_KEY = "run_config"
CONFIG_FLAG = "--config"
_SCALARS = (bool, int, float, str)
# Every command's help for "no progress bars" (`tt_zoo.cli.parsing.add_no_progress`).
NO_PROGRESS_HELP = "no progress bars (log lines, where the command has them)"


class RunConfigError(TtZooError):
    """A ``--config`` file that is not the command's run config; the message names the file and
    the key."""


class RunError(TtZooError):
    """A run that cannot start or go on as configured (a setting the variant cannot train with,
    a missing input, resumed settings that differ, a non-finite loss); the message names the
    setting by its flag, and the command exits with it."""


def option(default: Any = None, help: str = "", *,  # noqa: A002 (argparse's word)
           choices: Optional[Sequence] = None, metavar: Optional[str] = None,
           hidden_aliases: Sequence[str] = (), number: Optional[Number] = None):
    """A run-config field: the flag ``--x-y`` of field ``x_y``, with its default, help and
    choices. A ``bool`` field is a switch (``store_true``); `hidden_aliases` are older spellings
    that keep working and stay out of ``--help``. An int or float field names its range,
    `number` (`tt_zoo.numbers`): a flag without one is refused when the parser is built."""
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": tuple(choices) if choices else None, "metavar": metavar,
        "hidden_aliases": tuple(hidden_aliases), "number": number})


def flag(name: str) -> str:
    """The command-line spelling of field `name`: ``--x-y`` for ``x_y``."""
    return "--" + name.replace("_", "-")


def recorded_command(command: str, argv: Optional[Sequence] = None) -> str:
    """``tt-zoo COMMAND ARGS...`` as a shell line, for the artifact's ``command`` (`argv`: what
    `main` was given; None: this process's own arguments)."""
    return shlex.join(["tt-zoo", command, *(sys.argv[1:] if argv is None else map(str, argv))])


@dataclasses.dataclass(frozen=True)
class _Setting:
    group: str
    field: dataclasses.Field
    kind: type          # bool, int, float or str
    optional: bool      # None allowed


def _scalar(annotation) -> Tuple[type, bool]:
    """(bool/int/float/str, whether None is allowed) of a field's annotation."""
    members = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in members if a is not type(None)]
        if len(kinds) == 1 and kinds[0] in _SCALARS:
            return kinds[0], len(kinds) < len(members)
    elif annotation in _SCALARS:
        return annotation, False
    elif typing.get_origin(annotation) is tuple and members == (str, Ellipsis):
        return tuple, False  # a repeatable flag
    raise TypeError(f"a run-config field must be bool, int, float or str, or Optional of one, "
                    f"or Tuple[str, ...] (got {annotation!r})")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Base of a command's run config: each field is an argument group (a dataclass of
    `option` fields), its name the group's key in `to_dict` and in a ``--config`` file.

    `COMMAND`: the ``tt-zoo`` command that runs it; `REQUIRED`: fields that must be set, by a
    flag or the file (argparse's own message when not); `ONE_OF`: tuples of fields of one group
    of which exactly one is set (a mutually exclusive argparse group). Field names are unique
    across the groups (one flag each).
    """

    COMMAND: ClassVar[str] = ""
    REQUIRED: ClassVar[Tuple[str, ...]] = ()
    ONE_OF: ClassVar[Tuple[Tuple[str, ...], ...]] = ()

    # ------------------------------------------------------------------ the fields

    @classmethod
    def groups(cls) -> Dict[str, type]:
        """Group name -> its dataclass, in declaration order."""
        return dict(_groups(cls))

    @classmethod
    def settings(cls) -> Dict[str, _Setting]:
        """Field name -> its group, field and scalar type, over every group."""
        return dict(_settings(cls))

    @classmethod
    def _find_settings(cls) -> Dict[str, _Setting]:
        found = {}
        for group, group_type in cls.groups().items():
            hints = typing.get_type_hints(group_type)
            for field in dataclasses.fields(group_type):
                if field.name in found:
                    raise TypeError(f"{cls.__name__}: field {field.name!r} is in groups "
                                    f"{found[field.name].group!r} and {group!r}")
                found[field.name] = _Setting(group, field, *_scalar(hints[field.name]))
        return found

    # ------------------------------------------------------------------ flags

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """``--config`` and one argparse group a config group (title: the group's name,
        description: its docstring's first line), a flag a field."""
        parser.add_argument(
            CONFIG_FLAG, metavar="FILE.json",
            help="read the settings from a JSON file, {\"group\": {\"setting\": value}} as an "
                 f"export records them under {RUN_CONFIG_KEY!r} (any subset); flags given "
                 "here override it")
        settings = cls.settings()
        for group, group_type in cls.groups().items():
            about = " ".join((group_type.__doc__ or "").strip().split("\n\n")[0].split())
            container = parser.add_argument_group(group, textwrap.fill(about, 78) or None)
            exclusive = {}
            for names in cls.ONE_OF:
                if names[0] in settings and settings[names[0]].group == group:
                    shared = container.add_mutually_exclusive_group()
                    exclusive.update({name: shared for name in names})
            for field in dataclasses.fields(group_type):
                cls._add_flag(exclusive.get(field.name, container), settings[field.name])

    @classmethod
    def _add_flag(cls, container, setting: _Setting) -> None:
        field, meta = setting.field, setting.field.metadata
        text = meta["help"] + (" (required)" if field.name in cls.REQUIRED else "")
        default = field.default
        if setting.kind is bool:
            kwargs = {"action": "store_true"}
        elif setting.kind is tuple:  # argparse appends to a list: None until a flag is given
            kwargs, default = {"action": "append", "metavar": meta["metavar"]}, None
            text += " (repeatable)"
        else:
            kwargs = {"type": None if setting.kind is str else _number(setting),
                      "choices": meta["choices"], "metavar": meta["metavar"]}
        container.add_argument(flag(field.name), dest=field.name, default=default,
                               help=text, **kwargs)
        for alias in meta["hidden_aliases"]:
            container.add_argument(alias, dest=field.name, help=argparse.SUPPRESS, **kwargs)

    @classmethod
    def parse(cls, parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
        """The flags of `argv` over the ``--config`` file's settings over the defaults, as a flat
        namespace (one attribute a field). A bad file exits with one line naming it and the key,
        a missing required setting or none of a `ONE_OF` through ``parser.error`` (status 2
        both)."""
        args = parser.parse_args(argv)
        path = args.config
        if path is not None:
            try:
                values = cls.read_json(path)
            except RunConfigError as e:  # one line: the fix is in the file, not the syntax
                parser.exit(2, f"{parser.prog}: error: {e}\n")  # tt_zoo.cli.parsing.exit_missing
            # A member of a ONE_OF given as a flag replaces the file's choice among them.
            for names in cls.ONE_OF:
                if any(getattr(args, name) is not None for name in names):
                    for name in names:
                        values.pop(name, None)
            # A repeatable flag given replaces the file's list (argparse would extend it).
            repeated = {name: getattr(args, name) for name, s in cls.settings().items()
                        if s.kind is tuple and getattr(args, name) is not None}
            parser.set_defaults(**{k: list(v) if isinstance(v, tuple) else v
                                   for k, v in values.items()})
            args = parser.parse_args(argv)
            for name, value in repeated.items():
                setattr(args, name, value)
        missing = [flag(name) for name in cls.REQUIRED if getattr(args, name) is None]
        if missing:
            parser.error(f"the following arguments are required: {', '.join(missing)}")
        for names in cls.ONE_OF:
            if all(getattr(args, name) is None for name in names):
                parser.error(f"one of the arguments {' '.join(map(flag, names))} is required")
        return args

    @classmethod
    def from_namespace(cls, args: argparse.Namespace):
        """The config of a parsed namespace (`parse`'s)."""
        settings = cls.settings()

        def value(name):
            given = getattr(args, name)
            return tuple(given or ()) if settings[name].kind is tuple else given

        return cls(**{group: group_type(**{f.name: value(f.name)
                                           for f in dataclasses.fields(group_type)})
                      for group, group_type in cls.groups().items()})

    # ------------------------------------------------------------------ JSON

    def get(self, name: str, default: Any = None) -> Any:
        """The value of setting `name` (a field of any group), `default` when the config has no
        such setting."""
        setting = self.settings().get(name)
        return default if setting is None else getattr(getattr(self, setting.group), name)

    def replace(self, **settings):
        """This config with the named settings (field names, of any group) changed."""
        known = self.settings()
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no setting {', '.join(unknown)}")
        groups = {}
        for name, value in settings.items():
            groups.setdefault(known[name].group, {})[name] = value
        return dataclasses.replace(self, **{
            group: dataclasses.replace(getattr(self, group), **values)
            for group, values in groups.items()})

    def argv(self) -> List[str]:
        """The flags that give this config from the defaults: every setting that is not its
        field's default, in declaration order (a switch alone, a repeatable flag once a value).
        Raises ValueError for a setting no flag can give (None where the default is not)."""
        words: List[str] = []
        for name, setting in self.settings().items():
            value = getattr(getattr(self, setting.group), name)
            if value == setting.field.default:
                continue
            if setting.kind is bool:
                words.append(flag(name))
            elif setting.kind is tuple:
                for item in value:
                    words += [flag(name), item]
            elif value is None:
                raise ValueError(f"{type(self).__name__}: {flag(name)} cannot be unset on the "
                                 f"command line (its default is {setting.field.default!r})")
            else:
                words += [flag(name), _spelled(value)]
        return words

    def command_line(self) -> str:
        """``tt-zoo COMMAND FLAGS...`` as a shell line: what gives this config (`argv`)."""
        return shlex.join(["tt-zoo", self.COMMAND, *self.argv()])

    def to_dict(self) -> dict:
        """``{group: {field: value}}``: the whole config, JSON-ready (what ``--config`` reads)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data, source: str = "run config"):
        """The config of a `to_dict`-shaped mapping (any subset; the rest are the defaults);
        raises `RunConfigError` naming `source` and the key for anything else."""
        values = cls.checked_values(data, source)
        return cls(**{group: group_type(**{f.name: values[f.name] for f in
                                           dataclasses.fields(group_type) if f.name in values})
                      for group, group_type in cls.groups().items()})

    @classmethod
    def read_json(cls, path) -> Dict[str, Any]:
        """Field name -> value of a ``--config`` file, checked (`checked_values`)."""
        source = f"{CONFIG_FLAG} {path}"
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            raise RunConfigError(f"{source}: cannot be read ({e.strerror or e})") from e
        except json.JSONDecodeError as e:
            raise RunConfigError(f"{source}: not valid JSON ({e})") from e
        return cls.checked_values(data, source)

    @classmethod
    def checked_values(cls, data, source: str) -> Dict[str, Any]:
        """Field name -> value of a `to_dict`-shaped mapping, each key known and each value of
        its field's type and choices (an int is taken for a float); `RunConfigError` names
        `source` and the key otherwise."""
        groups, settings = cls.groups(), cls.settings()
        if not isinstance(data, dict):
            raise RunConfigError(f"{source}: expected a JSON object of groups "
                                 f"({', '.join(groups)}), got {type(data).__name__}")
        known = [f"{s.group}.{name}" for name, s in settings.items()]
        values = {}
        for group, entries in data.items():
            if group not in groups:
                raise RunConfigError(f"{source}: unknown key {group!r}"
                                     f"{_hint(group, settings, groups)}")
            if not isinstance(entries, dict):
                raise RunConfigError(f"{source}: {group!r} must be an object of settings "
                                     f"(got {type(entries).__name__})")
            for name, value in entries.items():
                key = f"{group}.{name}"
                setting = settings.get(name)
                if setting is None or setting.group != group:
                    raise RunConfigError(f"{source}: unknown key {key!r}"
                                         f"{_hint(name, settings, groups, known, key)}")
                values[name] = _checked(value, setting, f"{source}: {key!r}")
        for names in cls.ONE_OF:
            both = [n for n in names if values.get(n) is not None]
            if len(both) > 1:
                raise RunConfigError(f"{source}: {' and '.join(map(repr, both))} exclude each "
                                     "other; give one")
        return values


@functools.lru_cache(maxsize=None)
def _groups(config_type) -> Dict[str, type]:
    """`RunConfig.groups` of a config class, worked out once (type hints are slow to read)."""
    hints = typing.get_type_hints(config_type)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_type)}


@functools.lru_cache(maxsize=None)
def _settings(config_type) -> Dict[str, _Setting]:
    """`RunConfig.settings` of a config class, worked out once."""
    return config_type._find_settings()


def _hint(name: str, settings, groups, known=(), key: str = "") -> str:
    """' (did you mean ...?)' for an unknown key, and what the config does have."""
    if name in settings:  # a field, in the wrong group or at the top level
        close = [f"{settings[name].group}.{name}"]
    else:
        close = difflib.get_close_matches(key or name, list(known) or list(groups), n=1,
                                          cutoff=0.6)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{guess}; the groups are {', '.join(groups)}"


def _spelled(value) -> str:
    """A setting's value as its flag takes it: a float as short as it reads back exactly."""
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def _number(setting: _Setting) -> Number:
    """The range of an int or float field; a field without one is a programming error."""
    number = setting.field.metadata.get("number")
    if number is None or number.kind is not setting.kind:
        raise TypeError(f"run-config field {setting.field.name!r} ({setting.kind.__name__}) "
                        f"needs option(number=tt_zoo.numbers.Number({setting.kind.__name__}"
                        ", ...)): every numeric flag is range-checked when parsed")
    return number


def _checked(value, setting: _Setting, where: str):
    """`value` if it fits the field (a float field takes an int, as float), else
    `RunConfigError`."""
    kind, choices = setting.kind, setting.field.metadata["choices"]
    if kind is tuple:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise RunConfigError(f"{where} must be a list of strings (got {json.dumps(value)})")
    if value is None:
        if setting.optional:
            return None
    elif kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        if not choices or value in choices:
            return _in_range(value, setting, where)
    elif isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        if not choices or value in choices:
            return _in_range(value, setting, where)
    expected = {bool: "true or false", int: "an integer", float: "a number",
                str: "a string"}[kind]
    if choices:
        expected = f"one of {', '.join(map(json.dumps, choices))}"
    if setting.optional:
        expected += " or null"
    raise RunConfigError(f"{where} must be {expected} (got {json.dumps(value)})")


def _in_range(value, setting: _Setting, where: str):
    """`value` if the field's range (`_number`) takes it, else `RunConfigError`."""
    if setting.kind in (int, float):
        problem = _number(setting).problem(value)
        if problem:
            raise RunConfigError(f"{where} {problem}")
    return value


# ------------------------------------------------------------------ shared run-config groups
# Each is one argument group of `RunConfig` configs; a run subclasses one to add its own fields
# (pretrain's --hard-negatives-dir).

@dataclasses.dataclass(frozen=True)
class TrainedModelArguments:
    """A trained model a run starts from, by registered name or export directory (a run
    subclasses it with its own fields and description)."""

    model: Optional[str] = option(
        None, "a registered model name or an export directory (tt_zoo.load)",
        metavar="NAME_OR_PATH")


@dataclasses.dataclass(frozen=True)
class ComputeArguments:
    """The precision training computes in (tt_zoo.training.precision): bfloat16 for Transformer
    towers on a CPU with a bfloat16 unit (AMX or AVX512-BF16), float32 elsewhere."""

    precision: str = option(
        "auto", "auto: bfloat16 (Keras mixed_bfloat16: float32 weights, bfloat16 matmuls) for "
                "Transformer towers where the CPU has AMX or AVX512-BF16, float32 for "
                "bag-of-words towers and elsewhere (TT_ZOO_PRECISION sets the auto choice); "
                "float32: the switch back. The export holds float32 weights either way",
        choices=PRECISION_CHOICES)


@dataclasses.dataclass(frozen=True)
class HardNegativeArguments:
    """BM25 hard negatives beside the in-batch ones (Multi-task DPR's hard confounders,
    Maillard et al. 2021; tt_zoo.mining.hard_negatives)."""

    hard_negatives: int = option(
        0, "H BM25 hard negatives per training pair (finetune: per question, skipping the gold "
           "and answer-holding candidates, or mined by --hard-negatives-from) beside the "
           "in-batch ones (0: none)", metavar="H",
        number=numbers.count(low=0, high=1000))
    hard_negatives_depth: Optional[int] = option(
        None, "BM25 results searched per query when mining (default "
              "tt_zoo.mining.hard_negatives.DEFAULT_DEPTH)", number=numbers.count())


@dataclasses.dataclass(frozen=True)
class SequenceLengthArguments:
    """Token budgets of the towers (Chang et al. 2020, Sec. 5.1: query 64, document 288)."""

    query_length: Optional[int] = option(
        None, "query token budget (default: the model's own: the registry's for a variant, an "
              "export's for a loaded model; paper: 64)", number=numbers.TOKEN_BUDGET)
    document_length: Optional[int] = option(
        None, "document token budget (default: the model's own: the registry's for a variant, "
              "an export's for a loaded model; paper: 288)", number=numbers.TOKEN_BUDGET)


@dataclasses.dataclass(frozen=True)
class PairArguments:
    """Training pairs written by tt-zoo make-pairs, tokenized once and cached."""

    pairs: Optional[str] = option(None, "a pair directory written by tt-zoo make-pairs")
    max_pairs: Optional[int] = option(None, "train on the first N pairs of --pairs only",
                                      number=numbers.count())
    token_cache: str = option(
        os.path.join("runs", "token_cache"),
        "where the pairs, tokenized once (train-term-weights: the documents and their targets), "
        "are kept for later runs ('': nowhere)")


@dataclasses.dataclass(frozen=True)
class TrainOutputArguments:
    """Checkpoints (a killed or finished run resumes), logs and the export."""

    export: Optional[str] = option(None, "export directory for the trained model")
    workdir: Optional[str] = option(
        None, "checkpoints, logs and train_summary.json (default: runs/pretrain/VARIANT; "
              "train-term-weights: runs/term_weights/NAME)")
    checkpoint_every: int = option(
        100, "steps between checkpoints (a killed run resumes from the last)",
        number=numbers.count())
    no_progress: bool = option(False, NO_PROGRESS_HELP)
