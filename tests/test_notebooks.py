"""notebooks/: each runs top to bottom (small settings) and its check (notebooks/run.py's
`CHECKS`, evaluated in the kernel after the last cell) still gives the value recorded in its
metadata, so a notebook whose code changed without a rerun is caught; committed outputs show
no harness lines and no native-library noise."""

import importlib.util
import time

import nbformat
import pytest

from conftest import REPO_ROOT, data_file

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
# Lines a reader should never see in a committed output: the old harness line, TensorFlow's CUDA
# probe and oneDNN notes, ScaNN's absl logs, Keras' warning about the unused pooler.
NOISE = ("CHECK {", "cuInit", "oneDNN", "absl::InitializeLog", "I0000 ", "W0000 ", "E0000 ",
         "partitioner_factory_base", "Gradients do not exist", "WARNING:tensorflow")


def runner():
    """notebooks/run.py, imported by path (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("notebook_runner",
                                                  REPO_ROOT / "notebooks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def output_texts(book) -> list:
    texts = []
    for cell in book.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            texts.extend(str(v) for k, v in output.get("data", {}).items()
                         if k.startswith("text/"))
    return texts


def test_three_notebooks_are_committed_with_outputs_pictures_and_checks():
    run = runner()
    assert [p.name for p in NOTEBOOKS] == ["01_quickstart.ipynb", "02_finetune.ipynb",
                                           "03_pretrain_and_serve.ipynb"]
    assert sorted(run.CHECKS) == [p.name for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        code = [c for c in book.cells if c.cell_type == "code"]
        assert all(c.get("execution_count") for c in code), f"{path.name} is not fully executed"
        assert not [o for c in code for o in c.outputs if o.output_type == "error"], path.name
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"{path.name} has no plot"
        assert isinstance(book.metadata.get(run.CHECK_METADATA), dict), (
            f"{path.name} has no recorded check: run notebooks/run.py")
        noisy = [line for text in output_texts(book) for line in text.splitlines()
                 if any(n in line for n in NOISE)]
        assert noisy == [], f"{path.name} shows: {noisy[:5]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_matches_its_committed_check(path, monkeypatch):
    data_file("squad/dev-v1.1.json")
    monkeypatch.setenv("TT_ZOO_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("TT_ZOO_DATA", str(data_file("")))
    run = runner()
    committed = nbformat.read(path, as_version=4).metadata[run.CHECK_METADATA]
    book = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    check = run.execute(book, path, timeout=600)
    seconds = time.perf_counter() - start
    print(f"{path.name}: {seconds:.0f} s with small settings")
    assert check == committed, (
        f"{path.name}: its code now gives other results than its committed outputs; rerun it "
        "(.venv/bin/python notebooks/run.py)")
    assert seconds < 300, f"{path.name} took {seconds:.0f} s (budget: 3 minutes on CI)"
