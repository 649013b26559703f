"""Shared test fixtures: the data path and small real slices of the shared data."""

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
