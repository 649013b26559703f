"""Table 1 statistics on hand-made pairs, token counts worked out by hand."""

import json

import pytest

from tt_zoo.data import features
from tt_zoo.data import pair_stats
from tt_zoo.data.articles import ReadReport

from tt_zoo.data.pretraining_tasks import Pair

# WordPiece (uncased BERT), no special tokens:
#   "the cat sat" -> the cat sat                                     3
#   "who discovered penicillin?" -> who discovered pen ##ici ##llin ? 6
#   "Café au lait" -> cafe au lai ##t                                4
#   "Paris" -> paris                                                 1
#   "Hello, World!" -> hello , world !                               4
#   "unaffable" -> una ##ffa ##ble                                   3
PAIRS = [
    Pair("the cat sat", "Paris", "Hello, World!", "Paris/0/0", "ict"),           # q 3, d 1+4
    Pair("who discovered penicillin?", "Paris", "unaffable", "Paris/0/1", "ict"),  # q 6, d 1+3
    Pair("Café au lait", "Paris", "the cat sat", "Paris/1/0", "bfs"),           # q 4, d 1+3
]


def test_table1_numbers_by_hand(bert_vocab_file):
    report = ReadReport()
    report.keep(), report.keep(), report.skip("redirect")
    stats = pair_stats.compute_pair_stats(PAIRS, bert_vocab_file, read_report=report,
                                          generator_counters={"ict_short_query": 2},
                                          batch_size=2)  # a batch boundary inside the list
    ict, bfs, total = stats.tasks["ict"], stats.tasks["bfs"], stats.total
    assert (ict.num_pairs, ict.query_tokens, ict.doc_tokens, ict.num_tokens) == (2, 9, 9, 18)
    assert (ict.avg_query_tokens, ict.avg_doc_tokens) == (4.5, 4.5)
    assert (bfs.num_pairs, bfs.query_tokens, bfs.doc_tokens) == (1, 4, 4)
    assert (total.num_pairs, total.num_tokens) == (3, 26)
    assert total.avg_query_tokens == pytest.approx(13 / 3)

    table = pair_stats.format_table(stats)
    assert "WordPiece" in table
    lines = table.splitlines()
    assert lines[3].split() == ["ict", "18", "2", "4.50", "4.50"]  # the paper's row order
    assert lines[4].split() == ["bfs", "8", "1", "4.00", "4.00"]
    assert lines[5].split() == ["all", "26", "3", "4.33", "4.33"]
    assert "kept 2 articles; skipped redirect=1" in table
    assert "ict_short_query=2" in table

    obj = json.loads(json.dumps(stats.to_json()))
    assert obj["all"]["num_tokens"] == 26 and obj["read_report"]["skipped"] == {"redirect": 1}
    again = pair_stats.PairStats.from_json(obj)
    assert again.to_json() == stats.to_json()


def test_feature_dicts_and_whitespace_unit():
    rows = [{features.TASK: b"wlp", features.QUERY: b"a b c", features.DOC_TITLE: b"T",
             features.DOC_TEXT: "x y"}]
    stats = pair_stats.compute_pair_stats(rows)
    assert stats.token_unit == "whitespace"
    assert (stats.tasks["wlp"].query_tokens, stats.tasks["wlp"].doc_tokens) == (3, 3)


def test_missing_vocab_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        pair_stats.TokenCounter(tmp_path / "nope.txt")


def test_save_is_json(tmp_path, bert_vocab_file):
    stats = pair_stats.compute_pair_stats(PAIRS[:1], bert_vocab_file)
    stats.save(str(tmp_path / "stats.json"))
    assert json.loads((tmp_path / "stats.json").read_text())["tasks"]["ict"]["num_pairs"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["stats.json"]


def test_stats_for_directory(tmp_path, bert_vocab_file):
    from tt_zoo.data import pairs_io
    pairs_io.write_pair_shards(PAIRS, tmp_path, 2, progress=False)
    stats = pair_stats.stats_for_directory(tmp_path, bert_vocab_file)
    assert stats.total.num_tokens == 26 and stats.tasks["ict"].num_pairs == 2
    assert stats.read_report is None


def test_token_counts_are_the_towers_tokens(bert_vocab_file):
    """Table 1 counts what the towers' TextPreprocessor packs: its real tokens minus [CLS]/[SEP]."""
    import tensorflow as tf
    from tt_zoo.data.text import TextPreprocessor

    texts = [t for p in PAIRS for t in (p.query, p.doc_title, p.doc_text)] + [
        "", "Bad \ufffd byte and\ttabs\nand lines", "Ünïcödé ÀCCENTS, numbers 1984!"]
    packed = TextPreprocessor(str(bert_vocab_file), seq_length=64)(tf.constant(texts))
    expected = (packed["input_mask"].numpy().sum(axis=1) - 2).tolist()
    assert pair_stats.TokenCounter(bert_vocab_file)(texts) == expected
    assert expected[:9] == [3, 1, 4, 6, 1, 3, 4, 1, 3]  # the hand counts above
