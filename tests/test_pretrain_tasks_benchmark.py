"""benchmarks/pretrain_tasks.py keeps the cells of earlier runs in its report: a cell run again
replaces its own row in place, a new cell is added after them, and the Table-1 statistics of
each pair set come from the rows when the pair set is gone from runs/."""

import json

from test_fusion_benchmark import BENCHMARKS  # importing it puts benchmarks/ on sys.path


def test_earlier_cells_stay_and_a_cell_run_again_replaces_its_row(tmp_path):
    import pretrain_tasks

    assert pretrain_tasks.__file__.startswith(str(BENCHMARKS))  # the script, not a namesake
    previous = tmp_path / "pretrain_tasks.json"
    assert pretrain_tasks.with_earlier_rows([{"name": "a"}], previous) == [{"name": "a"}]
    previous.write_text(json.dumps({"cells": [{"name": "a", "R": 1}, {"name": "b", "R": 2}],
                                    "baselines": {}}))
    rows = [{"name": "c", "R": 5}, {"name": "a", "R": 3}]
    assert pretrain_tasks.with_earlier_rows(rows, previous) == [
        {"name": "a", "R": 3}, {"name": "b", "R": 2}, {"name": "c", "R": 5}]


def test_the_pair_set_table_comes_from_the_rows_when_the_pair_set_is_gone():
    import pretrain_tasks_report

    stats = {"token_unit": "whitespace", "tasks": {"crop": {
        "num_pairs": 1200, "num_tokens": 34567, "avg_query_tokens": 17.84,
        "avg_doc_tokens": 19.8, "skipped": 3}}}
    rows = [{"tasks": "no_such_set_here", "pair_stats": stats}, {"tasks": "nor_this_one"}]
    table = pretrain_tasks_report.pair_statistics(rows)
    assert "| no_such_set_here | crop | 1,200 | 34,567 | whitespace | 17.8 | 19.8 | 3 |" in table
    assert "nor_this_one" not in table  # no recorded statistics and no stats.json: no row


def test_pair_stats_are_read_from_the_cells_pair_set(tmp_path):
    import pretrain_tasks
    import pretrain_tasks_report

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
    import pretrain_tasks

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


def test_a_cell_can_cut_its_pairs_from_longer_passages(tmp_path):
    """`:doc_words=N` (Contriever crops 256-token chunks; the grid's passages hold 96 words):
    its own pair set, cell folder, label and row in the pair-set table."""
    import pretrain_tasks
    import pretrain_tasks_report

    cell = pretrain_tasks.Cell("bert:crop:3500x128:doc_words=256")
    assert cell.doc_words == 256 and cell.name == "bert_crop_3500x128_doc256"
    assert cell.label.endswith("(passages of ≤ 256 words)")
    assert pretrain_tasks.pairs_path("crop", 256).name == "crop_128_doc256"
    default = pretrain_tasks.Cell("bert:crop:3500x128")
    assert default.doc_words == pretrain_tasks.MAX_DOC_WORDS == 96
    assert (default.name, default.pair_set) == ("bert_crop_3500x128", "crop")
    assert pretrain_tasks.pairs_path("crop", 96) == pretrain_tasks.pairs_path("crop")
    for bad in ("bert:crop:3500x128:doc_words=0", "bert:crop:3500x128:doc_words=x"):
        try:
            pretrain_tasks.Cell(bad)
        except SystemExit as e:
            assert "doc_words must be a positive integer" in str(e)
        else:
            raise AssertionError(f"{bad} was accepted")
    stats = {"token_unit": "whitespace", "tasks": {"crop": {
        "num_pairs": 5, "num_tokens": 500, "avg_query_tokens": 50.0, "avg_doc_tokens": 50.0,
        "skipped": 0}}}
    table = pretrain_tasks_report.pair_statistics([
        {"tasks": "crop", "pair_set": cell.pair_set, "pair_stats": stats},
        {"tasks": "crop", "pair_stats": {**stats, "tasks": {"crop": {
            **stats["tasks"]["crop"], "num_pairs": 9}}}}])
    assert "| crop (passages of ≤ 256 words) | crop | 5 |" in table
    assert "| crop | crop | 9 |" in table
