"""`tt-zoo list`, `tt-zoo encode` and `tt-zoo search`, with conftest's tiny export."""

import json

import numpy as np
import pytest

from tt_zoo import cli
from tt_zoo.cli.list_models import headline
from tt_zoo.zoo.registry import REGISTRY, list_models

from conftest import REPO_ROOT
from helpers import run_as_a_user

PASSAGES = [{"id": "d0", "title": "penicillin", "text": "alexander fleming discovered penicillin."},
            {"id": "d1", "title": "paris", "text": "paris is the capital of france."},
            {"id": "d2", "title": "seine", "text": "the seine flows through paris."},
            {"id": "d3", "title": "water", "text": "water boils at 100 degrees."}]
QUERIES = ["who discovered penicillin?", "what river flows through paris?"]


def run(capsys, *argv):
    """`tt-zoo ARGV` in-process: (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def exits(capsys, *argv):
    """The exit code and stderr of a command that fails."""
    code, _, err = run(capsys, *argv)
    assert code != 0
    return code, err


@pytest.fixture(scope="module")
def loaded(exported):
    import tt_zoo
    return tt_zoo.load(exported.path)


@pytest.fixture
def tiny(exported, loaded, monkeypatch):
    """The tiny export's path; `tt_zoo.load` of it gives one model loaded once (the commands
    load their model through `tt_zoo.load`), any other name or path loads as usual."""
    import tt_zoo
    from tt_zoo.zoo import loading

    monkeypatch.setattr(tt_zoo, "load", lambda name: loaded if str(name) == str(exported.path)
                        else loading.load(name))
    return exported.path


@pytest.fixture
def passages_jsonl(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    return path


# ---------------------------------------------------------------------------------- list

def test_list_names_the_models_that_load_and_with_recipes_every_registered_one(capsys):
    code, out, _ = run(capsys, "list")
    rows = [line.split() for line in out.splitlines()]
    assert code == 0 and [r[0] for r in rows] == list_models() == list_models(shipped_only=True)
    # Beside each name, its ARCH.TAG (the same model's other name).
    assert [r[1] for r in rows] == [REGISTRY[r[0]].arch_tag for r in rows]
    assert sorted(r[1] for r in rows) == list_models(arch_tag=True)
    assert ["ict_bfs_wlp_512", "bert_tiny_512.ict_bfs_wlp"] in rows
    code, out, _ = run(capsys, "list", "--include-recipes")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == sorted(REGISTRY)
    code, out, _ = run(capsys, "list", "--shipped")
    head, *rows = out.splitlines()
    assert code == 0 and head.split()[:5] == ["name", "arch.tag", "kind", "encoder",
                                              "pretraining"]
    assert [r.split()[0] for r in rows] == list_models(shipped_only=True)
    flagship = next(r for r in rows if r.startswith("ict_bfs_wlp_512 "))
    metrics = dict(REGISTRY["ict_bfs_wlp_512"].metrics)
    assert flagship.split()[1:5] == ["bert_tiny_512.ict_bfs_wlp", "two-tower", "bert-tiny",
                                     "ict_bfs_wlp"]
    assert flagship.endswith(f"ReQA R@100 80% test {metrics['R@100 zero-shot 80%']:g}, "
                             f"ODQA R@20 {metrics['ODQA validation R@20']:g}")
    code, out, _ = run(capsys, "list", "ict_bfs_wlp_*", "--shipped", "--kind", "two_tower")
    assert [r.split()[0] for r in out.splitlines()[1:]] == [
        "ict_bfs_wlp_128", "ict_bfs_wlp_256", "ict_bfs_wlp_512", "ict_bfs_wlp_crop_span_qgen_512"]
    code, out, _ = run(capsys, "list", "bow_mlp_512.*")  # a pattern over the ARCH.TAG names
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list_models(
        "bow_mlp_512.*") and "bow_mlp_ict_bfs_wlp_512" in out and "bert_tiny" not in out
    code, _, err = run(capsys, "list", "nothing_like_this*")
    assert code == 1 and "no model that loads matches 'nothing_like_this*'" in err
    code, _, err = run(capsys, "list", "bert_base_*")  # recipes only: says how to see them
    assert code == 1 and "recipe(s) without weights match" in err and "--include-recipes" in err
    code, _, err = run(capsys, "list", "--shipped", "--include-recipes")
    assert code == 1 and "use one of them" in err


def test_headline_numbers_of_each_kind_of_card():
    assert headline({"R@100 zero-shot 80%": 78.19, "R@100 fine-tuned 1%": 81.09,
                     "ODQA validation R@20": 40.25}) == "ReQA R@100 80% test 78.19, ODQA R@20 40.25"
    # Late-interaction / term-weight cards: one number per search setting; the own search's
    # (tt_zoo.zoo.own_search): HDCT's BM25 with k1 10, unread plain; ColBERT's best mode.
    hdct = {"ReQA R@100, HDCT-weighted BM25 (k1 1.5, b 0.75)": 95.94,
            "ReQA R@100, HDCT-weighted BM25 (k1 10, unread plain)": 96.0,
            "ODQA validation R@20, HDCT-weighted BM25 (k1 10, unread plain)": 52.97,
            "ODQA validation R@20, convex(HDCT-weighted BM25, BM25)": 56.25}
    assert headline(hdct, "hdct", "term_weights") == "ReQA R@100 all 96, ODQA R@20 52.97"
    colbert = {"ODQA validation R@20, ColBERT end to end (token index, k' 64)": 42.27,
               "ODQA validation R@20, ColBERT re-ranking BM25@100": 54.45,
               "ReQA R@100, ColBERT end to end (token index, k' 64)": 92.38,
               "ReQA R@100, ColBERT re-ranking BM25@100": 97.64}
    assert headline(colbert, "colbert", "late_interaction") == "ReQA R@100 all 97.64, ODQA R@20 54.45"
    assert headline({}) == ""


def test_list_loads_no_tensorflow():
    script = ("import sys, contextlib, io\nfrom tt_zoo import cli\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    assert cli.main(['list', '--shipped']) == 0\n"
              "print([m for m in ('tensorflow', 'scann', 'bm25s') if m in sys.modules])\n")
    result = run_as_a_user(["-c", script], cwd=REPO_ROOT, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr[-2000:]


# -------------------------------------------------------------------------------- encode

def test_encode_documents_with_titles_and_queries(tiny, exported, passages_jsonl, tmp_path,
                                                  capsys):
    out = tmp_path / "docs.npy"
    code, stdout, _ = run(capsys, "encode", tiny, passages_jsonl, "-o", out, "--no-progress")
    assert code == 0 and f"wrote 4 x 8 document embeddings of tiny_test to {out}" in stdout
    np.testing.assert_allclose(
        np.load(out), exported.model.encode_documents([p["text"] for p in PASSAGES],
                                                      titles=[p["title"] for p in PASSAGES]),
        rtol=1e-5, atol=1e-6)
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(QUERIES) + "\n")
    code, _, _ = run(capsys, "encode", tiny, questions, "--queries", "--output",
                     tmp_path / "q.npy", "--batch-size", 1)
    np.testing.assert_allclose(np.load(tmp_path / "q.npy"),
                               exported.model.encode_queries(QUERIES), rtol=1e-5, atol=1e-6)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_encode_refuses_to_overwrite_without_the_flag(tiny, passages_jsonl, tmp_path, capsys):
    out = tmp_path / "docs.npy"
    out.write_bytes(b"keep")
    code, err = exits(capsys, "encode", tiny, passages_jsonl, "-o", out)
    assert code == 2 and "exists; pass --overwrite to replace it" in err
    assert out.read_bytes() == b"keep"
    assert run(capsys, "encode", tiny, passages_jsonl, "-o", out, "--overwrite",
               "--no-progress")[0] == 0
    assert np.load(out).shape == (4, 8)
    code, err = exits(capsys, "encode", tiny, passages_jsonl, "-o", tmp_path / "x.txt")
    assert code == 2 and "--output must be a .npy file" in err


def test_encode_names_a_bad_line_before_loading_any_model(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": \n')
    # (A shipped name: an unknown one fails earlier still, while the arguments are parsed.)
    code, err = exits(capsys, "encode", "ict_bfs_wlp_512", bad, "-o", tmp_path / "e.npy")
    assert code == 1 and f"tt-zoo encode: {bad}:2: not valid JSON" in err
    assert not (tmp_path / "e.npy").exists()


def test_encode_with_an_unknown_or_unshipped_name_is_one_clear_error(passages_jsonl, tmp_path,
                                                                     capsys):
    # Both fail while the arguments are parsed, before TensorFlow loads (exit code 2).
    code, err = exits(capsys, "encode", "ict_bfs_wlp_521", passages_jsonl, "-o",
                      tmp_path / "e.npy")
    assert code == 2 and "'ict_bfs_wlp_521' is not a tt_zoo model" in err
    assert "Did you mean 'ict_bfs_wlp_512'" in err and "'tt-zoo list'" in err
    unshipped = next(n for n, s in REGISTRY.items() if not s.shipped and s.kind == "two_tower")
    code, err = exits(capsys, "encode", unshipped, passages_jsonl, "-o", tmp_path / "e.npy")
    assert code == 2 and f"tt-zoo pretrain --variant {unshipped}" in err
    assert "recipes/" not in err


# -------------------------------------------------------------------------------- search

def test_search_with_a_model_prints_the_exact_top_k(tiny, loaded, passages_jsonl, capsys):
    code, out, _ = run(capsys, "search", passages_jsonl, "--model", tiny,
                       "--query", QUERIES[0], "--query", QUERIES[1], "-k", 2,
                       "--backend", "brute_force", "--no-progress")
    assert code == 0
    expected = loaded.index(
        [p["text"] for p in PASSAGES], titles=[p["title"] for p in PASSAGES],
        ids=[p["id"] for p in PASSAGES], backend="brute_force").search(QUERIES, k=2)
    lines = out.splitlines()
    assert lines[0] == f"query 1: {QUERIES[0]}" and "passage (tiny_test)" in lines[1]
    rows = [line.split() for line in lines if line.startswith("     ")]
    assert [(r[0], r[2]) for r in rows] == [(str(rank), h.id) for hits in expected
                                           for rank, h in enumerate(hits, 1)]
    assert [float(r[1]) for r in rows] == pytest.approx(
        [h.score for hits in expected for h in hits], abs=1e-3)


def test_search_with_bm25_writes_jsonl(tmp_path, capsys):
    passages = tmp_path / "passages.tsv"
    passages.write_text("id\ttitle\ttext\n" + "".join(
        f"{p['id']}\t{p['title']}\t{p['text']}\n" for p in PASSAGES))
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"text": QUERIES[1]}) + "\n")
    out = tmp_path / "hits.jsonl"
    code, stdout, _ = run(capsys, "search", passages, "--bm25", "--query", QUERIES[0],
                          "--queries", queries, "-k", 3, "--output", out)
    assert code == 0 and f"for 2 queries to {out}" in stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["query"] for r in rows] == QUERIES
    first = rows[0]["hits"][0]
    assert (first["rank"], first["id"], first["title"]) == (1, "d0", "penicillin")
    assert first["text"] == PASSAGES[0]["text"]
    assert rows[1]["hits"][0]["id"] == "d2"  # "river flows through paris": the Seine
    scores = [h["score"] for h in rows[0]["hits"]]
    assert scores == sorted(scores, reverse=True) and len(scores) <= 3
    # Plain BM25 over "title text", as tt_zoo.retrieval.bm25 scores it.
    from tt_zoo.retrieval.bm25 import BM25Retriever
    bm25 = BM25Retriever([f"{p['title']} {p['text']}" for p in PASSAGES],
                         ids=[p["id"] for p in PASSAGES])
    # Only passages sharing a term with the query (no arbitrary order of zero scores).
    assert all(score > 0 for score in scores)
    assert scores == pytest.approx(
        [h.score for h in bm25.search([QUERIES[0]], 3).hits()[0] if h.score > 0], abs=1e-5)
    code, stdout, _ = run(capsys, "search", passages, "--bm25", "--query", "penicillin",
                          "--output", tmp_path / "one.jsonl")
    assert code == 0 and "for 1 query to" in stdout


def test_search_argument_and_file_errors(passages_jsonl, tmp_path, capsys):
    code, err = exits(capsys, "search", passages_jsonl, "--bm25")
    assert code == 2 and "nothing to search for" in err
    # (An export path: a model name is checked first, and the flagship's name is the default.)
    code, err = exits(capsys, "search", passages_jsonl, "--bm25", "--model", tmp_path / "m",
                      "--query", "q")
    assert code == 2 and "not allowed with argument" in err
    out = tmp_path / "hits.jsonl"
    out.write_text("keep")
    code, err = exits(capsys, "search", passages_jsonl, "--bm25", "--query", "q", "-o", out)
    assert code == 2 and "exists; pass --overwrite" in err
    bad = tmp_path / "bad.tsv"
    bad.write_text("id\ttext\nd0\tfine\nd1\n")
    code, err = exits(capsys, "search", bad, "--bm25", "--query", "q")
    assert code == 1 and f"{bad}:3: 1 tab-separated fields where the header names 2" in err
    code, err = exits(capsys, "search", passages_jsonl, "--bm25", "--queries",
                      tmp_path / "absent.txt")
    assert code == 1 and "absent.txt: no such file" in err


def test_search_a_query_without_any_known_term(passages_jsonl, capsys):
    code, out, _ = run(capsys, "search", passages_jsonl, "--bm25", "--query", "zzz qqq")
    assert code == 0 and "(no hit: no query term occurs in the passages)" in out
