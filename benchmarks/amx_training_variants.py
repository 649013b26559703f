"""results/amx_training_variants.{json,md}: where the bfloat16 training step's time goes, by
swapping its parts.

The MiniLM step of `benchmarks.amx_training` (batch 32, query length 64, document length 128,
float32 against the ``mixed_bfloat16`` training copy in one process, interleaved rounds,
medians) run once per variant, each in its own process, since a variant replaces a function
for the whole process before the models are built:

- ``shipped``: the step unchanged, as ``model.fit`` of a training copy runs it (Keras'
  ``Dropout`` through `tf.nn.dropout`).
- ``generator_dropout``: dropout drawn from `tf.random.Generator` state, as the training commands
  run it (their checkpointable randomness,
  `tt_zoo.training.loop.enable_checkpointable_randomness`).
- ``stateless_dropout``: dropout as `tf.nn.experimental.stateless_dropout`, its seeds made by the
  same generators.
- ``inference_forward``: the bfloat16 towers train through the inference forward
  (`tt_zoo.modeling.bert_inference.encode_sequence`: `blocks_bfloat16` in its variable form,
  XLA kernels between the matmuls), which has no dropout; float32 keeps the layers.
- ``inference_forward_both``: both precisions train through their inference forwards (no
  dropout in either): the like-for-like ratio without dropout.
- ``inference_forward_dropout``: ``inference_forward`` with BERT's dropout put back (rate 0.1
  on the attention probabilities and on both projections' outputs before their residual), each
  one more XLA kernel drawing stateless random numbers: what a training forward built on the
  inference path would cost with dropout unfused (its seeds drawn per call, not from the
  layers' checkpointed generators: a timing, not a recipe).

``inference_forward`` and ``inference_forward_both`` are not trainable recipes (no dropout):
they bound what a training forward built on the inference path could gain. (Chang et al. 2020, Sec. 4: the towers are pre-trained and
fine-tuned at scale, so the step is what every run pays.)

Usage:
  python -m benchmarks.amx_training_variants                       # ~12 min here
  python -m benchmarks.amx_training_variants --variants shipped --rounds 2 --steps 1 \\
      --output /tmp/variants                                       # smoke
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

from benchmarks import amx_training, arguments, measure

VARIANTS = ("shipped", "generator_dropout", "stateless_dropout", "inference_forward",
            "inference_forward_both", "inference_forward_dropout")
DROPOUT_RATE = 0.1  # BERT's and all-MiniLM-L6-v2's
RESULT_MARKER = "VARIANT_RESULT "


def parse_args(argv=None):
    p = arguments.parser(__doc__, prog="python -m benchmarks.amx_training_variants")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, of {VARIANTS}")
    p.add_argument("--rounds", type=int, default=4, help="interleaved rounds per variant")
    p.add_argument("--steps", type=int, default=3, help="timed steps per round")
    p.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    arguments.add_output(p, help="write OUTPUT.json and OUTPUT.md "
                         "(default results/amx_training_variants)", type=str,
                         default="results/amx_training_variants")
    return p.parse_args(argv)


def apply_variant(name: str) -> None:
    """Replaces, for this process, what variant `name` swaps (module docstring)."""
    import tensorflow as tf

    if name in ("generator_dropout", "stateless_dropout"):
        tf.keras.backend.experimental.enable_tf_random_generator()
    if name == "stateless_dropout":
        from tf_keras.src import backend  # Keras' RandomGenerator: no public hook

        def dropout(self, inputs, rate, noise_shape=None):
            self._maybe_init()  # pylint: disable=protected-access
            seed = self._generator.make_seeds()[:, 0]  # pylint: disable=protected-access
            return tf.nn.experimental.stateless_dropout(inputs, rate=rate,
                                                        noise_shape=noise_shape, seed=seed)
        backend.RandomGenerator.dropout = dropout
    if name.startswith("inference_forward"):
        from tt_zoo.modeling import bert_inference

        layers_forward = bert_inference.sequence_output
        forward = (_with_unfused_dropout(bert_inference.encode_sequence)
                   if name == "inference_forward_dropout" else bert_inference.encode_sequence)

        def sequence_output(encoder, packed, training=None, plain_inference=True):
            if encoder.compute_dtype == "bfloat16" or name == "inference_forward_both":
                if not encoder.built:
                    encoder(packed, training=False)  # its variables, which the forward reads
                return forward(encoder, packed)
            return layers_forward(encoder, packed, training, plain_inference)
        bert_inference.sequence_output = sequence_output


def _with_unfused_dropout(forward):
    """`forward` (the bfloat16 inference forward) traced with dropout added: one XLA kernel
    after the softmax and one before each residual + layer norm (the bias added there too)."""
    import tensorflow as tf

    from tt_zoo.modeling import fused_epilogues

    def seed():
        return tf.random.uniform([2], maxval=2 ** 31 - 1, dtype=tf.int32)

    @tf.function(jit_compile=True, autograph=False)
    def dropout(x, bias, seed):
        if bias is not None:
            x = tf.cast(tf.cast(x, tf.float32) + bias, x.dtype)
        keep = tf.random.stateless_uniform(tf.shape(x), seed) >= DROPOUT_RATE
        return tf.where(keep, x * tf.cast(1.0 / (1.0 - DROPOUT_RATE), x.dtype), tf.zeros_like(x))

    def traced(encoder, packed):
        softmax, norm = tf.nn.softmax, fused_epilogues.residual_layer_norm
        tf.nn.softmax = lambda logits, axis=-1, name=None: dropout(softmax(logits, axis), None,
                                                                    seed())
        fused_epilogues.residual_layer_norm = (
            lambda projected, bias, *rest: norm(dropout(projected, bias, seed()), None, *rest))
        try:  # only while this forward is traced
            return forward(encoder, packed)
        finally:
            tf.nn.softmax, fused_epilogues.residual_layer_norm = softmax, norm
    return traced


def run_child(args) -> None:
    apply_variant(args.child)
    step_args = amx_training.parse_args(["--rounds", str(args.rounds),
                                         "--steps", str(args.steps)])
    step = amx_training.measure_step(step_args, log=lambda *_: None)
    print(RESULT_MARKER + json.dumps(step), flush=True)


def measure_variant(name: str, args, log=print) -> dict:
    command = [sys.executable, "-m", "benchmarks.amx_training_variants", "--child", name,
               "--rounds", str(args.rounds), "--steps", str(args.steps)]
    log(f"variant {name}")
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [l for l in run.stdout.splitlines() if l.startswith(RESULT_MARKER)]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"variant {name} failed (exit {run.returncode}):\n"
                           f"{run.stderr[-3000:]}")
    step = json.loads(lines[-1][len(RESULT_MARKER):])
    rows = {r["policy"]: r for r in step["rows"]}
    return {"variant": name, "float32_ms": rows["float32"]["median_step_ms"],
            "bfloat16_ms": rows["mixed_bfloat16"]["median_step_ms"],
            "speed_vs_float32": rows["mixed_bfloat16"]["speed_vs_float32"]}


def markdown(record: dict) -> str:
    step = amx_training.parse_args([])  # the step each child times: its defaults
    out = ["# The bfloat16 training step with its parts swapped", "",
           f"Model `{record['model']}`, batch {step.batch}, query length {step.query_length}, "
           f"document length {step.document_length}; each variant in its own process, "
           f"float32 and mixed_bfloat16 in {record['rounds']} interleaved rounds of "
           f"{record['steps']} steps, medians "
           "(`benchmarks/amx_training_variants.py`, which says what each variant swaps).", "",
           measure.machine_line(record["machine"]), "", "    " + record["command"], "",
           "| variant | float32 step (ms) | bfloat16 step (ms) | speed |", "|---|---|---|---|"]
    out += [f"| {r['variant']} | {r['float32_ms']:,} | {r['bfloat16_ms']:,} | "
            f"x{r['speed_vs_float32']:.2f} |" for r in record["rows"]]
    return "\n".join(out + [""])


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        run_child(args)
        return
    variants = arguments.comma_choices(args.variants, VARIANTS, "--variants")
    machine = measure.machine_info()
    rows = [measure_variant(v, args) for v in variants]
    machine["other_busy_cores_at_end"] = measure.busy_cores()
    record = {"model": amx_training.MODEL, "rounds": args.rounds, "steps": args.steps,
              "rows": rows, "machine": machine,
              "command": " ".join(["python -m benchmarks.amx_training_variants",
                                   *(argv or sys.argv[1:])])}
    from tt_zoo.atomic_io import write_json, write_text

    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    text = markdown(record)
    write_json(output.with_suffix(".json"), record)
    write_text(output.with_suffix(".md"), text)
    print(text)


if __name__ == "__main__":
    main()
