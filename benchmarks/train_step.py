"""Training-step throughput of a two-tower model: pairs/s, achieved GFLOP/s and fraction of peak.

Model FLOPs are counted analytically (dense matmuls of the Transformer, 2 FLOPs per
multiply-add; backward = 2x forward, so a training step is 3x the forward pass).

Each configuration is `POLICY:INPUT[:xla]`: the Keras dtype policy of the towers (float32 or
mixed_bfloat16; scores and loss stay float32), where tokenization happens: `strings` (the
in-graph tokenizer runs inside every training step) or `tokens` (ids made once on the host by
`TwoTowerModel.tokenize_pairs`, as `recipes/pretrain.py` does), and `xla` to compile the step
with XLA (`recipes/pretrain.py --jit-compile yes`; needs `tokens`: XLA has no strings). All configurations are built
in one process and timed in interleaved rounds (A B C A B C ...); the report gives medians and
each configuration's speed relative to the first.

Usage:
  python -m benchmarks.train_step --size tiny --batch 128 --query-length 64 --doc-length 128 \
      --configs float32:strings,float32:tokens,mixed_bfloat16:tokens --rounds 5
  python -m benchmarks.train_step --configs float32:tokens,float32:tokens:xla --rounds 5
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

from tt_zoo.data import features as F  # first: the package sets Keras 2 as tf.keras
from tt_zoo.modeling.models import build_two_tower_model
from tt_zoo.training.step_data import step_batches, tokenize_pair_set
from tt_zoo.modeling.towers import resolve_bert_shape

import tensorflow as tf  # noqa: E402  pylint: disable=wrong-import-order

from benchmarks import arguments

FLOPS_PER_CYCLE_PER_CORE = 32  # FP32: two 256-bit FMA pipes x 8 lanes x 2 FLOPs (AVX2/Zen 4).


def bert_forward_flops(seq_len: int, num_layers: int, hidden: int, inner: int, dim: int) -> int:
    """Forward FLOPs of one sequence through a BERT tower and its [CLS] projection."""
    per_layer = (2 * seq_len * 4 * hidden * hidden      # Q, K, V and output projections
                 + 2 * 2 * seq_len * seq_len * hidden   # attention scores and weighted sum
                 + 2 * 2 * seq_len * hidden * inner)    # feed-forward in and out
    return num_layers * per_layer + 2 * hidden * dim


def train_step_flops(batch: int, query_len: int, doc_len: int, shape, dim: int) -> int:
    """FLOPs of one training step (forward + backward = 3x forward) for both towers + scores."""
    towers = (bert_forward_flops(query_len, shape.num_layers, shape.hidden_size, shape.inner_dim,
                                 dim)
              + bert_forward_flops(doc_len, shape.num_layers, shape.hidden_size,
                                   shape.inner_dim, dim))
    scores = 2 * batch * batch * dim
    return 3 * (batch * towers + scores)


def cpu_peak_gflops() -> tuple[float, str]:
    """This machine's FP32 peak from core count and clock, with how it was computed."""
    cores = os.cpu_count() or 1
    mhz = None
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("cpu MHz"):
                mhz = float(line.split(":")[1])
                break
    except OSError:
        pass
    if mhz is None:
        return float("nan"), "clock unknown (/proc/cpuinfo has no 'cpu MHz')"
    peak = cores * FLOPS_PER_CYCLE_PER_CORE * mhz / 1000.0
    return peak, (f"{cores} cores x {FLOPS_PER_CYCLE_PER_CORE} FP32 FLOP/cycle x "
                  f"{mhz / 1000:.3f} GHz = {peak:.1f} GFLOP/s")


def synthetic_pairs(vocab: list[str], batch: int, query_len: int, doc_len: int, seed: int = 0):
    """Text long enough to fill both token budgets, from whole-word vocabulary entries."""
    words = [w for w in vocab if w.isalpha() and not w.startswith("[")]
    rng = np.random.default_rng(seed)

    def text(n):
        return " ".join(rng.choice(words, size=n))

    n = batch * 4
    return tf.data.Dataset.from_tensor_slices({
        F.QUERY: [text(query_len) for _ in range(n)],
        F.DOC_TITLE: [text(4) for _ in range(n)],
        F.DOC_TEXT: [text(doc_len) for _ in range(n)],
        F.DOC_ID: [f"d{i}" for i in range(n)],
        F.DOC_SAMPLING_PROB: [1.0 / n] * n,
    }).repeat().batch(batch, drop_remainder=True)


class StepTimer(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter() - self._start)


def build(config: str, vocab, args):
    """A compiled model and its (repeating) training data for one POLICY:INPUT[:xla]."""
    policy, inputs, *compiler = config.split(":")
    if inputs not in ("strings", "tokens") or compiler not in ([], ["xla"]):
        raise SystemExit(f"bad configuration {config!r}: expected POLICY:strings or "
                         "POLICY:tokens, optionally followed by :xla")
    if compiler and inputs == "strings":
        raise SystemExit(f"{config!r}: XLA compiles no strings; use POLICY:tokens:xla")
    tf.keras.mixed_precision.set_global_policy(policy)
    tf.keras.utils.set_random_seed(0)
    model = build_two_tower_model(vocab, encoder="bert", size=args.size,
                                  embedding_dim=args.embedding_dim, pooling=args.pooling,
                                  share_towers=args.share_towers,
                                  query_length=args.query_length, document_length=args.doc_length)
    model.build_by_calling()  # sublayers made in build() take the policy in force now
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-4), jit_compile=bool(compiler))
    data = synthetic_pairs(vocab, args.batch, args.query_length, args.doc_length)
    if inputs == "tokens":  # the recipe's input path: ids and hashed doc ids made once
        arrays = tokenize_pair_set(model, data.take(4).unbatch(), log=lambda *_: None)
        data = step_batches(arrays, args.batch, seed=0, start_step=0)
    tf.keras.mixed_precision.set_global_policy("float32")
    return model, data


def main(argv=None):
    parser = arguments.parser(__doc__, summary="line")
    parser.add_argument("--size", default="tiny", help="BERT tower size: tiny, mini, small, base")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--query-length", type=int, default=64)
    parser.add_argument("--doc-length", type=int, default=288)
    parser.add_argument("--embedding-dim", type=int, default=512)
    parser.add_argument("--pooling", default="mean", choices=("cls", "mean"))
    parser.add_argument("--share-towers", action="store_true")
    parser.add_argument("--configs", default="float32:strings",
                        help="comma-separated POLICY:INPUT[:xla], e.g. float32:tokens,"
                             "mixed_bfloat16:tokens,float32:tokens:xla")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps (tracing)")
    parser.add_argument("--vocab", default=None,
                        help="vocab.txt (default: $TT_ZOO_DATA/bert-vocab/vocab.txt)")
    arguments.add_output(parser, help="write the results as JSON here", type=str)
    parser.add_argument("--intra-op", type=int, default=0,
                        help="TensorFlow intra-op threads (0: TensorFlow's default)")
    parser.add_argument("--inter-op", type=int, default=0,
                        help="TensorFlow inter-op threads (0: TensorFlow's default)")
    args = parser.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)

    vocab_path = pathlib.Path(args.vocab or arguments.data_dir() / "bert-vocab" / "vocab.txt")
    if not vocab_path.exists():
        sys.exit(f"vocabulary {vocab_path} not found; pass --vocab or set TT_ZOO_DATA")
    vocab = [line.rstrip("\n") for line in open(vocab_path, encoding="utf-8")]

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    built = {c: build(c, vocab, args) for c in configs}
    iterators = {c: iter(data) for c, (_, data) in built.items()}
    times = {c: [] for c in configs}
    for config in configs:  # warm-up: tracing and the first steps are not timed
        model, _ = built[config]
        model.fit(iterators[config], steps_per_epoch=args.warmup, epochs=1, verbose=0)
    for _ in range(args.rounds):
        for config in configs:
            model, _ = built[config]
            timer = StepTimer()
            model.fit(iterators[config], steps_per_epoch=args.steps, epochs=1, verbose=0,
                      callbacks=[timer])
            times[config].extend(timer.times)

    shape = resolve_bert_shape(args.size)
    flops = train_step_flops(args.batch, args.query_length, args.doc_length, shape,
                             args.embedding_dim)
    peak, how = cpu_peak_gflops()
    print(f"tower={args.size} ({shape.num_layers} layers, hidden {shape.hidden_size}) "
          f"batch={args.batch} query_len={args.query_length} doc_len={args.doc_length} "
          f"dim={args.embedding_dim} pooling={args.pooling}; {args.rounds} interleaved rounds "
          f"x {args.steps} steps; model FLOPs/step {flops / 1e9:.2f} GFLOP; peak {how}")
    results = []
    base = statistics.median(times[configs[0]])
    for config in configs:
        step_s = statistics.median(times[config])
        row = {"config": config, "median_step_ms": round(step_s * 1000, 1),
               "pairs_per_s": round(args.batch / step_s, 1),
               "achieved_gflops": round(flops / step_s / 1e9, 1),
               "fraction_of_fp32_peak": round(flops / step_s / 1e9 / peak, 3),
               "speed_vs_first": round(base / step_s, 2), "steps_timed": len(times[config])}
        results.append(row)
        print(f"{config:28s} median step {row['median_step_ms']:7.1f} ms  "
              f"{row['pairs_per_s']:7.1f} pairs/s  {row['achieved_gflops']:6.1f} GFLOP/s  "
              f"x{row['speed_vs_first']:.2f} vs {configs[0]}")
    if args.output:
        from tt_zoo.atomic_io import write_text
        write_text(args.output, json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
