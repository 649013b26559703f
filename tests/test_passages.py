"""Tests of sentence splitting and passage cutting (tt_zoo.data.passages)."""

import pytest

from tt_zoo.data.articles import Article, Section
from tt_zoo.data.passages import Passage, make_passages, sentence_spans, split_sentences


def _sentence(i, words=10):
    """A sentence of `words` words that blingfire splits as one: "Start3 w3 w3 ... end3." """
    return " ".join([f"Start{i}"] + [f"w{i}"] * (words - 2)) + f" end{i}."


def test_split_sentences_drops_empties():
    assert split_sentences("It rains. It pours!  ") == ["It rains.", "It pours!"]
    assert split_sentences("Mr. Smith went to Washington. He left.") == [
        "Mr. Smith went to Washington.", "He left."]
    assert split_sentences("") == [] and split_sentences("   \n ") == []


def test_one_splitter_sentences_are_the_spans_substrings():
    text = "  It rains. It pours!  The carbon dioxide (CO\n2) stays. "
    spans = sentence_spans(text)
    assert spans == [(2, 11), (12, 21), (23, 55)]
    assert split_sentences(text) == [text[s:e] for s, e in spans] == [
        "It rains.", "It pours!", "The carbon dioxide (CO\n2) stays."]
    assert sentence_spans("") == [] and sentence_spans(" \n ") == []


def test_passage_ids_and_lead():
    p = Passage("Áedán mac Gabráin", 0, 3, "text")
    assert p.doc_id == "Áedán mac Gabráin#3"
    assert p.in_lead and not Passage("T", 1, 0, "x").in_lead


def test_paragraphs_become_passages_within_sections():
    long_para = " ".join(_sentence(i) for i in range(5))           # 50 words
    article = Article("T", (Section("", (long_para, long_para)),
                            Section("H", (long_para,))))
    passages = make_passages(article, max_tokens=288, min_tokens=40)
    assert [(p.section_index, p.index, p.text) for p in passages] == [
        (0, 0, long_para), (0, 1, long_para), (1, 2, long_para)]


def test_short_paragraphs_merge_but_never_across_sections():
    a, b, c = _sentence(1, 5), _sentence(2, 5), _sentence(3, 5)
    article = Article("T", (Section("", (a, b)), Section("H", (c,))))
    passages = make_passages(article, max_tokens=288, min_tokens=64)
    assert [p.text for p in passages] == [f"{a} {b}", c]
    # A passage that reached min_tokens does not absorb the next paragraph.
    assert len(make_passages(article, max_tokens=288, min_tokens=5)) == 3


def test_long_paragraph_split_at_sentence_boundaries_within_budget():
    sentences = [_sentence(i, words=10 + i) for i in range(30)]    # 735 words
    article = Article("T", (Section("", (" ".join(sentences),)),))
    passages = make_passages(article, max_tokens=100, min_tokens=0)
    assert all(len(p.text.split()) <= 100 for p in passages)
    assert " ".join(p.text for p in passages) == " ".join(sentences)   # nothing lost, in order
    for p in passages:  # every passage is whole sentences
        assert p.text.endswith(".") and p.text.startswith("Start")
    assert len(passages) == 9


def test_overlong_sentence_cut_at_words_and_custom_counter():
    sentence = " ".join(f"x{i}" for i in range(50)) + "."
    article = Article("T", (Section("", (sentence,)),))
    passages = make_passages(article, max_tokens=20, min_tokens=0)
    assert [len(p.text.split()) for p in passages] == [20, 20, 10]
    # A counter that charges 2 tokens a word halves the words per passage.
    passages = make_passages(article, max_tokens=20, min_tokens=0,
                             count_tokens=lambda t: 2 * len(t.split()))
    assert [len(p.text.split()) for p in passages] == [10] * 5


def test_bad_budget_is_an_error():
    with pytest.raises(ValueError, match="max_tokens"):
        make_passages(Article("T", (Section("", ("a b",)),)), max_tokens=0)
