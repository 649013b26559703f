"""The command line's errors and small defects (issue 47, item 5): an unknown --model fails in
under a second, before TensorFlow loads, with a suggestion and a pointer to `tt-zoo list`; a
mistyped top-level flag is named; `tt-zoo list | head -1` ends quietly; search's help and flags
agree with the code."""

import subprocess
import sys
import time

import pytest

from conftest import REPO_ROOT
from helpers import loadable_models, run_as_a_user
from tt_zoo import cli
from tt_zoo.cli import export as export_command
from tt_zoo.cli import search as search_command


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_unknown_model_name_fails_at_once_with_a_suggestion(tmp_path):
    """A fresh `tt-zoo search --model ict_bfs_wlp_51`: the name is checked while the arguments
    are parsed, without TensorFlow (which took ~10 s to load before the name was refused)."""
    passages = tmp_path / "passages.txt"
    passages.write_text("Fleming discovered penicillin.\n")
    start = time.perf_counter()
    result = run_as_a_user(["-m", "tt_zoo.cli", "search", str(passages), "--model",
                            "ict_bfs_wlp_51", "--query", "who?"], cwd=REPO_ROOT, timeout=60)
    seconds = time.perf_counter() - start
    print(f"tt-zoo search --model ict_bfs_wlp_51: failed in {seconds:.2f} s")
    assert result.returncode == 2
    assert ("argument --model: 'ict_bfs_wlp_51' is not a tt_zoo model. Did you mean "
            "'ict_bfs_wlp_512'") in result.stderr
    assert f"'tt-zoo list' lists the {loadable_models()} models that load" in result.stderr
    assert seconds < 3, f"{seconds:.2f} s (measured ~0.5 s; TensorFlow alone takes ~5 s)"


@pytest.mark.parametrize("argv", [
    ["search", "p.txt", "--query", "q", "--model", "ICT_BFS_WLP_512"],
    ["encode", "ICT_BFS_WLP_512", "p.txt", "-o", "x.npy"],
    ["evaluate", "--model", "ICT_BFS_WLP_512"],
    ["export", "--model", "ICT_BFS_WLP_512", "--output", "x"],
])
def test_every_model_option_checks_the_name_and_suggests_a_case_change(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2 and "'ICT_BFS_WLP_512' is not a tt_zoo model. Did you mean " \
        "'ict_bfs_wlp_512'?" in err, err


def test_a_recipe_name_says_it_has_no_weights_and_how_to_train_it(capsys):
    code, _, err = run(capsys, "search", "p.txt", "--query", "q", "--model", "bert_base_ict_512")
    assert code == 2 and "'bert_base_ict_512' is a recipe without weights" in err
    assert "tt-zoo pretrain --variant bert_base_ict_512" in err


def test_a_mistyped_top_level_flag_is_named(capsys):
    code, _, err = run(capsys, "--verison")
    assert code == 2
    assert "unknown option '--verison'. Did you mean --version?" in err
    assert "required" not in err


def test_list_into_a_closed_pipe_ends_without_a_traceback():
    """`tt-zoo list | head -1`: the reader is gone before the names are written."""
    process = subprocess.Popen([sys.executable, "-m", "tt_zoo.cli", "list"], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # (before the interpreter has started: every write finds no reader)
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert process.returncode == 0  # the reader had what it wanted (tests/test_user_habits.py)


def test_search_help_states_the_exact_search_threshold_the_code_uses(capsys):
    from tt_zoo.retrieval.index import MIN_PARTITIONED_SIZE

    with pytest.raises(SystemExit):
        search_command.parse_args(["--help"])
    out = capsys.readouterr().out
    assert f"exact below {MIN_PARTITIONED_SIZE:,} passages" in " ".join(out.split())
    assert "1,000" not in out


def test_search_with_bm25_refuses_a_backend(capsys):
    with pytest.raises(SystemExit):
        search_command.parse_args(["p.txt", "--query", "q", "--bm25", "--backend",
                                   "brute_force"])
    err = capsys.readouterr().err
    assert "--backend is for a model's index; --bm25 indexes with BM25 alone" in err
    assert search_command.parse_args(["p.txt", "--query", "q", "--bm25"]).backend == "scann"
    assert search_command.parse_args(["p.txt", "--query", "q"]).backend == "scann"


@pytest.mark.parametrize("spelling", ["-k", "--k"])
def test_search_and_export_take_both_spellings_of_k(spelling):
    assert search_command.parse_args(["p.txt", "--query", "q", spelling, "7"]).k == 7
    parser = cli.parsing.command_parser("export", export_command.__doc__,
                                        export_command.add_arguments)
    assert parser.parse_args(["--model", "ict_bfs_wlp_512", spelling, "7"]).k == 7


def test_list_matches_list_models(capsys):
    import tt_zoo

    code, out, _ = run(capsys, "list")
    rows = [line.split() for line in out.splitlines()]
    assert code == 0 and [r[0] for r in rows] == tt_zoo.list_models()
    assert sorted(r[1] for r in rows) == tt_zoo.list_models(arch_tag=True)
    code, out, _ = run(capsys, "list", "--include-recipes")
    rows = [line.split() for line in out.splitlines()]
    assert code == 0 and [r[0] for r in rows] == tt_zoo.list_models(include_recipes=True)
    assert sorted(r[1] for r in rows) == tt_zoo.list_models(include_recipes=True, arch_tag=True)
