"""Where one bfloat16 Transformer block's time goes on the AMX units: each step of
`tt_zoo.modeling.transformer_bfloat16.blocks_bfloat16` timed alone, beside the float32 block.

The shapes are all-MiniLM-L6-v2's (hidden 384, 12 heads, inner 1,536) on a batch of 32 passages
of 144 tokens (a 100-word passage with its title: 130-150 tokens). Each step runs the op the
block runs (a bfloat16 ``MatMul``/``BatchMatMulV2`` on oneDNN, an XLA epilogue of
`tt_zoo.modeling.fused_epilogues`, oneDNN's softmax) on random inputs of its shape; the float32
rows run the float32 graph's ops (fused ``MatMul + BiasAdd (+ GELU)``, layer norms as TensorFlow
ops). Times are process CPU
seconds over the two cores (divided by 2: what a quiet machine's wall clock would show), median
of --rounds, so other processes on the machine weigh less than on wall time.

  python -m benchmarks.amx_parts                 # ~1 min; writes results/amx_parts.{md,json}
"""

from __future__ import annotations

import json
import statistics
import time
import types

import numpy as np

from benchmarks import arguments
from benchmarks.measure import machine_info, machine_line

BATCH, LENGTH, HIDDEN, HEADS, INNER = 32, 144, 384, 12, 1536


def parse_args(argv=None):
    p = arguments.parser(__doc__, prog="python -m benchmarks.amx_parts")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=10, help="calls timed a round")
    arguments.add_output(p, default=arguments.RESULTS / "amx_parts")
    return p.parse_args(argv)


def steps():
    """(name, precision, callable) of every step of one block, on random inputs."""
    import tensorflow as tf

    from tt_zoo.modeling import fused_epilogues as fe
    from tt_zoo.modeling.transformer_bfloat16 import layer_norm

    rng = np.random.default_rng(0)
    rows = BATCH * LENGTH

    def rand(*shape, dtype=tf.float32):
        return tf.cast(tf.constant(rng.standard_normal(shape).astype(np.float32)), dtype)

    bf = tf.bfloat16
    x, x16 = rand(rows, HIDDEN), rand(rows, HIDDEN, dtype=bf)
    inner, inner16 = rand(rows, INNER), rand(rows, INNER, dtype=bf)
    w = {k: (rand(*s), rand(*s, dtype=bf)) for k, s in (
        ("qkv", (HIDDEN, 3 * HIDDEN)), ("out", (HIDDEN, HIDDEN)), ("in", (HIDDEN, INNER)),
        ("o", (INNER, HIDDEN)))}
    b = {k: rand(n) for k, n in (("qkv", 3 * HIDDEN), ("h", HIDDEN), ("in", INNER))}
    heads16 = rand(BATCH, HEADS, LENGTH, HIDDEN // HEADS, dtype=bf)
    heads32 = rand(BATCH, HEADS, LENGTH, HIDDEN // HEADS)
    scores16, scores32 = rand(BATCH, HEADS, LENGTH, LENGTH, dtype=bf), rand(BATCH, HEADS, LENGTH,
                                                                            LENGTH)
    mask16, mask32 = rand(BATCH, 1, 1, LENGTH, dtype=bf), rand(BATCH, 1, 1, LENGTH)
    qkv16 = rand(BATCH, LENGTH, 3 * HIDDEN, dtype=bf)
    gelu = lambda t: tf.nn.gelu(t, approximate=False)  # noqa: E731
    norm = types.SimpleNamespace(gamma=b["h"], beta=b["h"], epsilon=1e-12)
    fn = tf.function
    return [
        ("QKV projection", "bfloat16", fn(lambda: tf.matmul(x16, w["qkv"][1]))),
        ("QKV projection", "float32", fn(lambda: tf.nn.bias_add(tf.matmul(x, w["qkv"][0]),
                                                                b["qkv"]))),
        ("bias + split into heads (XLA)", "bfloat16", lambda: fe.split_heads(qkv16, b["qkv"],
                                                                             HEADS)[0]),
        ("attention logits", "bfloat16", fn(lambda: tf.matmul(heads16, heads16,
                                                              transpose_b=True))),
        ("attention logits", "float32", fn(lambda: tf.matmul(heads32 * 0.17, heads32,
                                                             transpose_b=True) + mask32)),
        ("mask + softmax", "bfloat16", fn(lambda: tf.nn.softmax(scores16 + mask16))),
        ("softmax", "float32", fn(lambda: tf.nn.softmax(scores32))),
        ("context", "bfloat16", fn(lambda: tf.matmul(scores16, heads16))),
        ("context", "float32", fn(lambda: tf.matmul(scores32, heads32))),
        ("merge heads (XLA)", "bfloat16", lambda: fe.merge_heads(heads16)),
        ("output projection", "bfloat16", fn(lambda: tf.matmul(x16, w["out"][1]))),
        ("output projection", "float32", fn(lambda: tf.nn.bias_add(tf.matmul(x, w["out"][0]),
                                                                   b["h"]))),
        ("bias + residual + layer norm (XLA), x2", "bfloat16",
         lambda: fe.residual_layer_norm(x16, b["h"], x, b["h"], b["h"], 1e-12)[0]),
        ("residual + layer norm, x2", "float32", fn(lambda: layer_norm(x + x, norm))),
        ("inner matmul", "bfloat16", fn(lambda: tf.matmul(x16, w["in"][1]))),
        ("inner matmul + bias + GELU", "float32", fn(lambda: gelu(tf.nn.bias_add(
            tf.matmul(x, w["in"][0]), b["in"])))),
        ("bias + GELU (XLA)", "bfloat16", lambda: fe.bias_activation(inner16, b["in"], gelu)),
        ("output matmul", "bfloat16", fn(lambda: tf.matmul(inner16, w["o"][1]))),
        ("output matmul", "float32", fn(lambda: tf.nn.bias_add(tf.matmul(inner, w["o"][0]),
                                                               b["h"]))),
    ]


def cpu_ms(call, repeats: int) -> float:
    """Process CPU milliseconds of one call over two cores (CPU time / 2), `repeats` calls."""
    start = time.process_time()
    for _ in range(repeats):
        out = call()
    np.asarray(out)
    return (time.process_time() - start) / repeats / 2 * 1e3


def main(argv=None) -> dict:
    args = parse_args(argv)
    import tt_zoo  # noqa: F401  (Keras 2 before TensorFlow)

    measured = steps()
    for _, _, call in measured:
        call(), call()  # tracing and XLA compilation
    times = {i: [] for i in range(len(measured))}
    for _ in range(args.rounds):
        for i, (_, _, call) in enumerate(measured):
            times[i].append(cpu_ms(call, args.repeats))
    rows = [{"step": name, "precision": precision, "ms": statistics.median(times[i])}
            for i, (name, precision, _) in enumerate(measured)]
    totals = {p: sum(r["ms"] * (2 if "x2" in r["step"] else 1) for r in rows
                     if r["precision"] == p) for p in ("float32", "bfloat16")}
    matmuls = sum(r["ms"] for r in rows if r["precision"] == "bfloat16" and "(XLA)" not in
                  r["step"] and "softmax" not in r["step"])
    result = {"shape": {"batch": BATCH, "length": LENGTH, "hidden": HIDDEN, "heads": HEADS,
                        "inner": INNER}, "rounds": args.rounds, "repeats": args.repeats,
              "rows": rows, "block_ms": totals, "bfloat16_matmul_ms": matmuls,
              "machine": machine_info()}
    write(result, args.output)
    return result


def write(result: dict, output) -> None:
    from tt_zoo.atomic_io import write_json, write_text

    lines = ["# Where a bfloat16 block's time goes on the AMX units", "",
             f"One all-MiniLM-L6-v2 block (hidden {HIDDEN}, {HEADS} heads, inner {INNER}) on "
             f"{BATCH} passages of {LENGTH} tokens; each step alone, process CPU ms / 2, median "
             f"of {result['rounds']} rounds of {result['repeats']} calls "
             "(`python -m benchmarks.amx_parts`).", "", machine_line(result["machine"]), "",
             "| step | precision | ms |", "| --- | --- | --- |"]
    lines += [f"| {r['step']} | {r['precision']} | {r['ms']:.2f} |" for r in result["rows"]]
    t = result["block_ms"]
    lines += ["", f"A block: float32 {t['float32']:.1f} ms, bfloat16 {t['bfloat16']:.1f} ms "
              f"(x{t['float32'] / t['bfloat16']:.2f}); of the bfloat16 block, the matmuls on the "
              f"AMX units take {result['bfloat16_matmul_ms']:.1f} ms "
              f"({100 * result['bfloat16_matmul_ms'] / t['bfloat16']:.0f}%), the elementwise "
              "steps and the softmax the rest."]
    write_text(output.with_suffix(".md"), "\n".join(lines) + "\n")
    write_json(output.with_suffix(".json"), result)


if __name__ == "__main__":
    print(json.dumps(main()["block_ms"]))
