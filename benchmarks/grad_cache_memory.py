"""Peak memory and step time of pretraining with and without GradCache (Gao et al. 2021).

The registry's tiny BERT variant (``ict_bfs_wlp_128``: 2 layers, hidden 128, embedding 128;
query length 64, document length 128, dropout 0.1 from checkpointable generators) trains on a
batch of 512 tokenized synthetic pairs, the whole batch at once (``full``) or with GradCache
(`tt_zoo.training.grad_cache.use_grad_cache(model, chunk)`; ``recipes/pretrain.py
--grad-cache-chunk``). Each setting runs in its own Python process, so each peak resident set
(``resource.getrusage`` ``ru_maxrss``, the process's high-water mark) is its own; the report
gives it, the resident set just before training (model, optimizer and token arrays in memory,
nothing traced), and the median wall-clock seconds of the timed steps (the first step, which
traces, is not timed).

Usage:
  nice -n 10 python -m benchmarks.grad_cache_memory --settings full,64,128 --steps 3 \
      --output results/grad_cache_memory
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

import tt_zoo  # noqa: F401  (first: the package sets Keras 2 as tf.keras)

from benchmarks import arguments

VARIANT = "ict_bfs_wlp_128"


def current_rss_mb() -> float:
    """This process's resident set now (VmRSS), in MiB."""
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    """This process's peak resident set so far (ru_maxrss is in KiB on Linux), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_pairs(vocab: list, n: int, query_len: int, doc_len: int, seed: int = 0):
    """`n` pairs of text long enough to fill both token budgets, from whole vocabulary words."""
    import tensorflow as tf
    from tt_zoo.data import features as F
    words = [w for w in vocab if w.isalpha() and not w.startswith("[")]
    rng = np.random.default_rng(seed)

    def text(length):
        return " ".join(rng.choice(words, size=length))
    return tf.data.Dataset.from_tensor_slices({
        F.QUERY: [text(query_len) for _ in range(n)],
        F.DOC_TITLE: [text(4) for _ in range(n)],
        F.DOC_TEXT: [text(doc_len) for _ in range(n)],
        F.DOC_ID: [f"d{i}" for i in range(n)],
        F.DOC_SAMPLING_PROB: [1.0 / n] * n})


def run_setting(setting: str, args) -> dict:
    """Trains `args.steps + 1` steps of one setting in this process; returns its numbers."""
    import tensorflow as tf
    from tt_zoo.cli.common import PROJECT_VOCAB
    from tt_zoo.training import loop
    from tt_zoo.training.grad_cache import use_grad_cache
    from tt_zoo.training.step_data import step_batches, tokenize_pair_set
    from tt_zoo.zoo import registry
    from tt_zoo.zoo.build import build_untrained

    chunk = None if setting == "full" else int(setting)
    loop.enable_checkpointable_randomness(0)
    vocab_path = args.vocab or str(PROJECT_VOCAB)
    vocab = [line.rstrip("\n") for line in open(vocab_path, encoding="utf-8")]
    model = build_untrained(registry.get_spec(VARIANT), vocab_path, query_length=args.query_length,
                            document_length=args.document_length, dropout_rate=0.1)
    model.build_by_calling()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-4))
    use_grad_cache(model, chunk)
    arrays = tokenize_pair_set(model, synthetic_pairs(vocab, 2 * args.batch, args.query_length,
                                                      args.document_length),
                               log=lambda *_: None)
    data = iter(step_batches(arrays, args.batch, seed=0, start_step=0))
    rss_before = current_rss_mb()
    peak_before = peak_rss_mb()

    times = []

    class Timer(tf.keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    history = model.fit(data, steps_per_epoch=args.steps + 1, epochs=1, verbose=0,
                        callbacks=[Timer()])
    timed = times[1:]  # the first step traces the train function
    return {"setting": setting, "grad_cache_chunk": chunk,
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "rss_before_training_mb": round(rss_before, 1),
            "peak_rss_before_training_mb": round(peak_before, 1),
            "median_step_s": round(statistics.median(timed), 3),
            "step_s": [round(t, 3) for t in timed],
            "first_step_s": round(times[0], 1),
            "loss": round(float(history.history["loss"][-1]), 4)}


def markdown(report: dict) -> str:
    args = report["args"]
    lines = [
        "# GradCache: peak memory and step time",
        "",
        f"`benchmarks/grad_cache_memory.py`: the tiny BERT variant `{VARIANT}` (2 layers, "
        f"hidden 128, embedding 128, dropout 0.1), batch {args['batch']}, query length "
        f"{args['query_length']}, document length {args['document_length']}, Adam, on "
        f"{report['machine']}; each setting in its own process, {args['steps']} timed steps "
        "after one untimed (tracing) step. Peak RSS is `ru_maxrss` of the process (TensorFlow, "
        "the model, the tokenized pairs, tracing and training); \"before training\" is the "
        "resident set once the model, optimizer and token arrays are in memory.",
        "",
        "| setting | peak RSS (MiB) | RSS before training (MiB) | peak - before (MiB) "
        "| median step (s) | vs full |",
        "|---|---:|---:|---:|---:|---:|"]
    full = next((r for r in report["results"] if r["setting"] == "full"), None)
    for r in report["results"]:
        name = "full batch" if r["setting"] == "full" else f"GradCache, chunk {r['setting']}"
        ratio = (f"x{r['median_step_s'] / full['median_step_s']:.2f} time"
                 if full else "")
        lines.append(f"| {name} | {r['peak_rss_mb']:.0f} | {r['rss_before_training_mb']:.0f} | "
                     f"{r['peak_rss_mb'] - r['rss_before_training_mb']:.0f} | "
                     f"{r['median_step_s']:.2f} | {ratio} |")
    lines += ["", report.get("note", ""), ""]
    return "\n".join(lines)


def main(argv=None):
    parser = arguments.parser(__doc__, summary="line")
    parser.add_argument("--settings", default="full,64,128",
                        help="comma-separated: full, or a GradCache chunk size")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--query-length", type=int, default=64)
    parser.add_argument("--document-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per setting")
    parser.add_argument("--vocab", default=None, help="vocab.txt (the project vocabulary)")
    arguments.add_output(parser, type=str,
                         help="write OUTPUT.json and OUTPUT.md (e.g. results/grad_cache_memory)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # one setting, in this process: print its numbers as the last line
        print(json.dumps(run_setting(args.child, args)))
        return
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    for s in settings:
        if s != "full" and (not s.isdigit() or int(s) <= 0 or args.batch % int(s)):
            sys.exit(f"setting {s!r}: expected 'full' or a chunk size dividing --batch "
                     f"{args.batch}")
    results = []
    for setting in settings:
        command = [sys.executable, "-m", "benchmarks.grad_cache_memory", "--child", setting,
                   "--batch", str(args.batch), "--query-length", str(args.query_length),
                   "--document-length", str(args.document_length), "--steps", str(args.steps),
                   *(["--vocab", os.path.abspath(args.vocab)] if args.vocab else [])]
        done = subprocess.run(command, capture_output=True, text=True, cwd=arguments.REPO)
        if done.returncode:
            sys.exit(f"setting {setting} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = results[-1]
        print(f"{setting:>5}: peak RSS {r['peak_rss_mb']:.0f} MiB (before training "
              f"{r['rss_before_training_mb']:.0f}), median step {r['median_step_s']:.2f} s "
              f"over {len(r['step_s'])} steps")
    report = {"args": {k: v for k, v in vars(args).items() if k != "child"},
              "machine": f"{os.cpu_count()} CPU cores ({platform.machine()}), "
                         f"load average {os.getloadavg()[0]:.1f} at the end",
              "results": results}
    if args.output:
        from tt_zoo.atomic_io import write_text
        write_text(args.output + ".json", json.dumps(report, indent=2) + "\n")
        write_text(args.output + ".md", markdown(report))


if __name__ == "__main__":
    main()
