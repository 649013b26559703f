"""notebooks/: each runs top to bottom (small settings) and still prints what its committed
outputs show, so a notebook whose code changed without a rerun is caught."""

import ast
import time

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import REPO_ROOT, data_file

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def check_line(book) -> dict:
    """The dict a notebook's last cell prints as ``CHECK {...}``."""
    for cell in reversed(book.cells):
        for output in cell.get("outputs", []):
            for line in output.get("text", "").splitlines():
                if line.startswith("CHECK "):
                    return ast.literal_eval(line[len("CHECK "):])
    raise AssertionError("the notebook printed no CHECK line")


def test_three_notebooks_are_committed_with_outputs_and_pictures():
    assert [p.name for p in NOTEBOOKS] == ["01_quickstart.ipynb", "02_finetune.ipynb",
                                           "03_pretrain_and_serve.ipynb"]
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        code = [c for c in book.cells if c.cell_type == "code"]
        assert all(c.get("execution_count") for c in code), f"{path.name} is not fully executed"
        assert not [o for c in code for o in c.outputs if o.output_type == "error"], path.name
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"{path.name} has no plot"
        check_line(book)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_matches_its_committed_outputs(path, tmp_path, monkeypatch):
    data_file("squad/dev-v1.1.json")
    monkeypatch.setenv("TT_ZOO_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("TT_ZOO_DATA", str(data_file("")))
    committed = nbformat.read(path, as_version=4)
    book = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(book, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    print(f"{path.name}: {seconds:.0f} s with small settings")
    assert check_line(book) == check_line(committed), (
        f"{path.name}: its code now prints other results than its committed outputs; rerun it "
        "(see notebooks/README.md)")
    assert seconds < 300, f"{path.name} took {seconds:.0f} s (budget: 3 minutes on CI)"
