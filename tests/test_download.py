"""Weights by name anywhere: `tt_zoo.load(name)` from the clone, the cache, or a download
(against a local HTTP server on 127.0.0.1), and from a wheel installed in a fresh venv."""

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

import tt_zoo
from helpers import assert_matches_golden, read_golden
from tt_zoo.artifacts import download
from tt_zoo.zoo import registry
from tt_zoo.errors import ArtifactError, DownloadError, TtZooError
from tt_zoo.manifest import describe_files

REPO = pathlib.Path(__file__).resolve().parents[1]
NAME = "bow_mlp_none_512"  # a small shipped export (14 MiB) that loads fast
SPEC = registry.get_spec(NAME)
CLONE_COPY = registry.SAVED_MODELS_DIR / SPEC.artifact


@pytest.fixture
def home(monkeypatch, tmp_path):
    """The clone's saved_models/ made invisible, and an empty TT_ZOO_HOME."""
    monkeypatch.setattr(registry, "SAVED_MODELS_DIR", tmp_path / "no_clone" / "saved_models")
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv(download.BASE_URL_ENV, raising=False)
    return tmp_path / "home"


def served_copy(tmp_path) -> pathlib.Path:
    """A folder laid out like saved_models/, holding a copy of NAME's export."""
    root = tmp_path / "served"
    shutil.copytree(CLONE_COPY, root / SPEC.artifact)
    return root


def cache_is_empty(home: pathlib.Path) -> bool:
    return not [p for p in home.rglob("*") if p.is_file()]


def test_shipped_entries_record_their_release_url():
    """(An imported checkpoint is built from its registry package, never downloaded.)"""
    for name in tt_zoo.list_models(shipped_only=True):
        spec = registry.get_spec(name)
        if spec.imported is not None:
            assert spec.url is None
            continue
        assert spec.url == download.release_url(spec.artifact) == download.artifact_url(spec)


def test_the_clone_comes_before_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(download.HOME_ENV, str(tmp_path / "home"))
    shutil.copytree(CLONE_COPY, download.cache_path(SPEC.artifact))
    assert download.locate(SPEC) == CLONE_COPY


def test_load_by_name_downloads_verifies_and_caches(home, tmp_path, http_server, monkeypatch,
                                                    capsys):
    server = http_server(served_copy(tmp_path))
    # The registry entry's own URL (no TT_ZOO_BASE_URL), pointed at the local server.
    monkeypatch.setitem(registry.REGISTRY, NAME,
                        dataclasses.replace(SPEC, url=f"{server.url}/{SPEC.artifact}"))
    model = tt_zoo.load(NAME)
    printed = capsys.readouterr().err  # stderr is no terminal here: one line, no bar
    assert f"tt_zoo: downloading {NAME}" in printed and "%|" not in printed
    assert model.path == home / "models" / SPEC.artifact
    assert server.requests[0] == f"/{SPEC.artifact}/metadata.json"  # checked before the rest
    assert describe_files(model.path) == describe_files(CLONE_COPY)  # every file, card included
    golden = read_golden(NAME)
    queries = model.encode_queries(golden["queries"])
    assert_matches_golden(golden, queries,
                          model.encode_documents(golden["passages"], titles=golden["titles"]))

    server.stop()  # the second load finds the cache and asks nobody
    again = tt_zoo.load(NAME)
    assert again.path == model.path
    assert_matches_golden(golden, again.encode_queries(golden["queries"]),
                          again.encode_documents(golden["passages"], titles=golden["titles"]))


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_damaged_download_is_refused_and_nothing_is_cached(home, tmp_path, http_server,
                                                             monkeypatch, damage):
    root = served_copy(tmp_path)
    weights = next((root / SPEC.artifact / "variables").glob("variables.data-*"))
    data = bytearray(weights.read_bytes())
    if damage == "flipped":
        data[len(data) // 2] ^= 0xFF
    else:
        del data[-100:]
    weights.write_bytes(bytes(data))
    monkeypatch.setenv(download.BASE_URL_ENV, http_server(root).url)
    with pytest.raises(ArtifactError, match=r"variables/variables\.data-.*corrupted or truncated"):
        tt_zoo.load(NAME)
    assert cache_is_empty(home)


def test_metadata_that_differs_from_the_registry_stops_the_download(home, tmp_path,
                                                                     http_server, monkeypatch):
    root = served_copy(tmp_path)
    meta_path = root / SPEC.artifact / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["files"]["saved_model.pb"]["size"] += 1
    meta_path.write_text(json.dumps(meta))
    server = http_server(root)
    monkeypatch.setenv(download.BASE_URL_ENV, server.url)
    with pytest.raises(ArtifactError, match="describes other files than the registry"):
        tt_zoo.load(NAME)
    assert server.requests == [f"/{SPEC.artifact}/metadata.json"]
    assert cache_is_empty(home)


def test_offline_the_error_names_the_url_and_the_folder(home, tmp_path, http_server,
                                                        monkeypatch):
    (tmp_path / "empty").mkdir()
    server = http_server(tmp_path / "empty")  # nothing served: HTTP 404
    monkeypatch.setenv(download.BASE_URL_ENV, server.url)
    url = f"{server.url}/{SPEC.artifact}/metadata.json"
    with pytest.raises(DownloadError, match="HTTP 404") as not_found:
        tt_zoo.load(NAME)
    server.stop()  # the server is gone: connection refused
    with pytest.raises(TtZooError) as offline:
        tt_zoo.load(NAME)
    for error in (not_found.value, offline.value):
        assert isinstance(error, DownloadError)
        assert url in str(error) and str(home / "models" / SPEC.artifact) in str(error)
        assert f"saved_models/{SPEC.artifact}" in str(error)
    assert cache_is_empty(home)


def test_a_damaged_cache_says_how_to_download_again(home):
    cached = download.cache_path(SPEC.artifact)
    shutil.copytree(CLONE_COPY, cached)
    (cached / "config.json").write_text("{}")
    with pytest.raises(ArtifactError, match=f"tt_zoo's cache: delete {cached}"):
        tt_zoo.load(NAME)


def _run(args, **kwargs):
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


LOAD_BY_NAME = """
import json, sys
import tt_zoo
model = tt_zoo.load(sys.argv[1])
golden = json.loads(sys.argv[2])
print(json.dumps({
    "tt_zoo": tt_zoo.__file__, "path": str(model.path),
    "shipped": tt_zoo.list_models(shipped_only=True),
    "queries": model.encode_queries(golden["queries"]).tolist(),
    "documents": model.encode_documents(golden["passages"], titles=golden["titles"]).tolist()}))
"""


def test_the_wheel_installed_in_a_fresh_venv_loads_a_model_by_name(tmp_path, http_server):
    """`pip wheel` of the project holds the package and its list of shipped models but no
    weights; installed into a fresh venv (dependencies borrowed from this one through a .pth
    path line, which does not activate this venv's editable tt_zoo), it downloads a model by
    name from a local server into TT_ZOO_HOME, and the model gives the golden outputs."""
    source = tmp_path / "source"  # the project without its data folders, as an sdist holds it
    shutil.copytree(REPO / "tt_zoo", source / "tt_zoo",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in REPO.iterdir():
        if path.is_file() and not path.name.startswith("."):
            shutil.copy2(path, source / path.name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "--disable-pip-version-check", "-q", "-w", tmp_path / "dist", source])
    (wheel,) = (tmp_path / "dist").glob("tt_zoo-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tt_zoo/zoo/shipped_models.json" in names and "tt_zoo/artifacts/download.py" in names
    assert not [n for n in names if n.startswith("saved_models/") or n.endswith(".pb")]
    assert wheel.stat().st_size < 1 << 20, f"{wheel} holds {wheel.stat().st_size} bytes"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
          "--disable-pip-version-check", "-q", wheel])
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    ours = sysconfig.get_paths()
    pathlib.Path(site.stdout.strip(), "_tt_zoo_test_dependencies.pth").write_text(
        "\n".join(sorted({ours["purelib"], ours["platlib"]})) + "\n")

    server = http_server(served_copy(tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update({download.HOME_ENV: str(tmp_path / "home"), download.BASE_URL_ENV: server.url,
                "TF_CPP_MIN_LOG_LEVEL": "2"})
    (tmp_path / "cwd").mkdir()
    golden = read_golden(NAME)
    done = _run([python, "-I", "-c", LOAD_BY_NAME, NAME, json.dumps(golden)], env=env,
                cwd=tmp_path / "cwd")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert pathlib.Path(result["tt_zoo"]).is_relative_to(venv), result["tt_zoo"]
    assert result["path"] == str(tmp_path / "home" / "models" / SPEC.artifact)
    # (Its TT_ZOO_HOME is empty: an optional teacher imported into this machine's cache by
    # `make teacher` is not listed there.)
    optional = {n for n, s in registry.REGISTRY.items() if s.imported and s.imported.optional}
    assert set(result["shipped"]) == set(tt_zoo.list_models(shipped_only=True)) - optional
    assert f"/{SPEC.artifact}/metadata.json" in server.requests
    assert_matches_golden(golden, result["queries"], result["documents"])
