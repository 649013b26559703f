"""Shared test fixtures: the data path, small real slices of the shared data, a tiny exported
model and a local HTTP server. (Plain helpers and data live in helpers.py.)"""

import os
import pathlib

import pytest

import tt_zoo  # noqa: F401  (before any test imports TensorFlow: sets Keras 2 as tf.keras)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA_DIR = pathlib.Path(os.environ.get("TT_ZOO_DATA", REPO_ROOT.parent / "shared" / "data"))


def data_file(relative: str) -> pathlib.Path:
    """Returns a file under TT_ZOO_DATA, or skips the test with the reason when it is absent."""
    path = DATA_DIR / relative
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent (set TT_ZOO_DATA to the data folder)")
    return path


@pytest.fixture
def bert_vocab_file():
    return data_file("bert-vocab/vocab.txt")


TINY_EXPORT_METADATA = {"name": "tiny_test", "encoder": "bert", "pretraining": "none"}


@pytest.fixture(scope="module")
def exported(request, tmp_path_factory):
    """`helpers.tiny_model()` exported once per test module: ``(model, path, meta)``, `meta` as
    `export_saved_model` returned it. A module sets ``TINY_EXPORT_METADATA`` to choose the
    metadata written (default: name "tiny_test", encoder "bert", pretraining "none")."""
    from helpers import TinyExport, tiny_model
    from tt_zoo.artifacts.export import export_saved_model

    model = tiny_model()
    model.build_by_calling()
    path = tmp_path_factory.mktemp("exported") / "tiny"
    metadata = getattr(request.module, "TINY_EXPORT_METADATA", TINY_EXPORT_METADATA)
    meta = export_saved_model(model, path, dict(metadata))
    return TinyExport(model, path, meta)


class LocalServer:
    """An HTTP server on 127.0.0.1 (a free port) serving one folder from a thread; `requests`
    lists the paths asked for. `stop()` closes it (later connections are refused)."""

    def __init__(self, directory):
        import functools
        import http.server
        import threading

        requests = self.requests = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # quiet; record what was asked instead
                requests.append(self.path)

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(directory)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread.is_alive():
            self.server.shutdown()
            self._thread.join()
        self.server.server_close()


@pytest.fixture
def http_server():
    """Starts `LocalServer`s: ``http_server(folder)`` serves `folder`; all stop at teardown."""
    servers = []

    def serve(directory) -> LocalServer:
        servers.append(LocalServer(directory))
        return servers[-1]

    yield serve
    for server in servers:
        server.stop()
