"""benchmarks/pretrain_tasks.py keeps the cells of earlier runs in its report: a cell run again
replaces its own row in place, a new cell is added after them, and the Table-1 statistics of
each pair set come from the rows when the pair set is gone from runs/."""

import json

from test_fusion_benchmark import BENCHMARKS


def test_earlier_cells_stay_and_a_cell_run_again_replaces_its_row(tmp_path):
    from benchmarks import pretrain_tasks

    assert pretrain_tasks.__file__.startswith(str(BENCHMARKS))  # the script, not a namesake
    previous = tmp_path / "pretrain_tasks.json"
    assert pretrain_tasks.with_earlier_rows([{"name": "a"}], previous) == [{"name": "a"}]
    previous.write_text(json.dumps({"cells": [{"name": "a", "R": 1}, {"name": "b", "R": 2}],
                                    "baselines": {}}))
    rows = [{"name": "c", "R": 5}, {"name": "a", "R": 3}]
    assert pretrain_tasks.with_earlier_rows(rows, previous) == [
        {"name": "a", "R": 3}, {"name": "b", "R": 2}, {"name": "c", "R": 5}]


def test_the_pair_set_table_comes_from_the_rows_when_the_pair_set_is_gone():
    from benchmarks import pretrain_tasks_report

    stats = {"token_unit": "whitespace", "tasks": {"crop": {
        "num_pairs": 1200, "num_tokens": 34567, "avg_query_tokens": 17.84,
        "avg_doc_tokens": 19.8, "skipped": 3}}}
    rows = [{"tasks": "no_such_set_here", "pair_stats": stats}, {"tasks": "nor_this_one"}]
    table = pretrain_tasks_report.pair_statistics(rows)
    assert "| no_such_set_here | crop | 1,200 | 34,567 | whitespace | 17.8 | 19.8 | 3 |" in table
    assert "nor_this_one" not in table  # no recorded statistics and no stats.json: no row


def test_pair_stats_are_read_from_the_cells_pair_set(tmp_path):
    from benchmarks import pretrain_tasks
    from benchmarks import pretrain_tasks_report

    assert pretrain_tasks.pairs_path("crop").name == f"crop_{pretrain_tasks.PAIRS_PER_ARTICLE}"
    assert pretrain_tasks_report.pair_stats_of(tmp_path) is None  # no stats.json: gone
    (tmp_path / "stats.json").write_text(json.dumps({
        "token_unit": "whitespace",
        "tasks": {"span": {"num_pairs": 10, "num_tokens": 400, "avg_query_tokens": 18.0,
                           "avg_doc_tokens": 22.0}},
        "generator_counters": {"span_skipped_no_recurring_span": 4, "span_skipped_short": 1,
                               "crop_skipped_short": 7}}))
    assert pretrain_tasks_report.pair_stats_of(tmp_path) == {"token_unit": "whitespace", "tasks": {
        "span": {"num_pairs": 10, "num_tokens": 400, "avg_query_tokens": 18.0,
                 "avg_doc_tokens": 22.0, "skipped": 5}}}


def test_every_cell_names_its_vocabulary(tmp_path):
    """recipes/pretrain.py's default vocabulary depends on running from a git clone: a cell run
    from a copy of the code once trained on the 30K BERT vocabulary instead of the shipped 8K."""
    from benchmarks import pretrain_tasks

    def vocab_of(text):
        command = [str(c) for c in pretrain_tasks.train_command(
            pretrain_tasks.Cell(text), tmp_path, tmp_path / "pairs")]
        return command[command.index("--vocab") + 1]

    assert vocab_of("bert:span:3500x128") == str(pretrain_tasks.SHIPPED_VOCAB)
    assert pretrain_tasks.SHIPPED_VOCAB.is_file()
    assert vocab_of("bow_mlp:crop:1150x512:vocab=/v/bert-vocab/vocab.txt") == \
        "/v/bert-vocab/vocab.txt"
    assert pretrain_tasks.Cell("bow_mlp:crop:1150x512:vocab=/v/bert-vocab/vocab.txt").name == \
        "bow_mlp_crop_1150x512_vocab_bert-vocab"


def test_a_cell_can_change_its_pair_set(tmp_path, monkeypatch):
    """Pair-set options (`:doc_words=N`: passages of at most N words, the grid's 96;
    `:crop_words=N`: crops of N-word windows, Contriever's 256-token chunks): each its own pair
    set made with the matching make-pairs flags, cell folder, label and pair-set table row."""
    from benchmarks import pretrain_tasks
    from benchmarks import pretrain_tasks_report

    cell = pretrain_tasks.Cell("bert:crop:3500x128:doc_words=256")
    assert cell.pair_options == {"doc_words": 256} and cell.name == "bert_crop_3500x128_doc256"
    assert cell.label.endswith("(passages of ≤ 256 words)")
    both = pretrain_tasks.Cell("bert:crop:3500x128:crop_words=256:doc_words=300")
    assert both.name == "bert_crop_3500x128_cropwin256_doc300"
    assert both.pair_set == "crop (passages of ≤ 300 words, crops of 256-word windows)"
    assert pretrain_tasks.pairs_path("crop", both.pair_options).name == \
        "crop_128_cropwin256_doc300"
    default = pretrain_tasks.Cell("bert:crop:3500x128:doc_words=96")  # the grid's own value
    assert default.pair_options == {} and default.name == "bert_crop_3500x128"
    assert default.pair_set == "crop" and pretrain_tasks.pairs_path("crop").name == "crop_128"
    for bad in ("bert:crop:3500x128:doc_words=0", "bert:crop:3500x128:crop_words=x"):
        try:
            pretrain_tasks.Cell(bad)
        except SystemExit as e:
            assert "must be a positive integer" in str(e)
        else:
            raise AssertionError(f"{bad} was accepted")

    commands = []
    monkeypatch.setattr(pretrain_tasks, "REPO", tmp_path)
    monkeypatch.setattr(pretrain_tasks, "run",
                        lambda what, command, log, done: commands.append(command))
    pretrain_tasks.pairs_dir("crop", {"crop_words": 256})
    flags = [str(c) for c in commands[0]]
    assert flags[flags.index("--max-doc-tokens") + 1] == "96"
    assert flags[flags.index("--crop-source-words") + 1] == "256"
    assert flags[flags.index("--output") + 1] == str(tmp_path / "runs/pairs/crop_128_cropwin256")

    stats = {"token_unit": "whitespace", "tasks": {"crop": {
        "num_pairs": 5, "num_tokens": 500, "avg_query_tokens": 50.0, "avg_doc_tokens": 50.0,
        "skipped": 0}}}
    table = pretrain_tasks_report.pair_statistics([
        {"tasks": "crop", "pair_set": cell.pair_set, "pair_stats": stats},
        {"tasks": "crop", "pair_stats": {**stats, "tasks": {"crop": {
            **stats["tasks"]["crop"], "num_pairs": 9}}}}])
    assert "| crop (passages of ≤ 256 words) | crop | 5 |" in table
    assert "| crop | crop | 9 |" in table


def test_a_warm_start_takes_the_cells_export_or_the_model_it_shipped_as(tmp_path, monkeypatch):
    """`:warm=CELL` continues from runs/grid/CELL/export; when runs/ is gone, from the shipped
    model whose recorded training command wrote that cell's folder; from nothing else."""
    from benchmarks import pretrain_tasks

    monkeypatch.setattr(pretrain_tasks, "REPO", tmp_path)
    monkeypatch.setattr(pretrain_tasks, "SAVED_MODELS_DIR", tmp_path / "saved_models")
    cell = pretrain_tasks.Cell("bert:crop:7000x128:warm=bert:crop:3500x128")
    assert cell.name == "bert_crop_7000x128_from_bert_crop_3500x128"

    def init_from():
        command = [str(c) for c in pretrain_tasks.train_command(cell, tmp_path, tmp_path / "p")]
        return command[command.index("--init-from") + 1]

    def export(folder, command):
        folder.mkdir(parents=True)
        (folder / "metadata.json").write_text(json.dumps({"command": command}))
        return str(folder)

    shipped = export(tmp_path / "saved_models" / "crop_512",
                     "tt-zoo pretrain --workdir /elsewhere/runs/grid/bert_crop_1750x128/train")
    try:
        init_from()
    except SystemExit as e:
        assert "bert:crop:3500x128" in str(e) and "names another folder" in str(e)
    else:
        raise AssertionError("a shipped model of another cell was taken")
    (tmp_path / "saved_models" / "crop_512" / "metadata.json").write_text(json.dumps(
        {"command": "tt-zoo pretrain --workdir /snap/runs/grid/bert_crop_3500x128/train"}))
    assert init_from() == shipped
    grid = export(tmp_path / "runs" / "grid" / "bert_crop_3500x128" / "export", "")
    assert init_from() == grid  # the cell's own export first
