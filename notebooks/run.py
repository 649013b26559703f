"""Executes notebooks in place with their full settings, so their committed outputs are current.

  .venv/bin/python notebooks/run.py                 # all three
  .venv/bin/python notebooks/run.py notebooks/02_finetune.ipynb

`make test` re-executes them with TT_ZOO_NOTEBOOK_SMALL=1 (tests/test_notebooks.py) and fails
when what they print no longer matches these committed outputs.
"""

import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent


def main(paths) -> None:
    for path in paths or sorted(HERE.glob("*.ipynb")):
        path = pathlib.Path(path)
        book = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        NotebookClient(book, timeout=1800, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        nbformat.write(book, path)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
