"""A saved index searched without TensorFlow: its model's query tower in NumPy.

Starting TensorFlow and loading a SavedModel take seconds; encoding one query takes
milliseconds. So a `tt_zoo.zoo.zoo_model.TextIndex` saves, beside its embeddings, its model's
query tower as NumPy arrays (``query_encoder/``) when NumPy computes it, and `check_against` has
found the NumPy encoder equal to the model's own on probe texts; `tt-zoo search --index` then
answers from it without importing TensorFlow (`load_index_without_tensorflow`; a fusion with
BM25 too). Two towers are written out:

- a static tower (model2vec's shape: `tt_zoo.modeling.towers.BowMlpTower` without its MLP): the
  mean of the query's WordPiece vectors ([CLS] and [SEP] included), `StaticQueryEncoder`;
- a BERT tower (`tt_zoo.modeling.towers.BertTower`, post-norm BERT as
  `tt_zoo.modeling.bert_inference` computes it: all-MiniLM-L6-v2 and the tiny BERTs), its
  [CLS] state or mean, projected if it has a projection, `BertQueryEncoder`.

Either is L2-normalised when the model normalises. An HDCT index needs no model at query time
(its term weights are the index, queries are BM25's): it loads here too, as BM25 does. Tokenization here is BERT's for ASCII text:
lower-casing, splitting on white space and ASCII punctuation, greedy longest-match-first
WordPiece, words over 100 characters unknown (what tensorflow-text's FastBertTokenizer does to
ASCII). A query holding any other character is encoded by the model itself (`answers` says no
and the caller loads it).

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
ARRAYS_FILE = "arrays.npz"
VOCAB_FILE = "vocab.txt"
SETTINGS_FILE = "query_encoder.json"
FORMAT = "tt_zoo.NumpyQueryEncoder"
TEXT_INDEX_FILE = "text_index.json"  # tt_zoo.zoo.zoo_model.TEXT_INDEX_FILE (no TensorFlow here)
MAX_WORD_CHARS = 100  # tensorflow-text's FastBertTokenizer: longer words are [UNK]
_ASCII = re.compile(r"^[\x20-\x7e\t\n\r]*$")
_PUNCTUATION = frozenset(chr(c) for c in [*range(33, 48), *range(58, 65), *range(91, 97),
                                          *range(123, 127)])


class QueryEncoder:
    """What the NumPy query towers share: BERT's tokenization of ASCII text, normalisation, files.

    Args:
      arrays: the tower's weights, name -> array (`StaticQueryEncoder`, `BertQueryEncoder`).
      vocabulary: the tokens, id = position (``[CLS]``, ``[SEP]``, ``[UNK]`` among them).
      seq_length: the query budget in tokens, [CLS] and [SEP] included.
      lower_case: BERT uncased's lower-casing.
      normalize: L2-normalise each embedding.
      options: the tower's other settings (JSON values).
    """

    kind = ""

    def __init__(self, arrays: dict, vocabulary: Sequence[str], seq_length: int,
                 lower_case: bool, normalize: bool, **options):
        self.arrays = {k: np.asarray(v) for k, v in arrays.items()}
        self.vocabulary = list(vocabulary)
        self.ids = {token: i for i, token in enumerate(self.vocabulary)}
        self.seq_length, self.lower_case = int(seq_length), bool(lower_case)
        self.normalize = bool(normalize)
        self.options = options

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

    def embed(self, ids: List[int]) -> np.ndarray:
        """One query's float32 `[dim]` embedding from its token ids (before normalisation)."""
        raise NotImplementedError

    def encode(self, texts: Sequence[str]) -> Optional[np.ndarray]:
        """float32 `[len(texts), dim]`, or None when a text is not ASCII (the model encodes it).
        BLAS runs on one thread meanwhile: a query's matrices are small, and two threads made
        a MiniLM query 10 times slower on a busy two-core machine (0.42 s against 0.04 s)."""
        token_ids = [self.token_ids(text) for text in texts]
        if any(ids is None for ids in token_ids):
            return None
        with _one_blas_thread():
            rows = [self.embed(ids) for ids in token_ids]
        embeddings = np.stack(rows).astype(np.float32)
        if self.normalize:
            norms = np.sqrt(np.maximum((embeddings ** 2).sum(axis=1, keepdims=True), 1e-12))
            embeddings = embeddings / norms
        return embeddings

    # -- files --------------------------------------------------------------------------------
    def save(self, folder: pathlib.Path, embeddings_file: str) -> None:
        """Writes the tower to `folder` (float16 arrays where that is exact: weights stored in
        float16); `embeddings_file` names the file (under the index's embeddings/) that holds the
        passages' embeddings in order."""
        folder.mkdir(parents=True)
        arrays = {}
        for name, array in self.arrays.items():
            half = array.astype(np.float16)
            exact = array.dtype == np.float32 and np.array_equal(half.astype(np.float32), array)
            arrays[name] = half if exact else array
        with open(folder / ARRAYS_FILE, "wb") as f:
            np.savez(f, **arrays)
        (folder / VOCAB_FILE).write_text("".join(t + "\n" for t in self.vocabulary),
                                         encoding="utf-8")
        (folder / SETTINGS_FILE).write_text(json.dumps({
            "format": FORMAT, "kind": self.kind, "seq_length": self.seq_length,
            "lower_case": self.lower_case, "normalize": self.normalize,
            "embeddings_file": embeddings_file, "options": self.options}, indent=2),
            encoding="utf-8")

    @staticmethod
    def load(folder: pathlib.Path) -> "QueryEncoder":
        settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
        kinds = {cls.kind: cls for cls in (StaticQueryEncoder, BertQueryEncoder)}
        if settings.get("format") != FORMAT or settings.get("kind") not in kinds:
            raise ValueError(f"{folder / SETTINGS_FILE} is not a {FORMAT}.")
        vocabulary = (folder / VOCAB_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        with np.load(folder / ARRAYS_FILE, allow_pickle=False) as stored:
            arrays = {name: stored[name].astype(np.float32) if stored[name].dtype == np.float16
                      else stored[name] for name in stored.files}
        return kinds[settings["kind"]](arrays, vocabulary, settings["seq_length"],
                                       settings["lower_case"], settings["normalize"],
                                       **settings.get("options", {}))


class StaticQueryEncoder(QueryEncoder):
    """A static query tower: the mean of the query tokens' vectors (``arrays["table"]``)."""

    kind = "static"

    def embed(self, ids: List[int]) -> np.ndarray:
        return self.arrays["table"][ids].astype(np.float32).sum(axis=0) / np.float32(len(ids))


def _one_blas_thread():
    """A context in which NumPy's BLAS uses one thread (threadpoolctl, scikit-learn's
    dependency), or none when threadpoolctl is absent."""
    import contextlib  # noqa: PLC0415
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _layer_norm(x: np.ndarray, gamma, beta, epsilon: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + np.float32(epsilon)) * gamma + beta


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf  # noqa: PLC0415 (scikit-learn's dependency)
    return (0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))).astype(np.float32)


def _gelu_approximate(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))).astype(
        np.float32)


ACTIVATIONS = {"gelu": _gelu, "gelu_approximate": _gelu_approximate,
               "relu": lambda x: np.maximum(x, 0)}


class BertQueryEncoder(QueryEncoder):
    """A post-norm BERT query tower (Model Garden's `BertEncoderV2` as
    `tt_zoo.modeling.bert_inference.encode_sequence` runs it): embeddings and their layer norm,
    then per layer self-attention (one QKV matmul), add and norm, the feed-forward, add and
    norm; the [CLS] state or the mean over tokens; the projection, if any. Options: `heads`,
    `layers`, `activation`, `pooling`, `epsilons` (embeddings', then each layer's two)."""

    kind = "bert"

    def embed(self, ids: List[int]) -> np.ndarray:
        a, o = self.arrays, self.options
        length = len(ids)
        eps = o["epsilons"]
        x = a["word"][ids] + a["position"][:length] + a["type"][0]
        x = _layer_norm(x.astype(np.float32), a["embed_gamma"], a["embed_beta"], eps[0])
        heads = o["heads"]
        hidden = x.shape[-1]
        head_dim = hidden // heads
        activation = ACTIVATIONS[o["activation"]]
        for i in range(o["layers"]):
            qkv = x @ a[f"{i}.qkv_kernel"] + a[f"{i}.qkv_bias"]  # [length, 3 * hidden]
            q, k, v = (qkv[:, j * hidden:(j + 1) * hidden].reshape(length, heads, head_dim)
                       .transpose(1, 0, 2) for j in range(3))
            scores = (q * np.float32(1.0 / np.sqrt(head_dim))) @ k.transpose(0, 2, 1)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            context = (scores / scores.sum(axis=-1, keepdims=True)) @ v  # [heads, length, d]
            context = context.transpose(1, 0, 2).reshape(length, hidden)
            attended = _layer_norm(x + context @ a[f"{i}.out_kernel"] + a[f"{i}.out_bias"],
                                   a[f"{i}.attention_gamma"], a[f"{i}.attention_beta"],
                                   eps[1 + 2 * i])
            inner = activation(attended @ a[f"{i}.inner_kernel"] + a[f"{i}.inner_bias"])
            x = _layer_norm(attended + inner @ a[f"{i}.output_kernel"] + a[f"{i}.output_bias"],
                            a[f"{i}.output_gamma"], a[f"{i}.output_beta"], eps[2 + 2 * i])
        pooled = x[0] if o["pooling"] == "cls" else x.mean(axis=0)
        if "projection_kernel" in a:
            pooled = pooled @ a["projection_kernel"] + a["projection_bias"]
        return pooled.astype(np.float32)


def _bert_arrays(tower) -> Optional[tuple]:
    """(arrays, options) of a `BertTower`'s query side, or None when NumPy cannot compute it."""
    from tt_zoo.modeling import bert_inference  # noqa: PLC0415 (the caller has TensorFlow)

    encoder = tower.encoder
    if not bert_inference.supports(encoder) or type(tower).__name__ != "BertTower":
        return None
    # pylint: disable=protected-access
    arrays = {"word": encoder._embedding_layer.embeddings.numpy(),
              "position": encoder._position_embedding_layer._position_embeddings.numpy(),
              "type": encoder._type_embedding_layer.embeddings.numpy()}
    norm = encoder._embedding_norm_layer
    arrays.update(embed_gamma=norm.gamma.numpy(), embed_beta=norm.beta.numpy())
    epsilons = [float(norm.epsilon)]
    hidden = arrays["word"].shape[-1]
    heads = None
    activation = None
    probe = np.linspace(-4, 4, 33, dtype=np.float32)
    for i, block in enumerate(encoder._transformer_layers):
        attention = block._attention_layer
        heads = attention._num_heads
        parts = (attention._query_dense, attention._key_dense, attention._value_dense)
        arrays[f"{i}.qkv_kernel"] = np.concatenate(
            [p.kernel.numpy().reshape(hidden, hidden) for p in parts], axis=1)
        arrays[f"{i}.qkv_bias"] = np.concatenate([p.bias.numpy().reshape(hidden) for p in parts])
        arrays[f"{i}.out_kernel"] = attention._output_dense.kernel.numpy().reshape(hidden, hidden)
        arrays[f"{i}.out_bias"] = attention._output_dense.bias.numpy().reshape(hidden)
        for name, layer in (("attention", block._attention_layer_norm),
                            ("output", block._output_layer_norm)):
            arrays[f"{i}.{name}_gamma"], arrays[f"{i}.{name}_beta"] = (layer.gamma.numpy(),
                                                                       layer.beta.numpy())
            epsilons.append(float(layer.epsilon))
        inner = block._intermediate_dense
        arrays[f"{i}.inner_kernel"] = inner.kernel.numpy().reshape(hidden, -1)
        arrays[f"{i}.inner_bias"] = inner.bias.numpy().reshape(-1)
        arrays[f"{i}.output_kernel"] = block._output_dense.kernel.numpy().reshape(-1, hidden)
        arrays[f"{i}.output_bias"] = block._output_dense.bias.numpy().reshape(hidden)
        applied = np.asarray(block._intermediate_activation_layer(probe))
        matches = [n for n, f in ACTIVATIONS.items() if np.allclose(f(probe), applied, atol=1e-5)]
        if not matches or (activation is not None and matches[0] != activation):
            return None
        activation = matches[0]
    if tower.projection is not None:
        arrays["projection_kernel"] = tower.projection.kernel.numpy()
        arrays["projection_bias"] = tower.projection.bias.numpy()
    return arrays, {"heads": int(heads), "layers": len(encoder._transformer_layers),
                    "activation": activation, "pooling": tower.pooling, "epsilons": epsilons}


def of_model(keras_model, task_markers: bool) -> Optional[QueryEncoder]:
    """The NumPy query tower of a two-tower Keras model whose query tower NumPy computes (static,
    or post-norm BERT; BERT uncased's lower-casing; no task markers), else None."""
    tower = getattr(keras_model, "query_tower", None)
    pre = getattr(keras_model, "query_preprocessor", None)
    if task_markers or tower is None or pre is None:
        return None
    vocabulary = [t.decode("utf-8") if isinstance(t, bytes) else str(t)
                  for t in getattr(pre, "vocabulary", [])]
    if not {"[CLS]", "[SEP]", "[UNK]"} <= set(vocabulary):
        return None
    settings = (vocabulary, pre.seq_length, pre.lower_case, keras_model.normalize_embeddings)
    if type(tower).__name__ == "BowMlpTower" and not tower.mlp:
        return StaticQueryEncoder({"table": tower.token_embeddings.get_weights()[0]}, *settings)
    if type(tower).__name__ == "BertTower":
        found = _bert_arrays(tower)
        return None if found is None else BertQueryEncoder(found[0], *settings, **found[1])
    return None


def check_against(encoder: QueryEncoder, encode_queries, probes: Sequence[str]) -> bool:
    """Whether `encoder` gives the model's own query embeddings (`encode_queries`) on the ASCII
    texts of `probes` (within float32 round-off)."""
    probes = [p for p in probes if _ASCII.match(p)]
    if not probes:
        return False
    ours = encoder.encode(probes)
    theirs = np.asarray(encode_queries(probes), np.float32)
    return ours is not None and ours.shape == theirs.shape and np.allclose(
        ours, theirs, rtol=1e-4, atol=1e-5)


def save_if_exact(encoder: QueryEncoder, staging: pathlib.Path, encode_queries,
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


class NumpyQuerySearcher:
    """A `tt_zoo.retrieval.search.Searcher` of ASCII query strings over passage embeddings: a
    NumPy query tower, then the exact top-k by inner product (ties: the lower row first)."""

    def __init__(self, encoder: QueryEncoder, embeddings: np.ndarray, ids: Sequence[str]):
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
    """The saved index at `path` as a text searcher that imports no TensorFlow: a model's
    exact index with its saved query tower, BM25, an HDCT index (its term weights and BM25's
    settings are all a query needs), or a fusion of those; None for any other
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
        encoder = QueryEncoder.load(root / ENCODER_DIR)
        settings = json.loads((root / ENCODER_DIR / SETTINGS_FILE).read_text(encoding="utf-8"))
        embeddings = np.load(root / "embeddings" / settings["embeddings_file"],
                             allow_pickle=False)
        ids, titles, texts = passage_lib.read_passages(root / passage_lib.PASSAGES_FILE)
        name = (manifest.get("model") or {}).get("name") or "static model"
        return passage_lib.PassageIndex(
            NumpyQuerySearcher(encoder, np.asarray(embeddings, np.float32), ids), texts, titles,
            description=name)
    if not (root / passage_lib.PASSAGE_INDEX_FILE).is_file():
        return None
    manifest = read_json_object(root / passage_lib.PASSAGE_INDEX_FILE, "a saved index")
    kind = (manifest.get("settings") or {}).get("kind")
    if kind == "bm25":
        return passage_lib.load_bm25_index(root)
    settings = manifest.get("settings") or {}
    if kind == "term_weights" and "stemmer" in settings:  # HDCT: the weights are the index
        from tt_zoo.retrieval.bm25 import CorpusTermWeights  # noqa: PLC0415

        _, ids, titles, texts = passage_lib.read_passage_index(root)
        return passage_lib.term_weighted_bm25(
            texts, titles, ids, CorpusTermWeights.load(root / "term_weights.npz"),
            stemmer=settings["stemmer"], stopwords=settings["stopwords"], k1=settings["k1"],
            b=settings["b"], unread=settings["unread"])
    if kind == "fusion":
        parts = [load_index_without_tensorflow(root / part) for part in passage_lib.FUSION_PARTS]
        if any(part is None for part in parts):
            return None
        passage_lib.read_passage_index(root)  # the fusion's own files, checked
        return passage_lib.fuse(*parts, **passage_lib.fusion_options(manifest["settings"]))
    return None
