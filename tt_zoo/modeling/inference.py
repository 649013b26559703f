"""Faster `TwoTowerModel.encode_*`: length bucketing, the plain inference graph, and options.

Chang et al. 2020, Sec. 2 ("Inference"): every candidate's psi(d) is computed once, offline, so
encoding a corpus is the cost of serving it. Ways to make it cheaper, none of which changes
what a tower computes:

* Length bucketing (on by default). The preprocessors pad every text to the full sequence
  length (documents 128 for the CPU-scale models, 288 for the paper's); padding is masked
  (attention adds -1e9 to padded keys, mean pooling averages over ``input_mask``), so a batch
  padded only to its longest member gives the same embeddings for fewer FLOPs. Texts are sorted
  by token length (longest first, within windows of `SORT_WINDOW_BATCHES` batches), each batch is
  cut to its longest member (the tower's function takes any length without tracing again; under
  XLA, rounded up to a multiple of `LENGTH_MULTIPLE`, which bounds the number of shapes, hence
  of compilations), and the embeddings come back in the caller's order. Cutting exactly rather
  than to a multiple of 16 made all-MiniLM-L6-v2 embed ReQA questions (about 14 tokens) 1.4x
  faster (294 against 209 queries/s, another job running). A BERT encoder accepts a shorter input than it was built for: its position embedding
  takes the first ``seq_length`` rows of its table.
* The plain inference graph (on by default, ``plain_inference=False`` turns it off): a float32
  BERT tower runs its encoder as `tt_zoo.modeling.bert_inference.encode_sequence` (fused
  MatMul + BiasAdd (+ GELU) instead of the Model Garden's Einsum layers; the same embeddings
  within float32 round-off). On the 2-core AMD EPYC of `results/encode_speed.md` the tiny BERT
  embeds 100-word passages with titles at 901 docs/s against 651 through the layers (1.38x),
  as fast as the layers under XLA (919), without XLA's compile time.
* ``precision``: "auto" (the default) runs a BERT tower in bfloat16 on a CPU with AMX
  (`tt_zoo.hardware`) when a call embeds at least `AUTO_BFLOAT16_MIN_TEXTS` texts, float32
  elsewhere; "float32" and "bfloat16" decide outright (``TT_ZOO_PRECISION=float32`` turns the
  default back to float32). In bfloat16 the towers run as a ``mixed_bfloat16`` copy that
  takes the model's weights at every call, traced with them as constants and traced again when
  they change (fine-tuning between calls is seen); a BERT tower's copy runs
  `tt_zoo.modeling.bert_inference.encode_sequence_bfloat16`: its projections fused with bias
  and GELU on the AMX units, the elementwise work between them in XLA kernels, compiled once
  per shape, so batches are cut to a multiple of `LENGTH_MULTIPLE` tokens and partial batches
  padded, as under XLA, and a call takes few texts (`BFLOAT16_ROW_WIDTH`). MiniLM embeds
  100-word passages 2.8x faster than in float32, at cosine 0.99997 to float32
  (`results/amx_encode.md`). Below `AUTO_BFLOAT16_MIN_TEXTS` texts (a few queries) the
  compilations would cost more than they save, so "auto" stays float32.
* ``jit_compile=True``: the towers run under XLA (one compilation per (rows, length) shape; the
  last, partial batch of a window is padded to a power-of-two number of rows to bound them).
  ``"auto"`` (the default of `encode_documents`) turns it on for a BERT tower run through its
  layers (``plain_inference=False``) when a call embeds at least `XLA_AUTO_MIN_DOCUMENTS` texts:
  there XLA embeds the passages 1.41x faster (919 against 651 docs/s) after about 4 s of
  compiling. On the plain graph XLA gains nothing (872 against 901 docs/s), so "auto" leaves it
  off; it gains little on the BoW-MLP. Compiled shapes are kept with the model, so later calls
  do not compile again.

Tokenization is the same in-graph `TextPreprocessor` as training and serving use; it runs
first, on the CPU, then the towers run on the cut batches.

Progress (`progress_bar`): ``show_progress_bar=None``, the default, draws a tqdm bar on stderr
when a call runs more than `PROGRESS_MIN_BATCHES` batches, stderr is a terminal or a Jupyter
kernel's, and no other tqdm bar is open (a caller that shows its own progress gets no second
bar); ``TQDM_DISABLE=1`` turns it off. True or False decide outright.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from tt_zoo.errors import TtZooError
from tt_zoo.hardware import PRECISION_CHOICES as PRECISIONS
from tt_zoo.modeling.transformer_bfloat16 import weights_as_constants

PACKED_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
LENGTH_MULTIPLE = 16  # batches are cut to a multiple of this many tokens
SORT_WINDOW_BATCHES = 32  # texts sorted by length within windows of this many batches
# A bfloat16 Transformer tower call takes at most this many rows x hidden units (a power of two
# of rows, at least 16): on AMX, 1,024 passages, all-MiniLM-L6-v2 (hidden 384) was fastest in
# calls of 32 (203 docs/s; 16: 185, 64: 199, 256: 159) and the tiny BERT (hidden 128) in calls
# of 128 (2,508; 32: 1,864, 256: 2,253): about this many either way (docs/speed.md).
BFLOAT16_ROW_WIDTH = 16384
AUTO_BFLOAT16_MIN_TEXTS = 64  # precision="auto": bfloat16 from this many texts (AMX CPUs)
XLA_AUTO_MIN_DOCUMENTS = 10_000  # jit_compile="auto": XLA for BERT layers from this many texts
PROGRESS_MIN_BATCHES = 4  # show_progress_bar=None: a bar only for calls of more batches


@dataclasses.dataclass(frozen=True)
class EncodeOptions:
    """How `TwoTowerModel.encode_*` runs the towers (see the module docstring).

    Args:
      bucketing: sort texts by token length and pad each batch only to its longest member
        (rounded up to `LENGTH_MULTIPLE`); False pads every text to the full sequence length.
      precision: "auto", "float32" or "bfloat16" (a mixed_bfloat16 copy of the towers);
        "auto": `resolve` decides per call.
      jit_compile: run the towers under XLA; "auto": `resolve` decides per call.
      plain_inference: a float32 BERT tower runs its encoder as the fused plain-matmul graph of
        `tt_zoo.modeling.bert_inference` (the same embeddings within float32 round-off);
        False runs the Model Garden layers (the training graph).
      max_rows: rows of one tower call at most (None: the caller's batch size); `resolve`
        sets it for bfloat16 (`BFLOAT16_ROW_WIDTH`).
    """

    bucketing: bool = True
    precision: str = "auto"
    jit_compile: Union[bool, str] = False
    plain_inference: bool = True
    max_rows: Optional[int] = None

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise TtZooError(f"precision must be one of {PRECISIONS} (got {self.precision!r}).")
        if not isinstance(self.bucketing, bool):
            raise TtZooError(f"bucketing must be True or False (got {self.bucketing!r}).")
        if not isinstance(self.plain_inference, bool):
            raise TtZooError(f"plain_inference must be True or False (got "
                             f"{self.plain_inference!r}).")
        if not (isinstance(self.jit_compile, bool) or self.jit_compile == "auto"):
            raise TtZooError("jit_compile must be True, False or 'auto' (got "
                             f"{self.jit_compile!r}).")

    @property
    def bounded_shapes(self) -> bool:
        """Whether batches take bounded shapes (lengths rounded up to `LENGTH_MULTIPLE`,
        partial batches padded): what is compiled per shape, XLA or bfloat16's epilogues."""
        return bool(self.jit_compile) or self.precision == "bfloat16"

    def rows_per_call(self, batch_size: int) -> int:
        """Rows of one tower call for a caller's `batch_size`: at most `max_rows`."""
        return batch_size if self.max_rows is None else min(batch_size, self.max_rows)

    def resolve(self, num_texts: int, tower) -> "EncodeOptions":
        """These options made concrete for one call of `num_texts` texts through `tower`:
        "auto" XLA is True for a BERT tower (`tt_zoo.modeling.towers.BertTower`, or a
        `TaskRoutedTower` of BERT sub-towers) run through its layers (not `plain_inference`)
        embedding at least `XLA_AUTO_MIN_DOCUMENTS` texts, where XLA's compile time pays;
        "auto" precision is bfloat16 for a tower whose inference runs on the AMX units
        (``amx_inference``: BERT's plain graph, MPNet) embedding at least
        `AUTO_BFLOAT16_MIN_TEXTS` texts where `tt_zoo.hardware.default_precision` says so
        (see the module docstring), float32 otherwise."""
        from tt_zoo.hardware import resolve_precision  # pylint: disable=import-outside-toplevel
        from tt_zoo.modeling.routed_tower import TaskRoutedTower  # pylint: disable=import-outside-toplevel
        from tt_zoo.modeling.towers import BertTower  # pylint: disable=import-outside-toplevel
        towers = tower.towers if isinstance(tower, TaskRoutedTower) else [tower]
        bert = all(isinstance(t, BertTower) for t in towers)
        jit = self.jit_compile
        if jit == "auto":
            jit = bert and not self.plain_inference and num_texts >= XLA_AUTO_MIN_DOCUMENTS
        precision = self.precision
        if precision == "auto":
            amx = all(getattr(t, "amx_inference", False) for t in towers)
            fast = (amx and self.plain_inference and not jit
                    and num_texts >= AUTO_BFLOAT16_MIN_TEXTS)
            precision = resolve_precision("auto") if fast else "float32"
        max_rows = self.max_rows
        if precision == "bfloat16" and max_rows is None:
            hidden = max(getattr(getattr(t, "shape_", None), "hidden_size", 0) for t in towers)
            max_rows = bfloat16_max_rows(hidden) if hidden else None
        return dataclasses.replace(self, jit_compile=jit, precision=precision,
                                   max_rows=max_rows)


def bfloat16_max_rows(hidden: int) -> int:
    """Rows of one bfloat16 call of a tower `hidden` units wide: the largest power of two
    whose rows x hidden stay within `BFLOAT16_ROW_WIDTH`, at least 16 (MiniLM's 384: 32)."""
    within = max(1, BFLOAT16_ROW_WIDTH // hidden)
    return max(16, 1 << (within.bit_length() - 1))


def bucket_length(longest: int, seq_length: int, multiple: int = LENGTH_MULTIPLE) -> int:
    """The length a batch whose longest member has `longest` tokens is cut to: `longest` rounded
    up to a multiple of `multiple`, at most `seq_length` (e.g. 17 -> 32, 120 of 128 -> 128)."""
    return int(min(seq_length, -(-int(longest) // multiple) * multiple))


def plan_batches(lengths: np.ndarray, batch_size: int, seq_length: int,
                 bucketing: bool = True,
                 multiple: int = LENGTH_MULTIPLE) -> List[Tuple[np.ndarray, int]]:
    """Batches of row indices and the length each is cut to.

    With `bucketing`, rows are taken longest first (ties in input order) and each batch is cut to
    `bucket_length` of its longest member (rounded up to `multiple`: 1 cuts exactly); without,
    rows keep their order and every batch keeps the full `seq_length`.
    """
    lengths = np.asarray(lengths)
    if not bucketing:
        order = np.arange(len(lengths))
    else:
        order = np.argsort(-lengths, kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        length = (bucket_length(lengths[rows].max(), seq_length, multiple) if bucketing
                  else seq_length)
        batches.append((rows, length))
    return batches


def padded_row_count(rows: int, batch_size: int) -> int:
    """Rows an XLA batch of `rows` is padded to: the next power of two, at most `batch_size`
    (so a partial batch adds one of log2(batch_size) + 1 shapes, not one per size)."""
    return int(min(batch_size, 1 << max(0, int(rows) - 1).bit_length()))


def check_batch_size(batch_size) -> int:
    """`batch_size` if it is a positive int, else a `TtZooError` naming it."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise TtZooError(f"batch_size must be a positive int (got {batch_size!r}).")
    return batch_size


def _interactive() -> bool:
    """True when stderr is a terminal or a Jupyter kernel's stream (where a bar is read)."""
    stream = sys.stderr
    if type(stream).__module__.startswith("ipykernel"):
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def bar_where_read() -> dict:
    """tqdm keywords for a bar that draws only where it is read (a terminal or a notebook),
    never into a log or a pipe; elsewhere tqdm's own TQDM_* settings apply."""
    return {} if _interactive() else {"disable": True}


def progress_bar(show_progress_bar: Optional[bool], n: int, batch_size: int, desc: str):
    """The tqdm bar (on stderr) of one encode call over `n` texts, counted in texts; a disabled
    bar when it should not show. `show_progress_bar`: True, False, or None (the rule of the
    module docstring: more than `PROGRESS_MIN_BATCHES` batches, at a terminal or in a notebook,
    inside no other bar)."""
    from tqdm.auto import tqdm  # pylint: disable=import-outside-toplevel

    check_batch_size(batch_size)
    if not (show_progress_bar is None or isinstance(show_progress_bar, bool)):
        raise TtZooError("show_progress_bar must be True, False or None (got "
                         f"{show_progress_bar!r}).")
    if show_progress_bar is None:
        batches = -(-n // batch_size)
        if not (batches > PROGRESS_MIN_BATCHES and _interactive()
                and not getattr(tqdm, "_instances", None)):
            return tqdm(total=n, disable=True)
        # No `disable` given: tqdm's own TQDM_DISABLE setting applies.
        return tqdm(total=n, desc=desc, unit="text", file=sys.stderr)
    return tqdm(total=n, desc=desc, unit="text", file=sys.stderr,
                disable=not show_progress_bar)


def encode_in_buckets(pack: Callable[[int, int], Dict[str, tf.Tensor]],
                      tower_fn: Callable[[Dict[str, tf.Tensor]], tf.Tensor], n: int,
                      dim: int, seq_length: int, batch_size: int,
                      options: EncodeOptions, bar=None) -> np.ndarray:
    """Embeds `n` texts: float32 [n, dim] in the caller's order.

    Args:
      pack: ``pack(start, end)`` -> packed ids (`PACKED_KEYS`, int32 [end - start, seq_length])
        of texts[start:end].
      tower_fn: packed ids [rows, length] -> float32 embeddings [rows, dim].
      n, dim, seq_length: number of texts, embedding size, the preprocessor's length.
      batch_size: rows per tower call.
      options: the `EncodeOptions`.
      bar: a tqdm bar (`progress_bar`) advanced by each batch's rows, or None.
    """
    check_batch_size(batch_size)
    out = np.zeros([n, dim], np.float32)
    window = batch_size * SORT_WINDOW_BATCHES
    for start in range(0, n, window):
        end = min(start + window, n)
        packed = {k: v.numpy() for k, v in pack(start, end).items()}
        lengths = packed["input_mask"].sum(axis=1)
        for rows, length in plan_batches(lengths, batch_size, seq_length, options.bucketing,
                                         LENGTH_MULTIPLE if options.bounded_shapes else 1):
            batch = {k: packed[k][rows, :length] for k in PACKED_KEYS}
            if options.bounded_shapes:
                target = padded_row_count(len(rows), batch_size)
                batch = {k: np.pad(v, [(0, target - len(rows)), (0, 0)])
                         for k, v in batch.items()}
            out[start + rows] = tower_fn(batch).numpy()[:len(rows)]
            if bar is not None:
                bar.update(len(rows))
    return out


def cut_to_longest(packed: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Packed ids [batch, seq_length] cut, in-graph, to the batch's longest member (at least
    one position). The serving signatures use it: a request's cost follows its texts."""
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(packed["input_mask"], axis=1)), 1)
    return {k: v[:, :longest] for k, v in packed.items()}


def mixed_bfloat16_copy(layer: tf.keras.layers.Layer, dummy_inputs) -> tf.keras.layers.Layer:
    """A copy of `layer` built under the ``mixed_bfloat16`` policy (float32 variables, bfloat16
    compute), built by calling it on `dummy_inputs`; its weights are set by `sync_weights`."""
    return policy_copy(layer, dummy_inputs, "mixed_bfloat16")


def policy_copy(layer: tf.keras.layers.Layer, dummy_inputs, policy: str) -> tf.keras.layers.Layer:
    """A copy of `layer` built under the Keras dtype `policy` ("float32" or "mixed_bfloat16":
    float32 variables either way), built by calling it on `dummy_inputs`; its weights are set
    by `sync_weights`."""
    return deserialize_under_policy(tf.keras.layers.serialize(layer), dummy_inputs, policy)


def deserialize_under_policy(config: dict, dummy_inputs, policy: str) -> tf.keras.layers.Layer:
    """The layer of a serialized `config` (`tf.keras.layers.serialize`'s) made and built (by
    calling it on `dummy_inputs`) under the Keras dtype `policy`, its sublayers too."""
    config = {**config, "config": {**config["config"], "dtype": policy}}
    previous = tf.keras.mixed_precision.global_policy()
    # Sublayers take the global policy when they are made, in __init__ or in build().
    tf.keras.mixed_precision.set_global_policy(policy)
    try:
        copy = tf.keras.layers.deserialize(config)
        copy(dummy_inputs, training=False)
    finally:
        tf.keras.mixed_precision.set_global_policy(previous)
    return copy


def dummy_packed() -> Dict[str, tf.Tensor]:
    """Packed ids of one two-token text: what builds a tower by calling it."""
    ids = tf.zeros([1, 2], tf.int32)
    return {"input_word_ids": ids, "input_mask": tf.ones_like(ids), "input_type_ids": ids}


def sync_weights(target: tf.keras.layers.Layer, source: tf.keras.layers.Layer) -> bool:
    """Assigns `source`'s weights to the same-architecture `target`, checking names and shapes;
    returns whether any of them differed."""
    if len(target.weights) != len(source.weights):
        raise TtZooError(f"Cannot copy the weights of {source.name!r}: the copy has "
                         f"{len(target.weights)} variables, the layer {len(source.weights)}.")
    for dst, src in zip(target.weights, source.weights):
        if _name_within(dst, target) != _name_within(src, source) or dst.shape != src.shape:
            raise TtZooError(f"Cannot copy the weights of {source.name!r}: variable {src.name} "
                             f"{src.shape} faces {dst.name} {dst.shape} in the copy.")
    changed = [(dst, src) for dst, src in zip(target.weights, source.weights)
               if bool(tf.reduce_any(tf.not_equal(dst, src)))]
    for dst, src in changed:
        dst.assign(src)
    return bool(changed)


def _name_within(variable, layer) -> str:
    """A variable's name below its layer's scope (the scopes above differ between a model's
    tower and its copy), e.g. "encoder/word_embeddings/embeddings:0"."""
    return variable.name.split(f"{layer.name}/", 1)[-1]

class EncodeCache:
    """What `TwoTowerModel.encode_*` runs, made on first use and kept: the tokenizing
    tf.functions, one tower tf.function per (tower, precision, XLA), the bfloat16 tower copies.

    A plain object (not trackable), so Keras weights, configs and SavedModels do not see it.
    """

    def __init__(self, model):
        self._model = model
        self._tower_fns: Dict[tuple, Callable] = {}
        self._bfloat16_towers: Dict[str, tf.keras.layers.Layer] = {}
        # No Python control flow in these: AutoGraph (which re-reads their source) is off. Each
        # wraps a partial, not a lambda: TensorFlow counts traces per code object, so lambdas of
        # one line, one per model loaded, would add up to its "retracing" warning at the fifth
        # model of a process; a partial counts on its own.
        self.pack_queries = tf.function(
            functools.partial(_pack_queries, model),
            input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        self.pack_documents = tf.function(
            functools.partial(_pack_documents, model),
            input_signature=[tf.TensorSpec([None], tf.string)] * 2, autograph=False)

    def tower_fn(self, role: str, options: EncodeOptions) -> Callable:
        """packed ids {PACKED_KEYS: int32 [rows, length]} -> float32 embeddings [rows, dim] of
        the "query" or "document" tower, run as `options` say. A bfloat16 tower's copy takes
        the model's current weights here, at every call; its functions, traced with the
        weights as constants, are dropped when they changed."""
        model = self._model
        tower = model.query_tower if role == "query" else model.document_tower
        if options.bounded_shapes:  # before the bfloat16 copy is built (which compiles): XLA
            # logs its first compilation; grappler's cost model warns of every bfloat16 softmax
            from tt_zoo._native_logs import quiet_xla  # pylint: disable=import-outside-toplevel
            quiet_xla()
        if options.precision == "bfloat16":
            if not model.built:
                model.build_by_calling()
            key = "query" if role == "query" or model.share_towers else "document"
            if key not in self._bfloat16_towers:
                self._bfloat16_towers[key] = mixed_bfloat16_copy(tower, dummy_packed())
            copy = self._bfloat16_towers[key]
            if sync_weights(copy, tower):  # traced with the weights as constants: again
                for fn_key in [k for k in self._tower_fns if k[1] == "bfloat16"]:
                    del self._tower_fns[fn_key]  # whenever they change
            tower = copy
        key = (role, options.precision, options.jit_compile, options.plain_inference)
        if key not in self._tower_fns:
            spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in PACKED_KEYS}
            from tt_zoo.modeling.routed_tower import TaskRoutedTower  # pylint: disable=import-outside-toplevel
            from tt_zoo.modeling.towers import BertTower  # pylint: disable=import-outside-toplevel
            # (A TaskRoutedTower passes the option on to its BERT sub-towers.)
            call_options = ({"plain_inference": options.plain_inference}
                            if isinstance(tower, (BertTower, TaskRoutedTower)) else {})
            bfloat16 = options.precision == "bfloat16"
            run = _run_tower_with_constant_weights if bfloat16 else _run_tower
            self._tower_fns[key] = tf.function(
                functools.partial(run, model, tower, call_options),
                input_signature=[spec], jit_compile=options.jit_compile, autograph=False)
        return self._tower_fns[key]


def _pack_queries(model, queries):
    return model.query_preprocessor(queries)


def _pack_documents(model, titles, texts):
    return model.document_preprocessor((titles, texts))


def _run_tower(model, tower, call_options, packed):
    # pylint: disable-next=protected-access
    return model._finish(tower(packed, training=False, **call_options))


def _run_tower_with_constant_weights(model, tower, call_options, packed):
    """`_run_tower` traced with the encoder's weights as constants: its bfloat16 projections
    then run on the AMX units with bias and activation fused (`tt_zoo.modeling.
    transformer_bfloat16`). The body runs only while tracing; `EncodeCache.tower_fn` traces
    again when the weights change."""
    with weights_as_constants():
        return _run_tower(model, tower, call_options, packed)


