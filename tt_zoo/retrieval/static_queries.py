"""A saved index of a static model searched without TensorFlow: the query tower as NumPy.

A static tower (model2vec's shape: `tt_zoo.modeling.towers.BowMlpTower` without its MLP) embeds a
query as the mean of its WordPiece tokens' vectors ([CLS] and [SEP] included), L2-normalised
when the model normalises. That is a table lookup and a mean: NumPy computes it in microseconds,
while starting TensorFlow and loading the SavedModel to do the same takes seconds. So a
`tt_zoo.zoo.zoo_model.TextIndex` of such a model saves, beside its embeddings, its query tower
(`query_encoder/`: the token table, the vocabulary, the settings) once `check_against` has found
the NumPy encoder equal to the model's own on probe texts, and `tt-zoo search --index` answers
from it without importing TensorFlow (`load_index_without_tensorflow`; a fusion with BM25 too).

Tokenization here is BERT's for ASCII text: lower-casing, splitting on white space and ASCII
punctuation, greedy longest-match-first WordPiece, words over 100 characters unknown (what
tensorflow-text's FastBertTokenizer does to ASCII). A query holding any other character is
encoded by the model itself (`StaticQueryEncoder.encode` returns None and the caller loads it).

Only exact searches are answered here (brute force, or ScaNN below its partitioning size, whose
stored dataset is the embeddings in order); a partitioned ScaNN index needs ScaNN.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import List, Optional, Sequence

import numpy as np

from tt_zoo.retrieval.search import SearchResult, check_k

ENCODER_DIR = "query_encoder"
TABLE_FILE = "token_embeddings.npy"
VOCAB_FILE = "vocab.txt"
SETTINGS_FILE = "query_encoder.json"
FORMAT = "tt_zoo.StaticQueryEncoder"
TEXT_INDEX_FILE = "text_index.json"  # tt_zoo.zoo.zoo_model.TEXT_INDEX_FILE (no TensorFlow here)
MAX_WORD_CHARS = 100  # tensorflow-text's FastBertTokenizer: longer words are [UNK]
_ASCII = re.compile(r"^[\x20-\x7e\t\n\r]*$")
_PUNCTUATION = frozenset(chr(c) for c in [*range(33, 48), *range(58, 65), *range(91, 97),
                                          *range(123, 127)])


class StaticQueryEncoder:
    """A static query tower in NumPy: tokens' vectors averaged (and L2-normalised).

    Args:
      table: float `[vocab_size, dim]` token vectors (the tower's ``token_embeddings``).
      vocabulary: the tokens, id = position (``[CLS]``, ``[SEP]``, ``[UNK]`` among them).
      seq_length: the query budget in tokens, [CLS] and [SEP] included.
      lower_case: BERT uncased's lower-casing.
      normalize: L2-normalise each embedding.
    """

    def __init__(self, table, vocabulary: Sequence[str], seq_length: int, lower_case: bool,
                 normalize: bool):
        self.table = np.asarray(table)
        self.vocabulary = list(vocabulary)
        self.ids = {token: i for i, token in enumerate(self.vocabulary)}
        self.seq_length, self.lower_case = int(seq_length), bool(lower_case)
        self.normalize = bool(normalize)
        if self.table.shape[0] != len(self.vocabulary):
            raise ValueError(f"{self.table.shape[0]} token vectors for {len(self.vocabulary)} "
                             "tokens.")

    def token_ids(self, text: str) -> Optional[List[int]]:
        """[CLS] wordpieces [SEP], cut to `seq_length`; None for a text that is not ASCII."""
        if not _ASCII.match(text):
            return None
        text = text.lower() if self.lower_case else text
        pieces = []
        for word in text.split():
            start = 0
            for i, char in enumerate(word):  # punctuation splits a word
                if char in _PUNCTUATION:
                    if start < i:
                        pieces.extend(self._wordpieces(word[start:i]))
                    pieces.extend(self._wordpieces(char))
                    start = i + 1
            if start < len(word):
                pieces.extend(self._wordpieces(word[start:]))
        return [self.ids["[CLS]"], *pieces[:self.seq_length - 2], self.ids["[SEP]"]]

    def _wordpieces(self, word: str) -> List[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.ids["[UNK]"]]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    start = end
                    break
            else:
                return [self.ids["[UNK]"]]
        return pieces

    def encode(self, texts: Sequence[str]) -> Optional[np.ndarray]:
        """float32 `[len(texts), dim]`, or None when a text is not ASCII (the model encodes it)."""
        rows = []
        for text in texts:
            ids = self.token_ids(text)
            if ids is None:
                return None
            rows.append(self.table[ids].astype(np.float32).sum(axis=0) / np.float32(len(ids)))
        embeddings = np.stack(rows).astype(np.float32)
        if self.normalize:
            norms = np.sqrt(np.maximum((embeddings ** 2).sum(axis=1, keepdims=True), 1e-12))
            embeddings = embeddings / norms
        return embeddings

    # -- files --------------------------------------------------------------------------------
    def save(self, folder: pathlib.Path, embeddings_file: str) -> None:
        """Writes the tower to `folder`; `embeddings_file` names the file (under the index's
        embeddings/) that holds the passages' embeddings in order."""
        folder.mkdir(parents=True)
        table = self.table
        if table.dtype != np.float16 and np.array_equal(table.astype(np.float16), table):
            table = table.astype(np.float16)  # float16 weights stored as float32: half the bytes
        np.save(folder / TABLE_FILE, table, allow_pickle=False)
        (folder / VOCAB_FILE).write_text("".join(t + "\n" for t in self.vocabulary),
                                         encoding="utf-8")
        (folder / SETTINGS_FILE).write_text(json.dumps({
            "format": FORMAT, "seq_length": self.seq_length, "lower_case": self.lower_case,
            "normalize": self.normalize, "embeddings_file": embeddings_file}, indent=2),
            encoding="utf-8")

    @classmethod
    def load(cls, folder: pathlib.Path) -> "StaticQueryEncoder":
        settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
        if settings.get("format") != FORMAT:
            raise ValueError(f"{folder / SETTINGS_FILE} is not a {FORMAT}.")
        vocabulary = (folder / VOCAB_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        return cls(np.load(folder / TABLE_FILE, allow_pickle=False), vocabulary,
                   settings["seq_length"], settings["lower_case"], settings["normalize"])


def of_model(keras_model, task_markers: bool) -> Optional[StaticQueryEncoder]:
    """The NumPy query tower of a two-tower Keras model whose query tower is static (a
    `BowMlpTower` without MLP, BERT uncased's lower-casing, no task markers), else None."""
    tower = getattr(keras_model, "query_tower", None)
    pre = getattr(keras_model, "query_preprocessor", None)
    if (task_markers or tower is None or pre is None or type(tower).__name__ != "BowMlpTower"
            or getattr(tower, "mlp", True)):
        return None
    try:
        vocabulary = [t.decode("utf-8") if isinstance(t, bytes) else str(t)
                      for t in pre.vocabulary]
        table = tower.token_embeddings.get_weights()[0]
    except (KeyError, AttributeError, IndexError):
        return None
    if not {"[CLS]", "[SEP]", "[UNK]"} <= set(vocabulary):
        return None
    return StaticQueryEncoder(table, vocabulary, pre.seq_length, pre.lower_case,
                              keras_model.normalize_embeddings)


def check_against(encoder: StaticQueryEncoder, encode_queries, probes: Sequence[str]) -> bool:
    """Whether `encoder` gives the model's own query embeddings (`encode_queries`) on the ASCII
    texts of `probes` (within float32 round-off)."""
    probes = [p for p in probes if _ASCII.match(p)]
    if not probes:
        return False
    ours = encoder.encode(probes)
    theirs = np.asarray(encode_queries(probes), np.float32)
    return ours is not None and ours.shape == theirs.shape and np.allclose(
        ours, theirs, rtol=1e-4, atol=1e-5)


def save_if_exact(encoder: StaticQueryEncoder, staging: pathlib.Path, encode_queries,
                  embedding_index, probes: Sequence[str]) -> bool:
    """Saves `encoder` into a `TextIndex` being written at `staging` (its ``embeddings/``
    written already) when both hold: it gives the model's own query embeddings on `probes`
    (`check_against`), and the saved embeddings file (brute force's ``embeddings.npy``, or an
    exact ScaNN index's ``scann/dataset.npy``) scores the probes as `embedding_index` does, row
    for row. Returns whether it saved."""
    if not check_against(encoder, encode_queries, probes):
        return False
    config = embedding_index.scann_config
    if embedding_index.backend == "brute_force":
        name = "embeddings.npy"
    elif config is not None and config.is_exact and config.num_leaves == 0:
        name = "scann/dataset.npy"
    else:
        return False
    path = staging / "embeddings" / name
    if not path.is_file():
        return False
    stored = np.load(path, allow_pickle=False)
    if stored.ndim != 2 or stored.shape != (len(embedding_index), embedding_index.dim):
        return False
    queries = np.asarray(encode_queries([p for p in probes if _ASCII.match(p)]), np.float32)
    found = embedding_index.search(queries, min(10, len(embedding_index)))
    ours = queries @ np.asarray(stored, np.float32).T
    if not np.allclose(np.take_along_axis(ours, found.rows, axis=1), found.scores, rtol=1e-4,
                       atol=1e-5):
        return False
    encoder.save(staging / ENCODER_DIR, name)
    return True


class StaticQuerySearcher:
    """A `tt_zoo.retrieval.search.Searcher` of ASCII query strings over passage embeddings: the
    NumPy query tower, then the exact top-k by inner product (ties: the lower row first)."""

    def __init__(self, encoder: StaticQueryEncoder, embeddings: np.ndarray, ids: Sequence[str]):
        self.encoder, self.embeddings, self.ids = encoder, embeddings, tuple(ids)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, queries: Sequence[str], k: int = 10) -> SearchResult:
        queries = list(queries)
        k = min(check_k(k), len(self))
        embeddings = self.encoder.encode(queries)
        if embeddings is None:
            raise ValueError("a query is not ASCII text: search it with tt_zoo.load_index, "
                             "whose model encodes any text.")
        scores = embeddings @ self.embeddings.T
        rows = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return SearchResult.from_rows(rows, np.take_along_axis(scores, rows, axis=1), self.ids)


def answers(queries: Sequence[str]) -> bool:
    """Whether the NumPy tower encodes every query (ASCII text)."""
    return all(_ASCII.match(q) for q in queries)


def load_index_without_tensorflow(path):
    """The saved index at `path` as a text searcher that imports no TensorFlow: a static model's
    exact index with its saved query tower, BM25, or a fusion of those; None for any other
    (load it with `tt_zoo.load_index`). Every file is checked against its manifest, as
    `tt_zoo.load_index` checks it; its queries must be ASCII (`answers`)."""
    from tt_zoo.manifest import read_json_object, verify_files  # noqa: PLC0415
    from tt_zoo.retrieval import passage_index as passage_lib  # noqa: PLC0415

    root = pathlib.Path(path)
    if (root / TEXT_INDEX_FILE).is_file():
        manifest = read_json_object(root / TEXT_INDEX_FILE, "a saved TextIndex's manifest")
        files = manifest.get("files") or {}
        if f"{ENCODER_DIR}/{SETTINGS_FILE}" not in files:
            return None
        verify_files(root, files, listed_in=root / TEXT_INDEX_FILE)
        encoder = StaticQueryEncoder.load(root / ENCODER_DIR)
        settings = json.loads((root / ENCODER_DIR / SETTINGS_FILE).read_text(encoding="utf-8"))
        embeddings = np.load(root / "embeddings" / settings["embeddings_file"],
                             allow_pickle=False)
        ids, titles, texts = passage_lib.read_passages(root / passage_lib.PASSAGES_FILE)
        name = (manifest.get("model") or {}).get("name") or "static model"
        return passage_lib.PassageIndex(
            StaticQuerySearcher(encoder, np.asarray(embeddings, np.float32), ids), texts, titles,
            description=name)
    if not (root / passage_lib.PASSAGE_INDEX_FILE).is_file():
        return None
    manifest = read_json_object(root / passage_lib.PASSAGE_INDEX_FILE, "a saved index")
    kind = (manifest.get("settings") or {}).get("kind")
    if kind == "bm25":
        return passage_lib.load_bm25_index(root)
    if kind == "fusion":
        parts = [load_index_without_tensorflow(root / part) for part in passage_lib.FUSION_PARTS]
        if any(part is None for part in parts):
            return None
        passage_lib.read_passage_index(root)  # the fusion's own files, checked
        return passage_lib.fuse(*parts, **passage_lib.fusion_options(manifest["settings"]))
    return None
