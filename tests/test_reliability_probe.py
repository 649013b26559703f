"""Cases 9 to 22 of docs/reliability.md: what a hostile probe of tt_zoo found (issue 64:
tampered exports, kills between renames, generators, mismatched signature inputs, garbage
beside checkpoints, a trickling server, out-of-range budgets, hostile text and files), one
test per defect, on tiny artifacts. Cases 1 to 8 are tests/test_reliability_cases.py's."""

import dataclasses
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import threading

import numpy as np
import pytest
import tensorflow as tf

import tt_zoo
from helpers import pair_dataset, tiny_colbert, tiny_model
from tt_zoo.errors import ArtifactError, DownloadError, TtZooError
from tt_zoo.artifacts import export as export_lib, float16_storage
from tt_zoo.training import loop as training
from tt_zoo.artifacts import download

from tt_zoo.zoo import registry

TINY_EXPORT_METADATA = {"name": "tiny_probe", "pretraining": "none"}  # conftest's `exported`
QUERIES = ["who discovered penicillin?", "what is the capital of france?"]
PASSAGES = ["Fleming discovered penicillin in 1928.", "Paris is the capital of France."]
TITLES = ["Penicillin", "Paris"]
NAME = "ict_bfs_wlp_128"  # a registered two-tower name the tests point at their tiny exports


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty TT_ZOO_HOME, no TT_ZOO_BASE_URL, and no clone's saved_models/."""
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv(download.BASE_URL_ENV, raising=False)
    monkeypatch.setattr(registry, "SAVED_MODELS_DIR", tmp_path / "saved_models")
    return tmp_path / "home"


def _ship_as(monkeypatch, name: str, path: pathlib.Path, sha256: str) -> None:
    """Registers `path` (in the patched saved_models/) as the shipped artifact of `name`."""
    monkeypatch.setitem(registry.REGISTRY, name, dataclasses.replace(
        registry.get_spec(name), artifact=path.name, sha256=sha256, embedding_dim=8))


def _edit_metadata(path: pathlib.Path, edit) -> None:
    meta = json.loads((path / "metadata.json").read_text())
    edit(meta)
    (path / "metadata.json").write_text(json.dumps(meta))


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _adapted_float16(tmp_path) -> pathlib.Path:
    """A query-adapted tiny model in float16 sharing every document-tower array with its base
    (as adapted_multitask_static_minilm_l6_384 shares its base's)."""
    from tt_zoo.training.multi_task import untie_towers
    base_model = tiny_model(share_towers=True)
    base_model.build_by_calling()
    export_lib.export_saved_model(base_model, tmp_path / "base", {"name": "tiny_base"})
    adapted = untie_towers(base_model)
    adapted.query_tower.set_weights([w + 0.01 for w in adapted.query_tower.get_weights()])
    export_lib.export_saved_model(adapted, tmp_path / "adapted", {"name": "tiny_adapted"})
    compact = tmp_path / "saved_models" / "adapted16"
    compact.mkdir(parents=True)
    float16_storage.write_float16(tmp_path / "adapted", compact, share_with=str(tmp_path / "base"))
    return compact


def test_9_float16_storage_is_pinned_by_the_manifest_and_keys_the_cache(tmp_path, home,
                                                                        monkeypatch):
    """9. Two targets of ``storage.shared_arrays`` swapped in metadata.json: refused, by path
    and by name, naming metadata.json; with metadata.json restored, the right float32 copy
    loads (no wrong copy was cached)."""
    monkeypatch.setattr(float16_storage, "MIN_SHARED_VALUES", 1)  # the kernels too
    compact = _adapted_float16(tmp_path)
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "first_home"))
    expected = tt_zoo.load(compact).encode_documents(PASSAGES, titles=TITLES)
    monkeypatch.setenv(download.HOME_ENV, str(home))  # a fresh cache
    original = (compact / "metadata.json").read_text()
    layer = "model/document_tower/encoder/_transformer_layers/0/_attention_layer/"
    query, key = (f"{layer}_{part}_dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"
                  for part in ("query", "key"))

    def swap(meta):
        arrays = meta["storage"]["shared_arrays"]
        arrays[query], arrays[key] = arrays[key], arrays[query]
    _edit_metadata(compact, swap)
    with pytest.raises(ArtifactError, match=r"adapted16/metadata.json: storage .*differ.*"
                                            r"behaviour.json"):
        tt_zoo.load(compact)
    sha256 = json.loads(original)["sha256"]
    _ship_as(monkeypatch, NAME, compact, sha256)
    with pytest.raises(ArtifactError, match=r"metadata.json: storage"):
        tt_zoo.load(NAME)
    (compact / "metadata.json").write_text(original)
    for loaded in (tt_zoo.load(compact), tt_zoo.load(NAME)):
        np.testing.assert_array_equal(loaded.encode_documents(PASSAGES, titles=TITLES),
                                      expected)
    # The cache's folder is named by a digest of the pinned facts, not by the folder alone.
    copy = float16_storage.materialised_path(compact, json.loads(original))
    assert tt_zoo.load(compact).path == copy and copy.parent == home / "float32"


def test_10_a_ship_killed_between_its_renames_is_recovered_by_name(exported, tmp_path, home,
                                                                   monkeypatch):
    """10. ``.NAME.old-*`` left by a kill between the renames of a ship: a load by name puts
    the old version back, as a load by path does (no download is tried)."""
    shipped = tmp_path / "saved_models" / "tiny"
    shutil.copytree(exported.path, shipped)
    _ship_as(monkeypatch, NAME, shipped, exported.meta["sha256"])
    aside = shipped.parent / f".tiny.old-{_dead_pid()}-abc"
    aside.mkdir()
    os.rename(shipped, aside / "tiny")
    assert tt_zoo.load(NAME).path == shipped
    assert sorted(p.name for p in shipped.parent.iterdir()) == ["tiny"]


def test_11_encoders_and_search_take_any_iterable(exported):
    """11. A generator of texts encodes as its list does (encode_queries, encode, search)."""
    model = tt_zoo.load(exported.path)
    expected = model.encode_queries(QUERIES)
    np.testing.assert_array_equal(model.encode_queries(q for q in QUERIES), expected)
    # encode is the document side (sentence-transformers' name for a passage encoder)
    np.testing.assert_array_equal(model.encode(iter(QUERIES)), model.encode_documents(QUERIES))
    np.testing.assert_array_equal(model.encode(iter(QUERIES), prompt_name="query"), expected)
    index = model.index(PASSAGES, titles=TITLES, backend="brute_force")
    assert [len(hits) for hits in index.search(q for q in QUERIES)] == [2, 2]
    assert len(index.search_batch(iter(QUERIES), k=1)) == 2


def test_12_a_signature_refuses_titles_and_passages_of_other_lengths(exported, tmp_path):
    """12. encode_document (and ColBERT's encode_document_tokens) with 2 titles and 3
    passages: an InvalidArgument naming both, not 2 rows."""
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)
    colbert = tiny_colbert()
    colbert.build_by_calling()
    export_lib.export_saved_model(colbert, tmp_path / "colbert", {"name": "tiny_colbert"})
    for path, signature in ((exported.path, "encode_document"),
                            (tmp_path / "colbert", "encode_document_tokens")):
        encode = tf.saved_model.load(str(path)).signatures[signature]
        with pytest.raises(tf.errors.InvalidArgumentError, match="title.*passage"):
            encode(title=tf.constant(["a", "b"]), passage=tf.constant(["x", "y", "z"]))
        assert len(encode(title=tf.constant(["a"]), passage=tf.constant(["x"])))


def _train(checkpoint_dir, steps, settings=None, log=None):
    model = tiny_model()
    model.build_by_calling()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3))
    return training.train_resumable(model, lambda start: pair_dataset().repeat(), steps=steps,
                                    global_batch=4, checkpoint_dir=str(checkpoint_dir),
                                    checkpoint_every=2, settings=settings, progress=False,
                                    log=log or (lambda m: None))


def test_13_garbage_beside_checkpoints_never_costs_them(tmp_path):
    """13. A non-UTF-8 or garbage ``checkpoints/checkpoint`` file: the run resumes from the
    newest ckpt-N files, which are never overwritten; a corrupt run_settings.json is an error
    naming it."""
    run = tmp_path / "run"
    _train(run, 4, settings={"batch": 4})
    intact = {p.name: p.read_bytes() for p in run.glob("ckpt-*")}
    assert {"ckpt-2.index", "ckpt-4.index"} <= set(intact)
    for garbage in (b"\xff\xfe\x00 not utf-8", b"model_checkpoint_path: \"nowhere\"\n}{"):
        (run / "checkpoint").write_bytes(garbage)
        said = []
        result = _train(run, 4, settings={"batch": 4}, log=said.append)
        assert result.resumed_from == 4, said
        assert not any("starting fresh" in m for m in said)
        assert {p.name: p.read_bytes() for p in run.glob("ckpt-*")} == intact
    (run / training.SETTINGS_FILE).write_text("{not json")
    with pytest.raises(TtZooError, match=r"run/run_settings.json is not valid JSON"):
        _train(run, 4, settings={"batch": 4})


class _Trickle(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a promise of a megabyte, then one byte every 0.1 s."""
    stop = threading.Event()

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", str(1 << 20))
        self.end_headers()
        try:
            while not self.stop.wait(0.1):
                self.wfile.write(b"{")
                self.wfile.flush()
        except OSError:
            return

    def log_message(self, *args):
        pass


def test_14_a_download_that_trickles_ends_at_its_deadline(tmp_path, home, monkeypatch):
    """14. A server that sends a byte every 0.1 s: the download stops at its deadline
    (TT_ZOO_DOWNLOAD_DEADLINE_S here; by default a minimum rate) with an error naming it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    _Trickle.stop.clear()
    monkeypatch.setenv(download.DEADLINE_ENV, "1.5")
    spec = dataclasses.replace(registry.get_spec(NAME), artifact="tiny", sha256="0" * 64,
                               url=f"http://127.0.0.1:{server.server_address[1]}/tiny")
    outcome = []

    def fetch():
        try:
            download.download_export(spec, home / "models" / "tiny")
        except Exception as e:  # noqa: BLE001 (what the download raised, for the assert)
            outcome.append(e)
    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    thread.join(15)
    still_running = thread.is_alive()
    _Trickle.stop.set()
    server.shutdown()
    server.server_close()
    assert not still_running, "the download was still running after 15 s"
    assert isinstance(outcome[0], DownloadError), outcome
    assert "TT_ZOO_DOWNLOAD_DEADLINE_S" in str(outcome[0]) and "metadata.json" in str(outcome[0])
    assert not (home / "models" / "tiny").exists()


def test_15_reproduce_budget_values_are_range_checked(capsys):
    """15. ``tt-zoo reproduce --budget`` values outside their flag's range: a usage error
    naming --budget and the field, before anything runs."""
    from tt_zoo.cli import reproduce
    for item, field in (("batch_size=0", "batch_size"), ("learning_rate=nan", "learning_rate"),
                        ("steps=-5", "steps"), ("document_length=2", "document_length")):
        with pytest.raises(SystemExit) as stop:
            reproduce.parse_args(["--stages", "report", "--budget", item])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"--budget: {field}" in err and "must be" in err, err
    assert reproduce.parse_args(["--stages", "report", "--budget", "steps=5"]).budget.steps == 5


def test_16_odqa_k_is_range_checked(capsys):
    """16. ``tt-zoo odqa --k 99999999999999``: a usage error naming --k and its range."""
    from tt_zoo.cli import odqa
    for value in ("99999999999999", "5,0", "1,x"):
        with pytest.raises(SystemExit) as stop:
            odqa.parse_args(["--bm25", "--k", value])
        assert stop.value.code == 2
        assert "--k" in capsys.readouterr().err
    assert odqa.parse_args(["--bm25", "--k", "20,1"]).ks == (1, 20)


def test_17_ship_shares_arrays_only_with_a_registered_name(exported, tmp_path, monkeypatch):
    """17. ``ship --float16 --share-with PATH``: refused (a path moves; only a registered,
    shipped name is recorded), before anything is written."""
    from tt_zoo.zoo import shipping
    monkeypatch.setitem(registry.REGISTRY, NAME, dataclasses.replace(
        registry.get_spec(NAME), embedding_dim=8))
    saved, shipped_file = tmp_path / "saved_models", tmp_path / "shipped.json"
    with pytest.raises(TtZooError, match=r"share_with .*is not a registered, shipped model"):
        shipping.ship(exported.path, NAME, float16=True, share_with=str(exported.path),
                      saved_models=saved, shipped_file=shipped_file, log=lambda line: None)
    assert not saved.exists() and not shipped_file.exists()


def test_18_passage_embeddings_are_checked_row_by_row(exported, tmp_path):
    """18. --passage-embeddings with a NaN row, 12 of 20 rows zeroed or another model's, or
    strings: refused naming the flag's file."""
    from tt_zoo.training.query_adaptation import check_passage_embeddings
    model = tt_zoo.load(exported.path).keras_model
    texts = [f"passage number {i} about paris" for i in range(20)]
    titles = [f"title {i}" for i in range(20)]
    good = model.encode_documents(texts, titles=titles)
    where = "--passage-embeddings p.npy"
    assert min(check_passage_embeddings(model, good, titles, texts, where)) > 0.999
    unsampled = [1, 3, 4, 6, 7, 9, 11, 12, 14, 15, 17, 18]  # what the old 8-row sample missed
    other = np.random.default_rng(0).normal(size=good.shape).astype("float32")
    for bad, why in ((np.where(np.arange(20)[:, None] == 3, np.nan, good), "not finite"),
                     (np.where(np.isin(np.arange(20), unsampled)[:, None], 0.0, good), "zero"),
                     (np.where(np.isin(np.arange(20), unsampled)[:, None], other, good),
                      "cosine")):
        with pytest.raises(ValueError, match=rf"^--passage-embeddings p.npy: row \d+ .*{why}"):
            check_passage_embeddings(model, bad.astype("float32"), titles, texts, where)
    np.save(tmp_path / "s.npy", np.array([["a"] * 8] * 20))
    with pytest.raises(ValueError, match=r"^--passage-embeddings p.npy: .*<U1.*float"):
        check_passage_embeddings(model, np.load(tmp_path / "s.npy", mmap_mode="r"), titles,
                                 texts, where)


def _checkpoint_error(folder) -> str:
    from tt_zoo.modeling.checkpoints import read_checkpoint
    with pytest.raises(ArtifactError) as e:
        read_checkpoint(folder)
    return str(e.value)


def test_19_import_checkpoint_refuses_what_it_would_not_import_faithfully(tmp_path):
    """19. NaN weights, a layer_norm_eps the encoder does not use, weights of layers the config
    does not have, a malformed modules.json, a layer_norm_eps or max_seq_length that is no
    setting: errors naming the file and the key."""
    from bert_reference import random_bert_weights, write_hf_folder
    from helpers import tiny_vocab
    weights = random_bert_weights(len(tiny_vocab()), hidden=16, inner=32)
    nan = dict(weights, **{"encoder.layer.0.output.dense.weight": np.full((16, 32), np.nan,
                                                                          "float32")})
    folder, _, _ = write_hf_folder(tmp_path / "nan", weights=nan)
    assert "'encoder.layer.0.output.dense.weight' holds NaN or infinite" in _checkpoint_error(
        folder)
    extra = dict(weights, **{k.replace("layer.1.", "layer.2."): v for k, v in weights.items()
                             if k.startswith("encoder.layer.1.")})
    folder, _, _ = write_hf_folder(tmp_path / "extra", weights=extra)
    assert "encoder.layer.2." in _checkpoint_error(folder) and "2 layers" in _checkpoint_error(
        folder)
    for eps, said in ((1e-5, "1e-05 is not"), ("abc", "'abc'")):
        folder, _, _ = write_hf_folder(tmp_path / f"eps{eps}",
                                       config_overrides={"layer_norm_eps": eps})
        message = _checkpoint_error(folder)
        assert "config.json" in message and "layer_norm_eps" in message and said in message
    folder, _, _ = write_hf_folder(tmp_path / "modules")
    for text in ("{not json", '{"type": "Normalize"}', "[1, 2]"):
        (folder / "modules.json").write_text(text)
        assert "modules.json" in _checkpoint_error(folder)
    folder, _, _ = write_hf_folder(tmp_path / "short")
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 2}))
    message = _checkpoint_error(folder)
    assert "sentence_bert_config.json" in message and "'max_seq_length'" in message


def test_20_bytes_passages_are_decoded_when_indexed(exported, tmp_path):
    """20. ``index(['a', b'b'])``: bytes are UTF-8 text (saved and loaded as str); bytes that
    are not UTF-8 are refused at index(), naming the argument."""
    model = tt_zoo.load(exported.path)
    index = model.index(["a passage", b"another passage"], titles=[b"t", "u"], ids=[b"x", "y"],
                        backend="brute_force")
    loaded = model.load_index(index.save(tmp_path / "index"))
    assert loaded.texts == ["a passage", "another passage"] and loaded.titles == ["t", "u"]
    assert list(loaded.ids) == ["x", "y"]
    with pytest.raises(ValueError, match=r"^texts\[1\] is bytes that are not UTF-8"):
        model.index(["a", b"\xff\xfe"])


def test_21_an_export_its_loader_would_refuse_is_not_written(exported, tmp_path):
    """21. Task markers that are not one word: refused before anything is written."""
    model = tt_zoo.load(exported.path)
    with pytest.raises(TtZooError, match=r"task_markers must map each task class to one marker "
                                         r"word"):
        model.export(tmp_path / "m", {"task_markers": {"qa": "two words"},
                                      "default_task_class": "qa"})
    assert not (tmp_path / "m").exists()


def _copy(source, path, edit=None) -> pathlib.Path:
    shutil.copytree(source, path)
    if edit is not None:
        _edit_metadata(path, edit)
    return path


def test_22_edited_cards_name_what_is_wrong(exported, tmp_path, home):
    """22. "kind" set to term_weights on a two-tower export, storage injected into a float32
    export or removed from a float16 one: an ArtifactError naming metadata.json and the key."""
    kind = _copy(exported.path, tmp_path / "kind", lambda m: m.update(kind="term_weights"))
    with pytest.raises(ArtifactError, match=r"kind/metadata.json says .*term_weights.*"
                                            r"config.json .*TwoTowerModel"):
        tt_zoo.load(kind)
    storage = {"weights": "float16", "arrays": 3, "float32_sha256": "0" * 64}
    injected = _copy(exported.path, tmp_path / "injected", lambda m: m.update(storage=storage))
    with pytest.raises(ArtifactError, match=r"injected/metadata.json: storage"):
        tt_zoo.load(injected)
    compact = tmp_path / "compact"
    compact.mkdir()
    float16_storage.write_float16(exported.path, compact)
    removed = _copy(compact, tmp_path / "removed", lambda m: m.pop("storage"))
    with pytest.raises(ArtifactError, match=r"removed/metadata.json: storage") as e:
        tt_zoo.load(removed)
    assert "load it with tt_zoo.load" not in str(e.value)


def test_22_api_arguments_that_are_no_sequence_are_named(exported):
    """22. ``index(ids=5)``, ``search_batch(None)``: a TypeError naming the argument."""
    model = tt_zoo.load(exported.path)
    with pytest.raises(TypeError, match=r"^ids must be"):
        model.index(["a", "b"], ids=5)
    with pytest.raises(ValueError, match=r"^ids and texts differ in length"):
        model.index(["a", "b"], ids=["x"])
    with pytest.raises(TypeError, match=r"^queries must be"):
        model.index(["a"], backend="brute_force").search_batch(None)


def test_22_environment_variables_are_checked(tmp_path, monkeypatch):
    """22. TT_ZOO_BASE_URL that does not parse, or padded with spaces; TT_ZOO_HOME a file."""
    spec = registry.get_spec(NAME)
    monkeypatch.setenv(download.BASE_URL_ENV, "http://[::1")
    with pytest.raises(DownloadError, match=r"TT_ZOO_BASE_URL='http://\[::1' is not a URL"):
        download.artifact_url(spec)
    monkeypatch.setenv(download.BASE_URL_ENV, "  http://mirror/saved_models/  ")
    assert download.artifact_url(spec) == f"http://mirror/saved_models/{spec.artifact}"
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "file"))
    with pytest.raises(TtZooError, match=r"TT_ZOO_HOME=.*file is not a folder"):
        download.home()


def test_22_a_damaged_pair_shard_is_named(tmp_path):
    """22. A flipped byte in a pairs shard (its size unchanged): the error names the shard."""
    from tt_zoo.data.pairs_io import IncompleteOutputError, read_pair_texts, write_pair_shards
    from tt_zoo.data.pretraining_tasks import Pair
    pairs = [Pair(query=f"q {i}", doc_title="t", doc_text=f"passage {i}", doc_id=f"d{i}",
                  task="ict") for i in range(20)]
    write_pair_shards(pairs, str(tmp_path / "pairs"), num_shards=2)
    shard = sorted((tmp_path / "pairs").glob("*-of-*"))[1]
    raw = bytearray(shard.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(IncompleteOutputError, match=rf"{shard.name} is corrupted"):
        read_pair_texts(str(tmp_path / "pairs"))


def test_22_ship_checks_record_from_first_and_names_an_unfinished_ship(exported, tmp_path,
                                                                      home, monkeypatch):
    """22. ``ship --record-from notjson``: refused naming the file before anything ships; an
    export whose registry entry a killed ship did not update: named as such, not "Re-train"."""
    from tt_zoo.cli import ship
    monkeypatch.setattr(registry, "SHIPPED_FILE", tmp_path / "shipped.json")
    monkeypatch.setitem(registry.REGISTRY, NAME, dataclasses.replace(
        registry.get_spec(NAME), embedding_dim=8))
    (tmp_path / "notjson").write_text("not json")
    with pytest.raises(SystemExit, match=r"--record-from: .*notjson is not valid JSON"):
        ship.main([NAME, "--export", str(exported.path), "--record-from",
                   str(tmp_path / "notjson")])
    assert not (tmp_path / "saved_models").exists() and not (tmp_path / "shipped.json").exists()

    shipped = _copy(exported.path, tmp_path / "saved_models" / "tiny")
    _ship_as(monkeypatch, NAME, shipped, "1" * 64)  # the entry of the export it replaced
    with pytest.raises(ArtifactError, match=r"another export than the registry's .*tt-zoo "
                                            r"ship") as e:
        tt_zoo.load(NAME)
    assert "Re-train" not in str(e.value)
