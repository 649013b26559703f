"""Tests of the ICT/BFS/WLP pair generators and the MLM examples on a real Wikispeedia slice."""

import collections
import itertools
import tarfile
import urllib.parse

import numpy as np
import pytest

from conftest import data_file
from tt_zoo.data import pretraining_tasks as pt
from tt_zoo.data.articles import Article, Section
from tt_zoo.data.passages import make_passages, split_sentences
from tt_zoo.data.wikispeedia import read_wikispeedia

SLICE = 80  # the first 80 articles of the tarball: Finland and Television have in-links among them


@pytest.fixture(scope="module")
def articles():
    folder = data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz").parent
    data_file("wikispeedia/wikispeedia_paths-and-graph.tar.gz")
    return list(itertools.islice(read_wikispeedia(folder, progress=False), SLICE))


@pytest.fixture(scope="module")
def links():
    """(source, target) title pairs read straight from links.tsv, independently of the reader."""
    path = data_file("wikispeedia/wikispeedia_paths-and-graph.tar.gz")
    with tarfile.open(path, "r:gz") as tar:
        member = next(m for m in tar if m.name.endswith("links.tsv"))
        text = tar.extractfile(member).read().decode("utf-8")
    decode = lambda name: urllib.parse.unquote(name).replace("_", " ")
    return {tuple(decode(f) for f in line.split("\t"))
            for line in text.splitlines() if line.strip() and not line.startswith("#")}


def _pairs_by_article(articles, config, counters=None):
    index = collections.defaultdict(list)
    for b in articles:
        for target, passage in pt.linking_passages(b, config):
            index[target].append(passage)
    return {a.title: pt.pairs_for_article(a, index[a.title], config, counters) for a in articles}


def _passage(article, doc_id, config):
    return next(p for p in make_passages(article, config.max_doc_tokens) if p.doc_id == doc_id)


def test_ict_removes_the_query_sentence_from_its_passage(articles):
    config = pt.TaskConfig(tasks=("ict",), ict_keep_query_prob=0.0, pairs_per_article=3)
    by_title = {a.title: a for a in articles}
    pairs = [(by_title[t], p) for t, ps in _pairs_by_article(articles, config).items() for p in ps]
    assert len(pairs) > 2 * len(articles)
    for article, pair in pairs:
        assert pair.task == "ict" and pair.doc_title == article.title
        sentences = split_sentences(_passage(article, pair.doc_id, config).text)
        assert pair.query in sentences and len(pair.query.split()) >= config.min_query_words
        rest = list(sentences)
        rest.remove(pair.query)
        assert pair.doc_text == " ".join(rest)
        assert pair.query not in pair.doc_text


def test_ict_keeps_the_query_about_ten_percent_of_the_time(articles):
    config = pt.TaskConfig(tasks=("ict",), pairs_per_article=40)
    pairs = list(pt.generate_pairs(articles, config))
    assert len(pairs) > 3000
    kept = np.mean([p.query in p.doc_text for p in pairs])
    assert 0.07 < kept < 0.13, kept


def test_bfs_and_wlp_queries_come_from_the_lead_section(articles, links):
    config = pt.TaskConfig(pairs_per_article=6)
    by_title = {a.title: a for a in articles}
    tasks = collections.Counter()
    for title, pairs in _pairs_by_article(articles, config).items():
        article = by_title[title]
        passages = make_passages(article, config.max_doc_tokens)
        lead = {s: p.index for p in passages if p.in_lead for s in split_sentences(p.text)}
        for pair in pairs:
            tasks[pair.task] += 1
            if pair.task == "ict":
                continue
            assert pair.query in lead, (title, pair.query)
            assert article.lead.heading == "" and pair.query in " ".join(article.lead.paragraphs)
            if pair.task == "bfs":
                assert pair.doc_title == title
                doc = _passage(article, pair.doc_id, config)
                assert doc.text == pair.doc_text and pair.query not in doc.text
            else:  # WLP: the document's page B links to the query's page A, per links.tsv
                assert pair.doc_title != title
                assert (pair.doc_title, title) in links
                doc = _passage(by_title[pair.doc_title], pair.doc_id, config)
                assert doc.text == pair.doc_text
    assert tasks["bfs"] > 50 and tasks["wlp"] > 20, tasks  # few in-links inside the slice


def test_same_seed_same_pairs_in_any_article_order(articles):
    config = pt.TaskConfig(seed=7)
    first = list(pt.generate_pairs(articles, config))
    assert first == list(pt.generate_pairs(articles, config))
    reordered = list(pt.generate_pairs(articles[::-1], config))
    key = lambda p: (p.doc_id, p.query, p.task, p.doc_text)
    assert sorted(first, key=key) == sorted(reordered, key=key)
    assert sorted(first, key=key) != sorted(pt.generate_pairs(articles, pt.TaskConfig(seed=8)),
                                            key=key)


def test_task_mixture_is_uniform_and_single_task_configs_are_pure(articles):
    counters = collections.Counter()
    config = pt.TaskConfig(pairs_per_article=12)
    pairs = list(pt.generate_pairs(articles, config, counters))
    assert config.tasks == pt.PAPER_TASKS  # the default mixture is the paper's
    draws = {t: sum(v for k, v in counters.items() if k.startswith(t + "_")) for t in config.tasks}
    assert sum(draws.values()) == 12 * len(articles)
    for task in config.tasks:
        assert abs(draws[task] / (12 * len(articles)) - 1 / 3) < 0.05, draws
        assert counters[f"{task}_pairs"] == sum(p.task == task for p in pairs)
    for task in pt.TASKS:
        single = list(pt.generate_pairs(articles[:20], pt.TaskConfig(tasks=(task,))))
        assert single and {p.task for p in single} == {task}


def test_impossible_slots_are_skipped_and_counted():
    no_lead = Article("A", (Section("", ()), Section("Body", (
        "This body paragraph has one sentence. It also has a second sentence.",))))
    counters = collections.Counter()
    config = pt.TaskConfig(tasks=("bfs", "wlp"), pairs_per_article=10)
    assert pt.pairs_for_article(no_lead, [], config, counters) == []
    assert counters["bfs_skipped_no_lead"] + counters["wlp_skipped_no_lead"] == 10
    lead_only = Article("B", (Section("", ("A lead with just one sentence here.",)),))
    counters.clear()
    assert pt.pairs_for_article(lead_only, [], config, counters) == []
    assert set(counters) <= {"bfs_skipped_no_other_passage", "wlp_skipped_no_linking_page"}
    short = Article("C", (Section("", ("Too short. Also short.",)),))
    counters.clear()
    pt.pairs_for_article(short, [], pt.TaskConfig(tasks=("ict",)), counters)
    assert counters == {"ict_skipped_short_query": 4}


def test_linking_passages_are_deterministic_and_prefer_a_mention(articles):
    config = pt.TaskConfig()
    article = next(a for a in articles if len(a.links) > 10)
    entries = list(pt.linking_passages(article, config))
    assert entries == list(pt.linking_passages(article, config))
    assert [t for t, _ in entries] == [t for t in article.links if t != article.title]
    ids = {p.doc_id for p in make_passages(article, config.max_doc_tokens)}
    assert all(p.doc_id in ids for _, p in entries)
    mentioned = [(t, p) for t, p in entries if t.lower() in " ".join(article.paragraphs).lower()]
    assert mentioned and all(t.lower() in p.text.lower() for t, p in mentioned)


def test_generate_pairs_takes_a_callable_and_rejects_one_shot_iterators(articles):
    config = pt.TaskConfig()
    some = articles[:10]
    assert list(pt.generate_pairs(lambda: iter(some), config)) == list(pt.generate_pairs(some, config))
    with pytest.raises(TypeError, match="one-shot iterator"):
        list(pt.generate_pairs(iter(some), config))


def test_task_config_validation():
    with pytest.raises(ValueError, match="'mlm'"):
        pt.TaskConfig(tasks=("ict", "mlm"))
    with pytest.raises(ValueError, match="ict_keep_query_prob"):
        pt.TaskConfig(ict_keep_query_prob=1.5)
    assert pt.TaskConfig(tasks=["ict"]).tasks == ("ict",)


def test_stable_seed_is_not_pythons_hash():
    assert pt.stable_seed(0, "Finland") == pt.stable_seed(0, "Finland")
    assert pt.stable_seed(0, "Finland") != pt.stable_seed(1, "Finland")
    assert 0 <= pt.stable_seed("x") < 2 ** 64


@pytest.fixture(scope="module")
def mlm(articles):
    import tensorflow as tf
    bert_vocab_file = data_file("bert-vocab/vocab.txt")
    import tensorflow_text as tf_text
    passages = [p for a in articles[:12] for p in make_passages(a)][:60]
    examples = list(pt.mlm_examples(passages, bert_vocab_file, seq_length=128, seed=3))
    tokenizer = tf_text.BertTokenizer(str(bert_vocab_file), lower_case=True)
    tokenize = lambda texts: [list(map(int, r)) for r in
                              tokenizer.tokenize(tf.constant(texts)).merge_dims(-2, -1).to_list()]
    return passages, examples, tokenize([p.title for p in passages]), \
        tokenize([p.text for p in passages])


def _round_robin(a, b, budget):
    """The document tower's truncation, by hand: tokens dealt one at a time to a, then b."""
    keep = [0, 0]
    while sum(keep) < budget and (keep[0] < len(a) or keep[1] < len(b)):
        for j, segment in enumerate((a, b)):
            if sum(keep) < budget and keep[j] < len(segment):
                keep[j] += 1
    return a[:keep[0]], b[:keep[1]]


def test_mlm_features_shapes_and_dtypes(mlm):
    _, examples, _, _ = mlm
    for ex in examples:
        assert ex["input_word_ids"].shape == (128,) and ex["input_word_ids"].dtype == np.int32
        assert ex["input_mask"].dtype == np.int32 and ex["input_type_ids"].dtype == np.int32
        assert ex["masked_lm_positions"].shape == (20,) and ex["masked_lm_ids"].dtype == np.int32
        assert ex["masked_lm_weights"].dtype == np.float32


def test_mlm_masked_ids_are_the_original_tokens_and_rates_hold(mlm, bert_vocab_file):
    passages, examples, titles, texts = mlm
    selected = real = masked = unchanged = 0
    for ex, title_ids, text_ids in zip(examples, titles, texts):
        # The unmasked sequence, rebuilt from an independent tokenization: [CLS] title [SEP] text [SEP]
        title_ids, text_ids = _round_robin(title_ids, text_ids, 128 - 3)
        original = [101] + title_ids + [102] + text_ids + [102]
        n = len(original)
        assert list(ex["input_mask"][:n]) == [1] * n and not ex["input_mask"][n:].any()
        assert list(ex["input_type_ids"][:n]) == [0] * (len(title_ids) + 2) + [1] * (len(text_ids) + 1)
        k = int(ex["masked_lm_weights"].sum())
        positions = ex["masked_lm_positions"][:k]
        assert list(ex["masked_lm_ids"][:k]) == [original[i] for i in positions]
        assert all(original[i] not in (0, 101, 102) for i in positions)  # never [PAD]/[CLS]/[SEP]
        others = np.setdiff1d(np.arange(n), positions)
        assert [int(ex["input_word_ids"][i]) for i in others] == [original[i] for i in others]
        real += n - 3
        selected += k
        masked += int((ex["input_word_ids"][positions] == 103).sum())
        unchanged += int((ex["input_word_ids"][positions] == ex["masked_lm_ids"][:k]).sum())
    assert real > 3000, real
    assert abs(selected / real - 0.15) < 0.01, selected / real
    assert abs(masked / selected - 0.8) < 0.05, masked / selected
    assert abs(unchanged / selected - 0.1) < 0.04, unchanged / selected


def test_mlm_is_deterministic_for_the_seed(mlm, bert_vocab_file):
    passages, examples, _, _ = mlm
    again = list(pt.mlm_examples(passages[:5], bert_vocab_file, seq_length=128, seed=3))
    for a, b in zip(again, examples[:5]):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    other = list(pt.mlm_examples(passages[:5], bert_vocab_file, seq_length=128, seed=4))
    assert any((a["masked_lm_positions"] != b["masked_lm_positions"]).any()
               for a, b in zip(other, examples[:5]))
    single = next(pt.mlm_examples(["a plain string of text"], bert_vocab_file, seq_length=16))
    assert not single["input_type_ids"].any() and single["input_mask"].sum() == 7


def _unmasked(example):
    """The example's input ids with the masked-out original ids put back."""
    k = int(example["masked_lm_weights"].sum())
    ids = example["input_word_ids"].copy()
    ids[example["masked_lm_positions"][:k]] = example["masked_lm_ids"][:k]
    return ids


def test_mlm_inputs_are_the_document_towers_inputs(mlm, bert_vocab_file):
    """One tokenizer path: MLM examples hold what the towers' TextPreprocessor packs."""
    import tensorflow as tf
    from tt_zoo.data.text import TextPreprocessor

    passages, examples, _, _ = mlm
    pre = TextPreprocessor(str(bert_vocab_file), seq_length=128)
    packed = pre((tf.constant([p.title for p in passages]), tf.constant([p.text for p in passages])))
    for i, ex in enumerate(examples):
        np.testing.assert_array_equal(_unmasked(ex), packed["input_word_ids"][i].numpy())
        np.testing.assert_array_equal(ex["input_mask"], packed["input_mask"][i].numpy())
        np.testing.assert_array_equal(ex["input_type_ids"], packed["input_type_ids"][i].numpy())
    # Passing the preprocessor itself (e.g. model.document_preprocessor) gives the same examples;
    # one of another length is used with the requested length.
    for given in (pre, TextPreprocessor(str(bert_vocab_file), seq_length=288)):
        again = list(pt.mlm_examples(passages[:5], given, seq_length=128, seed=3))
        for a, b in zip(again, examples[:5]):
            for key in a:
                np.testing.assert_array_equal(a[key], b[key])
    # Plain strings are single segments, cleaned like the towers' inputs (U+FFFD dropped).
    texts = ["a plain string of text", "bad \ufffd byte", "Mixed\tWHITE space\nhere"]
    singles = list(pt.mlm_examples(texts, pre, seed=0))
    packed = pre(tf.constant(texts))
    for i, ex in enumerate(singles):
        np.testing.assert_array_equal(_unmasked(ex), packed["input_word_ids"][i].numpy())
        np.testing.assert_array_equal(ex["input_mask"], packed["input_mask"][i].numpy())
    assert singles[1]["input_mask"].sum() == 4  # [CLS] bad byte [SEP]


def test_mlm_needs_a_mask_token():
    from helpers import tiny_vocab
    vocab = [t for t in tiny_vocab() if t != "[MASK]"]
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        next(pt.mlm_examples(["the city"], vocab, seq_length=8))
