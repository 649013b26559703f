"""Every model shipped in saved_models/, by its kind: golden outputs, a complete card with a
measured table, a sane retriever; and the size budget."""

import json
import pathlib

import numpy as np
import pytest

import tt_zoo
from helpers import (assert_matches_golden, assert_matches_term_golden,
                     assert_matches_token_golden, read_golden, registered_op_layers,
                     saved_model_graph)
from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER
from tt_zoo.artifacts.model_card import table_rows
from tt_zoo.zoo import registry

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
# (Not the optional teacher, `make teacher`'s mpnet_base_768, listed once imported: it has no
# measured ReQA table, and tests/test_mpnet.py checks it against sentence-transformers' vectors.)
SHIPPED = [n for n in tt_zoo.list_models(shipped_only=True)
           if not (registry.REGISTRY[n].imported and registry.REGISTRY[n].imported.optional)]
# Loaded with tt_zoo.load: one vector per text, or one per token (ColBERT).
MODELS = [n for n in SHIPPED if tt_zoo.get_spec(n).kind in (TWO_TOWER, LATE_INTERACTION)]
TERM_MODELS = tt_zoo.list_models(shipped_only=True, kind=TERM_WEIGHTS)
METRICS = ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR")
RECALLS = ("R@1", "R@5", "R@10", "R@20", "R@50", "R@100")


@pytest.fixture(scope="module", params=SHIPPED)
def any_shipped(request):
    """Every shipped name, of every kind, loaded once by `tt_zoo.load`."""
    return request.param, tt_zoo.load(request.param)


@pytest.fixture(scope="module")
def shipped(any_shipped):
    """The shipped models that encode text (two-tower and ColBERT), loaded by `tt_zoo.load`."""
    name, model = any_shipped
    if name not in MODELS:
        pytest.skip(f"{name} is a {tt_zoo.get_spec(name).kind} model: it encodes no text")
    return name, model


@pytest.fixture(scope="module", params=TERM_MODELS)
def term_weighter(request):
    return request.param, tt_zoo.load_term_weighter(request.param)


def test_golden_outputs(shipped):
    name, model = shipped
    golden = read_golden(name)
    if tt_zoo.get_spec(name).kind == LATE_INTERACTION:
        assert_matches_token_golden(
            golden, model.encode_query_tokens(golden["queries"]),
            model.encode_document_tokens(golden["passages"], titles=golden["titles"]),
            model.score(golden["queries"], golden["passages"], titles=golden["titles"]))
    else:
        assert_matches_golden(golden, model.encode_queries(golden["queries"]),
                              model.encode_documents(golden["passages"], titles=golden["titles"]))


def test_term_weight_golden_outputs(term_weighter):
    name, weighter = term_weighter
    golden = read_golden(name)
    assert_matches_term_golden(golden, weighter.weigh(golden["titles"], golden["passages"]))


def measured_rows(meta: dict, title_start: str):
    """(title, row label, values) of every row of the card's tables whose title starts so."""
    for title, table in meta.get("metrics", {}).items():
        if title.startswith(title_start):
            for label, values in (table_rows(table) or {}).items():
                yield title, label, values


def test_card_records_the_measured_table_and_how_it_was_trained(shipped):
    """Two-tower: a ReQA table of the model itself; ColBERT: a ReQA table with its rows (from
    benchmarks/late_interaction.py, `tt-zoo ship --record-from`)."""
    name, model = shipped
    meta = model.metadata
    rows = [(label, values) for _, label, values in measured_rows(meta, "ReQA")]
    if tt_zoo.get_spec(name).kind == LATE_INTERACTION:
        rows = [(label, values) for label, values in rows if "ColBERT" in label]
        assert meta.get("late_interaction") and meta.get("scoring") == "maxsim"
    else:
        assert "model_options" in meta or meta.get("pretraining") == "none"
    assert rows and all(k in rows[0][1] for k in METRICS), f"{name}: no measured ReQA table"
    card = (model.path / "MODEL_CARD.md").read_text()
    assert "## Measured quality" in card and "Trained with:" in card


def test_term_weight_card_records_the_weighted_bm25_table(term_weighter):
    """The measured weighted-BM25 rows (benchmarks/term_weights.py, recorded by `tt-zoo ship
    --record-from`) on ReQA, with the model's training recorded."""
    name, weighter = term_weighter
    meta = weighter.model.export_metadata
    rows = [values for _, label, values in measured_rows(meta, "ReQA") if "HDCT" in label]
    assert rows and all(k in rows[0] for k in RECALLS + ("MRR",)), f"{name}: no HDCT table"
    assert meta["kind"] == TERM_WEIGHTS and meta.get("init") and meta.get("train_steps")
    card = (tt_zoo.get_spec(name).artifact_path / "MODEL_CARD.md").read_text()
    assert "## Measured quality" in card and "Trained with:" in card


def test_pretrained_models_put_the_matching_passage_first(shipped):
    """The golden scores (inner products, or MaxSim for ColBERT) rank each question's own
    passage first."""
    name, model = shipped
    if model.pretraining == "none":
        pytest.skip("an untrained model is not expected to rank")
    golden = json.loads((GOLDEN / f"{name}.json").read_text())
    scores = np.array(golden["scores"])
    assert (scores.argmax(axis=1) == np.arange(len(scores))).all(), scores


SEARCH_TITLES = ["Penicillin", "Paris", "Seine", "Water"]
SEARCH_PASSAGES = ["Alexander Fleming discovered penicillin in 1928.",
                   "Paris is the capital of France.", "The Seine flows through Paris.",
                   "Water boils at 100 degrees Celsius."]


def test_every_shipped_model_indexes_passages_and_searches_them_with_text(any_shipped):
    """Issue 47: `tt_zoo.load(name).index(passages, titles=...).search(text)` for every kind:
    two-tower (embeddings), ColBERT (its card's best mode: re-ranking BM25), HDCT (weighted
    BM25), each giving the one hit type, best first, the penicillin passage on top."""
    from tt_zoo.retrieval.search import Hit, TextSearcher
    name, model = any_shipped
    index = model.index(SEARCH_PASSAGES, titles=SEARCH_TITLES, ids=["p", "q", "r", "s"])
    assert isinstance(index, TextSearcher) and len(index) == 4
    hits = index.search("who discovered penicillin?", k=3)
    assert hits and all(type(h) is Hit for h in hits), hits
    assert {h.id for h in hits} <= {"p", "q", "r", "s"} and len({h.id for h in hits}) == len(hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and np.isfinite(scores).all(), hits
    # Even the untrained models put it first here (it shares the query's rare word).
    assert (hits[0].id, hits[0].title) == ("p", "Penicillin"), hits
    batch = index.search_batch(["who discovered penicillin?", "what river flows through paris?"],
                               k=2)
    assert len(batch) == 2 and [h.id for h in batch[0]] == [h.id for h in hits[:2]]
    np.testing.assert_allclose([h.score for h in batch[0]], scores[:2], rtol=1e-4, atol=1e-5)


def test_weighted_bm25_puts_the_matching_passage_first(term_weighter):
    """BM25 over the golden passages weighted by the model ranks each question's own passage
    first."""
    from tt_zoo.retrieval.bm25 import BM25Retriever
    name, weighter = term_weighter
    golden = read_golden(name)
    texts = [f"{t} {p}" for t, p in zip(golden["titles"], golden["passages"])]
    weights = weighter.weigh(golden["titles"], golden["passages"])
    rows = BM25Retriever(texts, weights=weights).search(golden["queries"], 1).rows
    assert rows[:, 0].tolist() == list(range(len(texts))), rows


def test_every_grid_variant_is_shipped_within_the_size_budget():
    """The reproduce grid's ten variants (Tables 3 and 5) are all shipped, and saved_models/
    holds at most 350 MiB: the budget rose from 150 to 200 MiB for a late-interaction (ColBERT)
    and a term-weight (HDCT) model beside the two-tower ones, then to 350 MiB for models made
    from a public checkpoint (at most two MiniLM-sized exports beside a static one)."""
    from helpers import load_recipe
    cells = load_recipe("reproduce").CELLS
    assert len(cells) == 10 and set(cells) <= set(SHIPPED), sorted(set(cells) - set(SHIPPED))
    saved_models = pathlib.Path(tt_zoo.__file__).resolve().parents[1] / "saved_models"
    size = sum(f.stat().st_size for f in saved_models.rglob("*") if f.is_file())
    assert size <= 350 * 2**20, f"saved_models/ holds {size / 2**20:.1f} MiB (budget 350)"


# ------------------------------------------------------------------ serving (no model loaded)
# Read from each export's saved_model.pb (protobuf parsing, no TensorFlow load), for every entry
# of tt_zoo/zoo/shipped_models.json.

SHIPPED_ENTRIES = registry.read_shipped()
# The signatures the README's Serving section promises each kind; serving_default (what TF
# Serving's REST API uses when a request names none) is the first of them.
PROMISED_SIGNATURES = {
    TWO_TOWER: ("encode_query", "encode_document", "query_encoder", "response_encoder"),
    LATE_INTERACTION: ("encode_query_tokens", "encode_document_tokens"),
    TERM_WEIGHTS: ("term_weights",)}


def _inputs_and_outputs(signature):
    return ({k: v.dtype for k, v in signature.inputs.items()},
            {k: v.dtype for k, v in signature.outputs.items()})


@pytest.mark.parametrize("name", sorted(SHIPPED_ENTRIES))
def test_every_shipped_export_has_serving_default_and_its_kinds_signatures(name):
    from tensorflow.core.framework import types_pb2
    entry = SHIPPED_ENTRIES[name]
    path = registry.SAVED_MODELS_DIR / entry["artifact"]
    _, signatures = saved_model_graph(path)
    promised = PROMISED_SIGNATURES[entry["kind"]]
    missing = [s for s in ("serving_default",) + promised if s not in signatures]
    assert not missing, (f"{name} has no {missing} signature: re-export it from its own "
                         "weights (tt_zoo.zoo.shipping.reexport)")
    assert _inputs_and_outputs(signatures["serving_default"]) == _inputs_and_outputs(
        signatures[promised[0]])
    for signature in promised:
        inputs = signatures[signature].inputs
        assert inputs and {t.dtype for t in inputs.values()} == {types_pb2.DT_STRING}, signature
    recorded = json.loads((path / "metadata.json").read_text())["signatures"]
    assert set(recorded) == {"serving_default", *promised}, recorded


@pytest.mark.parametrize("name", sorted(SHIPPED_ENTRIES))
def test_shipped_exports_use_only_tensorflow_core_and_tensorflow_text_ops(name):
    """The ops a stock TF Serving ModelServer has: TensorFlow's own and tensorflow-text's, which
    tensorflow_serving/model_servers/BUILD links in (SUPPORTED_TENSORFLOW_OPS). Here "TensorFlow's
    own" is what the pinned pip TensorFlow registers, the closest offline stand-in for the
    ModelServer of the same version (its own op list cannot be had offline)."""
    used, _ = saved_model_graph(registry.SAVED_MODELS_DIR / SHIPPED_ENTRIES[name]["artifact"])
    layers = registered_op_layers()
    assert used - layers["core"] - layers["text"] == set()
    assert used & layers["text"], "the in-graph tokenizer uses tensorflow-text's ops"


def test_the_license_file_is_the_one_the_metadata_and_every_card_name():
    """LICENSE holds the Apache License 2.0 that setup.cfg declares (and puts in the wheel:
    license_files), and every shipped card records it with the note on its training text."""
    import configparser
    root = registry.SAVED_MODELS_DIR.parent
    text = (root / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
    setup = configparser.ConfigParser()
    setup.read(root / "setup.cfg")
    assert setup["metadata"]["license"] == "Apache-2.0"
    assert setup["metadata"]["license_files"].split() == ["LICENSE"]
    for name, entry in SHIPPED_ENTRIES.items():
        meta = json.loads((registry.SAVED_MODELS_DIR / entry["artifact"] / "metadata.json")
                          .read_text())
        # A model trained from an imported checkpoint keeps the checkpoint's licence line.
        assert meta.get("license") in ("Apache-2.0 (weights trained on CC BY-SA text)",
                                       "Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)"), name


@pytest.mark.parametrize("name", sorted(SHIPPED_ENTRIES))
def test_a_shipped_models_run_config_is_the_command_it_records(name):
    """A shipped model's recipe, tt_zoo/zoo/recipes/COMMAND/NAME.json (written by
    `tt_zoo.training.shipped_recipes`), is the run config its export records, or, where the export
    records only its command line (`python recipes/pretrain.py ...`), the config those flags parse
    to. Read through the command's --config, it gives the settings of the recorded command (so
    `tt-zoo COMMAND --config FILE` reruns that command)."""
    from tt_zoo.training import shipped_recipes

    meta = shipped_recipes.recorded_run(name)
    command, from_command = shipped_recipes.parse_command(meta["command"])
    path = shipped_recipes.recipe_path(name, command)
    written = shipped_recipes.shipped_recipe(name)[1]
    assert json.loads(path.read_text()) == json.loads(json.dumps(written)), (
        f"{path} is not the recorded run's: python -m {shipped_recipes.__name__} rewrites it")
    recipe = shipped_recipes.parse(command, ["--config", str(path)]).to_dict()
    from_command = from_command.to_dict()
    if "run_config" in meta:
        config_type = shipped_recipes.RUN_CONFIGS[command]
        assert recipe == config_type.from_dict(meta["run_config"], source=name).to_dict()
    # A default the run resolved (pretrain's vocabulary: saved_models/vocab/vocab.txt) is
    # recorded as the path it used, and so is pretrain's --dtype-policy, whose default was
    # "float32" before --precision (now None: read only where a config records it); every other
    # setting is the command's.
    resolved = {(group, key) for group, values in from_command.items()
                for key, value in values.items()
                if value is None and recipe[group][key] is not None}
    assert resolved <= {("model", "vocab"), ("model", "dtype_policy")}, resolved
    for group, key in resolved:
        from_command[group][key] = recipe[group][key]
    assert from_command == recipe


@pytest.mark.parametrize("name", sorted(SHIPPED_ENTRIES))
def test_recipe_command_is_the_command_its_export_records(name):
    """Issue 66: a shipped model's `recipe_command()` is the command recorded in its export's
    metadata.json (``command``), made from the one run config the registry holds for it
    (`ModelSpec.run`, read from tt_zoo/zoo/recipes/COMMAND/NAME.json).

    The documented normalisation: both lines are read by the command's own run-config parser
    and written back by the one renderer (`RunConfig.command_line`), so the flags' order, the
    spelling of the command (``python recipes/pretrain.py`` then, ``tt-zoo pretrain`` now) and
    of a number (1e-3, 0.001), and a flag given at its default do not count; a default the run
    resolved itself (pretrain's vocabulary, the older dtype policy) is taken as the run
    recorded it (see `test_a_shipped_models_run_config_is_the_command_it_records`). Before the
    make-pairs step, the chain makes the pair set the run read (its --pairs folder)."""
    from tt_zoo.training import shipped_recipes

    spec = registry.get_spec(name)
    path = shipped_recipes.recipe_path(name, spec.run.COMMAND)
    assert json.loads(json.dumps(spec.run.to_dict())) == json.loads(path.read_text())  # (read)
    *make, train = spec.recipe_command().split(" && ")
    assert train == spec.run.command_line()
    command, rendered = shipped_recipes.parse_command(train)
    assert (command, rendered) == (spec.run.COMMAND, spec.run)  # the line gives the config
    recorded_command, recorded = shipped_recipes.parse_command(
        shipped_recipes.recorded_run(name)["command"])
    resolved = {key: spec.run.get(key) for key in ("vocab", "dtype_policy")
                if key in spec.run.settings() and recorded.get(key) is None}
    assert command == recorded_command
    assert train == recorded.replace(**resolved).command_line(), name
    folder = spec.run.get("pairs") or spec.run.get("mlm_examples")
    assert [m.rsplit(" --output ", 1)[1] for m in make] == ([folder] if folder else [])


def test_a_wheel_carries_the_recipes_of_the_shipped_models(tmp_path):
    """The recipes are package data (tt_zoo/zoo/recipes/, setup.cfg): a wheel built from the
    sources holds every one, and installed from it (no clone beside it: no saved_models/), a
    shipped name's run config and recipe command are its recorded run's, not its series'
    defaults (the flagship's 3,500 steps, not 800)."""
    import shutil
    import subprocess
    import sys
    import zipfile

    from helpers import run_as_a_user

    repo = GOLDEN.parents[1]
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.py", "setup.cfg", "README.md", "LICENSE"):
        shutil.copy(repo / name, source / name)
    shutil.copytree(repo / "tt_zoo", source / "tt_zoo",
                    ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "--no-index", "-q", "-w",
                            str(tmp_path / "dist"), str(source)],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    wheel = zipfile.ZipFile(next((tmp_path / "dist").glob("tt_zoo-*.whl")))
    recipes = {pathlib.PurePosixPath(n).relative_to("tt_zoo/zoo/recipes")
               for n in wheel.namelist() if n.startswith("tt_zoo/zoo/recipes/")}
    expected = {path.relative_to(registry.RECIPES_DIR)
                for path in registry.recipe_files().values()}
    # One recipe a shipped model; a retired one (registered, not shipped) keeps its own.
    assert set(SHIPPED_ENTRIES) <= set(registry.recipe_files()) <= set(registry.REGISTRY)
    assert {pathlib.Path(r) for r in recipes} == expected
    site = tmp_path / "site"
    wheel.extractall(site)
    flagship = "ict_bfs_wlp_512"
    installed = run_as_a_user(
        ["-c", "import json, tt_zoo; from tt_zoo.zoo import registry; "
               f"spec = registry.get_spec({flagship!r}); "
               "print(json.dumps([tt_zoo.__file__, registry.SAVED_MODELS_DIR.is_dir(), "
               "spec.run.training.steps, spec.recipe_command()]))"],
        cwd=tmp_path, PYTHONPATH=str(site), TF_USE_LEGACY_KERAS="1")
    assert installed.returncode == 0, installed.stderr
    where, clone, steps, command = json.loads(installed.stdout.splitlines()[-1])
    assert pathlib.Path(where).is_relative_to(site) and not clone
    spec = registry.get_spec(flagship)
    assert steps == spec.run.training.steps == 3500
    assert command == spec.recipe_command()
