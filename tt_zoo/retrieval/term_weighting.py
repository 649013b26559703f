"""Documents -> learned term weights in BM25's term space, for HDCT's weighted BM25 index.

Dai & Callan, WWW 2020 (HDCT), Sec. 3.3: a `TermWeightModel` predicts y per WordPiece of a
(title, passage) document; a word's weight is its first piece's y; a term's weight in a window
is the largest weight of its words (a term can occur several times); the terms are BM25's
(`tt_zoo.data.terms.TermSpace`: lower-cased, bm25s's tokenisation, stemmed, stop words
dropped), so `tt_zoo.retrieval.bm25.BM25Retriever(texts, weights=...)` indexes them directly.

Long documents: the passage is cut into windows at word starts, each packed as
``[CLS] title [SEP] window [SEP]`` (the title cut to `max_title_tokens` pieces, repeated in
every window), and a term's document weight is the **maximum** over windows. HDCT sums
pseudo term frequencies over a web page's passages (pw_i = 1 or 1/i) instead; we take the
maximum because our documents are single passages (100-word ODQA passages, SQuAD paragraphs)
that overflow one window by a few words, not multi-passage pages, and the maximum keeps y in
[0, 1] so one formula, tf = round(N sqrt(y)), applies to every document. `TermWeights.seen`
counts the occurrences read (a title's once), so BM25 keeps the plain count of the rest.

Word merging runs in Python on the token strings (`tt_zoo.data.term_weight_targets`): the
model gives y per piece, tensorflow-text tokenises in the graph.

Corpora: `weigh_corpus` weights each distinct (title, passage) once (open-domain ReQA's
578K candidates share far fewer passages), in chunks with a progress bar, and keeps each chunk
in a cache folder (temp file then rename), so a killed run resumes at its first missing chunk.
The result is a `CorpusTermWeights`: compact arrays that hand `BM25Retriever` one
`TermWeights` at a time.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tt_zoo.atomic_io import write_json
from tt_zoo.data.term_weight_targets import merge_word_pieces, word_term_list
from tt_zoo.data.terms import TermSpace
from tt_zoo.errors import ArtifactError
from tt_zoo.modeling.models import as_string_list
from tt_zoo.retrieval.bm25 import CorpusTermWeights, TermWeights  # noqa: F401 (its home)

COMBINE = "max"  # how window weights make a document weight (see the module docstring)
# With jit_compile="auto", calls weighing at least this many documents run the model under XLA
# (1.6x the docs/s of the tiny BERT on 100-word passages here, after about 15 s of compiling
# one graph per length bucket).
XLA_AUTO_MIN_DOCUMENTS = 1024
XLA_LENGTH_BUCKET = 16  # under XLA, windows are padded to a multiple of this: few shapes
CACHE_FORMAT = "tt_zoo.term_weights.v1"


class TermWeighter:
    """Turns (title, passage) documents into `TermWeights` with a `TermWeightModel`.

    Args:
      model: the `TermWeightModel` (its preprocessor's vocabulary and length are used).
      terms: BM25's term space (default: English stemmer, English stop words, as
        `BM25Retriever`'s defaults; use the same settings as the index).
      max_title_tokens: title pieces kept in each window (default a quarter of the budget).
      max_windows: windows read per document (None: all; occurrences beyond the cap are not
        `seen`, so BM25 keeps their plain count).
      batch_size: windows per forward pass.
      jit_compile: run the model under XLA: True, False, or "auto" (when a call weighs at
        least `XLA_AUTO_MIN_DOCUMENTS` documents); XLA batches are padded to `batch_size` rows
        and a multiple of `XLA_LENGTH_BUCKET` positions, so it compiles a few shapes only.

    References:
      Dai & Callan, WWW 2020 (HDCT), Sec. 3.3 (passage-level weights, document combination).
    """

    def __init__(self, model, *, terms: Optional[TermSpace] = None,
                 max_title_tokens: Optional[int] = None, max_windows: Optional[int] = None,
                 batch_size: int = 128, jit_compile="auto"):
        self.model = model
        self.terms = terms or TermSpace()
        length = model.seq_length
        budget = length - 3  # [CLS] title [SEP] window [SEP]
        if budget < 2:
            raise ValueError(f"The model's length {length} leaves no room for a window.")
        self.max_title_tokens = budget // 4 if max_title_tokens is None else int(max_title_tokens)
        if not 0 <= self.max_title_tokens < budget:
            raise ValueError(f"max_title_tokens must be in [0, {budget}) for length {length} "
                             f"(got {max_title_tokens}).")
        if max_windows is not None and max_windows < 1:
            raise ValueError(f"max_windows must be >= 1 or None (got {max_windows}).")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive (got {batch_size}).")
        if jit_compile not in (True, False, "auto"):
            raise ValueError(f"jit_compile must be True, False or 'auto' (got {jit_compile!r}).")
        self.max_windows, self.batch_size, self.jit_compile = max_windows, batch_size, jit_compile
        pre = model.preprocessor
        self.vocabulary = np.array(pre.vocabulary, dtype=object)
        self._starts_word = np.array([not t.startswith("##") for t in pre.vocabulary])
        self._cls, self._sep = pre.cls_id, pre.sep_id
        self._predict = {xla: tf.function(
            lambda ids, mask, types: model({"input_word_ids": ids, "input_mask": mask,
                                            "input_type_ids": types}, training=False),
            input_signature=None if xla else [tf.TensorSpec([None, None], tf.int32)] * 3,
            jit_compile=xla) for xla in (False, True)}

    def settings(self) -> dict:
        """What the weights depend on besides the model's weights (for caches and cards)."""
        return {"seq_length": self.model.seq_length, "max_title_tokens": self.max_title_tokens,
                "max_windows": self.max_windows, "combine": COMBINE,
                "word_weight": "first piece", "terms": self.terms.settings()}

    def fingerprint(self) -> str:
        """sha256 of the model's config and weights (a cache key: other weights, other key)."""
        digest = hashlib.sha256(json.dumps(self.model.artifact_config(), sort_keys=True)
                                .encode("utf-8"))
        for w in self.model.get_weights():
            digest.update(np.ascontiguousarray(w).tobytes())
        return digest.hexdigest()

    # -- one batch of documents ---------------------------------------------------------------
    def weigh(self, titles: Sequence[str], passages: Sequence[str]) -> List[TermWeights]:
        """The `TermWeights` of each (title, passage), with `seen` counts."""
        titles, passages = _check_documents(titles, passages)
        if not passages:
            return []
        windows = self._windows(titles, passages)
        weights: List[Dict[str, float]] = [{} for _ in passages]
        seen: List[Dict[str, int]] = [{} for _ in passages]
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]) + len(windows[w][2]))
        xla = self.jit_compile is True or (self.jit_compile == "auto" and
                                           len(passages) >= XLA_AUTO_MIN_DOCUMENTS)
        if xla:
            from tt_zoo._native_logs import quiet_xla  # noqa: PLC0415
            quiet_xla()
        for start in range(0, len(order), self.batch_size):
            batch = [windows[w] for w in order[start:start + self.batch_size]]
            ids, mask, types = self._pack(batch, fixed_shapes=xla)
            y = self._predict[xla](tf.constant(ids), tf.constant(mask),
                                   tf.constant(types)).numpy()
            for (doc, title, _, first), row_ids, row_y in zip(batch, ids, y):
                self._collect(row_ids, row_y, len(title), first, weights[doc], seen[doc])
        return [TermWeights(w, s) for w, s in zip(weights, seen)]

    def _windows(self, titles, passages) -> List[Tuple[int, np.ndarray, np.ndarray, bool]]:
        """(document, title ids, passage window ids, first window?) of every window."""
        pre = self.model.preprocessor
        t = pre.tokenize(tf.constant(titles, tf.string))
        p = pre.tokenize(tf.constant(passages, tf.string))
        t_ids, t_splits = t.flat_values.numpy(), t.row_splits.numpy()
        p_ids, p_splits = p.flat_values.numpy(), p.row_splits.numpy()
        budget = self.model.seq_length - 3
        out = []
        for doc in range(len(passages)):
            title = t_ids[t_splits[doc]:t_splits[doc + 1]][:self.max_title_tokens]
            passage = p_ids[p_splits[doc]:p_splits[doc + 1]]
            room = budget - len(title)
            start, count = 0, 0
            while True:
                end = min(start + room, len(passage))
                if end < len(passage):  # cut before the last word start inside the window
                    starts = np.flatnonzero(self._starts_word[passage[start + 1:end + 1]])
                    if starts.size:
                        end = start + 1 + int(starts[-1])
                out.append((doc, title, passage[start:end], count == 0))
                count += 1
                start = end
                if start >= len(passage) or (self.max_windows and count >= self.max_windows):
                    break
        return out

    def _pack(self, batch, fixed_shapes: bool = False):
        """Packed ids, mask, segment ids of windows, padded to the longest (with
        `fixed_shapes`: to `batch_size` rows and a multiple of `XLA_LENGTH_BUCKET`)."""
        longest = max(len(title) + len(window) + 3 for _, title, window, _ in batch)
        rows = len(batch)
        if fixed_shapes:
            longest = min(-(-longest // XLA_LENGTH_BUCKET) * XLA_LENGTH_BUCKET,
                          self.model.seq_length)
            rows = max(rows, self.batch_size)
        ids = np.zeros((rows, longest), np.int32)
        types = np.zeros_like(ids)
        for i, (_, title, window, _) in enumerate(batch):
            row = np.concatenate([[self._cls], title, [self._sep], window, [self._sep]])
            ids[i, :len(row)] = row
            types[i, len(title) + 2:len(row)] = 1
        return ids, (ids != 0).astype(np.int32), types

    def _collect(self, row_ids, row_y, title_length, first_window, weights, seen) -> None:
        """Adds one window's words to its document's weights (max) and seen counts."""
        words, word_of = merge_word_pieces(self.vocabulary[row_ids].tolist())
        terms = word_term_list(words, self.terms)
        first_piece = np.flatnonzero((word_of >= 0) & (word_of != np.r_[-1, word_of[:-1]]))
        for position in first_piece:
            term = terms[word_of[position]]
            if term is None:
                continue
            y = float(row_y[position])
            if y > weights.get(term, -1.0):
                weights[term] = y
            # A title is in every window: its words are read once, in the first.
            if first_window or position > title_length + 1:
                seen[term] = seen.get(term, 0) + 1


def _check_documents(titles, passages) -> Tuple[List[str], List[str]]:
    titles = as_string_list(titles, "titles")
    passages = as_string_list(passages, "passages")
    if len(titles) != len(passages):
        raise ValueError(f"titles and passages differ in length ({len(titles)} vs "
                         f"{len(passages)}).")
    return titles, passages


def weigh_corpus(weighter: TermWeighter, titles: Optional[Sequence[str]],
                 passages: Sequence[str], *, cache_dir: Optional[str] = None,
                 chunk_size: int = 4096, progress: bool = True, log=print) -> CorpusTermWeights:
    """The term weights of a corpus, each distinct (title, passage) weighted once.

    Args:
      weighter: the `TermWeighter`.
      titles: one per passage, or None (no titles).
      passages: the passages.
      cache_dir: where finished chunks are kept (a folder per model, settings and corpus,
        named by their sha256: other weights or documents never hit a stale cache); a rerun
        reads the chunks done and weights the rest. None: no cache.
      chunk_size: distinct documents per cached chunk.
      progress: a tqdm bar over the distinct documents (docs/s).

    Returns:
      `CorpusTermWeights` with one item per passage, in order.
    """
    passages = as_string_list(passages, "passages")
    titles, passages = _check_documents([""] * len(passages) if titles is None else titles,
                                        passages)
    rows: Dict[Tuple[str, str], int] = {}
    doc_rows = np.array([rows.setdefault(doc, len(rows)) for doc in zip(titles, passages)],
                        np.int64)
    distinct = list(rows)
    num_chunks = max(1, math.ceil(len(distinct) / chunk_size))
    folder = None
    if cache_dir:
        digest = hashlib.sha256()
        for title, passage in distinct:
            digest.update(json.dumps([title, passage]).encode("utf-8"))
        key_fields = {"format": CACHE_FORMAT, "model": weighter.fingerprint(),
                      "settings": weighter.settings(), "documents": digest.hexdigest(),
                      "chunk_size": chunk_size}
        key = hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode("utf-8")).hexdigest()
        folder = os.path.join(str(cache_dir), f"term-weights-{key[:24]}")
        tf.io.gfile.makedirs(folder)
        write_json(os.path.join(folder, "settings.json"),
                   {**key_fields, "num_documents": len(distinct), "num_chunks": num_chunks})
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(distinct), unit="doc", desc="term weights", smoothing=0.1)
    parts, computed, seconds = [], 0, 0.0
    try:
        for c in range(num_chunks):
            chunk = distinct[c * chunk_size:(c + 1) * chunk_size]
            path = folder and os.path.join(folder, f"part-{c:05d}-of-{num_chunks:05d}.npz")
            if path and tf.io.gfile.exists(path):
                part = CorpusTermWeights.load(path)
                if part.num_rows != len(chunk):
                    raise ArtifactError(f"{path} holds {part.num_rows} documents, not "
                                        f"{len(chunk)}: delete it to weight them again.")
            else:
                t = time.perf_counter()
                part = CorpusTermWeights.from_term_weights(
                    weighter.weigh([d[0] for d in chunk], [d[1] for d in chunk]))
                seconds += time.perf_counter() - t
                computed += len(chunk)
                if path:
                    part.save(path)
            parts.append(part)
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    if log:
        read = len(distinct) - computed
        log("; ".join(message for message in (
            f"weighted {computed:,} distinct documents in {seconds:.0f} s "
            f"({computed / max(seconds, 1e-9):.0f} docs/s)" if computed else "",
            f"read {read:,} from {folder}" if read else "") if message))
    corpus = CorpusTermWeights.concatenate(parts)
    corpus.doc_rows = doc_rows
    return corpus
