"""Shipping an export under a registered name, and recording its measured tables in its card.

What ships is three things kept in step: the export in ``saved_models/<name>/`` (its files
pinned by the sha256 of their manifest, `tt_zoo.manifest`), its entry in
``tt_zoo/zoo/shipped_models.json`` (kind, artifact, that sha256, the release URL, provenance,
a few headline numbers; `tt_zoo.zoo.registry.read_shipped`; how it was trained is its recipe,
``tt_zoo/zoo/recipes/``, which `tt-zoo ship` writes), and its ``MODEL_CARD.md`` with the measured
tables (``metadata.json``'s ``metrics``). Any kind ships the
same way (`tt_zoo.modeling.kinds.KINDS`: two-tower, late interaction, term weights).

- `ship(source, name)`: verifies the export, checks its kind and size against the registered
  name, copies it to saved_models/<name> atomically (nothing to copy when it is already there)
  and writes the name's entry.
- `record_tables(name_or_path, tables, source=...)`: measured tables into the metadata and the
  card, replacing those the same source recorded before. metadata.json and the card are not in
  the file manifest, so the weights' sha256 is unchanged; the shipped entry's sha256 is set to
  the export's all the same, so the two never disagree.
- `reexport(name_or_path, reason)`: the export written again from its own weights by today's
  exporter (e.g. to add a signature an older exporter did not write), the card kept and a note
  of when and why added; the shipped entry gets the new sha256 and keeps its numbers.
- `benchmark_tables` / `record_results`: the tables of a results JSON of the text benchmarks
  (`benchmarks/text_rows.py`: benchmarks/late_interaction.py, benchmarks/term_weights.py), the
  model's rows with BM25's beside them, per benchmark and question set, with the question and
  candidate counts in each title.

`tt-zoo ship` (`tt_zoo.cli.ship`) runs these; `python tests/golden/regenerate.py NAME` then pins
the model's outputs.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import shutil
import tempfile
from typing import Callable, Dict, Mapping, Optional, Tuple, Union

from tt_zoo.atomic_io import read_json, write_directory, write_json
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER
from tt_zoo.artifacts import float16_storage
from tt_zoo.artifacts.export import (METADATA_FILE, is_model_export, update_metadata,
                                   verify_export)
from tt_zoo.artifacts.model_card import Measurement, ModelCard, PairSet, Reexport, table_rows
from tt_zoo.artifacts import download

# The rows of a text-benchmark results JSON that are a model's own, by the model's kind (a
from tt_zoo.zoo import loading, registry

# The rows of a text-benchmark results JSON that are a model's own, by the model's kind (a
# two-tower model's rows are labelled with its name).
ROW_MARKERS = {LATE_INTERACTION: "ColBERT", TERM_WEIGHTS: "HDCT"}
BASELINE_ROW = "BM25"
# Each benchmark's headline number for the shipped entry's metrics (the README's columns).
_HEADLINE = {"reqa": ("ReQA", "R@100"), "open_domain_reqa": ("open-domain ReQA", "R@100"),
             "odqa": ("ODQA validation", "R@20")}
# The results settings naming the model a text benchmark measured.
_MODEL_SETTINGS = ("colbert", "term_model")


# -- ship -------------------------------------------------------------------------------------

def ship(source, name: str, *, provenance: Optional[str] = None, float16: bool = False,
         share_with: Optional[str] = None, saved_models=None,
         shipped_file=None, log: Callable[[str], None] = print) -> dict:
    """Copies the export at `source` to ``saved_models/<name>`` and lists it as shipped.

    Args:
      source: an export directory of any kind (in place when it is saved_models/<name>).
      name: a registered name of the export's kind (`tt_zoo.zoo.registry.get_spec`).
      provenance: the entry's training data and license line (default: from the metadata).
      float16: ship the weights stored in float16 (`tt_zoo.artifacts.float16_storage`: half the
        bytes; `tt_zoo.load` materialises the float32 SavedModel); `source` is a float32
        export, and may be saved_models/<name> itself. Its cost in recall is measured apart
        (``python -m benchmarks.precision_cost --compare storage``). A `source` stored in
        float16 already is shipped again from its materialised float32 copy: the same float16
        arrays, written by today's code (e.g. to pin what an older tt_zoo left unpinned).
      share_with: with `float16`, the registered name of a shipped model whose arrays the
        export holds too (a query-adapted model's base): they are read from it, not stored
        again. A path is refused: the artifact records the name, and a path moves.
      saved_models, shipped_file: default the registry's (`SAVED_MODELS_DIR`, `SHIPPED_FILE`).

    Returns:
      the shipped entry written (also registered in this process).

    Raises:
      ArtifactError: `source` is not a complete, undamaged export.
      TtZooError: its kind or size is not the registered name's, or saved_models/<name> holds
        another model's export.
    """
    spec = registry.get_spec(name)
    if share_with is not None and not float16:
        raise TtZooError("share_with: arrays are shared by a float16 artifact; give float16 too.")
    _check_shipped_name(share_with)
    base = loading.locate_artifact(share_with)[0] if share_with is not None else None
    source = pathlib.Path(source)
    card = ModelCard.from_dict(verify_export(source))
    source_sha256 = card.provenance.sha256
    if float16 and float16_storage.is_float16(card.to_dict()):
        source = loading.loadable(source)  # its float32 copy: cast back to the same arrays
    kind = card.artifact_kind
    if kind != spec.kind:
        raise TtZooError(f"{source} is a {kind} export; {name!r} is registered as a "
                         f"{spec.kind} variant (tt_zoo.list_models(kind={kind!r}) lists the "
                         "names it may ship as).")
    if kind != TERM_WEIGHTS and card.architecture.embedding_dim != spec.embedding_dim:
        raise TtZooError(f"{source} has embedding_dim {card.architecture.embedding_dim}; "
                         f"{name!r} is registered with {spec.embedding_dim}.")
    dest = pathlib.Path(saved_models or registry.SAVED_MODELS_DIR) / name
    if source.resolve() != dest.resolve() or float16:
        current = ModelCard.from_dict(read_json(dest / METADATA_FILE) or {}).name
        if dest.exists() and current not in (name, card.name):
            raise TtZooError(f"{dest} holds an export of {current!r}, not of {name!r}; move it "
                             "away first.")

        def copy(staging: pathlib.Path) -> None:
            if float16:
                float16_storage.write_float16(source, staging, share_with=share_with,
                                              base=base)
            else:
                shutil.copytree(source, staging, dirs_exist_ok=True)

        write_directory(dest, copy, is_replaceable=is_model_export, what="tt_zoo model export")
        log(f"copied {source} to {dest}{' with its weights in float16' if float16 else ''}")
    update_metadata(dest, name=name)  # the card names it as it loads, rendered as today
    card = ModelCard.from_dict(verify_export(dest))
    sha256 = card.provenance.sha256
    shipped_file = pathlib.Path(shipped_file or registry.SHIPPED_FILE)
    shipped = read_json(shipped_file) or {}
    previous = shipped.get(name, {})
    entry = {"kind": kind, "artifact": name, "sha256": sha256,
             "url": download.release_url(name),
             "provenance": provenance or previous.get("provenance") or _provenance(card),
             # headline numbers measured on these weights stay (on the float32 export a
             # float16 one was cast from too: its card says so); on other weights they go
             "metrics": previous.get("metrics", {}) if previous.get("sha256") in (
                 sha256, source_sha256,
                 getattr(card.provenance.storage, "float32_sha256", None)) else {}}
    shipped[name] = entry
    _write_shipped(shipped_file, shipped, name)
    log(f"shipped {name} ({kind}): {dest} (sha256 {sha256[:12]}…), listed in "
        f"{shipped_file}")
    return entry


def _check_shipped_name(share_with: Optional[str]) -> None:
    """Raises `TtZooError` unless `share_with` is None or a registered name with shipped
    weights (what a float16 artifact may record as the model it shares arrays with)."""
    if share_with is None:
        return
    name = registry.registered_name(share_with)
    if name is None or not registry.get_spec(name).shipped:
        raise TtZooError(f"share_with {share_with!r} is not a registered, shipped model: a "
                         "shipped artifact reads the arrays it shares from a model it names, "
                         "found as tt_zoo.load finds it (a path would not be where it was on "
                         "another machine). Ship that model first and give its name "
                         "(tt_zoo.list_models(shipped_only=True)).")


def _write_shipped(shipped_file: pathlib.Path, shipped: dict, name: str) -> None:
    """Writes the shipped list and registers `name`'s entry in this process (read back through
    `read_shipped`, so a malformed entry fails here, not at the next import)."""
    write_json(shipped_file, shipped, indent=2, sort_keys=True)
    registry.register_shipped(name, **registry.read_shipped(shipped_file)[name])


def _given(value, default):
    """`value`, or `default` when the card does not record it."""
    return default if value is None else value


def _provenance(card: ModelCard) -> str:
    """A provenance line from the card: data, pairs, schedule, starting point, license."""
    run, lineage = card.training, card.lineage
    pairs = run.pairs or PairSet()
    tasks = "+".join((pairs.make_pairs_config or {}).get("tasks", []))
    data = _given(run.training_data, "training data not recorded")
    if tasks:
        data = f"{tasks} {data}"
    if pairs.num_pairs:
        first = f", the first {pairs.max_pairs:,}" if pairs.max_pairs else ""
        data += f" ({pairs.num_pairs:,} pairs{first})"
    parts = [data, f"{run.train_steps or 0:,} steps x {_given(run.batch_size, '?')} on CPU"]
    start = ((lineage.warm_start and lineage.warm_start.source)
             or (lineage.init and lineage.init.name))
    if start:
        parts.append(f"from {start}'s encoder")
    if card.license:
        parts.append(card.license)
    return "; ".join(parts)


# -- re-export --------------------------------------------------------------------------------

def reexport(name_or_path, reason: str, *, shipped_file=None,
             log: Callable[[str], None] = print) -> dict:
    """Writes an export again, in place, from its own weights with today's exporter.

    For an export made before the exporter gained something (the three shipped exports of
    2026-11-22 predate the ``serving_default`` signature). The weights are read from the export
    and written back unchanged (checked: every array equal after reading the new files back);
    the card is kept (name, training, command, measured tables, provenance); what the exporter
    derives (signatures, versions, format_version, file manifest, sha256, exported) is the new
    files', and ``reexported`` gains a note: date, reason, the previous sha256 and export date.
    A shipped export's entry gets the new sha256 and keeps its headline numbers (same weights).
    Its golden test (tests/test_shipped_models.py) then shows the outputs unchanged.

    Args:
      name_or_path: a shipped name or an export directory of any kind.
      reason: why, for the card (e.g. "to add the serving_default signature").
      shipped_file: default the registry's.

    Returns:
      the metadata written.
    """
    from tt_zoo._version import __version__
    from tt_zoo.artifacts import export as export_lib, term_weight_export

    path, spec = export_path(name_or_path)
    metadata = verify_export(path, spec.sha256 if spec else None)
    if float16_storage.is_float16(metadata):
        raise TtZooError(f"{path} stores its weights in float16 ({float16_storage.FLOAT16_DIR}/)"
                         "; re-export the float32 export it was cast from, then ship that with "
                         "--float16.")
    card = ModelCard.from_dict(metadata)
    provenance, before_sha256 = card.provenance, card.provenance.sha256
    if card.artifact_kind == TERM_WEIGHTS:
        read, write = (term_weight_export.load_term_weight_model,
                       term_weight_export.export_term_weight_model)
    else:
        read, write = export_lib.load_keras_model, export_lib.export_saved_model
    model = read(path)
    note = Reexport(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        reason=reason, weights="unchanged", by=f"tt_zoo {__version__}",
        previous_sha256=before_sha256, previous_exported=provenance.exported)
    provenance.reexported = list(provenance.reexported or []) + [note]
    provenance.files = provenance.sha256 = None  # the new files'
    with tempfile.TemporaryDirectory(prefix="tt_zoo_reexport_") as tmp:
        staged = pathlib.Path(tmp) / path.name
        write(model, staged, card.to_dict())
        arrays = _same_weights(model, read(staged), staged)
        write_directory(path, lambda staging: shutil.copytree(staged, staging,
                                                              dirs_exist_ok=True),
                        is_replaceable=is_model_export, what="tt_zoo model export")
    meta = verify_export(path)
    after = ModelCard.from_dict(meta)
    log(f"re-exported {path} from its own weights (weights unchanged: {arrays} arrays equal); "
        f"sha256 {before_sha256[:12]}… -> {after.provenance.sha256[:12]}…; signatures "
        f"{', '.join(after.architecture.signatures or [])}")
    if spec is not None:
        shipped_file = pathlib.Path(shipped_file or registry.SHIPPED_FILE)
        shipped = read_json(shipped_file) or {}
        shipped[spec.name]["sha256"] = after.provenance.sha256
        _write_shipped(shipped_file, shipped, spec.name)
        log(f"{spec.name}: the shipped entry in {shipped_file} records the new sha256")
    return meta


def _same_weights(model, reread, where) -> int:
    """How many weight arrays `model` and the model read back from `where` share; raises
    `TtZooError` when any differs (a re-export must not change the weights)."""
    import numpy as np  # noqa: PLC0415
    ours, theirs = model.get_weights(), reread.get_weights()
    if len(ours) != len(theirs) or not all(
            a.shape == b.shape and np.array_equal(a, b) for a, b in zip(ours, theirs)):
        raise TtZooError(f"The weights read back from {where} differ from the export's own "
                         "(the re-export is not written).")
    return len(ours)


# -- record measured tables -------------------------------------------------------------------

def export_path(name_or_path, saved_models=None
                ) -> Tuple[pathlib.Path, Optional[registry.ModelSpec]]:
    """The export folder of a shipped name or a path, and the shipped spec it is (None for a
    folder no shipped entry names); shipped exports are in `saved_models` (default the
    registry's, `SAVED_MODELS_DIR`)."""
    saved_models = pathlib.Path(saved_models or registry.SAVED_MODELS_DIR)
    path = pathlib.Path(name_or_path)
    if not path.is_dir():
        spec = registry.get_spec(str(name_or_path))
        if not spec.shipped or not (saved_models / spec.artifact).is_dir():
            raise TtZooError(f"{name_or_path!r} has no export in {saved_models}: "
                             "ship it first (tt-zoo ship NAME --export PATH).")
        return saved_models / spec.artifact, spec
    for spec in registry.REGISTRY.values():
        if spec.shipped and (saved_models / spec.artifact).resolve() == path.resolve():
            return path, spec
    return path, None


def record_tables(name_or_path, tables: Mapping[str, Mapping], *, source: str,
                  results: Optional[str] = None, summary: Optional[Mapping[str, float]] = None,
                  saved_models=None, shipped_file=None,
                  log: Callable[[str], None] = print) -> dict:
    """Writes measured tables into an export's metadata and re-renders its MODEL_CARD.md.

    Args:
      name_or_path: a shipped name or an export directory (of any kind).
      tables: title -> table: ``{column: value}`` (one row) or ``{row label: {column: value}}``
        (`tt_zoo.artifacts.model_card.table_rows`); the card prints each under "## Measured quality"
        (`tt_zoo.artifacts.card_rendering`).
      source: what measured them (e.g. "benchmarks/late_interaction.py"): the tables it recorded
        before are replaced, others stay; ``metadata["measured_by"][source]`` lists them. A
        table of rows whose title another source recorded too (titles are shared on purpose:
        one wording a measurement) takes the new rows over its rows of the same label and keeps
        the others, and a one-row table leaves it as it is (`merged_table`): a benchmark with
        fewer rows never erases a richer table.
      results: the results file they come from, named in the card.
      summary: headline numbers for the shipped entry's ``metrics`` (replacing the ones this
        source recorded before).
      saved_models, shipped_file: default the registry's (`ship`'s).

    Returns:
      the metadata written. The export's files are verified first; the shipped entry (when
      the export is a shipped one) gets the export's sha256.
    """
    if not tables or not all(isinstance(t, Mapping) and t for t in tables.values()):
        raise ValueError(f"tables must map each title to a non-empty table (got {tables!r}).")
    path, spec = export_path(name_or_path, saved_models)
    evaluation = ModelCard.from_dict(verify_export(path)).evaluation
    metrics = dict(evaluation.metrics or {})
    measured_by = dict(evaluation.measured_by or {})
    before = measured_by.get(source) or Measurement()
    shared = {title for other, m in measured_by.items() if other != source
              for title in (m.tables or [])}
    for title in before.tables or []:
        if title not in shared:
            metrics.pop(title, None)
    for title, table in tables.items():
        table = dict(table)
        metrics[title] = merged_table(metrics.get(title) if title in shared else None, table)
        if "" in table_rows(table) and metrics[title] != table:
            log(f"{title!r}: kept the table of rows another source recorded under this title")
    measured_by[source] = Measurement(
        tables=list(tables), recorded=datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"), summary=sorted(summary or {}),
        results=_repo_relative(results) if results else None)
    meta = update_metadata(path, metrics=metrics, measured_by=measured_by)
    sha256 = ModelCard.from_dict(meta).provenance.sha256
    log(f"recorded {len(tables)} table(s) from {source} in {path / 'MODEL_CARD.md'}")
    if spec is not None:
        shipped_file = pathlib.Path(shipped_file or registry.SHIPPED_FILE)
        shipped = read_json(shipped_file) or {}
        entry = shipped[spec.name]
        if entry.get("sha256") != sha256:
            log(f"{spec.name}: the shipped entry's sha256 {str(entry.get('sha256'))[:12]}… is "
                f"now the export's {sha256[:12]}… (regenerate its golden outputs)")
        entry["sha256"] = sha256
        entry_metrics = {k: v for k, v in entry.get("metrics", {}).items()
                         if k not in (before.summary or [])}
        entry_metrics.update(summary or {})
        entry["metrics"] = entry_metrics
        _write_shipped(shipped_file, shipped, spec.name)
    return meta


def merged_table(earlier, table: Mapping) -> dict:
    """`table` over `earlier`, a same-title table another source recorded. Two tables of rows
    (`tt_zoo.artifacts.model_card.table_rows`): earlier's rows with the new rows replacing those
    of the same label, in earlier's order, new labels last. A one-row table over a table of rows:
    the rows stay (the same title is the same measurement, and the rows hold the model's own
    row beside BM25's and the fusions'). Otherwise `table`."""
    before, rows = table_rows(earlier), table_rows(table)
    if before is None or "" in before:  # nothing, or one row: the new table replaces it
        return dict(table)
    return {**before, **rows} if "" not in rows else dict(before)


def _repo_relative(path) -> str:
    """`path` relative to the clone (results/x.json) when inside it, else as given."""
    try:
        return pathlib.Path(path).resolve().relative_to(
            registry.SAVED_MODELS_DIR.parent.resolve()).as_posix()
    except ValueError:
        return str(path)


def _percent(value: float) -> float:
    return round(100 * float(value), 2)


def benchmark_tables(out: dict, rows: Union[str, Callable[[str], bool]],
                     baseline: Optional[str] = BASELINE_ROW, *, regime: str = "zero-shot",
                     trained_on_reqa: bool = False) -> Dict[str, Dict[str, dict]]:
    """A model card's tables from a text-benchmark results JSON (`benchmarks/text_rows.py`'s
    ``run``): per benchmark and question set ("all" first), the rows whose label contains
    `rows` (or for which it is true) and the `baseline` row, R@k (%) (+ MRR for ReQA), titled
    with the question and candidate counts. Benchmarks without such a row are left out.
    `regime` says how the model met the questions ("zero-shot", or e.g. "after multi-task
    training on webquestions + reqa"); `trained_on_reqa` marks ReQA's all-questions tables as
    holding questions the model trained on (its split's test part is the one to read)."""
    mine = (lambda label: rows in label) if isinstance(rows, str) else rows
    ks = out.get("ks") or [1, 5, 10, 20, 50, 100]
    tables = {}
    for bench, results in out.get("results", {}).items():
        chosen = {label: row for label, row in results.items() if mine(label)}
        if not chosen:
            continue
        if baseline in results:
            chosen = {baseline: results[baseline], **chosen}
        described = out["benchmarks"][bench]
        columns = [f"R@{k}" for k in ks] + (["MRR"] if bench != "odqa" else [])
        sets = list(next(iter(chosen.values()))["sets"])
        for set_name in (["all"] if "all" in sets else []) + [s for s in sets if s != "all"]:
            first = next(iter(chosen.values()))["sets"][set_name]
            title = _table_title(bench, described, set_name, first, regime)
            if trained_on_reqa and bench != "odqa" and set_name == "all":
                title = title.replace(" (%)", ", including the questions it trained on (%)")
            tables[title] = {
                label: {c: _percent(row["sets"][set_name][c]) for c in columns
                        if c in row["sets"][set_name]}
                for label, row in chosen.items()}
    return tables


def _table_title(bench: str, described: dict, set_name: str, counts: dict,
                 regime: str = "zero-shot") -> str:
    """The wording of the cards' other tables (`tt_zoo.evaluation.odqa.card_tables`, the
    reproduce stage's ReQA tables), with the question and candidate counts."""
    if bench == "odqa":
        from tt_zoo.evaluation.odqa import SET_DESCRIPTIONS
        source = pathlib.Path(str(described.get("source", ""))).name.capitalize()
        return (f"ODQA answer recall {regime}, {SET_DESCRIPTIONS.get(set_name, set_name)}, "
                f"{counts['answerable']:,} answerable of {counts['num_questions']:,} questions, "
                f"{described['num_passages']:,} {described.get('passage_words', 100)}-word "
                f"{source} passages (%)")
    from tt_zoo.evaluation.text_benchmarks import split_label, split_part

    what = ("all questions" if set_name == "all"
            else f"{split_part(set_name)} part of the {split_label(set_name)} split")
    name = "ReQA-SQuAD(dev)" if bench == "reqa" else "Open-domain ReQA"
    return (f"{name} {regime}, {what} ({counts['num_questions']:,} questions, "
            f"{described['num_candidates']:,} candidates) (%)")


def record_results(name_or_path, out: dict, *, rows: Optional[str] = None,
                   results_path=None, shipped_file=None,
                   log: Callable[[str], None] = print) -> dict:
    """Records a text-benchmark run's tables of one model (`benchmark_tables`) in its card, with
    each benchmark's headline number of each of its rows in the shipped entry (`record_tables`).

    `rows`: the label text of the model's rows (default by its kind, `ROW_MARKERS`, or its name
    for a two-tower model). The card takes every row holding it (fusion rows too); the shipped
    entry's headline numbers take every such row of a kind's marker, but only the row labelled
    exactly with the name when the label is the model's name. A smoke run, a run of another
    model (by sha256, when the results name a folder or shipped name that resolves), or one
    without such rows raises `TtZooError`."""
    path, _ = export_path(name_or_path)
    card = ModelCard.from_dict(json.loads((path / METADATA_FILE).read_text(encoding="utf-8")))
    settings = out.get("settings") or {}
    where = results_path or out.get("generator", "the results")
    if settings.get("smoke"):
        raise TtZooError(f"{where} is a smoke run (--limit-questions / --limit-articles): its "
                         "numbers are not the benchmark's, and are not recorded.")
    _check_same_model(settings, card, where, log)
    marker = rows or ROW_MARKERS.get(card.artifact_kind) or card.name
    if rows and card.artifact_kind == TWO_TOWER and rows != card.name:
        # the model's rows under the name it ships as (the run named its export otherwise)
        out = {**out, "results": {bench: {label.replace(rows, card.name): row
                                          for label, row in results.items()}
                                  for bench, results in out.get("results", {}).items()}}
        marker = card.name
    run = card.training.multi_task if card.training is not None else None
    trained_on = [t.name for t in (run.tasks or [])] if run is not None else []
    tables = benchmark_tables(
        out, marker, regime=_regime(card, trained_on), trained_on_reqa="reqa" in trained_on)
    if not tables:
        raise TtZooError(f"{where} has no row labelled with {marker!r} (rows: "
                         f"{sorted({r for res in out.get('results', {}).values() for r in res})}).")
    return record_tables(path, tables, source=out.get("generator", "benchmark"),
                         results=str(results_path) if results_path else None,
                         summary=headline_numbers(out, marker, own_row_only=marker == card.name,
                                                  trained_on_reqa="reqa" in trained_on),
                         shipped_file=shipped_file, log=log)


def _regime(card: ModelCard, trained_on) -> str:
    """How the card's model met the benchmark's questions, for its tables' titles: after a
    multi-task run's tasks, after query adaptation on its questions, else zero-shot."""
    if trained_on:
        return "after multi-task training on " + " + ".join(trained_on)
    if card.lineage.document_encoder is not None:  # tt-zoo adapt-queries
        from tt_zoo.data.question_sets import TRAIN  # noqa: PLC0415 (adapt-queries' default)
        data = (card.training.run_config or {}).get("data", {}) if card.training else {}
        return "after query adaptation on " + " + ".join(data.get("questions") or TRAIN)
    return "zero-shot"


def headline_numbers(out: dict, marker: str, *, own_row_only: bool,
                     trained_on_reqa: bool = False) -> Dict[str, float]:
    """A shipped entry's headline numbers from a text-benchmark run: each benchmark's
    headline metric of every row whose label holds `marker` (one per search setting), or with
    `own_row_only` (a model named by its name) of the row labelled `marker` only (not
    "RRF(BM25, name)": the card keeps those). On all questions, but for a model trained on the
    ReQA split's training questions (`trained_on_reqa`) ReQA's and open-domain ReQA's come
    from the split's test questions, and their key says so."""
    from tt_zoo.evaluation.text_benchmarks import split_label, test_subset

    summary = {}
    for bench, results in out["results"].items():
        short, metric = _HEADLINE.get(bench, (bench, "R@100"))
        for label, row in results.items():
            if not (label == marker if own_row_only else marker in label):
                continue
            set_name, key = "all", short
            if trained_on_reqa and bench != "odqa":
                set_name = test_subset(row["sets"])
                if set_name is None:  # no split: nothing measured on unseen questions
                    continue
                key = f"{short} (test part of the {split_label(set_name)} split)"
            values = row["sets"][set_name]
            if metric in values:
                summary[f"{key} {metric}, {label}"] = _percent(values[metric])
    return summary


def _check_same_model(settings: dict, card: ModelCard, where, log) -> None:
    """Refuses results measured on other weights than `card`'s (compared by sha256 when the
    model the results name still resolves to an export; the sha256 of an export that a
    re-export replaced counts as these weights)."""
    named = next((settings[k] for k in _MODEL_SETTINGS if settings.get(k)), None)
    if named is None:
        return
    sha = None
    for candidate in (pathlib.Path(named), registry.SAVED_MODELS_DIR.parent / named):
        if (candidate / METADATA_FILE).is_file():
            sha = ModelCard.from_dict(read_json(candidate / METADATA_FILE) or {}).provenance.sha256
            break
    else:
        if registry.registered_name(named) is not None:
            sha = registry.get_spec(named).sha256
    ours = card.provenance.sha256
    # A re-export keeps the weights (checked array by array): results measured on the export it
    # replaced are measured on these weights.
    same_weights = {ours} | {note.previous_sha256 for note in card.provenance.reexported or []
                             if note.weights == "unchanged"}
    if sha is None:
        log(f"warning: {where} measured {named!r}, which no longer resolves: recording it for "
            f"{card.name} unchecked")
    elif sha not in same_weights:
        raise TtZooError(f"{where} measured {named!r} (sha256 {sha[:12]}…), not these weights "
                         f"({card.name}, sha256 {str(ours)[:12]}…).")


__all__ = ["ship", "reexport", "record_tables", "record_results", "benchmark_tables",
           "export_path", "ROW_MARKERS"]
