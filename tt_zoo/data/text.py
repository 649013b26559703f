"""In-graph text preprocessing and WordPiece vocabularies for the two towers.

Both towers of Chang et al. (ICLR 2020) read WordPiece ids: the Transformer tower gets BERT-style
packed inputs (Sec. 2, 5.1: query length 64, document length 288; the document is the text pair
"title [SEP] passage" for ICT, "sentence [SEP] passage" for ReQA), and the BoW-MLP tower averages
the unigram embeddings of the same ids over ``input_mask``. :class:`TextPreprocessor` turns raw
strings into those ids inside the TensorFlow graph (tensorflow-text ops only), so an exported
SavedModel takes raw strings in.

Public API:

* :func:`load_vocab` / :func:`save_vocab`: a BERT-style ``vocab.txt`` (one token per line).
* :func:`learn_wordpiece_vocab`: learn a small vocabulary with tensorflow-text's BERT vocabulary
  learner, so a model can ship its own.
* :class:`TextPreprocessor`: Keras layer, strings (or string pairs) -> ``input_word_ids``,
  ``input_mask``, ``input_type_ids``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
import os
import pathlib
from typing import Dict, Iterable, Sequence

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bert_vocab

from tt_zoo.atomic_io import write_text

PAD = "[PAD]"
UNK = "[UNK]"
CLS = "[CLS]"
SEP = "[SEP]"
MASK = "[MASK]"
REQUIRED_SPECIAL_TOKENS = (PAD, UNK, CLS, SEP)
DEFAULT_RESERVED_TOKENS = (PAD, UNK, CLS, SEP, MASK)


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
    """A tokenizer mapping: which vocabulary tokens play the packing roles, and how a pair is
    joined. BERT packs ``[CLS] a [SEP]`` and ``[CLS] a [SEP] b [SEP]`` (Devlin et al. 2019,
    Sec. 3); RoBERTa and MPNet pack ``<s> a </s>`` and ``<s> a </s></s> b </s>`` (Hugging Face's
    ``RobertaProcessing``), padding with ``<pad>``. Each architecture family registers its own
    (`tt_zoo.modeling.architectures`).

    Args:
      pad, unk, cls, sep: the tokens of those roles (each must be in the vocabulary).
      mask: the masked-LM token, optional in the vocabulary.
      pair_separators: how many ``sep`` tokens join the two segments of a pair (1 or 2).
    """

    pad: str = "[PAD]"
    unk: str = "[UNK]"
    cls: str = "[CLS]"
    sep: str = "[SEP]"
    mask: str = "[MASK]"
    pair_separators: int = 1

    def __post_init__(self):
        if self.pair_separators not in (1, 2):
            raise ValueError(f"pair_separators must be 1 or 2 (got {self.pair_separators!r}).")

    @property
    def required(self) -> tuple:
        return (self.pad, self.unk, self.cls, self.sep)

    @classmethod
    def from_config(cls, config) -> "SpecialTokens":
        """From `to_config`'s dict (None: BERT's)."""
        if config is None:
            return BERT_SPECIAL_TOKENS
        if isinstance(config, SpecialTokens):
            return config
        if not isinstance(config, dict) or set(config) - {f.name for f in
                                                           dataclasses.fields(cls)}:
            raise ValueError(f"special_tokens must be a dict of {[f.name for f in dataclasses.fields(cls)]}"
                             f" (got {config!r}).")
        return cls(**config)

    def to_config(self) -> dict:
        return dataclasses.asdict(self)


BERT_SPECIAL_TOKENS = SpecialTokens()

# How an uncased tokenizer lower-cases: see `TextPreprocessor`'s ``case_folding``.
CASE_FOLDINGS = ("nfkc_casefold", "unicode_lower")
DEFAULT_CASE_FOLDING = "nfkc_casefold"

# BERT's text cleaning drops U+FFFD (the replacement character); we use it to mark invalid bytes.
_REPLACEMENT_CHAR = 0xFFFD


# --------------------------------------------------------------------------------------------
# Vocabulary files.
# --------------------------------------------------------------------------------------------

def validate_vocab(tokens: Sequence[str], source: str = "vocabulary",
                   special_tokens: SpecialTokens = BERT_SPECIAL_TOKENS) -> list[str]:
    """Checks a token list and returns it as a plain ``list[str]``.

    Raises ``ValueError`` naming ``source`` and the first problem: a token that is not a string,
    empty, or holds whitespace (with its 1-based line number), a duplicate token (both lines), a
    missing required special token (``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]``, or the roles of
    another `special_tokens` mapping), or, with BERT's mapping, ``[PAD]`` not at id 0 (padding
    with 0 must mean ``[PAD]``; another mapping pads with its own pad id).
    """
    tokens = list(tokens)
    if not tokens:
        raise ValueError(f"{source}: the vocabulary is empty (expected one token per line).")
    first_line = {}
    for index, token in enumerate(tokens):
        line = index + 1
        if not isinstance(token, str):
            raise ValueError(f"{source}: line {line}: expected a str token, got {token!r}.")
        if not token:
            raise ValueError(f"{source}: line {line} is empty (expected one token per line).")
        if any(ch.isspace() for ch in token):
            raise ValueError(
                f"{source}: line {line}: token {token!r} contains whitespace "
                "(expected one token per line, no spaces).")
        if token in first_line:
            raise ValueError(
                f"{source}: line {line}: duplicate token {token!r} "
                f"(first seen on line {first_line[token]}).")
        first_line[token] = line
    required = special_tokens.required
    missing = [t for t in required if t not in first_line]
    if missing:
        raise ValueError(
            f"{source}: missing required special token(s) {missing} "
            f"(a vocabulary needs {list(required)}).")
    if special_tokens == BERT_SPECIAL_TOKENS and tokens[0] != PAD:
        raise ValueError(
            f"{source}: {PAD} must be id 0 (line 1), found it on line {first_line[PAD]}; "
            f"line 1 holds {tokens[0]!r}.")
    return tokens


def load_vocab(path: str | os.PathLike,
               special_tokens: SpecialTokens = BERT_SPECIAL_TOKENS) -> list[str]:
    """Reads a BERT-style ``vocab.txt`` (UTF-8, one token per line; token id = line index).

    Args:
        path: the vocabulary file.
        special_tokens: the mapping whose tokens it must hold (:func:`validate_vocab`).

    Returns:
        The tokens, in id order.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is not UTF-8, is empty, or fails :func:`validate_vocab`.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocabulary file {str(path)!r} does not exist (or is not a file).")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: not valid UTF-8 at byte {e.start} ({raw[e.start:e.start + 4]!r}).") from e
    if not text.strip():
        raise ValueError(f"{path}: the vocabulary file is empty (expected one token per line).")
    text = text.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    return validate_vocab(text.split("\n"), source=str(path), special_tokens=special_tokens)


def save_vocab(tokens: Sequence[str], path: str | os.PathLike) -> pathlib.Path:
    """Writes ``tokens`` as a ``vocab.txt`` atomically (temp file in the same folder, then rename).

    The tokens are validated first (:func:`validate_vocab`), so a saved file always loads.
    Returns the path written.
    """
    path = pathlib.Path(path)
    tokens = validate_vocab(tokens, source=f"tokens for {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, "\n".join(tokens) + "\n")
    return path


def learn_wordpiece_vocab(
    texts: Iterable[str],
    vocab_size: int,
    *,
    lower_case: bool = True,
    reserved_tokens: Sequence[str] = DEFAULT_RESERVED_TOKENS,
    learn_params: dict | None = None,
) -> list[str]:
    """Learns a WordPiece vocabulary with tensorflow-text's BERT vocabulary learner.

    Uses ``tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset``: texts are split into
    words by BERT's basic tokenizer (with the same ``lower_case`` as :class:`TextPreprocessor`),
    then a binary search over a minimum-count threshold picks subwords so that the size lands in
    ``[vocab_size * (1 - slack_ratio), vocab_size]`` when the corpus allows it. Every character
    of the corpus and its ``##`` suffix form are always included, so no seen word maps to
    ``[UNK]``.

    Two departures from the learner's defaults, both so that a small corpus behaves: the
    search may go down to a minimum count of 1 (``lower_thresh=1`` instead of 10; it still
    picks the highest threshold that fits), and when the search runs out of thresholds with a
    vocabulary that is too large we drop the rarest learned subwords (never a reserved token,
    a character or a ``##``-character), so the result never exceeds ``vocab_size`` unless the
    reserved tokens and characters alone do.

    Args:
        texts: the corpus, any iterable of strings (consumed once).
        vocab_size: the target (maximum) size, reserved tokens included.
        lower_case: lower-case and strip accents, as BERT uncased.
        reserved_tokens: tokens placed first, in this order; the default gives ``[PAD]`` id 0,
            ``[UNK]`` 1, ``[CLS]`` 2, ``[SEP]`` 3, ``[MASK]`` 4.
        learn_params: keyword arguments for ``wordpiece_tokenizer_learner_lib.learn``
            (``lower_thresh``, ``upper_thresh``, ``num_iterations``, ``slack_ratio``, ...).

    Returns:
        The vocabulary, reserved tokens first; it passes :func:`validate_vocab`.
    """
    reserved_tokens = list(reserved_tokens)
    if not isinstance(vocab_size, int) or vocab_size <= len(reserved_tokens):
        raise ValueError(
            f"vocab_size must be an int larger than the {len(reserved_tokens)} reserved tokens "
            f"(got {vocab_size!r}).")
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, (str, bytes))), None)
    if bad is not None:
        raise ValueError(f"texts[{bad}] is not a string (got {type(texts[bad]).__name__}).")
    if not any(t.strip() for t in texts):
        raise ValueError("learn_wordpiece_vocab needs at least one non-empty text (got none).")
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(texts, tf.string)).batch(1024)
    dataset = dataset.map(_sanitize_utf8)
    vocab = bert_vocab.bert_vocab_from_dataset(
        dataset,
        vocab_size=vocab_size,
        reserved_tokens=reserved_tokens,
        bert_tokenizer_params=dict(lower_case=lower_case),
        learn_params={"lower_thresh": 1, **(learn_params or {})},
    )
    if vocab[:len(reserved_tokens)] != reserved_tokens:  # The learner puts them first; check.
        raise RuntimeError(f"learned vocabulary does not start with {reserved_tokens}.")
    # BERT's basic tokenizer splits on ASCII whitespace only; drop a learned token that holds
    # another whitespace character (e.g. U+00A0): a vocab.txt line cannot represent it.
    rest = [t for t in vocab[len(reserved_tokens):] if not any(ch.isspace() for ch in t)]
    if len(reserved_tokens) + len(rest) > vocab_size:
        def is_char(token):
            return len(token) == 1 or (len(token) == 3 and token.startswith("##"))
        chars = [t for t in rest if is_char(t)]
        learned = [t for t in rest if not is_char(t)]  # In decreasing count order.
        keep = set(learned[:max(0, vocab_size - len(reserved_tokens) - len(chars))])
        rest = [t for t in rest if is_char(t) or t in keep]
    return validate_vocab(reserved_tokens + rest, source="learned vocabulary")


# --------------------------------------------------------------------------------------------
# The preprocessing layer.
# --------------------------------------------------------------------------------------------

def _sanitize_utf8(strings: tf.Tensor) -> tf.Tensor:
    """Replaces invalid UTF-8 bytes, then drops the replacement characters (as BERT does)."""
    strings = tf.strings.unicode_transcode(
        strings, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace",
        replacement_char=_REPLACEMENT_CHAR)
    return tf.strings.regex_replace(strings, "\uFFFD", "")


def _strip_accents_then_lower(strings: tf.Tensor) -> tf.Tensor:
    """BERT uncased's normalisation as its reference tokenizer and Hugging Face's
    ``BertNormalizer`` do it: NFD, drop the non-spacing marks (accents), then Unicode
    lower-casing of each character; compatibility characters ("²", "…") are left alone."""
    strings = tf_text.normalize_utf8(strings, "NFD")
    strings = tf.strings.regex_replace(strings, r"\p{Mn}", "")
    # One character at a time, as they do: ICU's word-final rule would make a final "Σ" "ς".
    strings = tf.strings.regex_replace(strings, "Σ", "σ")
    return tf.strings.lower(strings, encoding="utf-8")


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class TextPreprocessor(tf.keras.layers.Layer):
    """Turns raw strings or string pairs into BERT inputs of a fixed length, in-graph.

    Tokenizes with ``tensorflow_text.FastBertTokenizer`` (BERT's basic tokenizer, then greedy
    longest-match-first WordPiece, the ids of the classic ``BertTokenizer``; with
    ``lower_case`` it case-folds, applies NFD and strips accents like BERT uncased), truncates, adds ``[CLS]``/``[SEP]`` with
    ``tensorflow_text.combine_segments`` and pads with ``tensorflow_text.pad_model_inputs``.
    The vocabulary lives in the tokenizer's in-graph model built from the token list,
    and ``get_config()`` stores that list, so the layer round-trips through JSON and SavedModel
    without the original file. Only TensorFlow and tensorflow-text ops are used.

    String ops run on the CPU: on TPU, apply the layer in the ``tf.data`` input pipeline and
    feed the int32 outputs to the model.

    Invalid UTF-8 bytes are replaced and then dropped (BERT drops U+FFFD while cleaning text);
    an empty string gives ``[CLS] [SEP]``.

    Truncation keeps room for the special tokens: a single segment keeps at most
    ``seq_length - 2`` wordpieces; a pair keeps at most ``seq_length - 3`` in total, shared by
    ``tensorflow_text.RoundRobinTrimmer``: the budget is dealt one token at a time to each
    segment in turn, so a short segment (a title, a ReQA answer sentence) is kept whole and,
    when both are long, each keeps about half. (A waterfall trimmer would drop the whole
    passage whenever the first segment alone is long.)

    Args:
        vocabulary: path to a ``vocab.txt`` or a list of tokens (token id = position). Must hold
            ``[PAD]`` (id 0), ``[UNK]``, ``[CLS]`` and ``[SEP]``; ``[MASK]`` is optional.
        seq_length: int >= 3, the length of every output row.
        lower_case: lower-case and strip accents (BERT uncased). Use the same value the
            vocabulary was built with.
        case_folding: how `lower_case` lower-cases (ignored without it). ``"nfkc_casefold"``
            (the default, tensorflow-text's fused kernel): Unicode NFKC case folding, which also
            folds compatibility characters ("km²" -> "km2", "…" -> "...", final "ς" -> "σ").
            ``"unicode_lower"``: BERT's reference tokenizer and Hugging Face's
            ``BertNormalizer``: accents stripped after NFD, then plain Unicode lower-casing,
            nothing else folded. A checkpoint imported from either keeps its own rule
            (`tt_zoo.modeling.checkpoints`), so its token ids match the original's.
        special_tokens: the tokenizer mapping (:class:`SpecialTokens`, or its dict); None is
            BERT's (``[CLS]``/``[SEP]``/``[PAD]``). An MPNet tower's packs ``<s> a </s>`` and
            ``<s> a </s></s> b </s>``, padded with ``<pad>``.
        **kwargs: passed to ``tf.keras.layers.Layer`` (``name``, ...).

    Example:

    ```python
    pre = TextPreprocessor("vocab.txt", seq_length=8)
    pre(tf.constant(["Hello World!"]))["input_word_ids"]
    # [[101, 7592, 2088, 999, 102, 0, 0, 0]] with the BERT uncased vocabulary
    pre((tf.constant(["a title"]), tf.constant(["a passage"])))["input_type_ids"]
    # [[0, 0, 0, 0, 1, 1, 1, 0]]
    ```

    References:
        Chang et al., Pre-training Tasks for Embedding-based Large-scale Retrieval, ICLR 2020,
        Sec. 2 and 5.1 (BERT inputs; "title [SEP] passage" documents). Devlin et al., BERT, 2019,
        Sec. 3 (WordPiece, [CLS]/[SEP] packing, segment ids).
    """

    def __init__(self, vocabulary, seq_length=64, lower_case=True,
                 case_folding=DEFAULT_CASE_FOLDING, special_tokens=None, **kwargs):
        super().__init__(**kwargs)
        self.special_tokens = SpecialTokens.from_config(special_tokens)
        if isinstance(vocabulary, (str, os.PathLike)):
            tokens = load_vocab(vocabulary, self.special_tokens)
        else:
            tokens = validate_vocab(vocabulary, source=f"vocabulary of layer {self.name!r}",
                                    special_tokens=self.special_tokens)
        try:
            valid = not isinstance(seq_length, bool) and operator.index(seq_length) >= 3
        except TypeError:
            valid = False
        if not valid:
            raise ValueError(
                f"seq_length must be an int >= 3 (room for [CLS] a [SEP] b [SEP]), "
                f"got {seq_length!r}.")
        seq_length = operator.index(seq_length)
        # Kept as a tuple behind a property: Keras would wrap a list attribute for tracking.
        self._vocabulary = tuple(tokens)
        self.seq_length = seq_length
        self.lower_case = bool(lower_case)
        if case_folding not in CASE_FOLDINGS:
            raise ValueError(f"case_folding must be one of {CASE_FOLDINGS}, got {case_folding!r}.")
        self.case_folding = case_folding

        ids = {token: i for i, token in enumerate(tokens)}
        special = self.special_tokens
        self.vocab_size = len(tokens)
        self.pad_id = ids[special.pad]
        self.unk_id = ids[special.unk]
        self.cls_id = ids[special.cls]
        self.sep_id = ids[special.sep]
        self.mask_id = ids.get(special.mask)  # None when the vocabulary has no mask token.

        # FastBertTokenizer: BERT's basic tokenizer and WordPiece in one linear-time kernel
        # (Song et al. 2021, "Fast WordPiece Tokenization"); it gives the classic
        # BertTokenizer's ids (tests/test_text.py pins them) about 10x faster.
        self._tokenizer = tf_text.FastBertTokenizer(
            list(tokens), token_out_type=tf.int32, unknown_token=special.unk,
            lower_case_nfd_strip_accents=self.lower_case and not self._unicode_lower)

    @property
    def _unicode_lower(self) -> bool:
        return self.lower_case and self.case_folding == "unicode_lower"

    def tokenizer_settings(self) -> dict:
        """What decides the token ids besides the texts: the vocabulary's sha256, the casing and
        the packing (``case_folding`` and ``special_tokens`` only when not the default, so keys
        made before them stay valid).
        Caches of tokenized data key on it."""
        settings = {"vocabulary": self.vocabulary_sha256, "lower_case": self.lower_case}
        if self.case_folding != DEFAULT_CASE_FOLDING:
            settings["case_folding"] = self.case_folding
        if self.special_tokens != BERT_SPECIAL_TOKENS:
            settings["special_tokens"] = self.special_tokens.to_config()
        return settings

    @property
    def vocabulary_sha256(self) -> str:
        """sha256 of the token list: identifies the vocabulary in caches and run settings."""
        return hashlib.sha256("\n".join(self._vocabulary).encode("utf-8")).hexdigest()

    @property
    def vocabulary(self) -> list[str]:
        """The tokens, in id order."""
        return list(self._vocabulary)

    def _check_strings(self, strings, what):
        strings = tf.convert_to_tensor(strings)
        if strings.dtype != tf.string:
            raise ValueError(f"{what} must be a tf.string tensor (got dtype {strings.dtype.name}).")
        if strings.shape.rank is not None and strings.shape.rank != 1:
            hint = (" A tuple/list input means a pair of segments; pass a batch of strings as "
                    "one tensor, e.g. tf.constant([...])." if "segment" in what else "")
            raise ValueError(
                f"{what} must be a 1D string tensor [batch] (got shape {strings.shape}).{hint}")
        if strings.shape.rank is None:
            strings = tf.ensure_shape(strings, [None])
        return strings

    @tf.autograph.experimental.do_not_convert
    def tokenize(self, strings) -> tf.RaggedTensor:
        """WordPiece ids of each string, merged over words, without special tokens.

        Args:
            strings: ``[batch]`` tf.string.

        Returns:
            ``[batch, (num_wordpieces)]`` int32 ``tf.RaggedTensor``.
        """
        strings = self._check_strings(strings, "TextPreprocessor.tokenize input")
        strings = _sanitize_utf8(strings)
        if self._unicode_lower:
            strings = _strip_accents_then_lower(strings)
        return self._tokenizer.tokenize(strings)  # [batch, (wordpieces)]

    def call(self, inputs):
        """Packs one or two segments.

        Args:
            inputs: ``[batch]`` tf.string (single segment ``[CLS] a [SEP]``), or a tuple/list of
                two ``[batch]`` tf.string tensors (pair ``[CLS] a [SEP] b [SEP]``).

        Returns:
            A dict of int32 ``[batch, seq_length]`` tensors, zero-padded:
            ``input_word_ids``; ``input_mask`` (1 on real tokens); ``input_type_ids`` (0 for
            ``[CLS]``, a and its ``[SEP]``; 1 for b and its ``[SEP]``).
        """
        return self._pack(inputs)

    # No data-dependent Python control flow in here: skip AutoGraph, which would also convert
    # tensorflow-text's internals and only slow tracing down.
    @tf.autograph.experimental.do_not_convert
    def _pack(self, inputs):
        if isinstance(inputs, (tuple, list)):
            if len(inputs) not in (1, 2):
                raise ValueError(
                    f"TextPreprocessor takes one string tensor or a pair of them "
                    f"(got {len(inputs)} inputs).")
            segments = [
                self.tokenize(self._check_strings(x, f"TextPreprocessor input segment {i}"))
                for i, x in enumerate(inputs)]
        else:
            segments = [self.tokenize(self._check_strings(inputs, "TextPreprocessor input"))]

        # [CLS] + [SEP], and the pair's separators (one for BERT, two for MPNet).
        budget = self.seq_length - 2 - (self.special_tokens.pair_separators
                                        if len(segments) == 2 else 0)
        if len(segments) == 1:
            segments = [segments[0][:, :budget]]
        else:
            segments = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
        return self._combine_and_pad(segments)

    def _combine_and_pad(self, segments) -> Dict[str, tf.Tensor]:
        """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``, zero-padded to `seq_length`, built
        densely by position (what ``tensorflow_text.combine_segments`` and
        ``pad_model_inputs`` give, in a few element-wise ops instead of ragged concatenations,
        which cost a third of the time of tracing a signature)."""
        length = self.seq_length
        position = tf.range(length, dtype=tf.int32)[None, :]  # [1, length]
        pieces = [tf.cast(s, tf.int32).to_tensor(0, shape=[None, length]) for s in segments]
        sizes = [tf.cast(s.row_lengths(), tf.int32)[:, None] for s in segments]  # [batch, 1]
        shape = tf.shape(pieces[0])

        def gathered(piece, offset):  # piece[row, position - offset], clipped into range
            index = tf.clip_by_value(tf.broadcast_to(position - offset, shape), 0, length - 1)
            return tf.gather(piece, index, batch_dims=1)

        word_ids = tf.where(position == 0, self.cls_id, gathered(pieces[0], 1))
        end = sizes[0] + 1  # the position of the first [SEP]
        word_ids = tf.where(position == end, self.sep_id, word_ids)
        type_ids = tf.zeros_like(word_ids)
        if len(segments) == 2:
            for _ in range(self.special_tokens.pair_separators - 1):  # "</s></s>" joins a pair
                end = end + 1
                word_ids = tf.where(position == end, self.sep_id, word_ids)
            second = position > end
            word_ids = tf.where(second, gathered(pieces[1], end + 1), word_ids)
            end = end + sizes[1] + 1
            word_ids = tf.where(position == end, self.sep_id, word_ids)
            type_ids = tf.cast(second, tf.int32)
        mask = tf.cast(position <= end, tf.int32)
        padded = {"input_word_ids": tf.where(mask == 1, word_ids, self.pad_id),
                  "input_mask": mask, "input_type_ids": type_ids * mask}
        return {k: tf.ensure_shape(v, [None, length]) for k, v in padded.items()}

    def count_wordpieces(self, texts: Iterable[str], batch_size: int = 1024) -> list[int]:
        """Number of wordpieces of each text (no special tokens, no truncation), eagerly.

        Useful for corpus statistics such as the token counts of the paper's Table 1.
        """
        counts: list[int] = []
        batch: list[str] = []
        for text in texts:
            batch.append(text)
            if len(batch) == batch_size:
                counts.extend(self._count_batch(batch))
                batch = []
        if batch:
            counts.extend(self._count_batch(batch))
        return counts

    def _count_batch(self, batch):
        return self.tokenize(tf.constant(batch, tf.string)).row_lengths().numpy().tolist()

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary": self.vocabulary,
            "seq_length": self.seq_length,
            "lower_case": self.lower_case,
        })
        if self.case_folding != DEFAULT_CASE_FOLDING:  # configs saved before it stay identical
            config["case_folding"] = self.case_folding
        if self.special_tokens != BERT_SPECIAL_TOKENS:  # (so do BERT's)
            config["special_tokens"] = self.special_tokens.to_config()
        return config
