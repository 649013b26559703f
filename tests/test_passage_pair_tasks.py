"""Tests of the successor pair sources (Contriever crops, Spider recurring spans, ProQA qgen) on a
hand-built article and on a real Wikispeedia slice."""

import collections
import itertools
import random

import pytest

from conftest import data_file
from tt_zoo.data import passage_pair_tasks as ppt
from tt_zoo.data import pretraining_tasks as pt
from tt_zoo.data.articles import Article, Section
from tt_zoo.data.passages import Passage, make_passages

# Three passages (one paragraph each, each >= 64 words would merge; these stay apart because
# max_doc_tokens=12 cuts them): "Grand Canal" recurs in passages 0 and 2, "Marco Polo" in 1 and 2.
PARAGRAPHS = ("The Grand Canal links Beijing with Hangzhou in the east.",
              "Marco Polo described the canal in his travel book.",
              "Marco Polo saw the Grand Canal near Suzhou and Yangzhou.")
ARTICLE = Article("Grand Canal of China", (Section("", PARAGRAPHS),), ())


def _passages():
    passages = make_passages(ARTICLE, max_tokens=12, min_tokens=1)
    assert [p.text for p in passages] == list(PARAGRAPHS)
    return passages


def test_recurring_spans_hand_checked():
    spans = ppt.recurring_spans(_passages())
    # "the grand canal" is not a span (it starts with a stop word); "canal" alone is too short;
    # "grand canal" inside no longer qualifying span; "marco polo" likewise.
    assert spans == {("grand", "canal"): (0, 2), ("marco", "polo"): (1, 2)}


def test_recurring_spans_keep_only_maximal_ones():
    texts = ("Pactyes hired Greek mercenaries in Sardis.", "Later Pactyes hired Greek mercenaries.",
             "Pactyes hired riders.")
    passages = [Passage("Cyrus", 0, i, t) for i, t in enumerate(texts)]
    spans = ppt.recurring_spans(passages)
    # "pactyes hired greek mercenaries" (0, 1) covers "pactyes hired" (0, 1, 2): a sub-phrase of a
    # qualifying span is dropped even where it recurs more widely.
    assert spans == {("pactyes", "hired", "greek", "mercenaries"): (0, 1)}


def test_span_pair_removes_the_span_from_the_query_window():
    passages = _passages()
    for seed in range(20):
        drawn = ppt.span_pair(passages, random.Random(seed), min_words=2, max_words=10,
                              query_words=30, keep_prob=0.0)
        query, doc, doc_text = drawn
        span_words = {"grand canal": ("Grand", "Canal"), "marco polo": ("Marco", "Polo")}
        held = [k for k in span_words if k in doc_text.lower()]
        assert doc_text == doc.text and doc in passages
        # The query is a passage holding a shared span, with that span cut out.
        source = next(p.text for p in passages if p is not doc and
                      any(k in p.text.lower() for k in held) and
                      set(query.split()) <= set(p.text.split()))
        removed = [k for k in held if k in source.lower() and k not in query.lower()]
        assert removed, (query, doc_text)
        assert len(query.split()) == len(source.split()) - 2


def test_span_pair_keeps_the_span_when_asked():
    passages = _passages()
    query, doc, _ = ppt.span_pair(passages, random.Random(0), min_words=2, max_words=10,
                                  query_words=30, keep_prob=1.0)
    assert query in PARAGRAPHS and doc.text != query


def test_span_query_window_is_a_window_around_the_span():
    words = [f"w{i}" for i in range(40)]
    words[20:22] = ["Rhine", "Delta"]
    other = "The Rhine Delta is shaped by two bifurcations."
    passages = [Passage("Rhine", 0, 0, " ".join(words)), Passage("Rhine", 0, 1, other)]
    for seed in range(10):
        query, doc, _ = ppt.span_pair(passages, random.Random(seed), min_words=2, max_words=10,
                                      query_words=6, keep_prob=0.0)
        if doc.index == 1:
            q = query.split()
            assert len(q) == 4 and "Rhine" not in q
            # The 6-word window held positions 20-21 (the span), now cut out.
            positions = sorted([int(w[1:]) for w in q] + [20, 21])
            assert positions == list(range(positions[0], positions[0] + 6))


def test_crop_pair_takes_two_crops_of_one_passage():
    passages = _passages()
    for seed in range(30):
        query, doc, doc_text = ppt.crop_pair(passages, random.Random(seed), min_words=5,
                                             min_ratio=0.1, max_ratio=0.5, deletion_prob=0.0)
        words = doc.text.split()
        for crop in (query.split(), doc_text.split()):
            assert 1 <= len(crop) <= round(0.5 * len(words))
            # Without deletion a crop is a contiguous run of the passage's words.
            assert any(words[s:s + len(crop)] == crop for s in range(len(words)))


def test_crop_pair_of_a_window_crosses_passages_and_names_the_starting_one():
    """--crop-source-words N: both crops come from one window of N contiguous words of the
    article, across passage boundaries; the pair's passage is the one the window starts in."""
    passages = [Passage("Counting", 0, i, " ".join(f"w{10 * i + j}" for j in range(10)))
                for i in range(5)]  # w0 ... w49 in page order, ten words a passage
    crossing = 0
    for seed in range(50):
        query, doc, doc_text = ppt.crop_pair(passages, random.Random(seed), min_words=5,
                                             min_ratio=0.5, max_ratio=0.5, deletion_prob=0.0,
                                             source_words=30)
        crops = [[int(w[1:]) for w in c.split()] for c in (query, doc_text)]
        for crop in crops:  # 15 contiguous words (half the window)
            assert crop == list(range(crop[0], crop[0] + 15))
        low, high = min(c[0] for c in crops), max(c[-1] for c in crops)
        assert high - low < 30  # both inside one 30-word window
        assert doc.index * 10 <= low  # the window starts in doc (at or before both crops)
        crossing += any(c[0] // 10 != c[-1] // 10 for c in crops)
    assert crossing > 25  # 15-word crops of 10-word passages: most cross a boundary
    # An article shorter than the window is the window; shorter than min_words is skipped.
    short = passages[:1]
    query, doc, _ = ppt.crop_pair(short, random.Random(0), min_words=5, min_ratio=1.0,
                                  max_ratio=1.0, deletion_prob=0.0, source_words=256)
    assert query == short[0].text and doc is short[0]
    assert ppt.crop_pair(short, random.Random(0), min_words=11, min_ratio=0.1, max_ratio=0.5,
                         deletion_prob=0.0, source_words=256) == "short_passage"
    with pytest.raises(ValueError, match="crop_source_words must be >= 0"):
        pt.TaskConfig(tasks=("crop",), crop_source_words=-1)


def test_crop_deletion_drops_about_the_given_fraction():
    words = [f"w{i}" for i in range(1000)]
    rng = random.Random(0)
    kept, total = 0, 0
    for _ in range(200):
        crop = ppt.random_crop(words, rng, 0.5, 0.5, deletion_prob=0.1)
        kept += len(crop)
        total += 500
        positions = [int(w[1:]) for w in crop]
        assert positions == sorted(positions) and positions[-1] - positions[0] < 500
    assert 0.88 < kept / total < 0.92


def test_successor_tasks_in_the_pipeline_and_counted():
    config = pt.TaskConfig(tasks=("crop", "span"), pairs_per_article=40, max_doc_tokens=12,
                           span_keep_prob=0.0, crop_min_words=5)
    counters = collections.Counter()
    pairs = pt.pairs_for_article(ARTICLE, [], config, counters)
    assert {p.task for p in pairs} == {"crop", "span"}
    assert counters["crop_pairs"] + counters["span_pairs"] == len(pairs) == 40
    assert all(p.doc_title == ARTICLE.title and p.doc_id.startswith(ARTICLE.title + "#")
               for p in pairs)
    # A one-passage article has no recurring span: the slot is skipped and counted.
    lone = Article("Lone", (Section("", ("Only one short paragraph here about nothing.",)),), ())
    counters = collections.Counter()
    assert pt.pairs_for_article(lone, [], pt.TaskConfig(tasks=("span",)), counters) == []
    assert counters == {"span_skipped_no_recurring_span": 4}


def test_successor_config_validation():
    with pytest.raises(ValueError, match="crop ratios"):
        pt.TaskConfig(tasks=("crop",), crop_min_ratio=0.6, crop_max_ratio=0.5)
    with pytest.raises(ValueError, match="span_keep_prob"):
        pt.TaskConfig(tasks=("span",), span_keep_prob=1.5)
    with pytest.raises(ValueError, match="subset of"):
        pt.TaskConfig(tasks=("spider",))


def test_span_pairs_on_real_articles_share_a_span():
    folder = data_file("wikispeedia/wikispeedia_articles_plaintext.tar.gz").parent
    from tt_zoo.data.wikispeedia import read_wikispeedia

    articles = list(itertools.islice(read_wikispeedia(folder, progress=False), 30))
    config = pt.TaskConfig(tasks=("span",), pairs_per_article=4, max_doc_tokens=96,
                           span_keep_prob=0.0)
    checked = 0
    for article in articles:
        passages = make_passages(article, config.max_doc_tokens)
        spans = ppt.recurring_spans(passages)
        for pair in pt.pairs_for_article(article, [], config):
            doc_words = [ppt.normalize_word(w) for w in pair.doc_text.split()]
            # Some recurring span of the article is in the document, and the query came from
            # another passage that holds it too.
            shared = [s for s, holders in spans.items()
                      if any(tuple(doc_words[i:i + len(s)]) == s for i in range(len(doc_words)))
                      and len(holders) >= 2]
            assert shared, pair
            checked += 1
    assert checked > 80


def test_beam_gives_the_local_pairs_for_the_successor_tasks(tmp_path):
    from tt_zoo.data import beam_pairs, features, pairs_io
    from tt_zoo.data.wikispeedia import read_wikispeedia

    titles = ["Paris", "France", "Fungus"]
    articles = list(read_wikispeedia(data_file("wikispeedia"), progress=False, titles=titles))
    config = pt.TaskConfig(tasks=pt.SUCCESSOR_TASKS, pairs_per_article=12, seed=3,
                           max_doc_tokens=96)
    local = tmp_path / "local"
    pairs_io.write_pair_shards(pt.generate_pairs(articles, config), local, 2, progress=False)
    manifest = beam_pairs.run_beam_pipeline(articles, tmp_path / "beam", config, 2)

    def records(path):
        return sorted(tuple(sorted(r.items())) for r in pairs_io.iter_pair_records(path))

    assert records(tmp_path / "beam") == records(local)
    tasks = collections.Counter(dict(r)[features.TASK] for r in records(local))
    assert set(tasks) == set(pt.SUCCESSOR_TASKS), tasks
    assert manifest["config"]["span_keep_prob"] == config.span_keep_prob
