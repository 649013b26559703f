"""What several commands share: where the data and the vocabulary are by default, ReQA
loading (one clear error when SQuAD cannot be had). The score tables (Chang et al. 2020, Table
3's columns) live in `tt_zoo.evaluation.tables`, the run-config groups of more than one training
run (hard negatives, token budgets, pairs, checkpoints and export) in
`tt_zoo.configs.run_config`; both are named here too.

Default paths never point inside an installed package: the data folder is ``$TT_ZOO_DATA``,
else ``../shared/data`` beside the git clone tt_zoo runs from, else ``$TT_ZOO_HOME/data`` (the
cache, ``~/.cache/tt_zoo/data``); a command that needs a file there and does not find it says
which file, and which flag or variable sets it.
"""

from __future__ import annotations

import os
import pathlib
import socket
import sys
import urllib.parse
from typing import Optional

from tt_zoo import cache
from tt_zoo.cli.parsing import exit_missing
from tt_zoo.errors import TtZooError
from tt_zoo.training.multi_task_tasks import SQUAD_DEV  # the shared data's SQuAD v1.1 dev
from tt_zoo.zoo.registry import SAVED_MODELS_DIR

# The paper's model, which `tt-zoo demo` shows beside the default search model.
FLAGSHIP = "ict_bfs_wlp_512"
# The model `tt-zoo search` and `tt-zoo index` use unless told otherwise: the static model
# (mean-pooled token vectors, distilled from all-MiniLM-L6-v2 and trained on QA pairs), which
# retrieves better than every shipped model of the paper's towers and encodes a query in
# milliseconds (README's table).
DEFAULT_SEARCH_MODEL = "multitask_static_minilm_l6_384"
# The sample corpus the examples use: SQuAD dev paragraphs in BEIR's layout (examples/).
SAMPLE_CORPUS = "examples/squad_sample"
DATA_ENV = "TT_ZOO_DATA"
# Where tt_zoo's package sits: the root of a git clone when it runs from one (README.md,
# saved_models/: what `tt-zoo reproduce` updates), else site-packages, which no default may
# name (see `clone_root`). Work folders (runs/, results/) are relative to the current directory.
CLONE_ROOT = SAVED_MODELS_DIR.parent
# The vocabulary the project learned from Wikispeedia (`tt-zoo learn-vocab`), in a clone.
PROJECT_VOCAB = SAVED_MODELS_DIR / "vocab" / "vocab.txt"
_OFFLINE_ENV = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
_PROBE_TIMEOUT_S = 3.0


class MissingDataError(TtZooError):
    """A data file a command needs is absent and cannot be fetched; the message names the file
    and the flag (or variable) that sets it."""


def clone_root() -> Optional[pathlib.Path]:
    """The git clone tt_zoo runs from (its root holds saved_models/ and setup.cfg), else None
    (an installed wheel)."""
    if (CLONE_ROOT / "saved_models").is_dir() and (CLONE_ROOT / "setup.cfg").is_file():
        return CLONE_ROOT
    return None


def default_data_dir() -> pathlib.Path:
    """$TT_ZOO_DATA, else ../shared/data beside the git clone tt_zoo runs from, else the
    cache's data folder ($TT_ZOO_HOME/data, default ~/.cache/tt_zoo/data)."""
    if os.environ.get(DATA_ENV):
        return pathlib.Path(os.environ[DATA_ENV]).expanduser()
    root = clone_root()
    if root is not None:
        return root.parent / "shared" / "data"
    return cache.home() / "data"


def default_squad_path() -> str:
    return str(default_data_dir() / SQUAD_DEV)


def default_vocab_path() -> str:
    """The project's learned vocabulary in a git clone, else the BERT uncased one in the data
    folder ($TT_ZOO_DATA/bert-vocab/vocab.txt)."""
    if clone_root() is not None and PROJECT_VOCAB.is_file():
        return str(PROJECT_VOCAB)
    return str(default_data_dir() / "bert-vocab" / "vocab.txt")


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in _OFFLINE_ENV)


def _hub_reachable() -> bool:
    """Whether the Hugging Face hub ($HF_ENDPOINT) answers a TCP connection within a few
    seconds: without it, `datasets` would retry for minutes before failing."""
    url = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((url.hostname, url.port or 443), _PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def load_reqa(path: Optional[str] = None, flag: Optional[str] = "--squad"):
    """ReQA from the SQuAD file a user named (which must exist), or by default from
    $TT_ZOO_DATA/squad/dev-v1.1.json, else SQuAD validation from Hugging Face `datasets`.

    The Hugging Face fallback is tried only from the `datasets` cache when HF_DATASETS_OFFLINE
    or HF_HUB_OFFLINE is set, and only when the hub answers otherwise; when it fails,
    `MissingDataError` names the missing file and `flag` (the option that names the file;
    None: the command has none) in one line.

    Raises:
      FileNotFoundError: `path` given and absent.
      MissingDataError: no file, and no SQuAD from Hugging Face.
    """
    from tt_zoo.evaluation import reqa as reqa_lib  # noqa: PLC0415 (after argparse)

    if path is not None:
        if not pathlib.Path(path).is_file():
            raise FileNotFoundError(f"SQuAD file {path} does not exist.")
        return reqa_lib.build_reqa(path)
    default = default_squad_path()
    if pathlib.Path(default).is_file():
        return reqa_lib.build_reqa(default)
    todo = (f"{f'Pass {flag} PATH, or set' if flag else 'Set'} {DATA_ENV} to a folder holding "
            f"{SQUAD_DEV.as_posix()}.")
    offline = _offline()
    if not offline and not _hub_reachable():
        raise MissingDataError(f"SQuAD v1.1 dev not found: {default} does not exist and Hugging "
                               f"Face, the fallback, is unreachable. {todo}")
    if not offline:  # a download: say why the wait
        print(f"{default} is absent; loading SQuAD validation from Hugging Face datasets.",
              file=sys.stderr)
    try:
        return reqa_lib.load_squad_from_hf("validation")
    except Exception as e:  # noqa: BLE001 (datasets raises many kinds; all mean "not had")
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise MissingDataError(
            f"SQuAD v1.1 dev not found: {default} does not exist and Hugging Face datasets "
            f"failed{' (offline: its cache only)' if offline else ''} with "
            f"{type(e).__name__}{': ' + first if first else ''}. {todo}") from e


def load_model(name_or_path: str, command: str):
    """`tt_zoo.load(name_or_path)`, or exit with its error in one message naming the command
    (an unknown name with close matches, weights not shipped with the command that trains
    them, a damaged export, a failed download)."""
    import tt_zoo  # noqa: PLC0415 (TensorFlow: after argparse)

    return loaded_or_exit(tt_zoo.load, name_or_path, command)


def loaded_or_exit(load, path: str, command: str):
    """``load(path)`` (`tt_zoo.load`, `tt_zoo.load_index`), or exit with its error in one line
    naming the command."""
    try:
        return load(path)
    except KeyError as e:
        sys.exit(f"tt-zoo {command}: {e.args[0] if e.args else e}")
    except (FileNotFoundError, TtZooError) as e:
        sys.exit(f"tt-zoo {command}: {e}")


def run_training(command: str, train, config, argv: list, errors) -> dict:
    """`train(config, data_dir=default_data_dir(), argv=argv)`, a training run's library entry
    point, logging to stderr; a run that cannot go on (one of `errors`) exits in one line naming
    the command. `argv`: the command line, recorded."""
    import logging  # noqa: PLC0415

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        return train(config, data_dir=default_data_dir(), argv=argv)
    except errors as e:
        sys.exit(f"tt-zoo {command}: {e}")


def check_query_weight_flags(p, args) -> None:
    """Exits (``p.error``, naming the command's flags) when --query-idf, --query-mask-weight or
    --query-beta (if the command has it) is not a finite number >= 0
    (`query_token_weights.check_weight_settings`)."""
    from tt_zoo.modeling.query_token_weights import check_weight_settings  # noqa: PLC0415

    has_beta = hasattr(args, "query_beta")
    try:
        check_weight_settings(args.query_idf, args.query_mask_weight,
                              args.query_beta if has_beta else 0.0)
    except ValueError as e:
        p.error(f"--query-idf / --query-mask-weight{' / --query-beta' if has_beta else ''}: {e}")


def check_vocab_file(p, args) -> None:
    """Sets ``args.vocab`` to `default_vocab_path` when no ``--vocab`` was given, and exits
    naming the file unless it exists."""
    args.vocab = args.vocab or default_vocab_path()
    if not pathlib.Path(args.vocab).is_file():
        exit_missing(p, f"--vocab: vocabulary file {args.vocab} does not exist "
                        "(pass --vocab PATH or set TT_ZOO_DATA)")


def check_init_vocab(p, args) -> None:
    """``--init none`` builds towers over ``--vocab`` (default: `default_vocab_path`), which
    must exist (`check_vocab_file`); a loaded model carries its vocabulary, so ``--vocab`` is
    refused beside it."""
    if args.init == "none":
        check_vocab_file(p, args)
    elif args.vocab:
        p.error("--vocab is only for --init none (a loaded model carries its vocabulary)")


def check_model_export_target(p, path: str, flag: str) -> None:
    """Exits naming `flag` unless a model export may be written to `path` (absent, empty or an
    earlier export): checked before training, so a run never ends in a refused write."""
    from tt_zoo.atomic_io import check_replaceable  # noqa: PLC0415
    from tt_zoo.artifacts.export import is_model_export  # noqa: PLC0415

    try:
        check_replaceable(path, is_replaceable=is_model_export, what="tt_zoo model export")
    except FileExistsError as e:
        p.error(f"{flag}: {e}")


def question_sets_or_exit(names, data, prefix: str = ""):
    """The ODQA question sets `names` (named sets under `data`/odqa or files,
    `tt_zoo.data.question_sets.load_question_set`), each skipped question said on stderr; a
    set that cannot be read exits with "`prefix`--questions: why"."""
    from tt_zoo.data.question_sets import OdqaFormatError, load_question_set  # noqa: PLC0415

    try:
        sets = [load_question_set(name, data) for name in names]
    except OdqaFormatError as e:
        sys.exit(f"{prefix}--questions: {e}")
    for s in sets:
        for qid, why in s.skipped:
            print(f"{s.name}: skipped question {qid}: {why}", file=sys.stderr)
    return sets


def check_new_file(p, path: str, overwrite: bool, flag: str = "--output",
                   suffix: Optional[str] = None) -> None:
    """Exits through ``p.error``, naming `flag`, unless `path` can be written: a `suffix` file
    (when given) that is no folder, and that does not exist unless `overwrite`."""
    if suffix and not path.endswith(suffix):
        p.error(f"{flag} must be a {suffix} file (got {path!r})")
    target = pathlib.Path(path)
    if target.is_dir():
        p.error(f"{flag}: {path} is a directory; give a file path")
    if target.exists() and not overwrite:
        p.error(f"{flag}: {path} exists; pass --overwrite to replace it")


def progress_bar(no_progress: bool):
    """The `show_progress_bar` of the encoders and `ZooModel.index` for a command's
    --no-progress: off, or None (their default: a bar when a call runs more than a few
    batches)."""
    return False if no_progress else None
