"""Shipping any kind of export (two-tower, ColBERT, HDCT term weights): the shipped list and its
kinds, loading by name (clone and download), measured tables in the card, golden outputs."""

import dataclasses
import json
import shutil

import numpy as np
import pytest

import tt_zoo
from helpers import (PAIRS, assert_matches_term_golden, assert_matches_token_golden,
                     golden_regenerator, tiny_colbert, tiny_model)
from tt_zoo.data import features as F
from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS
from tt_zoo.artifacts.card_rendering import render_card
from tt_zoo.artifacts.model_card import ModelCard
from tt_zoo.artifacts import download

from tt_zoo.zoo import registry, shipping

COLBERT = "colbert_ict_bfs_wlp_32"
HDCT = "hdct_ict_bfs_wlp"


# ------------------------------------------------------------------ tables and cards (no TF)

def reqa_row(r1, r100, mrr):
    values = {"R@1": r1, "R@20": (r1 + r100) / 2, "R@100": r100, "MRR": mrr}
    return {"sets": {"all": {"num_questions": 10, **values},
                     "5% test": {"num_questions": 8, **values}}, "queries_per_s": 9.0}


def odqa_row(r1, r20):
    return {"sets": {"webquestions-val": {"num_questions": 7, "answerable": 5, "skipped": 0,
                                          "R@1": r1, "R@20": r20, "R@100": r20},
                     "all": {"num_questions": 12, "answerable": 9, "skipped": 0,
                             "R@1": r1, "R@20": r20, "R@100": r20}}}


def results(model_row="ColBERT re-ranking BM25@100", generator="late_interaction",
            model=None, smoke=False):
    """A text-benchmark results JSON (`benchmarks/text_rows.py`'s shape), hand-made."""
    return {"generator": f"benchmarks/{generator}.py",
            "settings": {"colbert": model, "smoke": smoke}, "ks": [1, 20, 100],
            "benchmarks": {"reqa": {"name": "reqa", "num_candidates": 50,
                                    "subsets": {"all": 10, "5% test": 8}},
                           "odqa": {"name": "odqa", "source": "/data/wikispeedia",
                                    "passage_words": 100, "num_passages": 1000}},
            "results": {"reqa": {"BM25": reqa_row(0.6, 0.9, 0.7),
                                 "ict_bfs_wlp_512": reqa_row(0.2, 0.8, 0.3),
                                 model_row: reqa_row(0.5, 0.9, 0.6)},
                        "odqa": {"BM25": odqa_row(0.1, 0.5), model_row: odqa_row(0.25, 0.75)}}}


REQA_ALL = "ReQA-SQuAD(dev) zero-shot, all questions (10 questions, 50 candidates) (%)"
REQA_TEST = ("ReQA-SQuAD(dev) zero-shot, test part of the 5% split (8 questions, 50 "
             "candidates) (%)")
ODQA_ALL = ("ODQA answer recall zero-shot, validation (WebQuestions val + CuratedTREC train), "
            "9 answerable of 12 questions, 1,000 100-word Wikispeedia passages (%)")
ODQA_WQ = ("ODQA answer recall zero-shot, webquestions-val, 5 answerable of 7 questions, 1,000 "
           "100-word Wikispeedia passages (%)")


def test_benchmark_tables_take_the_models_rows_beside_bm25():
    tables = shipping.benchmark_tables(results(), "ColBERT")
    assert list(tables) == [REQA_ALL, REQA_TEST, ODQA_ALL, ODQA_WQ]  # "all" first
    # The dense row is left out; BM25 stays as the reference; fractions become percentages.
    assert tables[REQA_ALL] == {
        "BM25": {"R@1": 60.0, "R@20": 75.0, "R@100": 90.0, "MRR": 70.0},
        "ColBERT re-ranking BM25@100": {"R@1": 50.0, "R@20": 70.0, "R@100": 90.0, "MRR": 60.0}}
    assert tables[ODQA_WQ]["ColBERT re-ranking BM25@100"] == {"R@1": 25.0, "R@20": 75.0,
                                                              "R@100": 75.0}  # no MRR
    assert shipping.benchmark_tables(results(), "HDCT") == {}


def test_a_model_trained_on_the_tasks_gets_tables_that_say_so():
    regime = "after multi-task training on webquestions + reqa"
    tables = shipping.benchmark_tables(results(), "ColBERT", regime=regime, trained_on_reqa=True)
    assert list(tables) == [
        REQA_ALL.replace("zero-shot", regime).replace(
            " (%)", ", including the questions it trained on (%)"),
        REQA_TEST.replace("zero-shot", regime), ODQA_ALL.replace("zero-shot", regime),
        ODQA_WQ.replace("zero-shot", regime)]


def test_the_splits_validation_questions_get_a_table_and_never_the_headline():
    # Settings chosen on the split's held-out validation questions report them too; a card's
    # headline stays on its test questions, whichever subset the results list first.
    out = results()
    for row in out["results"]["reqa"].values():
        row["sets"] = {"all": row["sets"]["all"],
                       "5% validation": {**row["sets"]["5% test"], "num_questions": 2,
                                         "R@100": 0.5},
                       "5% test": row["sets"]["5% test"]}
    tables = shipping.benchmark_tables(out, "ColBERT", trained_on_reqa=True)
    assert ("ReQA-SQuAD(dev) zero-shot, validation part of the 5% split (2 questions, 50 "
            "candidates) (%)") in tables
    headline = shipping.headline_numbers(out, "ColBERT", own_row_only=False,
                                         trained_on_reqa=True)
    assert headline["ReQA (test part of the 5% split) R@100, ColBERT re-ranking BM25@100"] == 90.0


def test_card_prints_tables_of_rows_and_of_one_row():
    card = render_card(ModelCard.from_dict({"name": "m", "metrics": {
        "T": {"BM25": {"R@1": 60.0, "MRR": 70.0}, "X": {"R@1": 55.5}},
        "one row": {"R@1": 12.25, "R@100": 80.0}},
        "measured_by": {"benchmarks/x.py": {"tables": ["T"], "results": "results/x.json",
                                            "recorded": "2026-11-25T00:00:00+00:00"}}}))
    section = card.split("## Measured quality\n", 1)[1].split("## Use", 1)[0]
    assert section.strip().splitlines() == [
        "**T**", "", "| row | R@1 | MRR |", "| --- | --- | --- |", "| BM25 | 60 | 70 |",
        "| X | 55.5 | – |", "", "**one row**", "", "| R@1 | R@100 |", "| --- | --- |",
        "| 12.25 | 80 |", "",
        "Measured by `benchmarks/x.py` (results/x.json), recorded 2026-11-25T00:00:00+00:00: "
        "1 table(s) above."]


def test_registry_kinds_and_term_weight_names(tmp_path):
    spec = registry.get_spec("hdct_ict_bfs_wlp_crop_span_qgen")
    assert (spec.kind, spec.encoder, spec.tower_size, spec.document_length) == (
        TERM_WEIGHTS, "bert", "tiny", 128)
    assert ("tt-zoo train-term-weights --init-from saved_models/ict_bfs_wlp_512 --pairs "
            "runs/pairs/ict_bfs_wlp_crop_span_qgen_128 --max-pairs 200000 --steps 2000 ") in (
        spec.recipe_command())  # (its run's: train-term-weights' own batch and rate)
    assert (spec.run.training.batch_size, spec.run.training.learning_rate) == (64, 5e-4)
    assert "hdct_none" not in registry.REGISTRY and "hdct_mlm" not in registry.REGISTRY
    assert registry.get_spec("colbert_ict_bfs_wlp_crop_span_qgen_64").kind == (
        LATE_INTERACTION)
    assert set(tt_zoo.list_models("hdct_*", include_recipes=True)) == set(
        tt_zoo.list_models(kind=TERM_WEIGHTS, include_recipes=True))
    with pytest.raises(ValueError, match="kind must be one of"):
        tt_zoo.list_models(kind="colbert")
    # The shipped list records each entry's kind; one that is not its name's is refused.
    for name, entry in json.loads(registry.SHIPPED_FILE.read_text()).items():
        assert entry["kind"] == registry.get_spec(name).kind, name
    path = tmp_path / "shipped.json"
    path.write_text(json.dumps({HDCT: {"kind": "two_tower", "artifact": HDCT}}))
    with pytest.raises(ValueError, match="records kind 'two_tower'.*'term_weights' variant"):
        registry.read_shipped(path)
    path.write_text(json.dumps({HDCT: {"artifact": HDCT}}))  # no kind: the name's
    assert registry.read_shipped(path)[HDCT]["kind"] == TERM_WEIGHTS


# ------------------------------------------------------------------ tiny exports, shipped

@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """A tiny ColBERT export (token vectors of 32) and a tiny term-weight export."""
    from tt_zoo.modeling.term_weights import TermWeightModel
    from tt_zoo.artifacts.export import export_saved_model
    from tt_zoo.artifacts.term_weight_export import export_term_weight_model

    root = tmp_path_factory.mktemp("sources")
    colbert = tiny_colbert(embedding_dim=32)
    colbert.build_by_calling()
    export_saved_model(colbert, root / "colbert", {
        "name": "colbert_run", "encoder": "colbert", "pretraining": "ict_bfs_wlp",
        "train_steps": 3, "batch_size": 8, "command": "python recipes/pretrain.py ..."})
    two_tower = tiny_model()
    two_tower.build_by_calling()
    term_model = TermWeightModel.from_two_tower(two_tower)
    export_term_weight_model(term_model, root / "hdct", {
        "name": "hdct_run", "train_steps": 4, "batch_size": 8, "learning_rate": 1e-3,
        "init": {"name": "tiny_test"}, "training_data": "pairs from runs/pairs/x",
        "pairs": {"num_pairs": 96, "max_pairs": 64,
                  "make_pairs_config": {"tasks": ["ict", "bfs", "wlp"], "max_doc_tokens": 80}},
        "command": "python recipes/train_term_weights.py --pairs runs/pairs/x --init-from "
                   "tiny_test --steps 4 --batch-size 8 --export runs/models/hdct_run"})
    return {"root": root, "colbert": colbert, "term_model": term_model}


@pytest.fixture
def zoo(sources, tmp_path, monkeypatch):
    """A temp saved_models/ and shipped list (the registry's copy, nothing shipped), with both
    tiny exports shipped: `(saved_models, shipped_file)`."""
    saved, shipped_file = tmp_path / "saved_models", tmp_path / "shipped.json"
    monkeypatch.setattr(registry, "SAVED_MODELS_DIR", saved)
    monkeypatch.setattr(registry, "SHIPPED_FILE", shipped_file)
    monkeypatch.setattr(registry, "REGISTRY", {
        n: dataclasses.replace(s, artifact=None, sha256=None, url=None, metrics=())
        for n, s in registry.REGISTRY.items()})
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv(download.BASE_URL_ENV, raising=False)
    messages = []
    shipping.ship(sources["root"] / "colbert", COLBERT, log=messages.append)
    shipping.ship(sources["root"] / "hdct", HDCT, log=messages.append)
    assert messages[0] == f"copied {sources['root'] / 'colbert'} to {saved / COLBERT}"
    return saved, shipped_file


def test_shipped_kinds_load_by_name(sources, zoo):
    saved, shipped_file = zoo
    entries = json.loads(shipped_file.read_text())
    assert {n: e["kind"] for n, e in entries.items()} == {COLBERT: "late_interaction",
                                                          HDCT: "term_weights"}
    hdct = entries[HDCT]
    meta = json.loads((saved / HDCT / "metadata.json").read_text())
    assert hdct["sha256"] == meta["sha256"] and meta["name"] == HDCT  # named as it loads
    assert hdct["url"] == download.release_url(HDCT)
    # artifact facts only: how it was trained is its recipe (zoo/recipes/, `tt-zoo ship`)
    assert set(hdct) == {"kind", "artifact", "sha256", "url", "provenance", "metrics"}
    assert hdct["provenance"] == ("ict+bfs+wlp pairs from runs/pairs/x (96 pairs, the first 64)"
                                  "; 4 steps x 8 on CPU; from tiny_test's encoder")
    assert tt_zoo.list_models() == tt_zoo.list_models(shipped_only=True) == [COLBERT, HDCT]
    assert tt_zoo.list_models(shipped_only=True, kind="term_weights") == [HDCT]

    colbert = tt_zoo.load(COLBERT)
    assert colbert.path == saved / COLBERT and colbert.spec.kind == "late_interaction"
    queries, docs, titles = PAIRS[F.QUERY], PAIRS[F.DOC_TEXT], PAIRS[F.DOC_TITLE]
    np.testing.assert_allclose(colbert.score(queries, docs, titles=titles),
                               sources["colbert"].score(queries, docs, titles=titles), atol=1e-5)
    weighter = tt_zoo.load_term_weighter(HDCT)
    direct = direct_weights(sources["term_model"])
    assert [w.weights.keys() for w in weighter.weigh(titles, docs)] == [
        w.weights.keys() for w in direct]
    np.testing.assert_allclose(
        [v for w in weighter.weigh(titles, docs) for v in w.weights.values()],
        [v for w in direct for v in w.weights.values()], atol=1e-6)

    # tt_zoo.load loads every kind (a term-weight model with its weighter, by name and by
    # path); load_term_weighter refuses the other kinds, naming the right loader.
    for given in (HDCT, saved / HDCT):
        loaded = tt_zoo.load(given)
        assert loaded.path == saved / HDCT and loaded.card.artifact_kind == "term_weights"
        assert [w.weights for w in loaded.weigh(titles, docs)] == [
            w.weights for w in weighter.weigh(titles, docs)]
    with pytest.raises(TtZooError, match="late-interaction model: load it with tt_zoo.load"):
        tt_zoo.load_term_weighter(COLBERT)
    with pytest.raises(ArtifactError, match="not a term-weight export"):
        tt_zoo.load_term_weighter(saved / COLBERT)
    with pytest.raises(FileNotFoundError, match="tt-zoo train-term-weights --init-from"):
        tt_zoo.load_term_weighter("hdct_crop")  # registered, not shipped
    # The registry's sha256 is checked: a copy whose files differ is refused (a whole export of
    # other files, as a ship cut short before it wrote the entry leaves, is named so).
    monkeypatch_sha(HDCT, "0" * 64)
    with pytest.raises(ArtifactError, match="another export than the registry's.*tt-zoo ship"):
        tt_zoo.load_term_weighter(HDCT)


def direct_weights(term_model):
    from tt_zoo.retrieval.term_weighting import TermWeighter
    return TermWeighter(term_model).weigh(PAIRS[F.DOC_TITLE], PAIRS[F.DOC_TEXT])


def monkeypatch_sha(name, sha):
    """(REGISTRY is the fixture's copy: the change goes with it.)"""
    registry.REGISTRY[name] = dataclasses.replace(registry.REGISTRY[name], sha256=sha)


def test_term_weighter_downloads_by_name(zoo, tmp_path, http_server, monkeypatch):
    saved, _ = zoo
    server = http_server(saved)  # a mirror laid out like saved_models/
    monkeypatch.setattr(registry, "SAVED_MODELS_DIR", tmp_path / "no_clone")
    monkeypatch.setenv(download.BASE_URL_ENV, server.url)
    weighter = tt_zoo.load_term_weighter(HDCT)
    cached = download.cache_path(HDCT)
    assert server.requests[0] == f"/{HDCT}/metadata.json"  # checked before the rest
    assert (cached / "saved_model.pb").is_file() and (cached / "MODEL_CARD.md").is_file()
    assert weighter.weigh(["paris"], ["the seine flows through paris."])[0].weights


def test_ship_refuses_another_kind_or_size_or_model(sources, zoo):
    root = sources["root"]
    with pytest.raises(TtZooError, match="is a term_weights export; 'colbert_ict_bfs_wlp_64' is"):
        shipping.ship(root / "hdct", "colbert_ict_bfs_wlp_64")
    with pytest.raises(TtZooError, match="embedding_dim 32; 'colbert_ict_bfs_wlp_64' is "
                                         "registered with 64"):
        shipping.ship(root / "colbert", "colbert_ict_bfs_wlp_64")
    saved, _ = zoo
    shutil.copytree(saved / HDCT, saved / "hdct_crop")  # hdct_crop's folder holds hdct_ict_bfs_wlp
    with pytest.raises(TtZooError, match="holds an export of 'hdct_ict_bfs_wlp', not of "
                                         "'hdct_crop'"):
        shipping.ship(root / "hdct", "hdct_crop")


def test_record_results_fills_the_card_and_the_shipped_entry(sources, zoo, tmp_path):
    saved, shipped_file = zoo
    path = saved / COLBERT
    before = json.loads((path / "metadata.json").read_text())
    out = results(model=str(path))
    results_json = tmp_path / "late_interaction.json"
    shipping.record_results(COLBERT, out, results_path=results_json)
    meta = json.loads((path / "metadata.json").read_text())
    assert sorted(meta["metrics"]) == sorted([REQA_ALL, REQA_TEST, ODQA_ALL, ODQA_WQ])
    assert meta["metrics"][REQA_ALL]["ColBERT re-ranking BM25@100"]["MRR"] == 60.0
    assert meta["files"] == before["files"] and meta["sha256"] == before["sha256"]
    card = (path / "MODEL_CARD.md").read_text()
    assert "| ColBERT re-ranking BM25@100 | 50 | 70 | 90 | 60 |" in card
    # (the results path relative to the clone: here tmp_path, saved_models/'s parent)
    assert "Measured by `benchmarks/late_interaction.py` (late_interaction.json)" in card
    entry = json.loads(shipped_file.read_text())[COLBERT]
    assert entry["sha256"] == meta["sha256"]
    assert entry["metrics"] == {"ReQA R@100, ColBERT re-ranking BM25@100": 90.0,
                                "ODQA validation R@20, ColBERT re-ranking BM25@100": 75.0}
    assert dict(registry.get_spec(COLBERT).metrics) == entry["metrics"]
    assert tt_zoo.load(COLBERT).metadata["metrics"] == meta["metrics"]  # still verifies

    # A later run of the same benchmark replaces its tables and numbers; other sources' stay.
    shipping.record_tables(COLBERT, {"Other table (%)": {"R@1": 1.0}}, source="elsewhere")
    shipping.record_results(COLBERT, results("ColBERT end to end", model=str(path)))
    meta = json.loads((path / "metadata.json").read_text())
    assert sorted(meta["metrics"]) == sorted([REQA_ALL, REQA_TEST, ODQA_ALL, ODQA_WQ,
                                              "Other table (%)"])
    assert list(meta["metrics"][REQA_ALL]) == ["BM25", "ColBERT end to end"]
    assert sorted(json.loads(shipped_file.read_text())[COLBERT]["metrics"]) == [
        "ODQA validation R@20, ColBERT end to end", "ReQA R@100, ColBERT end to end"]

    # Rows named by the model's name: the card keeps its fusion rows, the headline numbers
    # are its own row's only (`tt-zoo list` shows the first).
    fused = results(COLBERT, model=str(path))
    for bench, row in (("reqa", reqa_row(0.7, 0.99, 0.8)), ("odqa", odqa_row(0.3, 0.8))):
        fused["results"][bench][f"RRF(BM25, {COLBERT})"] = row
    shipping.record_results(COLBERT, fused, rows=COLBERT)
    assert f"RRF(BM25, {COLBERT})" in json.loads((path / "metadata.json").read_text())[
        "metrics"][REQA_ALL]
    assert json.loads(shipped_file.read_text())[COLBERT]["metrics"] == {
        f"ReQA R@100, {COLBERT}": 90.0, f"ODQA validation R@20, {COLBERT}": 75.0}

    with pytest.raises(TtZooError, match="smoke run"):
        shipping.record_results(COLBERT, results(model=str(path), smoke=True))
    with pytest.raises(TtZooError, match="measured .*hdct_ict_bfs_wlp.*not these weights"):
        shipping.record_results(COLBERT, results(model=str(saved / HDCT)))
    with pytest.raises(TtZooError, match="no row labelled with 'ColBERT'"):
        shipping.record_results(COLBERT, results("BM25 again"))


def test_a_table_two_sources_record_keeps_the_rows_of_both(zoo):
    """Titles are shared on purpose (one wording a measurement): a source recording a table of
    rows that another source recorded too replaces its rows of the same label and keeps the
    rest, instead of erasing the richer table; a one-row table replaces a one-row table and
    leaves a table of rows as it is."""
    saved, _ = zoo
    title, single = "ODQA validation (944 answerable) (%)", "Speed (queries/s)"
    rich = {"BM25": {"R@20": 56.4}, COLBERT: {"R@20": 50.0},
            f"RRF(BM25, {COLBERT})": {"R@20": 58.0}}
    shipping.record_tables(COLBERT, {title: rich, single: {"q/s": 10.0}}, source="a")
    shipping.record_tables(COLBERT, {title: {COLBERT: {"R@20": 51.0}, "new": {"R@20": 1.0}},
                                     single: {"q/s": 12.0}}, source="b")
    meta = json.loads((saved / COLBERT / "metadata.json").read_text())
    assert meta["metrics"][title] == {"BM25": {"R@20": 56.4}, COLBERT: {"R@20": 51.0},
                                      f"RRF(BM25, {COLBERT})": {"R@20": 58.0},
                                      "new": {"R@20": 1.0}}
    assert meta["metrics"][single] == {"q/s": 12.0}
    assert meta["measured_by"]["a"]["tables"] == [title, single]  # both list what they wrote
    # A source re-recording only some of its tables: a title no other source holds goes, a
    # shared one stays with the rows of both.
    shipping.record_tables(COLBERT, {"Other (%)": {"R@1": 2.0}}, source="b")
    meta = json.loads((saved / COLBERT / "metadata.json").read_text())
    assert meta["metrics"][title][f"RRF(BM25, {COLBERT})"] == {"R@20": 58.0}
    assert meta["metrics"][title][COLBERT] == {"R@20": 51.0} and "Other (%)" in meta["metrics"]
    # A one-row table (the reproduce stage's, `odqa.card_tables`) over the table of rows: kept.
    said = []
    shipping.record_tables(COLBERT, {title: {"R@20": 49.0}}, source="c", log=said.append)
    meta = json.loads((saved / COLBERT / "metadata.json").read_text())
    assert meta["metrics"][title][f"RRF(BM25, {COLBERT})"] == {"R@20": 58.0}
    assert any("kept the table of rows" in line for line in said)
    assert shipping.merged_table({"a": 1}, {"a": 2}) == {"a": 2}  # one row over one row
    assert shipping.merged_table(None, {"x": {"a": 1}}) == {"x": {"a": 1}}


def test_ship_command_records_term_weight_tables_and_goldens_pin_both(sources, zoo, tmp_path,
                                                                       capsys):
    from tt_zoo.cli import ship as ship_cli
    saved, shipped_file = zoo
    results_json = tmp_path / "term_weights.json"
    results_json.write_text(json.dumps(results("HDCT-weighted BM25 (k1 1.5, b 0.75)",
                                               generator="term_weights")))
    assert ship_cli.main([HDCT, "--record-from", str(results_json)]) == 0  # shipped in place
    said = capsys.readouterr().out
    assert f"next: python tests/golden/regenerate.py {HDCT}" in said
    recipe = tmp_path / "recipes" / "train-term-weights" / f"{HDCT}.json"
    assert f"wrote its recipe {recipe}" in said  # beside the (temporary) shipped list
    assert json.loads(recipe.read_text())["training"] == {
        "steps": 4, "batch_size": 8, "learning_rate": 0.0005, "warmup_fraction": 0.1, "seed": 0}
    card = (saved / HDCT / "MODEL_CARD.md").read_text()
    assert "Learned term weights after HDCT" in card and "## Measured quality" in card
    assert "| HDCT-weighted BM25 (k1 1.5, b 0.75) | 50 | 70 | 90 | 60 |" in card
    assert f"tt_zoo.load_term_weighter('{HDCT}')" in card
    assert json.loads(shipped_file.read_text())[HDCT]["metrics"][
        "ReQA R@100, HDCT-weighted BM25 (k1 1.5, b 0.75)"] == 90.0

    regenerate = golden_regenerator()
    regenerate.main(["--output", str(tmp_path)])  # every shipped model: both kinds
    token_golden = json.loads((tmp_path / f"{COLBERT}.json").read_text())
    term_golden = json.loads((tmp_path / f"{HDCT}.json").read_text())
    assert token_golden["kind"] == "late_interaction" and term_golden["kind"] == "term_weights"
    colbert = tt_zoo.load(COLBERT)
    q = colbert.encode_query_tokens(regenerate.QUERIES)
    d = colbert.encode_document_tokens(regenerate.PASSAGES, titles=regenerate.TITLES)
    assert np.asarray(token_golden["query_tokens_first3x8"]).shape == (3, 3, 8)
    assert token_golden["query_token_counts"] == [12, 12, 12]  # [MASK]-augmented queries
    assert_matches_token_golden(token_golden, q, d, colbert.score(
        regenerate.QUERIES, regenerate.PASSAGES, titles=regenerate.TITLES))
    weights = tt_zoo.load_term_weighter(HDCT).weigh(regenerate.TITLES, regenerate.PASSAGES)
    assert [len(t) for t in term_golden["top_terms"]] == [5, 5, 5]
    assert "penicillin" in dict(term_golden["terms"][0])
    assert_matches_term_golden(term_golden, weights)
    # ... and the checks fail on other outputs.
    term, weight = term_golden["terms"][0][0]
    term_golden["terms"][0][0] = [term, weight + 0.01]
    with pytest.raises(AssertionError):
        assert_matches_term_golden(term_golden, weights)
    scores = colbert.score(regenerate.QUERIES, regenerate.PASSAGES, titles=regenerate.TITLES)
    token_golden["scores"][0][0] += 0.01
    with pytest.raises(AssertionError):
        assert_matches_token_golden(token_golden, q, d, scores)
    # What tests/test_shipped_models.py runs on a shipped term-weight model's goldens.
    from tt_zoo.retrieval.bm25 import BM25Retriever
    texts = [f"{t} {p}" for t, p in zip(term_golden["titles"], term_golden["passages"])]
    rows = BM25Retriever(texts, weights=weights).search(term_golden["queries"], 1).rows
    assert rows.shape == (3, 1) and rows[0, 0] == 0  # "penicillin" is in the first only


def test_ship_float16_in_place_keeps_the_headline_numbers_and_loads_by_name(sources, zoo,
                                                                            capsys):
    """`tt-zoo ship NAME --float16`: the weights stored in float16 in saved_models/, the entry
    records the compact artifact's sha256 and keeps the numbers measured on the float32 export
    it was cast from; `tt_zoo.load(NAME)` materialises the float32 copy in the cache."""
    from tt_zoo.cli import ship as ship_cli
    saved, shipped_file = zoo
    entries = json.loads(shipped_file.read_text())
    float32_sha = entries[COLBERT]["sha256"]
    entries[COLBERT]["metrics"] = {"ReQA R@1": 50.0}  # as recorded on the float32 weights
    shipping._write_shipped(shipped_file, entries, COLBERT)
    assert ship_cli.main([COLBERT, "--float16"]) == 0
    assert "with its weights in float16" in capsys.readouterr().out
    entry = json.loads(shipped_file.read_text())[COLBERT]
    meta = json.loads((saved / COLBERT / "metadata.json").read_text())
    assert entry["sha256"] == meta["sha256"] != float32_sha
    assert meta["storage"]["float32_sha256"] == float32_sha
    assert entry["metrics"] == {"ReQA R@1": 50.0}
    assert not (saved / COLBERT / "variables").exists()
    colbert = tt_zoo.load(COLBERT)
    assert colbert.path.is_relative_to(download.home() / "float32")
    queries, docs, titles = PAIRS[F.QUERY], PAIRS[F.DOC_TEXT], PAIRS[F.DOC_TITLE]
    np.testing.assert_allclose(colbert.score(queries, docs, titles=titles),
                               sources["colbert"].score(queries, docs, titles=titles),
                               rtol=1e-2, atol=1e-2)
    # Shipped in place again: cast back from its float32 copy to the same arrays, the same
    # files and sha256 (how a float16 artifact is re-pinned by a later tt_zoo).
    files = {p.name: p.read_bytes() for p in (saved / COLBERT).rglob("*") if p.is_file()
             and p.name not in ("metadata.json", "MODEL_CARD.md")}
    again = shipping.ship(saved / COLBERT, COLBERT, float16=True, log=lambda line: None)
    assert again["sha256"] == entry["sha256"] and again["metrics"] == {"ReQA R@1": 50.0}
    assert {p.name: p.read_bytes() for p in (saved / COLBERT).rglob("*") if p.is_file()
            and p.name not in ("metadata.json", "MODEL_CARD.md")} == files


def test_ship_float16_of_a_term_weight_model_loads_by_name(sources, zoo):
    """The term-weight (HDCT) kind in float16 too: `load_term_weighter(NAME)` reads the
    materialised float32 copy, its weights within float16's rounding of the source's."""
    saved, shipped_file = zoo
    shipping.ship(saved / HDCT, HDCT, float16=True, log=lambda line: None)
    meta = json.loads((saved / HDCT / "metadata.json").read_text())
    assert meta["storage"]["weights"] == "float16" and not (saved / HDCT / "variables").exists()
    assert json.loads(shipped_file.read_text())[HDCT]["sha256"] == meta["sha256"]
    weighter = tt_zoo.load_term_weighter(HDCT)
    titles, docs = PAIRS[F.DOC_TITLE], PAIRS[F.DOC_TEXT]
    direct = direct_weights(sources["term_model"])
    weighed = weighter.weigh(titles, docs)
    assert [w.weights.keys() for w in weighed] == [w.weights.keys() for w in direct]
    np.testing.assert_allclose([v for w in weighed for v in w.weights.values()],
                               [v for w in direct for v in w.weights.values()], atol=1e-2)


def test_results_of_the_export_a_reexport_replaced_are_these_weights(tmp_path):
    """`_check_same_model`: a re-export keeps the weights (checked array by array), so results
    measured on the export it replaced (its previous sha256) record; other weights do not."""
    from tt_zoo.artifacts.model_card import ModelCard

    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "metadata.json").write_text(json.dumps({"sha256": "a" * 64}))
    card = ModelCard.from_dict({"name": "m", "sha256": "b" * 64, "reexported": [
        {"previous_sha256": "a" * 64, "weights": "unchanged"}]})
    shipping._check_same_model({"colbert": str(measured)}, card, "r.json", print)
    other = ModelCard.from_dict({"name": "m", "sha256": "b" * 64, "reexported": [
        {"previous_sha256": "c" * 64, "weights": "unchanged"}]})
    with pytest.raises(TtZooError, match=r"measured .*\(sha256 aaaaaaaaaaaa…\), not these weights"):
        shipping._check_same_model({"colbert": str(measured)}, other, "r.json", print)


def test_tables_say_how_the_model_met_the_questions():
    """A query-adapted card (its document side another model's) gets "after query adaptation
    on ..." in its tables' titles, never "zero-shot"."""
    from tt_zoo.artifacts.model_card import ModelCard

    adapted = ModelCard.from_dict({"name": "a", "document_encoder": {"name": "b", "sha256": "x"},
                                   "run_config": {"data": {"questions": ["my_questions.jsonl"]}}})
    assert shipping._regime(adapted, []) == "after query adaptation on my_questions.jsonl"
    default = ModelCard.from_dict({"name": "a", "document_encoder": {"name": "b"}})
    assert shipping._regime(default, []) == "after query adaptation on webquestions-trainmodel"
    assert shipping._regime(ModelCard.from_dict({"name": "a"}), []) == "zero-shot"
    assert shipping._regime(adapted, ["webquestions", "reqa"]) == (
        "after multi-task training on webquestions + reqa")
