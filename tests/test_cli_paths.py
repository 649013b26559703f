"""The commands' default paths (never inside an installed package), the one-line error for a
missing dataset offline (no network in tests), and score tables as wide as their names."""

import os
import pathlib
import socket
import subprocess
import sys

import pytest

from tt_zoo import cli
from tt_zoo.cli import common
from tt_zoo.evaluation import reqa as reqa_lib, tables

from conftest import REPO_ROOT


@pytest.fixture
def no_data_env(monkeypatch):
    for name in ("TT_ZOO_DATA", "TT_ZOO_HOME", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def installed(monkeypatch, tmp_path, no_data_env):
    """tt_zoo as if installed from a wheel: its package beside no saved_models/ or setup.cfg;
    the cache ($TT_ZOO_HOME) in tmp_path. Gives the fake site-packages folder."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(common, "CLONE_ROOT", site)
    monkeypatch.setenv("TT_ZOO_HOME", str(tmp_path / "home"))
    return site


def test_data_dir_is_the_variable_else_beside_the_clone(monkeypatch, tmp_path, no_data_env):
    assert common.clone_root() == REPO_ROOT
    assert common.default_data_dir() == REPO_ROOT.parent / "shared" / "data"
    assert common.default_vocab_path() == str(REPO_ROOT / "saved_models" / "vocab" / "vocab.txt")
    monkeypatch.setenv("TT_ZOO_DATA", str(tmp_path / "data"))
    assert common.default_data_dir() == tmp_path / "data"
    assert common.default_squad_path() == str(tmp_path / "data" / "squad" / "dev-v1.1.json")


def test_installed_defaults_resolve_in_the_cache_never_in_site_packages(installed, tmp_path,
                                                                        capsys):
    assert common.clone_root() is None
    home_data = tmp_path / "home" / "data"
    assert common.default_data_dir() == home_data
    assert common.default_vocab_path() == str(home_data / "bert-vocab" / "vocab.txt")
    pretrain = cli.command_module("pretrain").parse_args(["--variant", "ict_bfs_wlp_512"])
    assert capsys.readouterr().err == ""  # no BERT vocabulary here: the run's error says so
    (home_data / "bert-vocab").mkdir(parents=True)
    (home_data / "bert-vocab" / "vocab.txt").write_text("[PAD]\n")
    cli.command_module("pretrain").parse_args(["--variant", "ict_bfs_wlp_512"])
    assert f"default vocabulary is BERT's uncased one, {home_data}/bert-vocab/vocab.txt" in \
        capsys.readouterr().err
    reproduce = cli.command_module("reproduce").parse_args(["--stages", "pretrain"])
    for path in (pretrain.model.vocab, reproduce.vocab, reproduce.data,
                 common.default_squad_path()):
        assert not pathlib.Path(path).is_relative_to(installed.parents[2]), path
    assert reproduce.saved_models is None and reproduce.shipped is None


def test_installed_reproduce_ships_only_to_named_places(installed, tmp_path, capsys):
    reproduce = cli.command_module("reproduce")
    with pytest.raises(SystemExit):
        reproduce.parse_args(["--stages", "ship"])
    assert "not running from a clone: pass --saved-models and --shipped" in \
        capsys.readouterr().err
    args = reproduce.parse_args(["--stages", "ship", "--saved-models", str(tmp_path / "s"),
                                 "--shipped", str(tmp_path / "s.json")])
    assert args.saved_models == tmp_path / "s"


def test_a_missing_vocabulary_or_squad_file_is_one_line(installed, tmp_path, capsys):
    home_data = tmp_path / "home" / "data"
    code = cli.main(["export", "--variant", "ict_bfs_wlp_512", "--checkpoint", str(tmp_path),
                     "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines() == [
        f"tt-zoo export: error: --vocab: vocabulary file {home_data}/bert-vocab/vocab.txt does "
        "not exist (pass --vocab PATH or set TT_ZOO_DATA)"]
    code = cli.main(["pretrain", "--variant", "none_512", "--steps", "0"])
    err = capsys.readouterr().err
    assert code == 1 and err.splitlines() == [
        f"tt-zoo pretrain: --vocab: vocabulary {home_data}/bert-vocab/vocab.txt not found (pass "
        "--vocab PATH or set TT_ZOO_DATA; tt-zoo learn-vocab writes one)"]
    code = cli.main(["finetune", "--model", "ict_bfs_wlp_512", "--train-fraction", "0.05"])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines() == [
        f"tt-zoo finetune: error: --squad: SQuAD file {home_data}/squad/dev-v1.1.json does not "
        "exist (set TT_ZOO_DATA or pass --squad PATH)"]


# ------------------------------------------------------------------ SQuAD without the file

@pytest.fixture
def empty_data(monkeypatch, tmp_path, no_data_env):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("TT_ZOO_DATA", str(data))
    return data


@pytest.mark.parametrize("variable", ["HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"])
@pytest.mark.parametrize("command", [["demo"], ["evaluate", "--bm25"]])
def test_offline_a_missing_squad_is_one_error_line(empty_data, monkeypatch, capsys, variable,
                                                   command):
    """Offline (the variables Hugging Face reads), the fallback reads the datasets cache only;
    its failure ends in one line naming the file and the flag, not a traceback."""
    tried = []

    def from_cache_only(split):
        tried.append(split)
        raise ConnectionError("Couldn't reach 'squad' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setenv(variable, "1")
    monkeypatch.setattr(reqa_lib, "load_squad_from_hf", from_cache_only)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("probed"))
    assert cli.main(command) == 1
    err = capsys.readouterr().err
    assert tried == ["validation"] and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"tt-zoo {command[0]}: SQuAD v1.1 dev not found: "
                          f"{empty_data}/squad/dev-v1.1.json does not exist")
    assert "ConnectionError: Couldn't reach 'squad'" in err
    assert "Pass --squad PATH, or set TT_ZOO_DATA" in err


def test_an_unreachable_hub_is_not_tried_at_all(empty_data, monkeypatch, capsys):
    """Not told offline: a quick connection probe, and no `datasets` retries when it fails."""
    def refused(*args, **kwargs):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr(reqa_lib, "load_squad_from_hf", lambda split: pytest.fail("tried"))
    assert cli.main(["evaluate", "--bm25"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"tt-zoo evaluate: SQuAD v1.1 dev not found: {empty_data}/squad/dev-v1.1.json does not "
        "exist and Hugging Face, the fallback, is unreachable. Pass --squad PATH, or set "
        "TT_ZOO_DATA to a folder holding squad/dev-v1.1.json."]


def test_offline_with_the_real_datasets_library(tmp_path):
    """The real `datasets` in offline mode with an empty cache fails at once: one line."""
    (tmp_path / "data").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TT_ZOO"))}
    env.update(TT_ZOO_DATA=str(tmp_path / "data"), HF_DATASETS_OFFLINE="1",
               HF_HOME=str(tmp_path / "hf"))
    result = subprocess.run([sys.executable, "-m", "tt_zoo.cli", "evaluate", "--bm25"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("tt-zoo evaluate: SQuAD v1.1 dev not found:")


# ------------------------------------------------------------------------------ the tables

LONG = "bow_mlp_ict_bfs_wlp_crop_span_qgen_512 (brute_force)"


def test_score_table_is_as_wide_as_its_longest_name():
    rows = {LONG: {"R@1": 0.3, "R@10": 0.6, "R@100": 0.85},
            "BM25": {"R@1": 0.674, "R@10": 0.904, "R@100": 0.976}}
    head, long_row, bm25_row = tables.format_scores(rows, ("R@1", "R@10", "R@100")).splitlines()
    assert long_row.startswith(LONG + " ") and bm25_row.startswith("BM25 ")
    assert len({len(head), len(long_row), len(bm25_row)}) == 1
    assert bm25_row.split() == ["BM25", "67.4", "90.4", "97.6"]
    assert head.index("R@100") + len("R@100") == len(head)


def test_table3_columns_are_as_wide_as_their_entries():
    metrics = dict.fromkeys(tables.COLUMNS, 0.5)
    rows = [{"encoder": "bert-tiny", "pretraining": "ict_bfs_wlp_crop_span_qgen",
             "search": "exact", **metrics},
            {"encoder": "a" * 40, "pretraining": "-", "search": "ScaNN", **metrics}]
    head, rule, *lines = tables.format_table(rows).splitlines()
    assert "ict_bfs_wlp_crop_span_qgen " in lines[0] and lines[1].startswith("a" * 40 + " ")
    assert len({len(head), len(rule), *map(len, lines)}) == 1
    # The first number ends under the end of "R@1".
    assert {line.index("50.0") + 4 for line in lines} == {head.index("R@1") + 3}
