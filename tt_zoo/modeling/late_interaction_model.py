"""`LateInteractionModel`: ColBERT (Khattab & Zaharia, SIGIR 2020) trained like the two towers.

One `LateInteractionTower` encodes queries (marked and [MASK]-augmented by an
`AugmentedQueryPreprocessor`) and documents ((title or sentence, passage) pairs, punctuation
dropped) into L2-normalised token vectors; the loss is the two-tower models' corrected in-batch
softmax (`CorrectedSampledSoftmaxLoss`: logQ correction, accidental-hit removal, temperature,
hard negatives, cross-replica negatives) over MaxSim scores (``similarity="maxsim"``). ColBERT
trains with a softmax over (q, d+, d-) triples (Sec. 3.4); the in-batch softmax scores every
query against every document of the batch, the same objective with more negatives.

The model is not a `TwoTowerModel`: both are a `PairModel` (`tt_zoo.modeling.pair_model`),
here with one shared tower, so it tokenizes pairs, trains (`fit`, `tt-zoo pretrain`,
`tf.distribute`), serialises and exports the same way; what is its own is what it embeds:
token vectors, read with `encode_query_tokens` / `encode_document_tokens` (there is no
single-vector `encode_queries` / `encode_documents`). GradCache refuses it
(`tt_zoo.training.grad_cache.use_grad_cache`): its chunked passes cache one embedding per
example. With query-token weights (`tt_zoo.modeling.query_token_weights`) each query token
vector is scaled by its token's weight, so every MaxSim of the model counts rare query words
more.
"""

from __future__ import annotations

import functools
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tt_zoo.data.text import TextPreprocessor
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.inference import (SORT_WINDOW_BATCHES, check_batch_size, plan_batches,
                                       progress_bar)
from tt_zoo.modeling.late_interaction import (DEFAULT_QUERY_LENGTH, PACKED_KEYS, QUERY_TYPE_ID,
                                              AugmentedQueryPreprocessor, LateInteractionTower,
                                              punctuation_ids)
from tt_zoo.modeling.losses import CorrectedSampledSoftmaxLoss
from tt_zoo.modeling.maxsim import (MASK, TOKEN_VECTORS, maxsim_candidate_scores,
                                   maxsim_scores)
from tt_zoo.modeling.models import TwoTowerModel, as_documents, as_string_list, as_texts
from tt_zoo.modeling.pair_model import PairModel
from tt_zoo.modeling.towers import BertTower

# `score` keeps its [queries, query tokens, documents, document tokens] block below this size.
SCORE_BLOCK_FLOATS = 2**24


@tf.keras.utils.register_keras_serializable(package="tt_zoo")
class LateInteractionModel(PairModel):
    """ColBERT: one BERT tower giving token vectors, MaxSim scores, the corrected softmax.

    Args:
      query_preprocessor: an `AugmentedQueryPreprocessor` (query marker, [MASK] augmentation
        to a fixed length).
      document_preprocessor: a `TextPreprocessor` for (title or sentence, passage) pairs.
      tower: the `LateInteractionTower` both sides share (ColBERT has one BERT).
      loss: a `CorrectedSampledSoftmaxLoss` with ``similarity="maxsim"``; a default one (all
        corrections on, no temperature) if None.
      query_token_weights: None (ColBERT: every query token counts once), or the record of a
        weight per vocabulary id (`tt_zoo.modeling.query_token_weights`; e.g. ``{"scheme":
        "idf", "alpha": 1.0, "mask_weight": 0.0, "corpus": ..., "documents": N}``): the model
        then holds a non-trainable table of those weights (saved with its variables; set by
        `set_query_token_weights`) and scales each query token vector by its token's weight.
      **kwargs: passed to `tfrs.Model` (e.g. ``name``).

    What it shares with the two-tower model (tokenizing pairs, the loss and training step,
    building, the artifact config, the numpy encoders' packing) is
    `tt_zoo.modeling.pair_model.PairModel`'s; `query_tower` and `document_tower` are both
    `tower`, so `share_towers` is True.

    Example:
      >>> model = build_late_interaction_model(vocab, embedding_dim=64)
      >>> model.compile(tf.keras.optimizers.Adam(1e-4))
      >>> model.fit(pairs.batch(128), steps_per_epoch=100)
      >>> [v.shape for v in model.encode_query_tokens(["who discovered penicillin?"])]
      [(32, 64)]

    References:
      Khattab & Zaharia, SIGIR 2020, Sec. 3 (ColBERT); Chang et al. 2020, Sec. 2 (the loss).
    """

    # The tower L2-normalises every token vector (Khattab & Zaharia 2020, Sec. 3.2): what a
    # pretraining run's settings record and `ZooModel.similarity_fn_name` reads ("cosine").
    normalize_embeddings = True
    SERIALIZED_LAYERS = ("query_preprocessor", "document_preprocessor", "tower", "loss")

    def __init__(self, query_preprocessor: AugmentedQueryPreprocessor,
                 document_preprocessor: TextPreprocessor, tower: LateInteractionTower,
                 loss: Optional[CorrectedSampledSoftmaxLoss] = None,
                 query_token_weights: Optional[dict] = None, **kwargs):
        if not isinstance(query_preprocessor, AugmentedQueryPreprocessor):
            raise ValueError("A late-interaction model's query preprocessor must be an "
                             "AugmentedQueryPreprocessor (got "
                             f"{type(query_preprocessor).__name__}).")
        if not isinstance(tower, LateInteractionTower):
            raise ValueError(f"tower must be a LateInteractionTower (got {type(tower).__name__}).")
        types = tower.encoder.get_config()["type_vocab_size"]
        if query_preprocessor.marker_type_id >= types:
            raise ValueError(f"The query marker's segment id {query_preprocessor.marker_type_id} "
                             f"is outside the encoder's {types} type embeddings.")
        loss = loss if loss is not None else CorrectedSampledSoftmaxLoss(similarity="maxsim")
        if loss.similarity != "maxsim":
            raise ValueError("A late-interaction model scores with MaxSim: build its loss with "
                             f"similarity='maxsim' (got {loss.similarity!r}).")
        super().__init__(query_preprocessor, document_preprocessor, tower, None, loss=loss,
                         **kwargs)
        self.query_token_weights = None
        if query_token_weights is not None:
            self._make_weight_table(query_token_weights)

    def _make_weight_table(self, record: dict) -> None:
        if not isinstance(record, dict) or not record:
            raise ValueError("query_token_weights must be a non-empty dict recording the "
                             f"weights (got {record!r}).")
        self.query_token_weights = dict(record)
        if getattr(self, "query_token_weight_table", None) is None:
            self.query_token_weight_table = tf.Variable(
                tf.ones([self.query_preprocessor.vocab_size], tf.float32), trainable=False,
                name="query_token_weights")
            self.__dict__.pop("_tt_zoo_token_fns", None)  # traced without the table

    def set_query_token_weights(self, weights, record: dict) -> None:
        """Weighs each query token's MaxSim by ``weights[token id]`` from now on (training,
        encoding, export): float [vocab_size], finite, >= 0 (`query_token_weights.idf_weights`);
        `record` says how they were made and is kept in the model's config."""
        weights = np.asarray(weights, np.float32)
        vocab_size = self.query_preprocessor.vocab_size
        if weights.shape != (vocab_size,) or not np.all(np.isfinite(weights)) or \
                weights.min() < 0:
            raise ValueError(f"Query-token weights must be {vocab_size} finite floats >= 0, one "
                             f"per vocabulary id (got shape {weights.shape}).")
        self._make_weight_table(record)
        self.query_token_weight_table.assign(weights)

    @property
    def tower(self) -> LateInteractionTower:
        return self.query_tower

    # -- token vectors (what `PairModel`'s embedding and loss methods carry here) -------------
    def embed_query_inputs(self, packed, training=None) -> Dict[str, tf.Tensor]:
        """Packed query ids -> {"token_vectors": float32 [batch, length, m], "mask": int32
        [batch, length]} (every position of an augmented query is scored). With query-token
        weights, each vector is scaled by its token's weight and a token of weight 0 is masked
        (`tt_zoo.modeling.query_token_weights`)."""
        out = super().embed_query_inputs(packed, training=training)
        if self.query_token_weights is None:
            return out
        weights = tf.gather(self.query_token_weight_table, packed["input_word_ids"]) * \
            tf.cast(out[MASK], tf.float32)
        return {TOKEN_VECTORS: out[TOKEN_VECTORS] * weights[:, :, tf.newaxis],
                MASK: tf.cast(weights > 0, tf.int32)}

    def embed_document_inputs(self, packed, training=None) -> Dict[str, tf.Tensor]:
        """Packed document ids -> token vectors and mask as `embed_query_inputs`, padding and
        punctuation masked."""
        return self.tower(packed, training=training, mask_punctuation=True)

    # -- numpy conveniences ---------------------------------------------------------------------
    def encode_query_tokens(self, texts: Union[str, Sequence[str]], batch_size: int = 256, *,
                            show_progress_bar: Optional[bool] = None,
                            bucketing: bool = True) -> Union[np.ndarray, List[np.ndarray]]:
        """Token vectors of query strings: one float32 [n_i, m] array per query, in the order
        given, L2-normalised rows; a single string gives its one array. With [MASK]
        augmentation n_i is the query length (32) for every query; longer queries are truncated
        to it. With query-token weights each row is scaled by its token's weight and rows of
        weight 0 are left out. `batch_size` and `show_progress_bar` as
        `TwoTowerModel.encode_queries`."""
        texts, single = as_texts(texts, "texts")
        cache = self._encode_cache  # `PairModel`'s: the two-tower model's packing functions
        with progress_bar(show_progress_bar, len(texts), batch_size,
                          "encode query tokens") as bar:
            out = encode_tokens_in_buckets(
                lambda s, e: cache.pack_queries(tf.constant(texts[s:e], tf.string)),
                self._token_tower_fn("query"), len(texts), self.query_preprocessor.seq_length,
                batch_size, bucketing, bar)
        return out[0] if single else out

    def encode_document_tokens(self, texts: Union[str, Sequence[str]],
                               titles: Union[None, str, Sequence[str]] = None,
                               batch_size: int = 256, *, show_progress_bar: Optional[bool] = None,
                               bucketing: bool = True) -> Union[np.ndarray, List[np.ndarray]]:
        """Token vectors of (title or sentence, passage) documents: one float32 [n_i, m] array
        per document, in the order given, L2-normalised rows, padding and punctuation removed
        ([CLS] and [SEP] stay, as in ColBERT); a single string (with a single string or None as
        its title) gives its one array. `bucketing` sorts texts by length and pads each batch
        only to its longest member (the same vectors, fewer FLOPs;
        `tt_zoo.modeling.inference`); `batch_size` and `show_progress_bar` as
        `TwoTowerModel.encode_queries`."""
        texts, titles, single = as_documents(texts, titles)
        cache = self._encode_cache
        with progress_bar(show_progress_bar, len(texts), batch_size,
                          "encode document tokens") as bar:
            out = encode_tokens_in_buckets(
                lambda s, e: cache.pack_documents(tf.constant(titles[s:e], tf.string),
                                                  tf.constant(texts[s:e], tf.string)),
                self._token_tower_fn("document"), len(texts),
                self.document_preprocessor.seq_length, batch_size, bucketing, bar)
        return out[0] if single else out

    def score(self, queries: Sequence[str], documents: Sequence[str],
              titles: Optional[Sequence[str]] = None, batch_size: int = 256) -> np.ndarray:
        """MaxSim of every query with every document: float32 [len(queries), len(documents)]
        (exact; for a corpus, re-rank a first stage or use the token index of
        `tt_zoo.retrieval`)."""
        queries = as_string_list(queries, "queries")
        documents = as_string_list(documents, "documents")
        return maxsim_matrix(self.encode_query_tokens(queries, batch_size),
                             self.encode_document_tokens(documents, titles, batch_size))

    def candidate_scores(self, queries, candidates) -> tf.Tensor:
        """[B, K] MaxSim of each query with its own K candidates (a distillation batch's,
        `tt_zoo.modeling.maxsim.maxsim_candidate_scores`)."""
        return maxsim_candidate_scores(queries, candidates)

    def _token_tower_fn(self, role: str) -> Callable:
        """packed ids {PACKED_KEYS: int32 [rows, length]} -> {"token_vectors", "mask"}: one
        tf.function per role, made on first use and kept in a plain dict that Keras and
        SavedModel do not track."""
        fns = self.__dict__.get("_tt_zoo_token_fns")
        if fns is None:
            fns = {}
            object.__setattr__(self, "_tt_zoo_token_fns", fns)
        if role not in fns:
            embed = self.embed_query_inputs if role == "query" else self.embed_document_inputs
            spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in PACKED_KEYS}
            # A partial, not a lambda: TensorFlow counts traces per code object, and one
            # lambda's, traced once per model loaded, warned of retracing at the fifth model.
            fns[role] = tf.function(functools.partial(_embed_for_inference, embed),
                                    input_signature=[spec])
        return fns[role]

    # -- config ---------------------------------------------------------------------------------
    def get_config(self):
        serialize = tf.keras.layers.serialize
        return {"name": self.name,
                "query_preprocessor": serialize(self.query_preprocessor),
                "document_preprocessor": serialize(self.document_preprocessor),
                "tower": serialize(self.query_tower),
                "loss": serialize(self.retrieval_loss),
                "query_token_weights": self.query_token_weights}


def encode_tokens_in_buckets(pack: Callable[[int, int], Dict[str, tf.Tensor]],
                             tower_fn: Callable, n: int, seq_length: int, batch_size: int,
                             bucketing: bool = True, bar=None) -> List[np.ndarray]:
    """Token vectors of `n` texts: one float32 [n_i, m] array each (masked rows removed), in
    the caller's order; texts sorted by length within windows and each batch cut to its longest
    member, as `tt_zoo.modeling.inference.encode_in_buckets` does for single vectors.

    Args:
      pack: ``pack(start, end)`` -> packed ids (int32 [end - start, seq_length]).
      tower_fn: packed ids [rows, length] -> {"token_vectors" [rows, length, m], "mask"}.
      n, seq_length, batch_size, bucketing: texts, the preprocessor's length, rows per call,
        length bucketing on or off.
      bar: a tqdm bar (`tt_zoo.modeling.inference.progress_bar`) advanced by each batch's
        rows, or None.
    """
    check_batch_size(batch_size)
    if not isinstance(bucketing, bool):
        raise TtZooError(f"bucketing must be True or False (got {bucketing!r}).")
    out: List[Optional[np.ndarray]] = [None] * n
    window = batch_size * SORT_WINDOW_BATCHES
    for start in range(0, n, window):
        packed = {k: v.numpy() for k, v in pack(start, min(start + window, n)).items()}
        lengths = packed["input_mask"].sum(axis=1)
        for rows, length in plan_batches(lengths, batch_size, seq_length, bucketing,
                                         multiple=1):  # any length: no XLA here
            result = tower_fn({k: packed[k][rows, :length] for k in PACKED_KEYS})
            vectors = result[TOKEN_VECTORS].numpy()
            keep = result[MASK].numpy().astype(bool)
            for i, row in enumerate(rows):
                out[start + row] = np.ascontiguousarray(vectors[i][keep[i]], dtype=np.float32)
            if bar is not None:
                bar.update(len(rows))
    return out


def pad_token_vectors(arrays: Sequence[np.ndarray]):
    """float32 [n_i, m] arrays -> (vectors [n, max n_i, m] zero-padded, mask int32 [n, max])."""
    if not arrays:
        raise ValueError("pad_token_vectors needs at least one array.")
    dims = {a.shape[1] for a in arrays}
    if len(dims) != 1 or any(a.ndim != 2 for a in arrays):
        raise ValueError(f"Token vectors must all be [n_i, m] with one m (got sizes {dims}).")
    longest = max(len(a) for a in arrays)
    vectors = np.zeros([len(arrays), longest, dims.pop()], np.float32)
    mask = np.zeros([len(arrays), longest], np.int32)
    for i, a in enumerate(arrays):
        vectors[i, :len(a)], mask[i, :len(a)] = a, 1
    return vectors, mask


def maxsim_matrix(queries: Sequence[np.ndarray], documents: Sequence[np.ndarray]) -> np.ndarray:
    """MaxSim (`tt_zoo.modeling.maxsim.maxsim_scores`) of every query's token vectors with every
    document's: float32 [len(queries), len(documents)], computed in blocks of documents."""
    out = np.zeros([len(queries), len(documents)], np.float32)
    if not len(queries) or not len(documents):
        return out
    q_vectors, q_mask = pad_token_vectors(queries)
    longest = max(len(d) for d in documents)
    step = max(1, SCORE_BLOCK_FLOATS // (q_vectors.shape[0] * q_vectors.shape[1] * longest))
    for start in range(0, len(documents), step):
        d_vectors, d_mask = pad_token_vectors(documents[start:start + step])
        out[:, start:start + step] = maxsim_scores(q_vectors, q_mask, d_vectors, d_mask).numpy()
    return out


def build_late_interaction_model(vocabulary, *, embedding_dim: int = 128,
                                 size: Optional[str] = "tiny",
                                 query_length: int = DEFAULT_QUERY_LENGTH,
                                 document_length: int = 128, dropout_rate: float = 0.1,
                                 temperature: Optional[float] = None,
                                 mask_augmentation: bool = True,
                                 loss: Optional[CorrectedSampledSoftmaxLoss] = None,
                                 **bert_shape) -> LateInteractionModel:
    """Builds a ColBERT model from a vocabulary (path or token list) and the tower's settings.

    Args:
      vocabulary: a vocab.txt path or a list of WordPiece tokens (with [MASK]).
      embedding_dim: m, the size of each token vector (ColBERT: 128; 32-128 here).
      size: BERT tower size name ("tiny", "mini", "small", "base"); see `BertTower`.
      query_length: N_q, the fixed (augmented) query length (ColBERT: 32).
      document_length: the document token budget (CPU-scale models: 128).
      temperature: divides the MaxSim logits in the loss (ColBERT: none).
      mask_augmentation: ColBERT's [MASK] query augmentation.
      loss: overrides the loss (it must use similarity "maxsim").
      **bert_shape: explicit num_layers / hidden_size / num_attention_heads / inner_dim.
    """
    query_pre = AugmentedQueryPreprocessor(vocabulary, seq_length=query_length,
                                           marker_type_id=QUERY_TYPE_ID,
                                           mask_augmentation=mask_augmentation,
                                           name="query_preprocessor")
    doc_pre = TextPreprocessor(query_pre.vocabulary, seq_length=document_length,
                               name="document_preprocessor")
    tower = LateInteractionTower(query_pre.vocab_size, embedding_dim, size=size,
                                 max_sequence_length=max(query_length, document_length),
                                 dropout_rate=dropout_rate,
                                 punctuation_ids=punctuation_ids(query_pre.vocabulary),
                                 name="tower", **bert_shape)
    loss = loss if loss is not None else CorrectedSampledSoftmaxLoss(temperature=temperature,
                                                                     similarity="maxsim")
    return LateInteractionModel(query_pre, doc_pre, tower, loss=loss)


def warm_start_from(model: LateInteractionModel, source: TwoTowerModel) -> dict:
    """Copies a single-vector BERT model's encoder into `model`'s tower (a warm start).

    The token projection stays freshly initialised; the query marker's type-embedding row (never
    trained by a single-vector model, whose queries are segment 0) starts as a copy of row 0,
    so the warm-started tower encodes queries exactly as the source's query tower did. The
    vocabulary and the encoder's shape (layers, sizes) must match. Two tables may differ in rows
    (`_fitted`): a source with fewer segment rows than the marker needs (an imported checkpoint
    such as all-MiniLM-L6-v2 has two) gets its rows copied and the rest from row 0, and a source
    with more positions than the tower covers (512 in an imported checkpoint) gives its first
    rows, the positions the tower uses. Returns what was copied, for the model card.
    """
    tower = model.tower
    if not isinstance(source, TwoTowerModel) or not isinstance(source.query_tower, BertTower):
        raise TtZooError("warm_start_from copies a single-vector BERT model's encoder (got a "
                         f"{type(source).__name__} with a {type(source.query_tower).__name__}).")
    if source.query_preprocessor.vocabulary_sha256 != model.query_preprocessor.vocabulary_sha256:
        raise TtZooError("The source model's vocabulary differs from this model's.")
    activations = [t.get_config().get("inner_activation") for t in (source.query_tower, tower)]
    if activations[0] != activations[1]:
        raise TtZooError(f"The source's feed-forward activation is {activations[0]!r}, this "
                         f"tower's {activations[1]!r}: build the tower with the source's "
                         "(warm_start_options).")
    if not source.built:
        source.build_by_calling()
    if not model.built:
        model.build_by_calling()
    theirs, ours = source.query_tower.encoder.weights, tower.encoder.weights
    values = [_fitted(a, b) for a, b in zip(theirs, ours)]
    differ = [(a.name, tuple(a.shape), tuple(b.shape)) for a, b, v in zip(theirs, ours, values)
              if v is None]
    if len(theirs) != len(ours) or differ:
        raise TtZooError(f"The source's encoder does not match this tower's ({len(theirs)} "
                         f"weights against {len(ours)}; first differences: {differ[:3]}): the "
                         "BERT shape must be the source's, and the tower's max_sequence_length "
                         "(max of the query and document lengths) at most the source's.")
    tower.encoder.set_weights(values)
    marker = model.query_preprocessor.marker_type_id
    record = {"copied": f"encoder ({len(ours)} weights) from the source's "
                        f"{'shared tower' if source.share_towers else 'query tower'}",
              "new": [tower.projection.name]}
    fitted = [_fitting(a, b) for a, b in zip(theirs, ours) if a.shape != b.shape]
    if fitted:
        record["fitted"] = fitted
    if marker:
        table = [w for w in tower.encoder.weights if "type_embeddings" in w.name]
        if len(table) != 1:
            raise TtZooError("Cannot find the encoder's type embeddings to initialise the query "
                             f"marker (found {[w.name for w in table]}).")
        table[0].assign(tf.tensor_scatter_nd_update(table[0], [[marker]], table[0][:1]))
        record["query_marker"] = f"type embedding row {marker} initialised from row 0"
    return record


def warm_start_options(source) -> dict:
    """The tower options a ColBERT tower needs to be warm-started from `source` exactly, beyond
    its shape: the feed-forward activation its weights were trained with (an imported
    checkpoint's exact "gelu" against the zoo's "gelu_approximate"), for
    `build_late_interaction_model`'s ``**bert_shape``; {} for a source without a BERT query tower
    (which `warm_start_from` refuses)."""
    tower = getattr(source, "query_tower", None)
    if not isinstance(tower, BertTower):
        return {}
    return {"inner_activation": tower.get_config()["inner_activation"]}


def _fitting(theirs, ours) -> str:
    """What `_fitted` did to a table, for the card."""
    name, have, need = ours.name.split("/")[-2], theirs.shape[0], ours.shape[0]
    if have > need:
        return f"{name}: the first {need} of {have} rows"
    return f"{name}: {have} rows, {need - have} more copied from row 0"


def _fitted(theirs, ours):
    """The source weight `theirs` as `ours`'s shape (a numpy array), or None when it cannot be:
    the same shape as is; a type-embedding table with fewer rows, its rows then copies of row
    0; a position table with more rows, its first rows (the positions the tower uses)."""
    value, shape = theirs.numpy(), tuple(ours.shape)
    if value.shape == shape:
        return value
    if value.ndim != 2 or value.shape[1:] != shape[1:]:
        return None
    if "type_embeddings" in ours.name and value.shape[0] < shape[0]:
        return np.concatenate([value, np.repeat(value[:1], shape[0] - value.shape[0], 0)])
    if "position_embedding" in ours.name and value.shape[0] > shape[0]:
        return value[:shape[0]]
    return None


def _embed_for_inference(embed: Callable, packed):
    """`embed(packed, training=False)`: what `LateInteractionModel._token_tower_fn` traces."""
    return embed(packed, training=False)
