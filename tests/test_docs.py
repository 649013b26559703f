"""The user's documents: README.md stays short, README.md and docs/ speak to a reader who was not
there (no issue numbers, sessions or dated runs), their relative links resolve, and the generated
parts (the README's shipped-models table, results/README.md) match what generates them.
(tests/test_readme.py runs their code blocks.)"""

import pathlib
import re

from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 300
# Run-history wording: issue numbers, sessions, "this turn", dated runs (2026-11-24).
HISTORY = re.compile(r"\bissues?\b|\bsessions?\b|\bthis turn\b|\b20\d\d-\d\d-\d\d\b", re.I)
# (page name, the exact phrase, why it has to stay): none is needed today.
ALLOWED = []
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, (
        f"README.md has {lines} lines (at most {MAX_README_LINES}): studies and run histories "
        "belong on a page of docs/")


def test_no_run_history_wording_in_the_user_documents():
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for match in HISTORY.finditer(line):
                if not any(page.name == name and phrase in line for name, phrase, _ in ALLOWED):
                    found.append(f"{page.relative_to(REPO_ROOT)}:{number}: {match.group(0)!r} "
                                 f"in {line.strip()[:100]!r}")
    assert not found, "write for a reader who was not there:\n" + "\n".join(found)


def _anchors(page: pathlib.Path) -> set:
    """GitHub's heading anchors of a Markdown page."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.*)$", text, re.M)}


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES + [REPO_ROOT / "results" / "README.md"]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.name}: {target} (no {resolved})")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page.name}: {target} (no heading #{anchor})")
    assert not broken, "\n".join(broken)


def test_the_readme_table_of_shipped_models_is_the_generated_one():
    from benchmarks import docs_tables

    text = README.read_text(encoding="utf-8")
    assert docs_tables.BEGIN in text and docs_tables.END in text
    assert text == docs_tables.readme_with_table(text, docs_tables.shipped_models_markdown()), (
        "README.md's shipped-models table is out of date: run python -m benchmarks.docs_tables")


def test_the_shipped_models_table_has_one_line_per_shipped_model_and_bm25():
    from benchmarks import docs_tables
    from tt_zoo.zoo import registry

    rows = docs_tables.shipped_models_markdown().splitlines()[2:]
    shipped = [name for name, spec in registry.REGISTRY.items() if spec.shipped]
    assert len(rows) == len(shipped) + 1 and rows[-1].startswith("| BM25")
    for name in shipped:
        (row,) = [r for r in rows if r.startswith(f"| `{name}`")]
        spec = registry.REGISTRY[name]
        lineage = docs_tables._lineage(spec, registry)  # a model trained from one that did
        trained_on_reqa = any(s.multitask is not None and "reqa" in s.multitask.tasks.task
                              for s in lineage)
        assert ("†" in row.split(" | ")[0]) == trained_on_reqa, row
    # recorded from rows the run named otherwise, scored as its own exact search
    (adapted,) = [r for r in rows
                  if r.startswith("| `adapted_multitask_static_minilm_l6_384` † |")]
    assert "| exact search |" in adapted
    # the numbers are the cards' (two decimals there, one here, half up: 40.25 -> 40.3)
    assert "| `ict_bfs_wlp_512` |" in rows[7] and rows[7].endswith("| 78.2 | – | 40.3 |")
    assert rows[-1].endswith("| 97.6 | 97.6 | 56.4 |")


def test_the_results_index_lists_every_results_file_and_no_other():
    from benchmarks import docs_tables

    index = (REPO_ROOT / "results" / "README.md").read_text(encoding="utf-8")
    assert index == docs_tables.results_index(), (
        "results/README.md is out of date: run python -m benchmarks.docs_tables")
    listed = set(re.findall(r"\[([^\]/]+)\]\(\1\)", index))
    present = {p.name for p in (REPO_ROOT / "results").iterdir()
               if p.is_file() and p.name != "README.md"}
    assert listed == present


def test_the_counts_of_registered_names_in_the_docs_are_the_registrys():
    """docs/models.md counts the registered variants of each family; the README counts none
    (its generated table lists what loads)."""
    from tt_zoo.zoo import registry

    specs = registry.REGISTRY.values()
    two_tower = sum(1 for s in specs if s.kind == "two_tower" and s.imported is None
                    and s.init_from is None and not s.name.startswith("multitask"))
    colbert = sum(1 for s in specs if s.kind == "late_interaction"
                  and not s.name.startswith("multitask"))
    hdct = sum(1 for s in specs if s.kind == "term_weights")
    text = " ".join((REPO_ROOT / "docs" / "models.md").read_text(encoding="utf-8").split())
    assert f"{two_tower} names such as" in text
    assert f"`colbert_<tasks>_<m>` ({colbert})" in text and f"`hdct_<tasks>` models ({hdct})" in text
    readme = README.read_text(encoding="utf-8")
    assert not re.search(r"\b(\d+|[A-Z][a-z]+-[a-z]+) models load\b|variants? \(\d+\)", readme)
