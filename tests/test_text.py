"""Tests for tt_zoo.data.text: vocab files, the WordPiece learner and the TextPreprocessor layer."""

import json
import os
import shutil
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from conftest import data_file
from helpers import assert_layer_round_trip
from tt_zoo.data import text


@pytest.fixture(scope="module")
def bert_vocab():
    return text.load_vocab(data_file("bert-vocab/vocab.txt"))


@pytest.fixture(scope="module")
def bert_ids(bert_vocab):
    """Token -> id, looked up in the real BERT uncased vocab.txt (id = line index)."""
    return {token: i for i, token in enumerate(bert_vocab)}


@pytest.fixture(scope="module")
def pre16(bert_vocab):
    return text.TextPreprocessor(bert_vocab, seq_length=16)


def _np(outputs):
    return {k: v.numpy() for k, v in outputs.items()}


# ---------------------------------------------------------------- load_vocab / save_vocab

def test_load_bert_vocab(bert_vocab, bert_ids):
    assert len(bert_vocab) == 30522
    assert bert_vocab[0] == "[PAD]"
    # The well-known ids of BERT uncased.
    assert [bert_ids[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [100, 101, 102, 103]


def test_load_vocab_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        text.load_vocab(tmp_path / "nope.txt")

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        text.load_vocab(empty)

    good = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"]
    cases = {
        "space.txt": (good[:4] + ["hel lo"], r"line 5.*whitespace"),
        "blank.txt": (good[:2] + [""] + good[2:], r"line 3 is empty"),
        "dup.txt": (good + ["[UNK]"],
                    r"line 6: duplicate token '\[UNK\]' \(first seen on line 2\)"),
        "nocls.txt": ([t for t in good if t != "[CLS]"], r"missing.*\[CLS\]"),
        "padlast.txt": (good[1:] + ["[PAD]"], r"\[PAD\] must be id 0"),
    }
    for name, (lines, message) in cases.items():
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=message) as info:
            text.load_vocab(path)
        assert name in str(info.value)  # The error names the file.

    bad_utf8 = tmp_path / "latin1.txt"
    bad_utf8.write_bytes("\n".join(good).encode() + b"\ncaf\xe9\n")
    with pytest.raises(ValueError, match="UTF-8"):
        text.load_vocab(bad_utf8)


def test_save_vocab_roundtrip_is_atomic(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "héllo", "##s"]
    path = text.save_vocab(tokens, tmp_path / "sub" / "vocab.txt")
    assert text.load_vocab(path) == tokens
    assert os.listdir(path.parent) == ["vocab.txt"]  # No temp file left behind.
    with pytest.raises(ValueError, match="duplicate"):
        text.save_vocab(tokens + ["##s"], tmp_path / "bad.txt")
    assert not (tmp_path / "bad.txt").exists()


# ---------------------------------------------------------------- TextPreprocessor

def test_attributes(pre16, bert_ids):
    assert pre16.vocab_size == 30522
    assert (pre16.pad_id, pre16.unk_id, pre16.cls_id, pre16.sep_id, pre16.mask_id) == (
        0, bert_ids["[UNK]"], bert_ids["[CLS]"], bert_ids["[SEP]"], bert_ids["[MASK]"])
    no_mask = text.TextPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], seq_length=4)
    assert no_mask.mask_id is None and no_mask.vocab_size == 5
    cased = text.TextPreprocessor(pre16.vocabulary, seq_length=np.int64(8), lower_case=False)
    assert cased.seq_length == 8 and type(cased.seq_length) is int
    # The uncased vocabulary has no "Hello": without lower-casing it is [UNK].
    assert cased.tokenize(tf.constant(["Hello hello"])).to_list() == [
        [bert_ids["[UNK]"], bert_ids["hello"]]]


def test_single_segment_hello_world(pre16, bert_ids):
    out = _np(pre16(tf.constant(["Hello World!"])))
    expected = [bert_ids[t] for t in ("[CLS]", "hello", "world", "!", "[SEP]")]
    assert expected == [101, 7592, 2088, 999, 102]  # Read off vocab.txt by hand.
    np.testing.assert_array_equal(out["input_word_ids"], [expected + [0] * 11])
    np.testing.assert_array_equal(out["input_mask"], [[1] * 5 + [0] * 11])
    np.testing.assert_array_equal(out["input_type_ids"], np.zeros([1, 16]))
    for value in out.values():
        assert value.dtype == np.int32 and value.shape == (1, 16)


def test_lower_case_strips_accents_and_splits_wordpieces(pre16, bert_ids):
    pieces = pre16.tokenize(tf.constant(["Héllo WÖRLD", "unaffable"])).to_list()
    assert pieces[0] == [bert_ids["hello"], bert_ids["world"]]
    assert [pre16.vocabulary[i] for i in pieces[1]] == ["una", "##ffa", "##ble"]
    assert pre16.count_wordpieces(["Hello World!", "unaffable", ""]) == [3, 3, 0]


def test_case_folding_unicode_lower_keeps_what_bert_keeps(bert_vocab):
    """NFKC case folding (the default) also folds compatibility characters; BERT's reference
    tokenizer and Hugging Face's lower-case only (accents stripped), one character at a time:
    "km²" stays one token of the vocabulary, a final capital sigma becomes "σ", not "ς"."""
    folded = text.TextPreprocessor(bert_vocab, seq_length=16)
    lowered = text.TextPreprocessor(bert_vocab, seq_length=16, case_folding="unicode_lower")

    def pieces(pre, s):
        return [pre.vocabulary[i] for i in pre.tokenize(tf.constant([s])).to_list()[0]]

    assert pieces(folded, "KM²") == ["km", "##2"]
    assert pieces(lowered, "KM²") == ["km²"]
    assert pieces(folded, "…") == [".", ".", "."] and pieces(lowered, "…") == ["…"]
    assert pieces(lowered, "ΟΣ") == ["ο", "##σ"] and pieces(lowered, "ος") == ["ο", "##ς"]
    assert pieces(lowered, "Héllo WÖRLD") == pieces(folded, "Héllo WÖRLD") == ["hello", "world"]
    assert "case_folding" not in folded.get_config()  # configs saved before it are unchanged
    assert_layer_round_trip(lowered, tf.constant(["KM² … ΟΣ"]))
    assert lowered.tokenizer_settings() == {**folded.tokenizer_settings(),
                                            "case_folding": "unicode_lower"}
    with pytest.raises(ValueError, match="case_folding must be one of"):
        text.TextPreprocessor(bert_vocab, case_folding="upper")


def test_pair_packing(pre16, bert_ids):
    out = _np(pre16((tf.constant(["Hello World!"]), tf.constant(["the world"]))))
    # [CLS] hello world ! [SEP] the world [SEP]
    words = ["[CLS]", "hello", "world", "!", "[SEP]", "the", "world", "[SEP]"]
    np.testing.assert_array_equal(out["input_word_ids"][0], [bert_ids[w] for w in words] + [0] * 8)
    np.testing.assert_array_equal(out["input_type_ids"][0], [0] * 5 + [1] * 3 + [0] * 8)
    np.testing.assert_array_equal(out["input_mask"][0], [1] * 8 + [0] * 8)


def test_truncation_keeps_special_tokens(bert_ids):
    pre = text.TextPreprocessor(list(_vocab_of(bert_ids)), seq_length=12)
    long_a = " ".join(["a"] * 20)
    long_b = " ".join(["b"] * 20)
    a, b, cls, sep = (bert_ids[t] for t in ("a", "b", "[CLS]", "[SEP]"))

    single = _np(pre(tf.constant([long_a])))
    np.testing.assert_array_equal(single["input_word_ids"][0], [cls] + [a] * 10 + [sep])

    pair = _np(pre((tf.constant([long_a, "a a"]), tf.constant([long_b, long_b]))))
    # Budget 12 - 3 = 9, dealt round robin: both long -> 5 + 4; short first -> 2 + 7.
    np.testing.assert_array_equal(
        pair["input_word_ids"],
        [[cls] + [a] * 5 + [sep] + [b] * 4 + [sep],
         [cls] + [a] * 2 + [sep] + [b] * 7 + [sep]])
    np.testing.assert_array_equal(
        pair["input_type_ids"], [[0] * 7 + [1] * 5, [0] * 4 + [1] * 8])
    np.testing.assert_array_equal(pair["input_mask"], np.ones([2, 12]))


def _vocab_of(ids):
    return sorted(ids, key=ids.get)


def test_empty_and_invalid_utf8(pre16, bert_ids):
    out = _np(pre16(tf.constant(["", b"\xff\xfeabc", b"ab\xffc"])))
    cls, sep, abc = bert_ids["[CLS]"], bert_ids["[SEP]"], bert_ids["abc"]
    np.testing.assert_array_equal(out["input_word_ids"][0], [cls, sep] + [0] * 14)
    np.testing.assert_array_equal(out["input_mask"][0], [1, 1] + [0] * 14)
    # Invalid bytes are dropped as BERT drops U+FFFD: both read as "abc".
    np.testing.assert_array_equal(out["input_word_ids"][1], [cls, abc, sep] + [0] * 13)
    np.testing.assert_array_equal(out["input_word_ids"][2], [cls, abc, sep] + [0] * 13)

    pair = _np(pre16((tf.constant([""]), tf.constant([""]))))
    np.testing.assert_array_equal(pair["input_word_ids"][0, :4], [cls, sep, sep, 0])
    np.testing.assert_array_equal(pair["input_type_ids"][0, :4], [0, 0, 1, 0])


def test_bad_rank_and_dtype(pre16):
    with pytest.raises(ValueError, match=r"1D string tensor.*\(1, 2\)"):
        pre16(tf.constant([["a", "b"]]))
    with pytest.raises(ValueError, match=r"segment 1.*shape \(\).*pair of segments"):
        pre16((tf.constant(["a"]), tf.constant("b")))
    with pytest.raises(ValueError, match="dtype int32"):
        pre16(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="3 inputs"):
        pre16([tf.constant(["a"])] * 3)
    with pytest.raises(ValueError, match="seq_length"):
        text.TextPreprocessor(pre16.vocabulary, seq_length=2)


def test_tf_function_batch_sizes_0_and_1(pre16):
    single = tf.function(pre16, input_signature=[tf.TensorSpec([None], tf.string)])
    pair = tf.function(lambda a, b: pre16((a, b)),
                       input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    for batch in ([], ["Hello World!"]):
        strings = tf.constant(batch, tf.string)
        for out in (single(strings), pair(strings, strings)):
            assert all(v.shape == (len(batch), 16) for v in out.values())
    eager = pre16(tf.constant(["Hello World!"]))["input_word_ids"]
    np.testing.assert_array_equal(single(tf.constant(["Hello World!"]))["input_word_ids"], eager)


def test_get_config_json_roundtrip(pre16):
    config = json.loads(json.dumps(pre16.get_config()))
    assert config["vocabulary"] == pre16.vocabulary and config["seq_length"] == 16
    inputs = (tf.constant(["Hello World!", "Who discovered penicillin?"]),
              tf.constant(["a passage", "Alexander Fleming, in 1928."]))
    for x in (inputs[0], inputs):  # the shared case: same config, the same ids exactly
        assert_layer_round_trip(pre16, x)
    # Through Keras' own registry too.
    again = tf.keras.layers.deserialize(
        json.loads(json.dumps(tf.keras.layers.serialize(pre16))))
    assert isinstance(again, text.TextPreprocessor)


# The tensorflow-text kernels the layer uses (FastBertTokenizer, RoundRobinTrimmer).
TF_TEXT_OPS = {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "TFText>RoundRobinTrim"}

# Text where BERT's basic tokenizer has special rules: CJK characters split one by one, accents
# and compatibility forms, control and zero-width characters dropped, whitespace kinds,
# punctuation of many scripts, over-long words ([UNK]), the special tokens' spellings.
TRICKY_TEXTS = [
    "中文字符测试", "日本語のテキスト", "한국어", "mixed中文and English", "naïve café résumé",
    "Ångström ﬁ ligature", "e\u0301", "tab\tnew\nline\rcr", "ctrl\x00\x01\x7f\u200b\u200dzw",
    "emoji 😀👍🏽", "ÄÖÜ ß", "x" * 150, "a" + "b" * 300 + " c", "Ｆｕｌｌｗｉｄｔｈ", "¿Qué? ¡Sí!",
    "«quotes» “curly” ‘single’", "math ∑∫√ ≤ ≥", "—dash–", "$100 & 50% #tag @at",
    "Ελληνικά Русский עברית العربية हिन्दी ไทย", "\ufeffbom", "soft\u00adhyphen",
    "nbsp\u00a0space", "em\u2003space\u3000ideographic", "[MASK] [CLS] [SEP] [UNK]", "##suffix", "  leading   spaces  ", "",
    "Alexander Fleming, in 1928, discovered penicillin (PCN).", "don't won't U.S.A. 3.14"]


@pytest.mark.parametrize("lower_case", [True, False])
def test_ids_equal_the_classic_bert_tokenizer(lower_case):
    """FastBertTokenizer replaced tensorflow-text's BertTokenizer: the ids must not move (they
    did not on 276,873 Wikispeedia passages, titles and ReQA texts either, measured once with
    the shipped, lower-cased vocabulary). One difference, cased only: a no-break or other
    Unicode space (category Zs) separates words, as in BERT's own tokenizer
    (`_is_whitespace`); the classic cased BertTokenizer kept it inside the word."""
    vocab = text.load_vocab(data_file("bert-vocab/vocab.txt"))
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant(vocab), tf.range(len(vocab), dtype=tf.int64)), default_value=-1)
    classic = tf_text.BertTokenizer(table, token_out_type=tf.int64, unknown_token="[UNK]",
                                    lower_case=lower_case)
    pre = text.TextPreprocessor(vocab, seq_length=16, lower_case=lower_case)
    spaced = [t if lower_case else "".join(" " if unicodedata.category(c) == "Zs" else c
                                           for c in t) for t in TRICKY_TEXTS]
    expected = classic.tokenize(text._sanitize_utf8(tf.constant(spaced))).merge_dims(-2, -1)
    assert pre.tokenize(tf.constant(TRICKY_TEXTS)).to_list() == expected.to_list()


def _save_tiny_model(tmp_path):
    """Input strings -> TextPreprocessor (built from a vocab file we then delete) -> SavedModel."""
    vocab_file = tmp_path / "vocab.txt"
    shutil.copy(data_file("bert-vocab/vocab.txt"), vocab_file)
    pre = text.TextPreprocessor(str(vocab_file), seq_length=12)
    query = tf.keras.Input(shape=(), dtype=tf.string, name="query")
    passage = tf.keras.Input(shape=(), dtype=tf.string, name="passage")
    single, pair = pre(query), pre((query, passage))
    model = tf.keras.Model(
        [query, passage],
        {"query_ids": single["input_word_ids"], "doc_ids": pair["input_word_ids"],
         "doc_types": pair["input_type_ids"], "doc_mask": pair["input_mask"]})

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def serve(query, passage):
        return model([query, passage])

    inputs = [tf.constant(["Hello World!", "", b"\xff\xfeabc"]),
              tf.constant(["the world", "x", "a b c d e f g h i j k l m"])]
    expected = _np(model(inputs))
    model.save(str(tmp_path / "sm"), save_format="tf", signatures={"serving_default": serve})
    vocab_file.unlink()  # The SavedModel must not need the vocabulary file.
    return tmp_path / "sm", inputs, expected


def test_saved_model_without_vocab_file(tmp_path):
    path, inputs, expected = _save_tiny_model(tmp_path)
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    got = _np(serve(query=inputs[0], passage=inputs[1]))
    assert sorted(got) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])
    assert expected["doc_ids"][0, 4] == 102  # [SEP] after "hello world !": a real packing.
    empty = serve(query=tf.constant([], tf.string), passage=tf.constant([], tf.string))
    assert empty["doc_ids"].shape == (0, 12)

    # Every op that is not core TensorFlow comes from tensorflow-text.
    from tensorflow.core.protobuf import saved_model_pb2
    saved = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert {op for op in ops if not hasattr(tf.raw_ops, op)} <= TF_TEXT_OPS


@pytest.mark.slow
def test_saved_model_keras_load_model(tmp_path):
    path, inputs, expected = _save_tiny_model(tmp_path)
    model = tf.keras.models.load_model(str(path))
    assert any(isinstance(layer, text.TextPreprocessor) for layer in model.layers)
    got = _np(model(inputs))
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])


# ---------------------------------------------------------------- learn_wordpiece_vocab

def _squad_sentences(n):
    import blingfire
    squad = json.loads(data_file("squad/dev-v1.1.json").read_text(encoding="utf-8"))
    sentences = []
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            sentences += blingfire.text_to_sentences(paragraph["context"]).split("\n")
            if len(sentences) >= n:
                return sentences[:n]
    return sentences


def test_learn_wordpiece_vocab_on_squad(tmp_path):
    sentences = _squad_sentences(400)
    assert len(sentences) == 400
    vocab = text.learn_wordpiece_vocab(sentences, 1000)
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 800 <= len(vocab) <= 1000, len(vocab)
    assert text.load_vocab(text.save_vocab(vocab, tmp_path / "vocab.txt")) == vocab

    pre = text.TextPreprocessor(vocab, seq_length=32)
    # A sentence of SQuAD dev's first article (Super Bowl 50), not verbatim from the corpus.
    ids = pre.tokenize(tf.constant(["The Broncos won Super Bowl 50 in Santa Clara, California."]))
    ids = ids[0].numpy().tolist()
    assert ids.count(pre.unk_id) <= 1
    assert len(ids) <= 20  # Frequent words are whole tokens, not spelled out letter by letter.
    assert [vocab[i] for i in ids[:2]] == ["the", "broncos"]


def test_learn_wordpiece_vocab_errors():
    with pytest.raises(ValueError, match="vocab_size"):
        text.learn_wordpiece_vocab(["a b c"], 5)
    with pytest.raises(ValueError, match="non-empty"):
        text.learn_wordpiece_vocab(["", "  "], 100)
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        text.learn_wordpiece_vocab(["a", 3], 100)
