"""The ship stage of `tt-zoo reproduce`: the grid's fully evaluated models into saved_models/,
and their measured tables into their cards (the README's table of shipped models is
generated from those cards by `benchmarks.docs_tables`).

Shipping itself is `tt_zoo.zoo.shipping`'s, as `tt-zoo ship` does it: `ship` copies an export
to saved_models/NAME and writes its entry in shipped_models.json (sha256, release URL,
provenance), its recipe to recipes/ beside that list (the run config its export records:
`tt_zoo.training.shipped_recipes`), then `record_tables` writes the measured ReQA tables
(Chang et al. 2020, Table 3's columns; ODQA where measured) into its metadata and
MODEL_CARD.md, and their headline R@100s into the entry.
What is this stage's own: which models ship (`stage_ship`), their tables (`card_metrics`) and
provenance line (`provenance`).
"""

from __future__ import annotations

import pathlib

from tt_zoo.errors import StageError, TtZooError
from tt_zoo.evaluation.tables import COLUMNS
from tt_zoo.reproduction.grid import CELLS, FLAGSHIP_SUFFIX, FLAGSHIPS, read_card
from tt_zoo.reproduction.report import collect, label
from tt_zoo.reproduction.runner import read_json
from tt_zoo.artifacts.model_card import METADATA_FILE, ModelCard

# What recorded the tables (`tt_zoo.artifacts.model_card.Measurement`: a rerun replaces them).
SOURCE = "recipes/reproduce.py"
WIKISPEEDIA = ("Wikispeedia (SNAP; 4,598 articles of the 2007 Wikipedia for Schools, CC BY-SA), "
               "vocabulary learned from it (7,964 WordPiece tokens)")
ODQA_HEADLINE = "ODQA validation R@20"


def card_metrics(row: dict, bm25: dict) -> dict:
    """The measured tables of one model for its card: zero-shot and fine-tuned per split, BM25
    on the same test questions (%)."""
    tables = {}
    for split, metrics in row["zero_shot"].items():
        n = bm25[split]["num_queries"]
        where = f"test part of the {split} split ({n:,} questions, all candidates), exact search"
        tables[f"ReQA-SQuAD(dev) zero-shot, {where} (%)"] = {
            c: round(100 * metrics[c], 2) for c in COLUMNS}
        tuned = row["finetuned"].get(split)
        if tuned:
            tables[f"ReQA-SQuAD(dev) fine-tuned on the {split} split (a copy of these weights, "
                   f"{tuned['steps_run']} steps), {where} (%)"] = {
                c: round(100 * tuned[c], 2) for c in COLUMNS}
        tables[f"BM25, {where} (%)"] = {c: round(100 * bm25[split][c], 2) for c in COLUMNS}
    if row.get("odqa"):
        from tt_zoo.evaluation.odqa import card_tables  # noqa: PLC0415 (numpy only)

        tables.update(card_tables(row["odqa"]["sets"], row["odqa"]["num_passages"]))
    return tables


def headline_metrics(row: dict) -> dict:
    """The shipped entry's numbers (its card's headline): R@100 (%) zero-shot and fine-tuned
    per split, and ODQA validation R@20 where measured."""
    metrics = {f"R@100 {kind} {split}": round(100 * m["R@100"], 2)
               for kind, per_split in (("zero-shot", row["zero_shot"]),
                                       ("fine-tuned", row["finetuned"]))
               for split, m in per_split.items()}
    if row.get("odqa"):
        metrics[ODQA_HEADLINE] = round(100 * row["odqa"]["sets"]["all"]["R@20"], 2)
    return metrics


def provenance(row: dict, card: ModelCard) -> str:
    """The shipped entry's line on the training data, tower and schedule of a grid model."""
    tower = ("one shared BoW-MLP tower (linear output, cosine / 0.05)" if row["encoder"] ==
             "bow_mlp" else "one shared tiny BERT tower (mean pooling, cosine / 0.05)")
    if row["pretraining"] == "none":
        return f"no pretraining: {tower} initialised (seed 0); vocabulary from {WIKISPEEDIA}"
    if row["pretraining"] == "mlm":
        data = "MLM examples (masked-LM pretraining of the encoder)"
    else:
        pairs = card.training.pairs
        num_pairs = (pairs and pairs.num_pairs) or 0
        per_article = ((pairs and pairs.make_pairs_config) or {}).get("pairs_per_article")
        data = f"{label(row['pretraining'])} pairs ({num_pairs:,}; {per_article} per article)"
    budget = " (the reproduce grid's budget)" if row["variant"] in CELLS else ""
    warm = card.lineage.warm_start
    if warm is not None:
        budget += (f", warm-started from a {warm.train_steps or 0:,}-step run "
                   f"x {warm.batch_size} (a new schedule)")
    return (f"{data} from {WIKISPEEDIA}; {tower}, {row['train_steps']:,} steps x "
            f"{card.training.batch_size} on CPU{budget}")


def stage_ship(config) -> None:
    """Ships each fully evaluated grid model (a shipped flagship stays: it is the longer run of
    the same variant; the grid's equal-budget run of its variant stays in runs/), records its
    measured tables in its card and headline numbers in its entry. A model that cannot be
    shipped raises `StageError` naming it."""
    from tt_zoo.training import shipped_recipes
    from tt_zoo.zoo import registry, shipping

    grid = collect(config.cells, config.runs, config.budget, config.splits)
    shipped = read_json(config.shipped) or {}
    for name, row in grid["models"].items():
        complete = (set(row["zero_shot"]) == set(grid["splits"]) == set(row["finetuned"]))
        if not complete:
            print(f"ship {name}: not fully evaluated yet")
            continue
        variant = row["variant"]
        flagship = name.endswith(FLAGSHIP_SUFFIX)
        if variant in FLAGSHIPS and not flagship and variant in shipped:
            print(f"ship {name}: saved_models/{variant} is its longer run (flagship); the "
                  "grid's equal-budget model stays in runs/")
            continue
        source = pathlib.Path(row["model_dir"])

        def log(line: str, name=name) -> None:
            print(f"ship {name}: {line}")

        try:  # a flagship keeps its entry's provenance (its own run's)
            shipping.ship(source, variant, provenance=None if flagship
                          else provenance(row, read_card(source)),
                          saved_models=config.saved_models, shipped_file=config.shipped, log=log)
            recipe = shipped_recipes.write_recipe(
                variant, config.shipped.parent / registry.RECIPES_FOLDER,
                read_json(config.saved_models / variant / METADATA_FILE))
            log(f"wrote its recipe {recipe}")
            shipping.record_tables(config.saved_models / variant, card_metrics(row, grid["bm25"]),
                                   source=SOURCE, summary=headline_metrics(row),
                                   saved_models=config.saved_models,
                                   shipped_file=config.shipped, log=log)
        except TtZooError as e:  # ArtifactError included
            raise StageError(f"ship {name}: {e}") from e
    print("pin the new models' outputs with `python tests/golden/regenerate.py`, regenerate the "
          "README's table with `python -m benchmarks.docs_tables`, then commit saved_models/, "
          f"{config.shipped.name}, its recipes/, tests/golden/ and the README together (and "
          "publish saved_models/ at the release URL when releases are published)")
