"""The README's and docs/'s code runs as written: every ```python block marked ``<!-- runnable -->``
runs, in order, in one fresh interpreter (a user pasting them into one session, with none of the
TF_* variables the test run sets), and prints exactly the block marked ``<!-- output -->`` after
it, with nothing on stderr. The pages of docs/ run in one more interpreter, each page's blocks in
a namespace of their own (as if pasted into a fresh session: TensorFlow is imported once). A
Python block that does not run says why: ``<!-- not run: REASON -->``."""

import re

import pytest

from conftest import DATA_DIR, REPO_ROOT
from helpers import run_as_a_user

README = REPO_ROOT / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
PYTHON_BLOCK = re.compile(r"^(?:<!-- (.*?) -->\n)?```python\n", re.M)
BLOCK = re.compile(r"^<!-- (runnable|output) -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)
END = "\x1e end of README block"  # printed after each block, to split what each prints


def marked_blocks(text: str) -> list:
    """``[(code, expected output or None)]`` of the runnable blocks, in README order."""
    blocks = []
    for kind, body in BLOCK.findall(text):
        if kind == "runnable":
            blocks.append([body, None])
        else:
            assert blocks and blocks[-1][1] is None, "an output block follows no runnable block"
            blocks[-1][1] = body
    return [tuple(b) for b in blocks]


def test_marked_blocks_are_found():
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 2, "the Quick start has no runnable blocks"
    assert "tt_zoo.load(" in blocks[0][0] and "model.fit(" in "".join(c for c, _ in blocks)
    assert all(code.strip() for code, _ in blocks)


def test_runnable_blocks_run_and_print_what_the_readme_shows(tmp_path):
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    script = "".join(f"{code}\nprint({END!r}, flush=True)\n" for code, _ in blocks)
    proc = run_as_a_user(["-c", script], cwd=tmp_path, TT_ZOO_DATA=str(DATA_DIR))
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = proc.stdout.split(f"{END}\n")
    assert len(printed) == len(blocks) + 1 and printed[-1] == "", proc.stdout
    for i, ((code, expected), got) in enumerate(zip(blocks, printed)):
        if expected is not None:
            assert got == expected, f"README block {i + 1} printed:\n{got}\nnot:\n{expected}"
    assert proc.stderr == "", proc.stderr[-3000:]


def test_every_python_block_runs_or_says_why_not():
    for page in [README, *DOCS]:
        for match in PYTHON_BLOCK.finditer(page.read_text(encoding="utf-8")):
            marker = match.group(1) or ""
            assert marker == "runnable" or marker.startswith("not run: "), (
                f"{page.name}: a ```python block is neither <!-- runnable --> nor "
                f"<!-- not run: REASON --> (at {match.start()})")


def test_docs_blocks_run_and_print_what_the_pages_show(tmp_path):
    pages = {page: marked_blocks(page.read_text(encoding="utf-8")) for page in DOCS}
    pages = {page: blocks for page, blocks in pages.items() if blocks}
    assert pages, "no page of docs/ has a runnable block"
    script = "import tt_zoo\n"  # as each page's first block does: TF starts quiet
    for page, blocks in pages.items():
        script += "namespace = {'__name__': '__main__'}\n"
        script += "".join(f"exec(compile({code!r}, {page.name!r}, 'exec'), namespace)\n"
                          f"print({END!r}, flush=True)\n" for code, _ in blocks)
    proc = run_as_a_user(["-c", script], cwd=tmp_path, TT_ZOO_DATA=str(DATA_DIR))
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = iter(proc.stdout.split(f"{END}\n"))
    for page, blocks in pages.items():
        for i, (code, expected) in enumerate(blocks):
            got = next(printed)
            if expected is not None:
                assert got == expected, f"{page.name} block {i + 1} printed:\n{got}\nnot:\n{expected}"
    assert next(printed) == "" and next(printed, None) is None, proc.stdout
    assert proc.stderr == "", proc.stderr[-3000:]


@pytest.mark.slow  # the README's runs again (~1-2 min): the other import order
def test_runnable_blocks_print_nothing_on_stderr_with_tensorflow_imported_first(tmp_path):
    """The same blocks after ``import tensorflow as tf``: once tt_zoo is imported, stderr gets
    nothing (no C++ line, no WARNING:tensorflow); before it, TensorFlow's own import lines are
    TensorFlow's."""
    mark = "-- tensorflow imported; the README next --"
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    script = (f"import sys\nimport tensorflow as tf\nsys.stderr.write({mark!r} + '\\n')\n"
              "sys.stderr.flush()\n" + "".join(code + "\n" for code, _ in blocks))
    # (PYTHONPATH: this checkout's tt_zoo, whichever one the interpreter has installed.)
    proc = run_as_a_user(["-c", script], cwd=tmp_path, TT_ZOO_DATA=str(DATA_DIR),
                         PYTHONPATH=str(REPO_ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = proc.stderr.split(mark + "\n", 1)[1]
    assert after == "", after[-3000:]
