"""Every artifact and every setting trusted only once checked: one test per case of
docs/reliability.md (numbers in the docstrings), on tiny artifacts. The numeric flags of every
command are fuzzed in tests/test_cli_numeric_flags.py."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tt_zoo
from conftest import REPO_ROOT
from helpers import pair_dataset, tiny_model, tiny_vocab
from tt_zoo import atomic_io
from tt_zoo.errors import ArtifactError, DownloadError
from tt_zoo.artifacts import export as export_lib
from tt_zoo.training import loop as training

TINY_EXPORT_METADATA = {"name": "tiny_base", "pretraining": "none"}  # conftest's `exported`

def _index(model, path, passages):
    model.index(passages, backend="brute_force").save(path)
    return path


def test_1_an_index_is_bound_to_the_model_that_made_its_embeddings(exported, tmp_path):
    """1. Swapped embeddings, another model of the same dimension, an edited dim: refused at
    load, naming the files or both models."""
    model = tt_zoo.load(exported.path)
    a = _index(model, tmp_path / "a", ["penicillin was discovered by fleming", "water is wet"])
    b = _index(model, tmp_path / "b", ["water is wet", "penicillin was discovered by fleming"])
    assert len(model.load_index(a).search("who discovered penicillin?", k=2)) == 2

    swapped = tmp_path / "swapped"
    shutil.copytree(a, swapped)
    shutil.rmtree(swapped / "embeddings")
    shutil.copytree(b / "embeddings", swapped / "embeddings")
    with pytest.raises(ArtifactError, match=r"embeddings/.*(corrupted|missing)"):
        model.load_index(swapped)

    other = tt_zoo.load(exported.path)  # the same architecture and dimension, other weights
    weights = other.keras_model.get_weights()
    other.keras_model.set_weights([weights[0] + 0.5, *weights[1:]])
    with pytest.raises(ArtifactError, match=r"made by 'tiny_base'.*weights sha256.*dim 8\), not "
                                            r"by the model loading it"):
        other.load_index(a)

    edited = tmp_path / "edited"
    shutil.copytree(a, edited)
    config = json.loads((edited / "embeddings" / "index.json").read_text())
    config["dim"] = 16
    (edited / "embeddings" / "index.json").write_text(json.dumps(config))
    with pytest.raises(ArtifactError, match=r"embeddings/index.json is corrupted"):
        model.load_index(edited)


def _pretrain_inputs(root: pathlib.Path):
    from tt_zoo.data.pairs_io import write_pair_shards
    from tt_zoo.data.pretraining_tasks import Pair
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    words = "the a of in is who what paris france river water london city".split()
    rng = np.random.default_rng(0)
    pairs = [Pair(query=" ".join(rng.choice(words, 6)), doc_title="t",
                  doc_text=" ".join(rng.choice(words, 12)), doc_id=f"d{i}", task="ict")
             for i in range(16)]
    write_pair_shards(pairs, str(root / "pairs"), num_shards=1)
    write_pair_shards([], str(root / "no_pairs"), num_shards=1)
    return vocab


def _pretrain(root, vocab, *extra):
    """tt-zoo pretrain in this process: its exit message (None: success)."""
    from tt_zoo.cli import pretrain
    argv = ["--variant", "ict_bfs_wlp_128", "--pairs", str(root / "pairs"), "--vocab",
            str(vocab), "--steps", "4", "--batch-size", "4", "--checkpoint-every", "2",
            "--tower-shape", "1,16,2", "--query-length", "16", "--document-length", "24",
            "--workdir", str(root / "work"), "--token-cache", "", "--no-progress",
            "--export", str(root / "export"), *extra]
    try:
        pretrain.main(argv)
    except SystemExit as stop:
        return str(stop.code)
    return None


def test_2_pretrain_refuses_nonsense_and_stops_on_a_non_finite_loss(tmp_path, monkeypatch,
                                                                    capsys):
    """2. Bad settings end before training, naming the flag; a loss that becomes NaN stops the
    run with a clear error, no export and no summary; JSON is never written with NaN."""
    vocab = _pretrain_inputs(tmp_path)
    message = _pretrain(tmp_path, vocab, "--tower-shape", "1,15,2")
    assert "--tower-shape: HIDDEN 15 is not a multiple of HEADS 2" in capsys.readouterr().err
    assert message == "2"
    message = _pretrain(tmp_path, vocab, "--pairs", str(tmp_path / "no_pairs"))
    assert message.startswith("--pairs: ") and "holds no pairs" in message

    monkeypatch.setattr(training, "paper_learning_rate", lambda *args: float("nan"))
    message = _pretrain(tmp_path, vocab)
    assert message is not None and "The training loss became nan at step" in message
    assert "neither checkpointed nor exported" in message
    assert not (tmp_path / "export").exists()
    assert not (tmp_path / "work" / "train_summary.json").exists()

    with pytest.raises(ValueError, match="s.json: refusing to write a NaN"):
        atomic_io.write_json(tmp_path / "s.json", {"final_loss": float("nan")})
    assert not (tmp_path / "s.json").exists()


def test_3_metadata_that_changes_behaviour_is_pinned_by_the_manifest(exported, tmp_path):
    """3. Task markers added to (or dropped from) metadata.json, an edited embedding_dim:
    refused at load, naming metadata.json; an export written with markers loads."""
    def edited(source, name, **changes):
        copy = tmp_path / name
        shutil.copytree(source, copy)
        meta = json.loads((copy / "metadata.json").read_text())
        meta.update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del meta[key]
        (copy / "metadata.json").write_text(json.dumps(meta))
        return copy

    markers = {"task_markers": {"qa": "what"}, "default_task_class": "qa"}
    with pytest.raises(ArtifactError, match=r"metadata.json: default_task_class, task_markers "
                                            r".*differ from .*behaviour.json"):
        tt_zoo.load(edited(exported.path, "markers", **markers))
    with pytest.raises(ArtifactError, match=r"metadata.json says embedding_dim 999 \(the "
                                            r"model: 8\).*config.json"):
        tt_zoo.load(edited(exported.path, "dim", embedding_dim=999))

    with_markers = tmp_path / "with_markers"
    tt_zoo.load(exported.path).export(with_markers, markers)
    assert (with_markers / "behaviour.json").is_file()
    loaded = tt_zoo.load(with_markers)
    assert loaded.task_markers == {"qa": "what"}
    with pytest.raises(ArtifactError, match="behaviour.json"):
        tt_zoo.load(edited(with_markers, "dropped", task_markers=None,
                           default_task_class=None))
    with pytest.raises(ValueError, match="task_markers"):
        export_lib.update_metadata(with_markers, task_markers={"qa": "who"})


_SLOW_WRITER = textwrap.dedent("""
    import pathlib, sys, time
    sys.path.insert(0, {root!r})
    from tt_zoo import atomic_io
    def build(d):
        time.sleep(float(sys.argv[2]))
        (d / "who.txt").write_text(sys.argv[3])
    atomic_io.write_directory(pathlib.Path(sys.argv[1]), build,
                              is_replaceable=lambda p: (p / "who.txt").is_file())
""")


def test_4_two_writers_to_one_path_both_finish_and_the_last_wins(tmp_path):
    """4. The second writer's debris cleaning leaves the first's live temp folder alone; both
    succeed, the last to rename wins, and no temp folder is left."""
    script = tmp_path / "writer.py"
    script.write_text(_SLOW_WRITER.format(root=str(REPO_ROOT)))
    target = tmp_path / "out"
    first = subprocess.Popen([sys.executable, str(script), str(target), "2.0", "first"],
                             stderr=subprocess.PIPE, text=True)
    deadline = 50
    while not list(tmp_path.glob(".out.tmp-*")) and deadline:
        subprocess.run(["sleep", "0.1"])
        deadline -= 1
    second = subprocess.run([sys.executable, str(script), str(target), "0.0", "second"],
                            capture_output=True, text=True, timeout=60)
    first_err = first.communicate(timeout=60)[1]
    assert second.returncode == 0, second.stderr[-2000:]
    assert first.returncode == 0, first_err[-2000:]
    assert (target / "who.txt").read_text() == "first"  # it renamed last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "writer.py"]


def _train(model, checkpoint_dir, steps, log):
    return training.train_resumable(model, lambda start: pair_dataset().repeat(), steps=steps,
                                    global_batch=4, checkpoint_dir=str(checkpoint_dir),
                                    checkpoint_every=1, progress=False, log=log)


def _compiled_tiny_model():
    model = tiny_model()
    model.build_by_calling()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3))
    return model


@pytest.mark.parametrize("damage", [
    "truncated", pytest.param("flipped", marks=pytest.mark.slow)])  # (the make test budget)
def test_5_a_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path, damage):
    """5. A truncated or corrupted newest checkpoint (its Adam slots included) is found before
    training, named, and the previous one resumed; all damaged is one clear error."""
    _train(_compiled_tiny_model(), tmp_path, 2, log=lambda m: None)
    data = sorted(tmp_path.glob("ckpt-2.data-*"))[0]
    raw = bytearray(data.read_bytes())
    if damage == "truncated":
        data.write_bytes(bytes(raw[:len(raw) // 2]))
    else:
        raw[len(raw) - 40:len(raw) - 8] = bytes(32)  # the last tensors: the optimizer's slots
        data.write_bytes(bytes(raw))
    said = []
    result = _train(_compiled_tiny_model(), tmp_path, 3, log=said.append)
    damaged = [m for m in said if "is damaged" in m]
    assert damaged and str(data) in damaged[0] and "resuming from the previous one" in damaged[0]
    assert damaged[0].endswith("ckpt-1") and result.resumed_from == 1
    assert result.steps_done == 3 and np.isfinite(result.final_loss)

    for prefix in tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths:
        for data in pathlib.Path(prefix).parent.glob(pathlib.Path(prefix).name + ".data-*"):
            data.write_bytes(data.read_bytes()[:10])
    with pytest.raises(training.DamagedCheckpointError, match="Every checkpoint in .* is "
                                                              "damaged: .*ckpt-3.data"):
        _train(_compiled_tiny_model(), tmp_path, 4, log=lambda m: None)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_6_a_replace_killed_between_its_renames_is_recovered(exported, tmp_path):
    """6. A kill between the two renames leaves the old version in ``.NAME.old-*``: the next
    load puts it back (export, index), and so does the next write."""
    model = tt_zoo.load(exported.path)
    export = tmp_path / "model"
    shutil.copytree(exported.path, export)
    index = _index(model, tmp_path / "index", ["one passage", "another passage"])
    for path in (export, index):
        aside = tmp_path / f".{path.name}.old-{_dead_pid()}-abc"
        aside.mkdir()
        os.rename(path, aside / path.name)  # what the kill left: nothing at `path`
    assert tt_zoo.load(export).name == "tiny_base"
    assert len(model.load_index(index)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "model"]

    out = tmp_path / "out"
    atomic_io.write_directory(out, lambda d: (d / "v.txt").write_text("1"))
    (tmp_path / ".out.old-xyz").mkdir()  # an older tt_zoo's name: no process id
    os.rename(out, tmp_path / ".out.old-xyz" / "out")
    with pytest.raises(FileExistsError):  # the recovered version is checked like any other
        atomic_io.write_directory(out, lambda d: None, is_replaceable=lambda p: False)
    assert (out / "v.txt").read_text() == "1"


def test_7_api_errors_name_the_argument(exported, tmp_path):
    """7. None, an int or a dict as texts or paths; embeddings of the wrong dimension; a Keras
    Lambda in config.json: errors that name the argument or the file."""
    model = tt_zoo.load(exported.path)
    index = model.index(["a passage"], backend="brute_force")
    calls = {
        "texts": [lambda: model.encode_queries(None), lambda: model.encode_queries(5),
                  lambda: model.encode_queries({"a": 1}), lambda: model.encode_documents(None),
                  lambda: model.encode_documents({"a": 1}), lambda: model.index(None),
                  lambda: model.index(7)],
        "titles": [lambda: model.index(["a"], titles=5)],
        "queries": [lambda: index.search(None), lambda: index.search({"q": 1})],
        "name_or_path": [lambda: tt_zoo.load(None), lambda: tt_zoo.load(5)],
        "path": [lambda: model.load_index(None), lambda: index.save(None),
                 lambda: model.export(None), lambda: model.load_index({"p": 1})],
    }
    for name, tried in calls.items():
        for call in tried:
            with pytest.raises(TypeError, match=rf"^{name}\b"):
                call()
    with pytest.raises(ValueError, match=r"embeddings must be float \[2, 8\].*shape \(2, 4\)"):
        model.index(["a", "b"], embeddings=np.zeros((2, 4), "float32"))

    copy = tmp_path / "lambda"
    shutil.copytree(exported.path, copy)
    lam = tf.keras.layers.serialize(tf.keras.layers.Lambda(lambda x: x * 2))
    (copy / "config.json").write_text(json.dumps(lam))
    with pytest.raises(ArtifactError, match=r"lambda/config.json does not rebuild a tt_zoo "
                                            r"model .*Lambda"):
        export_lib.load_keras_model(copy)


def test_8_a_base_url_that_is_no_url_is_the_downloaders_error(tmp_path, monkeypatch):
    """8. TT_ZOO_BASE_URL="not a url at all": a DownloadError naming the variable."""
    from tt_zoo.artifacts import download
    monkeypatch.setenv("TT_ZOO_BASE_URL", "not a url at all")
    spec = tt_zoo.get_spec("ict_bfs_wlp_512")
    with pytest.raises(DownloadError, match="TT_ZOO_BASE_URL='not a url at all' is not a URL"):
        download.download_export(spec, tmp_path / "cache" / "m")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*"))
