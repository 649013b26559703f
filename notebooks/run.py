"""Executes notebooks in place with their full settings, so their committed outputs are current.

  .venv/bin/python notebooks/run.py                 # all three
  .venv/bin/python notebooks/run.py notebooks/02_finetune.ipynb

What each notebook must keep producing is checked without showing in it: `CHECKS` holds an
expression over the notebook's variables; `execute` runs the notebook, then evaluates that
expression in the same kernel (in a cell added for it and removed again), and `main` records
its value in the notebook's metadata under `CHECK_METADATA`, which Jupyter does not display.
`make test` re-executes each notebook with TT_ZOO_NOTEBOOK_SMALL=1 (tests/test_notebooks.py) and
fails when its check no longer gives the committed value.
"""

import json
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
CHECK_METADATA = "tt_zoo_check"
CHECKS = {
    "01_quickstart.ipynb": '{"embedding_dim": int(index.embedding_index.dim), '
                           '"recall_keys": sorted(model_recall), '
                           '"hit_fields": sorted(vars(hits[0]))}',
    "02_finetune.ipynb": '{"history_keys": sorted(history.history), "metrics": sorted(after), '
                         '"card": sorted(k for k in ("base_model", "fine_tuning") if k in meta)}',
    "03_pretrain_and_serve.ipynb": '{"signatures": meta["signatures"], '
                                   '"response_keys": sorted(response), '
                                   '"retrieve_outputs": sorted(result)}',
}


def execute(book, path: pathlib.Path, timeout: int = 1800) -> dict:
    """Executes `book` (read from `path`) in place, in `path`'s folder, and returns the value
    of its `CHECKS` expression, evaluated in the kernel after the last cell (JSON types)."""
    if path.name not in CHECKS:
        raise KeyError(f"{path.name} has no entry in CHECKS of {__file__}.")
    cell = nbformat.v4.new_code_cell(
        f"import json as _json\nprint(_json.dumps({CHECKS[path.name]}))")
    book.cells.append(cell)
    try:
        NotebookClient(book, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        book.cells = [c for c in book.cells if c is not cell]
    printed = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
    return json.loads(printed.strip().splitlines()[-1])


def main(paths) -> None:
    for path in paths or sorted(HERE.glob("*.ipynb")):
        path = pathlib.Path(path)
        book = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        book.metadata[CHECK_METADATA] = execute(book, path)
        nbformat.write(book, path)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
