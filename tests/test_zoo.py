"""The registry, tt_zoo.load, indexing and artifact checks."""

import dataclasses
import json
import shlex

import numpy as np
import pytest

import tt_zoo
from conftest import data_file
from helpers import PAIRS, tiny_vocab
from tt_zoo.data import features as F
from tt_zoo.errors import ArtifactError
from tt_zoo.modeling.kinds import LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER
from tt_zoo.configs.pretrain import PretrainConfig
from tt_zoo.zoo.build import build_untrained
from tt_zoo.zoo.registry import (CPU_PRETRAIN, CPU_SCALE, EMBEDDING_DIMS,
                                 MULTITASK_LEXICAL_RUN, MULTITASK_RUN, PAPER, PAPER_PRETRAIN,
                                 PRETRAINING_TASKS, REGISTRY, SERIES, SUCCESSOR_PREFIXES,
                                 SUCCESSOR_TASKS, TOKEN_DIMS)


def test_registry_names_read_like_the_paper():
    for name in ("ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_512", "mlm_128", "none_512",
                 "bert_base_ict_256", "wlp_512", "bfs_512"):
        assert name in REGISTRY
    spec = REGISTRY["bow_mlp_ict_bfs_wlp_512"]
    assert (spec.encoder, spec.pretraining, spec.embedding_dim) == ("bow_mlp", "ict_bfs_wlp", 512)
    assert tt_zoo.list_models("*_ict_bfs_wlp_128", include_recipes=True) == sorted(
        n for n in REGISTRY if n.endswith("_ict_bfs_wlp_128"))
    assert "ict_bfs_wlp_512" in tt_zoo.list_models("ict_bfs*")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_variant_is_consistent(name):
    from tt_zoo.zoo.registry import CHECKPOINT_FAMILY, DISTILLED, recipe_files
    spec = REGISTRY[name]
    if name in CHECKPOINT_FAMILY:  # a public checkpoint (imported) and what is made from it
        train = spec.recipe_command()
        # (a recorded run's recipe, shipped or retired, holds its own paths: the start and the
        # export it wrote)
        recorded = name in recipe_files()
        start = "" if recorded else f"{spec.init_from} "
        if spec.imported is not None:
            assert spec.shipped and spec.artifact == name and spec.sha256 is None
            assert train == f"tt-zoo import-checkpoint --name {name} --export saved_models/{name}"
        elif spec.adapted is not None:  # its query tower adapted to its base's passage index
            assert name == f"adapted_{spec.init_from}" and spec.init_from in CHECKPOINT_FAMILY
            assert spec.tag == f"adapted_{REGISTRY[spec.init_from].tag}"
            assert train.startswith(f"tt-zoo adapt-queries --model {start}")
        elif spec.multitask is not None:  # distilled_: the run learns a teacher's scores
            prefix = "distilled_" if spec.tag.startswith("distilled_") else "multitask_"
            assert name == f"{prefix}{spec.init_from}" and spec.init_from in CHECKPOINT_FAMILY
            assert train.startswith(f"tt-zoo multitask --init {start}")
        else:
            assert spec.pretraining == DISTILLED and spec.encoder == "bow_mlp"
            assert train.startswith(f"tt-zoo distill-static --model {spec.init_from} ")
        if not recorded:
            assert train.endswith(f"--export saved_models/{name}")
        return
    if spec.shipped:
        assert spec.artifact_path.is_dir() and spec.sha256
    if spec.kind == TERM_WEIGHTS:  # hdct_<tasks>: trained on pairs' query terms
        assert name == f"hdct_{spec.pretraining}" and spec.pretraining not in ("none", "mlm")
        assert "tt-zoo train-term-weights --init-from " in spec.recipe_command()
        if not spec.shipped:  # (a shipped name's recipe is its run's: its own paths)
            assert (f"tt-zoo train-term-weights --init-from ict_bfs_wlp_512 --pairs "
                    f"runs/pairs/{spec.pretraining}_128 ") in spec.recipe_command()
            assert spec.recipe_command().endswith(f"--export saved_models/{name}")
        return
    if spec.multitask is not None:  # multitask_[lexical_]<encoder>_<tasks>_<dim>
        tag = "lexical_" if "lexical" in spec.multitask.tasks.task else ""
        assert name == f"multitask_{tag}{spec.encoder}_{spec.pretraining}_{spec.embedding_dim}"
        assert spec.init_from == f"{spec.encoder}_{spec.pretraining}_{spec.embedding_dim}"
        assert spec.kind == (LATE_INTERACTION if spec.encoder == "colbert" else TWO_TOWER)
        train = spec.recipe_command()
        assert train.startswith("tt-zoo multitask --init ")
        if not spec.shipped:
            assert train.startswith(f"tt-zoo multitask --init {spec.init_from} ")
            assert train.endswith(f"--export saved_models/{name}")
        return
    assert spec.kind == (LATE_INTERACTION if spec.encoder == "colbert" else TWO_TOWER)
    # (late-interaction variants: the size of each token vector)
    assert spec.embedding_dim in (TOKEN_DIMS if spec.encoder == "colbert" else EMBEDDING_DIMS)
    if spec.pretraining in SUCCESSOR_TASKS:  # past the paper: the CPU-scale towers only
        assert name[:-len(f"{spec.pretraining}_{spec.embedding_dim}")] in SUCCESSOR_PREFIXES
        assert f"--tasks {spec.pretraining.replace('_', ',')} " in spec.recipe_command()
    else:
        assert spec.pretraining in PRETRAINING_TASKS
    assert name.endswith(f"{spec.pretraining}_{spec.embedding_dim}")
    assert (spec.tower_size is None) == (spec.encoder == "bow_mlp")
    assert f"--variant {name}" in spec.recipe_command()


def test_an_unshipped_names_recipe_is_the_one_of_its_options():
    """Issue 27: the unshipped mlm_128 (CPU-scale options: mean pooling, one shared tower)
    printed the paper's recipe, 8,192 x 100,000 steps at 1e-4 with documents of 288 tokens,
    while its shipped siblings ran 128 x 800 at 1e-3 with documents of 128. A recipe is a run
    config (issue 66): the series' run with the name's own variant, pairs and export."""
    mlm_128, mlm_512 = REGISTRY["mlm_128"], REGISTRY["mlm_512"]
    assert not mlm_128.shipped and mlm_128.options == CPU_SCALE == mlm_512.options
    r = mlm_128.run.training
    assert (r.batch_size, r.steps, r.learning_rate) == (128, 800, 1e-3)
    assert mlm_128.document_length == 128 == mlm_128.run.lengths.document_length
    schedule = mlm_512.run.training  # what the shipped sibling's run recorded
    assert (schedule.batch_size, schedule.steps, schedule.learning_rate) == (128, 800, 1e-3)
    command = mlm_128.recipe_command()
    assert "--steps 800 --batch-size 128 --learning-rate 0.001 " in command
    assert "--mlm-seq-length 128 " in command and "--document-length 128 " in command
    assert "--output runs/pairs/mlm_128 " in command and "--mlm-examples runs/pairs/mlm_128 " in (
        command)
    # The rule for every name: its series' options and run, together; shipped names keep
    # what their runs recorded.
    from tt_zoo.zoo.registry import CHECKPOINT_FAMILY
    for name, spec in REGISTRY.items():
        if name in CHECKPOINT_FAMILY:  # no series: test_every_registered_variant_is_consistent
            assert spec.options == CPU_SCALE, name
            continue
        prefix = max((p for p in SERIES if name.startswith(p)), key=len)
        series = SERIES[prefix]
        assert spec.options == series.options, name
        if series.kind == TWO_TOWER and spec.multitask is None:  # (ColBERT, term weights and
            # multi-task runs have their own)
            assert series.run == {CPU_SCALE: CPU_PRETRAIN, PAPER: PAPER_PRETRAIN}[series.options]
        assert spec.document_length == series.document_length, name
        if not spec.shipped:
            assert type(spec.run) is type(series.run), name
            assert spec.run.training == series.run.training or spec.pretraining == "none", name
            if isinstance(spec.run, PretrainConfig):  # (others: the start's own lengths)
                assert spec.run.lengths.document_length == spec.document_length, name
    paper = REGISTRY["bert_base_ict_512"]
    assert paper.options == PAPER and paper.run.training == PAPER_PRETRAIN.training
    assert (paper.run.training.batch_size, paper.run.training.steps, paper.document_length) == (
        8192, 100_000, 288)


@pytest.mark.parametrize("encoder_prefix", ["", "bow_mlp_"])
def test_untrained_variants_build_and_encode(encoder_prefix):
    spec = REGISTRY[f"{encoder_prefix}none_128"]
    model = build_untrained(spec, tiny_vocab(), query_length=16, document_length=24,
                            tower_shape=dict(num_layers=1, hidden_size=16, num_attention_heads=2))
    assert model.encode_queries(["who?"]).shape == (1, 128)


# ------------------------------------------------------------------ multi-task (issue 24)

MULTITASK_PRETRAINING = ("ict_bfs_wlp", "ict_bfs_wlp_crop_span_qgen")


def test_multitask_names_start_from_their_shipped_bow_mlp_model():
    names = [f"multitask_bow_mlp_{p}_512" for p in MULTITASK_PRETRAINING]
    assert tt_zoo.list_models("multitask_bow_mlp_*", include_recipes=True) == names
    bow_mlp = SERIES["bow_mlp_"]
    for pretraining, name in zip(MULTITASK_PRETRAINING, names):
        spec = REGISTRY[name]
        assert (spec.kind, spec.encoder, spec.tower_size, spec.embedding_dim, spec.pretraining) == (
            TWO_TOWER, "bow_mlp", None, 512, pretraining)
        assert spec.options == CPU_SCALE == bow_mlp.options
        assert (spec.query_length, spec.document_length) == (64, 128) == (
            bow_mlp.query_length, bow_mlp.document_length)
        assert spec.init_from == f"bow_mlp_{pretraining}_512" and REGISTRY[spec.init_from].shipped
        assert (spec.multitask.tasks.task, spec.multitask.training) == (
            MULTITASK_RUN.tasks.task, MULTITASK_RUN.training)
        assert spec.shipped == (pretraining == "ict_bfs_wlp_crop_span_qgen")  # issue 24's ship
    # the bow_mlp_ names stay single-task pretraining recipes
    assert REGISTRY["bow_mlp_ict_bfs_wlp_512"].multitask is None


def test_multitask_recipe_command_trains_on_the_two_qa_tasks():
    spec = REGISTRY["multitask_bow_mlp_ict_bfs_wlp_512"]
    assert spec.recipe_command() == (
        "tt-zoo multitask --init bow_mlp_ict_bfs_wlp_512 --task webquestions "
        "--task reqa --steps 800 --learning-rate 0.0005 "
        "--export saved_models/multitask_bow_mlp_ict_bfs_wlp_512")
    with_markers = dataclasses.replace(spec, run=spec.run.replace(markers=True))
    assert with_markers.recipe_command() == (
        "tt-zoo multitask --init bow_mlp_ict_bfs_wlp_512 --task webquestions "
        "--task reqa --markers --steps 800 --learning-rate 0.0005 "
        "--export saved_models/multitask_bow_mlp_ict_bfs_wlp_512")


def test_the_lexical_multitask_name_adds_bm25_as_a_teacher_to_the_two_qa_tasks():
    """multitask_lexical_bow_mlp_<tasks>_<dim> (issues 22, 24): the lexical task (SPAR) beside
    the two QA tasks, at 0.3 times its share of the batches."""
    assert tt_zoo.list_models("multitask_lexical_*", include_recipes=True) == [
        "multitask_lexical_bow_mlp_ict_bfs_wlp_crop_span_qgen_512"]
    spec = REGISTRY["multitask_lexical_bow_mlp_ict_bfs_wlp_crop_span_qgen_512"]
    assert (spec.kind, spec.encoder, spec.embedding_dim, spec.options) == (
        TWO_TOWER, "bow_mlp", 512, CPU_SCALE)
    assert spec.init_from == "bow_mlp_ict_bfs_wlp_crop_span_qgen_512"
    assert (spec.multitask.tasks.task, spec.multitask.tasks.weight) == (
        MULTITASK_LEXICAL_RUN.tasks.task, MULTITASK_LEXICAL_RUN.tasks.weight) == (
        ("webquestions", "reqa", "lexical"), ("lexical=0.3",))
    assert spec.multitask.training == MULTITASK_LEXICAL_RUN.training
    assert spec.recipe_command().startswith(  # (the rest: the paths of the run that made it)
        "tt-zoo multitask --init bow_mlp_ict_bfs_wlp_crop_span_qgen_512 --task webquestions "
        "--task reqa --task lexical --weight lexical=0.3 ")


def test_a_multitask_recipe_with_pairs_makes_them_first():
    spec = REGISTRY["multitask_bow_mlp_ict_bfs_wlp_512"]
    pairs = "runs/pairs/ict_bfs_wlp_128"
    spec = dataclasses.replace(spec, run=spec.run.replace(
        task=(*spec.run.tasks.task, f"pairs:{pairs}:10000")))
    make, train = spec.recipe_command().split(" && ")
    # the same pair directory the starting model's own recipe makes
    starting = REGISTRY["bow_mlp_ict_bfs_wlp_512"].recipe_command()
    assert make == starting.split(" && ")[0] and make.endswith(f"--output {pairs}")
    assert f"--task reqa --task pairs:{pairs}:10000 --steps 800" in train


def test_the_multitask_colbert_name_starts_from_the_shipped_colbert():
    """multitask_colbert_<tasks>_<m> (issues 23-24): the shipped ColBERT trained on the two QA
    tasks by tt-zoo multitask, with the tiny BERT's schedule."""
    from tt_zoo.zoo.registry import MULTITASK_COLBERT_RUN

    assert tt_zoo.list_models("multitask_colbert_*", include_recipes=True) == [
        "multitask_colbert_ict_bfs_wlp_crop_span_qgen_64"]
    spec = REGISTRY["multitask_colbert_ict_bfs_wlp_crop_span_qgen_64"]
    colbert = REGISTRY["colbert_ict_bfs_wlp_crop_span_qgen_64"]
    assert (spec.kind, spec.encoder, spec.tower_size, spec.embedding_dim, spec.options) == (
        LATE_INTERACTION, "colbert", "tiny", 64, colbert.options)
    assert (spec.query_length, spec.document_length) == (32, 128) == (
        colbert.query_length, colbert.document_length)
    assert spec.init_from == colbert.name and colbert.shipped
    assert (spec.multitask.tasks.task, spec.multitask.training) == (
        MULTITASK_COLBERT_RUN.tasks.task, MULTITASK_COLBERT_RUN.training)
    # (its run started from the shipped ColBERT's folder, saved_models/NAME)
    assert spec.recipe_command().startswith(
        "tt-zoo multitask --init saved_models/colbert_ict_bfs_wlp_crop_span_qgen_64 --task "
        "webquestions --task reqa ")


@pytest.mark.parametrize("name", tt_zoo.list_models("multitask_*", include_recipes=True))
def test_multitask_recipe_command_parses(name, tmp_path, monkeypatch):
    """`tt-zoo multitask` checks at parse time that its tasks' files exist: the shared data
    (webquestions, reqa) and the pair directory, made here where the command's cwd is. (Every
    other registered command line parses in tests/test_cli.py.)"""
    from tt_zoo.cli import multitask
    for needed in ("odqa/webquestions/trainmodel.json", "wikispeedia", "squad/dev-v1.1.json"):
        data_file(needed)
    monkeypatch.chdir(tmp_path)
    words = shlex.split(REGISTRY[name].recipe_command())
    assert words[:2] == ["tt-zoo", "multitask"]
    config = multitask.parse_args(words[2:])
    assert config == REGISTRY[name].run  # the command line gives the recipe's run config


def test_multitask_variant_builds_untrained_like_its_bow_mlp_start():
    spec = REGISTRY["multitask_bow_mlp_ict_bfs_wlp_512"]
    model = build_untrained(spec, tiny_vocab(), query_length=16, document_length=24,
                            tower_shape=dict(hidden_size=16))
    assert model.encode_queries(["who?"]).shape == (1, 512)


def test_unknown_and_unshipped_names():
    with pytest.raises(KeyError, match="ict_bfs_wlp_512"):
        tt_zoo.load("ict_bfs_wlp_521")
    unshipped = next(n for n, s in REGISTRY.items() if not s.shipped)
    with pytest.raises(FileNotFoundError, match="tt-zoo pretrain --variant"):
        tt_zoo.load(unshipped)
    with pytest.raises(ArtifactError, match="does not exist"):
        tt_zoo.load("./no/such/dir")


def test_load_by_path_encodes_like_the_keras_model(exported):
    model, path, _ = exported
    loaded = tt_zoo.load(path)
    assert loaded.pretraining == "none" and loaded.name == "tiny_test"
    np.testing.assert_allclose(loaded.encode_queries(PAIRS[F.QUERY]),
                               model.encode_queries(PAIRS[F.QUERY]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["scann", "brute_force"])
def test_index_search_and_save(exported, tmp_path, backend):
    loaded = tt_zoo.load(exported.path)
    passages = PAIRS[F.DOC_TEXT]
    index = loaded.index(passages, titles=PAIRS[F.DOC_TITLE], backend=backend)
    hits = index.search(["who discovered penicillin?", "paris"], k=3)
    assert len(hits) == 2 and len(hits[0]) == 3
    scores = [h.score for h in hits[0]]
    assert scores == sorted(scores, reverse=True)
    # The hits are the exact top-3 by inner product (4 candidates: ScaNN scores all of them).
    q = loaded.encode_queries(["who discovered penicillin?"])
    d = loaded.encode_documents(passages, titles=PAIRS[F.DOC_TITLE])
    expected = [passages[i] for i in np.argsort(-(q @ d.T)[0])[:3]]
    assert [h.text for h in hits[0]] == expected
    index.save(tmp_path / "idx")
    again = loaded.load_index(tmp_path / "idx")
    assert [h.id for h in again.search(["paris"], k=3)[0]] == [h.id for h in hits[1]]


def test_index_and_encode_take_batch_size_progress_and_one_string(exported, capsys):
    loaded = tt_zoo.load(exported.path)
    passages, titles = PAIRS[F.DOC_TEXT], PAIRS[F.DOC_TITLE]
    index = loaded.index(passages, titles=titles, backend="brute_force", batch_size=1,
                         show_progress_bar=True)
    assert "encode documents: 100%" in capsys.readouterr().err
    loaded.encode_queries(PAIRS[F.QUERY], batch_size=1, show_progress_bar=False)
    assert capsys.readouterr().err == ""
    # One query string: its one list of hits; one passage string: an index of one passage.
    hits = index.search("who discovered penicillin?", k=2)
    assert [type(h).__name__ for h in hits] == ["Hit", "Hit"]
    assert hits == index.search(["who discovered penicillin?"], k=2)[0]
    one = loaded.index(passages[0], titles=titles[0], ids="d0", backend="brute_force")
    assert (one.texts, one.titles, list(one.embedding_index.ids)) == (
        [passages[0]], [titles[0]], ["d0"])
    np.testing.assert_allclose(loaded.encode_documents(passages[0], titles=titles[0]),
                               loaded.encode_documents(passages, titles=titles)[0],
                               rtol=1e-5, atol=1e-6)


def test_fine_tunes_with_keras_fit(exported):
    import tensorflow as tf
    loaded = tt_zoo.load(exported.path)
    loaded.compile(optimizer=tf.keras.optimizers.Adam(1e-3))
    history = loaded.fit(tf.data.Dataset.from_tensor_slices(PAIRS).batch(4), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_corrupted_or_truncated_artifact_is_refused(exported, tmp_path):
    import shutil
    path = exported.path
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    data_file = next((broken / "variables").glob("variables.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:-100])  # truncated weights
    with pytest.raises(ArtifactError, match="corrupted or truncated"):
        tt_zoo.load(broken)
    missing = tmp_path / "missing"
    shutil.copytree(path, missing)
    (missing / "metadata.json").unlink()
    with pytest.raises(ArtifactError, match="metadata.json is missing"):
        tt_zoo.load(missing)


def test_shipped_list_is_read_from_saved_models(tmp_path):
    from tt_zoo.zoo import registry

    shipped = registry.read_shipped()
    # (An optional checkpoint, the `make teacher` MPNet, is listed once imported.)
    imported = {n for n, spec in registry.REGISTRY.items()
                if spec.imported is not None and registry.loads_by_name(spec)}
    assert set(shipped) | imported == set(tt_zoo.list_models(shipped_only=True))
    entry = {"artifact": "x", "sha256": "0" * 64, "metrics": {"R@1": 0.5}}
    path = tmp_path / "shipped.json"
    path.write_text(json.dumps({"ict_512": entry}))
    fields = registry.read_shipped(path)["ict_512"]
    assert fields["metrics"] == (("R@1", 0.5),) and fields["kind"] == TWO_TOWER
    # How a shipped model was trained is its recipe (tt_zoo/zoo/recipes/), not an entry's: an
    # entry recording a recipe, or its lengths, is refused.
    for bad in ({"ict_1024": entry}, {"ict_512": {**entry, "weights": "x"}},
                {"ict_512": {"sha256": "0"}}, {"ict_512": {**entry, "recipe": {"steps": 1}}},
                {"ict_512": {**entry, "document_length": 128}}):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match="shipped.json: entry"):
            registry.read_shipped(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        registry.read_shipped(path)


# ------------------------------------------------------------------ what load is given

def test_a_file_is_named_as_a_file_with_what_was_expected(exported, tmp_path):
    """Issue 26: a path that exists as a file said the directory "does not exist"."""
    notes = tmp_path / "file.txt"
    notes.write_text("not a model")
    for given in (notes, str(notes)):
        with pytest.raises(ArtifactError, match=r"file\.txt is a file, not a model export "
                                                r"directory") as caught:
            tt_zoo.load(given)
        assert "metadata.json" in str(caught.value) and "registered" in str(caught.value)
    with pytest.raises(ArtifactError, match="is a file"):
        tt_zoo.load_term_weighter(notes)
    # A file inside an export: the message names the folder to load instead.
    with pytest.raises(ArtifactError, match=f"load its folder {exported.path}"):
        tt_zoo.load(exported.path / "saved_model.pb")
    with pytest.raises(ArtifactError, match="does not exist"):
        tt_zoo.load(tmp_path / "nothing_here")


# ------------------------------------------------------------------ artifact format versions

def _copy_with_format(path, tmp_path, version, name="copy"):
    """A copy of an export whose metadata.json records `version` (None: no field, as every
    export before format versions were recorded)."""
    import shutil
    copy = tmp_path / name
    shutil.copytree(path, copy)
    meta = json.loads((copy / "metadata.json").read_text())
    meta.pop("format_version", None)
    if version is not None:
        meta["format_version"] = version
    (copy / "metadata.json").write_text(json.dumps(meta))  # not in the manifest: sha256 holds
    return copy


def test_an_export_of_a_newer_format_is_refused_naming_both_versions(exported, tmp_path):
    from tt_zoo.artifacts.export import FORMAT_VERSION
    newer = _copy_with_format(exported.path, tmp_path, FORMAT_VERSION + 1)
    expected = (f"written in tt_zoo model export format {FORMAT_VERSION + 1}; this tt_zoo .* "
                f"reads up to format {FORMAT_VERSION}: upgrade tt_zoo")
    with pytest.raises(ArtifactError, match=expected):
        tt_zoo.load(newer)
    with pytest.raises(ArtifactError, match=expected):  # the term-weight loader reads it too
        tt_zoo.load_term_weighter(newer)
    for bad in ("2", 0, True, 1.5):
        with pytest.raises(ArtifactError, match="format_version .* is not a whole number"):
            tt_zoo.load(_copy_with_format(exported.path, tmp_path, bad, name=f"bad_{bad}"))


def test_an_export_without_a_format_version_loads_as_format_1(exported, tmp_path):
    """Every export before format versions were recorded (most shipped ones) reads as 1."""
    older = _copy_with_format(exported.path, tmp_path, None)
    np.testing.assert_allclose(tt_zoo.load(older).encode_queries(["paris"]),
                               exported.model.encode_queries(["paris"]), rtol=1e-5, atol=1e-6)


def test_a_saved_text_index_records_its_format_version(exported, tmp_path):
    from tt_zoo.zoo.zoo_model import TEXT_INDEX_FILE, TEXT_INDEX_FORMAT_VERSION
    loaded = tt_zoo.load(exported.path)
    loaded.index(PAIRS[F.DOC_TEXT], backend="brute_force").save(tmp_path / "idx")
    manifest_path = tmp_path / "idx" / TEXT_INDEX_FILE
    manifest = json.loads(manifest_path.read_text())
    assert manifest["format_version"] == TEXT_INDEX_FORMAT_VERSION == 2
    assert len(loaded.load_index(tmp_path / "idx")) == len(PAIRS[F.DOC_TEXT])
    del manifest["format_version"]  # saved before versions were recorded: format 1, which
    manifest_path.write_text(json.dumps(manifest))  # records no model: it cannot be checked
    with pytest.raises(ArtifactError, match="saved by an older tt_zoo .* build it again"):
        loaded.load_index(tmp_path / "idx")
    manifest["format_version"] = 3
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="format 3; this tt_zoo .* reads up to format 2"):
        loaded.load_index(tmp_path / "idx")
