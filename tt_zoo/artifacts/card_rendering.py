"""MODEL_CARD.md of an export, rendered from its card: `render_card(card)`.

The card (`tt_zoo.artifacts.model_card.ModelCard`) is what an export records, typed; this module
is how it reads. The two are kept apart as in sentence-transformers (its
``SentenceTransformerModelCardData`` and the template that renders it) and huggingface_hub
(``ModelCardData`` and a card's template). MODEL_CARD.md is YAML front matter as the Hugging
Face Hub reads it (`ModelCard.front_matter`: ``library_name``, ``license``, ``base_model``,
``datasets``, ``metrics``, ``tags``), then what the model is, a table of what it records, the
tasks of a multi-task model, the command that trained it, its notes and re-exports, the
measured tables and how to use it. The body depends on the export's kind
(`ModelCard.artifact_kind`): two-tower and late-interaction exports share one, term-weight
exports have their own.

`tt_zoo.artifacts.export` writes the text beside metadata.json (and again whenever the metadata
is updated), so a shipped MODEL_CARD.md is always this rendering of its metadata.json.
"""

from __future__ import annotations

import posixpath

import yaml

from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS
from tt_zoo.artifacts.model_card import DEFAULT_SIGNATURE, ModelCard, table_rows


def render_card(card: ModelCard) -> str:
    """MODEL_CARD.md: the front matter, then the body for the export's kind."""
    matter = yaml.safe_dump(card.front_matter(), sort_keys=False, allow_unicode=True,
                            default_flow_style=False)
    kind = card.artifact_kind
    body = (_term_weight_body(card) if kind == TERM_WEIGHTS
            else _two_tower_body(card, tokens=kind == LATE_INTERACTION))
    return f"---\n{matter}---\n\n{body}"


# The fields each card's table shows, in this order, when recorded.
TWO_TOWER_TABLE = (
    "base_model", "fine_tuning", "averaged", "encoder", "tower_size", "pretraining",
    "embedding_dim", "scoring", "late_interaction", "model_options", "task_markers",
    "default_task_class", "query_length", "document_length",
    "vocab_size", "parameters", "training_data", "pairs", "warm_start", "train_steps",
    "batch_size", "pairs_seen", "learning_rate", "dtype_policy", "matrix_units",
    "grad_cache_chunk",
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


def _averaged_text(averaged: dict) -> str:
    """``averaged`` for a reader: "a (sha256 …) x 0.5 + b (sha256 …) x 0.5", each model as the
    command was given it (two exports of one run may share a name)."""
    parts = zip(averaged.get("models") or [], averaged.get("weights") or [])
    return " + ".join(
        f"{_origin_text({**origin, 'name': origin.get('from') or origin.get('name')})} x {weight:g}"
        for origin, weight in parts)


def _matrix_units_text(units: dict) -> str:
    """``matrix_units`` for a reader: "AMX (amx_bf16, amx_tile, ...)", "no AMX, AVX512-BF16
    (...)" or "no AMX (...)"."""
    flags = ", ".join(units.get("flags") or []) or "no AMX, AVX512-BF16 or VNNI flags"
    unit = ("AMX" if units.get("amx") else "no AMX, AVX512-BF16"
            if units.get("bfloat16_unit") == "avx512_bf16" else "no AMX")
    return f"{unit} ({flags})"


# Fields whose recorded object reads better as a sentence in the card's table.
_TABLE_TEXT = {"base_model": _origin_text, "fine_tuning": _fine_tuning_text,
               "averaged": _averaged_text,
               "matrix_units": _matrix_units_text}


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
    (``reexported``, written by `tt_zoo.zoo.shipping.reexport`), and for weights stored in
    float16 (``storage``, `tt_zoo.artifacts.float16_storage`); [] for none."""
    lines = []
    storage = card.provenance.storage
    if storage is not None and storage.float32_sha256:
        lines += ["", f"Weights stored in float16 ({_or(storage.arrays, '?')} arrays cast from "
                      f"the float32 export sha256 {storage.float32_sha256[:12]}…, on which the "
                      "tables below were measured); `tt_zoo.load` materialises the float32 "
                      "SavedModel in its cache. What the cast costs in recall, measured side "
                      "by side with the float32 export: docs/models.md (Weights)."]
    elif storage is not None and storage.materialised_from:
        lines += ["", "The float32 copy `tt_zoo.load` materialised from the float16 artifact "
                      f"sha256 {storage.materialised_from[:12]}…."]
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
    if run.distillation is not None:
        lines.append(distillation_line(run.distillation))
    return lines


def distillation_line(distilled) -> str:
    """The Tasks section's line on distillation (``multi_task.distillation``)."""
    loss = {"kl": "listwise KL (RocketQAv2)", "margin_mse": "Margin-MSE (Hofstätter et al. "
                                                            "2020)"}.get(distilled.loss,
                                                                         _or(distilled.loss, "?"))
    temperature = (f", teacher temperature {_fmt(distilled.temperature)}"
                   if distilled.temperature is not None else "")
    files = "; ".join(f"{f.get('task')}: {f.get('scores_file', {}).get('path')} (sha256 "
                      f"{str(f.get('scores_file', {}).get('sha256'))[:12]}…)"
                      for f in distilled.files or [])
    return (f"Distilled from {', '.join(distilled.teachers or []) or '?'}: {loss}, "
            f"{_or(distilled.candidates, '?')} candidates a question a step{temperature}; "
            f"teacher scores {files or '?'}.")


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
