"""Never lose a user's data, never load a wrong artifact, a clear error for every bad input.

One test per item of the reliability issue (numbers in the docstrings). Item 5 (a rerun of a
finished pretrain wrote NaN) is covered by tests/test_pretrain_recipe.py::
test_rerun_of_a_finished_run_and_resume_with_other_settings.
"""

import json
import time

import numpy as np
import pytest
import tensorflow as tf

import tt_zoo
from helpers import graph_ops, load_recipe, pair_dataset, tiny_model
from tt_zoo import atomic_io
from tt_zoo.artifacts import export
from tt_zoo.data import pairs_io
from tt_zoo.training import loop as training
from tt_zoo.errors import ArtifactError


# conftest's `exported` fixture writes this metadata: a base model with a card to be replaced.
TINY_EXPORT_METADATA = {"name": "tiny_base", "pretraining": "none", "train_steps": 0,
                        "metrics": {"ReQA zero-shot": {"R@1": 0.5}}}


def users_folder(tmp_path):
    folder = tmp_path / "mydir"
    folder.mkdir()
    (folder / "thesis.tex").write_text("keep")
    return folder


def test_saving_over_a_users_folder_is_refused(exported, tmp_path, capsys):
    """1. TextIndex.save, ZooModel.export and pretrain --export never delete a user's folder."""
    model = tt_zoo.load(exported.path)
    folder = users_folder(tmp_path)
    index = model.index(["a passage", "another passage"], backend="brute_force")
    with pytest.raises(FileExistsError, match="mydir exists and is not a saved tt_zoo TextIndex"):
        index.save(folder)
    with pytest.raises(FileExistsError, match="mydir exists and is not a tt_zoo model export"):
        model.export(folder)
    assert (folder / "thesis.tex").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydir"]  # no temp debris either

    index.save(tmp_path / "idx")
    index.save(tmp_path / "idx")  # an index over an index: replaced
    model.export(tmp_path / "model")
    model.export(tmp_path / "model")  # an export over an export: replaced
    model.export(folder, overwrite=True)  # the caller said so
    assert not (folder / "thesis.tex").exists()

    (tmp_path / "other").mkdir()
    theirs = users_folder(tmp_path / "other")
    with pytest.raises(SystemExit) as stop:  # the command's main, in this process
        load_recipe("pretrain").main(["--variant", "none_512", "--export", str(theirs)])
    said = f"{stop.value.code}\n{capsys.readouterr().err}"
    assert "--export:" in said and "not a tt_zoo model export" in said
    assert (theirs / "thesis.tex").read_text() == "keep"


def test_a_failed_make_pairs_rerun_keeps_the_old_pairs(tmp_path, capsys):
    """2. The new output is written beside the old one and swapped in only when complete."""
    recipe = load_recipe("make_pairs")
    out = tmp_path / "pairs"
    from tt_zoo.data.article_sources import write_jsonl_articles
    from tt_zoo.data.articles import Article, Section
    articles = [Article(f"Page {i}", [
        Section("", [f"Page {i} has a lead sentence here. Another lead sentence of page {i}."]),
        Section("Body", [f"Body {i} has one sentence. And a second one for good measure."])])
        for i in range(6)]
    good = tmp_path / "good.jsonl"
    write_jsonl_articles(articles, good)
    assert recipe.main(["--input", str(good), "--output", str(out), "--tasks", "ict,bfs",
                        "--num-shards", "2", "--no-progress"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + "{truncated\n")
    with pytest.raises(Exception):
        recipe.main(["--input", str(bad), "--output", str(out), "--tasks", "ict,bfs",
                     "--num-shards", "2", "--no-progress"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert pairs_io.read_manifest(out, verify="sha256")["num_records"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "good.jsonl", "pairs"]

    users = users_folder(tmp_path)
    with pytest.raises(SystemExit, match="--output: .*mydir exists and is not a pair directory"):
        recipe.main(["--input", str(good), "--output", str(users), "--no-progress"])
    assert (users / "thesis.tex").read_text() == "keep"


def test_debris_of_killed_writes_is_cleaned_on_the_next_run(tmp_path):
    """3. `.NAME.tmp-*` / `.NAME.old-*` beside an artifact, `ckpt-N_temp/` in a checkpoint
    folder: ours by name, removed by the next write; nothing else is touched."""
    for debris in (".out.tmp-abc123", ".out.old-def456", ".other.tmp-1"):
        (tmp_path / debris).mkdir()
        (tmp_path / debris / "half.bin").write_bytes(b"x")
    atomic_io.write_directory(tmp_path / "out", lambda d: (d / "f.txt").write_text("new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.tmp-1", "out"]

    checkpoints = tmp_path / "ckpt"
    (checkpoints / "ckpt-3_temp").mkdir(parents=True)
    (checkpoints / "ckpt-3_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    (checkpoints / "run_settings.json").write_text("{}")
    assert training.remove_checkpoint_debris(str(checkpoints)) == [
        str(checkpoints / "ckpt-3_temp")]
    assert [p.name for p in checkpoints.iterdir()] == ["run_settings.json"]


def test_writes_to_a_url_go_through_gfile_with_the_same_guarantees(monkeypatch):
    """URLs (gs://, ram://: TensorFlow's in-memory filesystem here) get the same rules: a user's
    folder is refused, an artifact is replaced, the completeness marker is uploaded last, a
    failed build leaves the old version, and files are renamed into place complete."""
    gfile = tf.io.gfile
    gfile.makedirs("ram://bucket/mydir")
    with gfile.GFile("ram://bucket/mydir/thesis.tex", "w") as f:
        f.write("keep")
    with pytest.raises(FileExistsError, match="ram://bucket/mydir exists and is not a"):
        atomic_io.write_directory("ram://bucket/mydir", lambda d: None)
    assert gfile.exists("ram://bucket/mydir/thesis.tex")

    def build(version):
        def fill(d):
            (d / "sub").mkdir()
            for name in ("z.bin", "sub/a.bin", "marker.json"):
                (d / name).write_text(version)
        return fill

    uploaded = []
    real_copy = gfile.copy
    monkeypatch.setattr(gfile, "copy", lambda src, dst, overwrite=False: (
        uploaded.append(dst), real_copy(src, dst, overwrite)))
    is_ours = lambda path: gfile.exists(f"{path}/marker.json")  # noqa: E731
    atomic_io.write_directory("ram://bucket/art", build("v1"), is_replaceable=is_ours,
                              last=("marker.json",))
    assert uploaded[-1] == "ram://bucket/art/marker.json" and len(uploaded) == 3
    with pytest.raises(RuntimeError, match="build failed"):
        atomic_io.write_directory("ram://bucket/art", lambda d: (_ for _ in ()).throw(
            RuntimeError("build failed")), is_replaceable=is_ours)
    with gfile.GFile("ram://bucket/art/marker.json") as f:
        assert f.read() == "v1"
    atomic_io.write_directory("ram://bucket/art", build("v2"), is_replaceable=is_ours)
    with gfile.GFile("ram://bucket/art/sub/a.bin") as f:
        assert f.read() == "v2"

    with atomic_io.open_for_replace("ram://bucket/arrays.npz", "wb") as f:
        np.savez(f, a=np.arange(3))  # a zip writer: needs seek/tell, which GFile lacks
    with gfile.GFile("ram://bucket/arrays.npz", "rb") as f:
        assert np.load(f)["a"].tolist() == [0, 1, 2]
    atomic_io.write_json("ram://bucket/x/settings.json", {"batch": 8})
    assert gfile.listdir("ram://bucket/x") == ["settings.json"]  # no temp file left


def test_a_fine_tuned_export_records_its_lineage_not_the_old_card(exported, tmp_path):
    """4. Fine-tune with fit, then export: the card names the base model, the steps and date,
    and carries none of the base model's metrics."""
    base = tt_zoo.load(exported.path)
    unchanged = base.export(tmp_path / "same")  # weights as loaded: the card stays
    assert unchanged["name"] == "tiny_base" and "metrics" in unchanged

    base.compile(optimizer=tf.keras.optimizers.Adam(1e-3))
    base.fit(pair_dataset().repeat(), steps_per_epoch=3, epochs=1, verbose=0)
    meta = base.export(tmp_path / "tuned", {"training_data": "4 hand-made pairs"})
    assert meta["name"] == "tiny_base_finetuned" and meta["train_steps"] == 3
    assert meta["base_model"]["name"] == "tiny_base"
    assert meta["base_model"]["sha256"] == base.metadata["sha256"]
    assert meta["fine_tuning"]["optimizer_steps"] == 3 and meta["fine_tuning"]["finished"]
    assert "metrics" not in meta and meta["training_data"] == "4 hand-made pairs"
    card = (tmp_path / "tuned" / "MODEL_CARD.md").read_text()
    assert "base_model" in card and "## Measured quality" not in card


def test_a_saved_index_is_verified_file_by_file(exported, tmp_path):
    """6. passages.jsonl is in the manifest: an edited, truncated or garbled one is refused
    with an ArtifactError naming the file."""
    model = tt_zoo.load(exported.path)
    model.index(["first passage", "second passage"], backend="brute_force").save(tmp_path / "i")
    passages = tmp_path / "i" / "passages.jsonl"
    original = passages.read_bytes()
    for damaged in (original.replace(b"second", b"sec0nd"), original[:-9], b"\xff\xfe" + original):
        passages.write_bytes(damaged)
        with pytest.raises(ArtifactError, match="passages.jsonl"):
            model.load_index(tmp_path / "i")
    passages.write_bytes(original)
    assert model.load_index(tmp_path / "i").search(["first passage"], k=1)[0][0].text == (
        "first passage")
    (tmp_path / "i" / "text_index.json").unlink()
    with pytest.raises(ArtifactError, match="text_index.json is missing"):
        model.load_index(tmp_path / "i")


def test_a_bare_string_is_one_text_never_a_sequence_of_characters(exported):
    """7. "abc" is one text (as sentence-transformers takes it), not three passages; beside a
    list of passages, a bare title or id string is refused."""
    model = tt_zoo.load(exported.path)
    assert model.encode_queries("abc").shape == (8,)
    assert model.encode_documents("abc").shape == (8,)
    assert len(model.index("abc", backend="brute_force")) == 1
    for call in (lambda: model.index(["a"], titles="t"), lambda: model.index(["a"], ids="i")):
        with pytest.raises(TypeError, match="not a single string"):
            call()


def test_a_missing_squad_file_is_an_error_at_once(tmp_path, capsys):
    """8. evaluate --squad typo.json: no silent fall-back to the Hugging Face hub."""
    recipe = load_recipe("evaluate")
    start = time.perf_counter()
    with pytest.raises(SystemExit):
        recipe.main(["--squad", str(tmp_path / "typo.json"), "--bm25"])
    assert "--squad: " in capsys.readouterr().err and time.perf_counter() - start < 5
    with pytest.raises(FileNotFoundError, match="typo.json does not exist"):
        recipe.load_reqa(str(tmp_path / "typo.json"))


def test_resuming_with_another_tower_shape_is_one_clear_error(tmp_path):
    """9. Changed batch / learning rate / steps are refused by the recorded run settings
    (tests/test_pretrain_recipe.py); a changed tower shape is refused in one line, not a tensor
    dump, even without recorded settings."""
    def run(model):
        model.build_by_calling()  # as recipes/pretrain.py does, so restoring is not deferred
        model.compile(optimizer=tf.keras.optimizers.Adam(1e-3))
        return training.train_resumable(model, lambda start: pair_dataset().repeat(), steps=2,
                                        global_batch=4, checkpoint_dir=str(tmp_path),
                                        checkpoint_every=1, progress=False, log=lambda m: None)

    run(tiny_model())
    with pytest.raises(training.SettingsMismatchError, match="does not fit this model") as e:
        run(_wider_tiny_model())
    assert len(str(e.value).splitlines()) == 1 and len(str(e.value)) < 600


def _wider_tiny_model():
    from helpers import tiny_vocab
    from tt_zoo.modeling.models import build_two_tower_model
    return build_two_tower_model(tiny_vocab(), size=None, num_layers=1, hidden_size=32,
                                 num_attention_heads=2, inner_dim=32, embedding_dim=8,
                                 query_length=16, document_length=24)


def test_an_export_without_sha256_or_with_truncated_weights_is_refused(exported, tmp_path):
    """10. Every export records a sha256; none means it cannot be verified; truncated variables
    are an ArtifactError, not an IndexError."""
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(exported.path, copy)
    meta = json.loads((copy / "metadata.json").read_text())
    del meta["sha256"]
    (copy / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="records no sha256"):
        tt_zoo.load(copy)

    variables = copy / "variables" / "variables.data-00000-of-00001"
    variables.write_bytes(variables.read_bytes()[:100])
    with pytest.raises(ValueError, match="Could not restore the weights"):
        export.load_keras_model(copy)


def test_serving_default_and_only_core_or_text_ops(exported):
    """11. TF Serving's default signature is encode_query, and the graphs use only TensorFlow
    core and tensorflow-text ops (the set a TF Serving build with tensorflow-text links)."""
    found = graph_ops(exported.path)
    assert found["other"] == [], found["other"]
    assert found["text"], "the tokenizer's tensorflow-text ops should be in the graph"
    assert "serving_default" in found["signatures"]
    loaded = tf.saved_model.load(str(exported.path))
    query = tf.constant(["who discovered penicillin?"])
    np.testing.assert_allclose(loaded.signatures["serving_default"](query=query)["embedding"],
                               loaded.signatures["encode_query"](query=query)["embedding"])
    assert "import tensorflow_text" in (exported.path / "MODEL_CARD.md").read_text()


def test_every_tt_zoo_error_has_one_base():
    """One `except tt_zoo.TtZooError` catches every error tt_zoo raises for bad input; corrupt or
    incomplete artifacts are `ArtifactError`s; all stay ValueErrors for older callers."""
    from tt_zoo.data import article_sources, mediawiki
    from tt_zoo.retrieval import index
    from tt_zoo.evaluation import reqa
    for error in (article_sources.ArticleFormatError, mediawiki.MediaWikiDumpError,
                  reqa.ReQAFormatError, training.SettingsMismatchError, ArtifactError):
        assert issubclass(error, tt_zoo.TtZooError) and issubclass(error, ValueError), error
    for error in (index.IndexFileError, pairs_io.IncompleteOutputError):
        assert issubclass(error, ArtifactError), error
