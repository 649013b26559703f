"""recipes/pretrain.py with every path on TensorFlow's in-memory filesystem (`ram://`), the
stand-in for the gs:// buckets a TPU reads and writes: pairs, token cache, checkpoints, logs,
run settings, summary and export all go through `tf.io.gfile`.

Usage: pretrain_ram_filesystem_check.py PAIRS_DIR VOCAB LOCAL_COPY_DIR
Copies the pairs into ram://, trains twice (the second run finds the run finished and the token
cache filled), copies the exported model back to LOCAL_COPY_DIR, and prints one JSON line: what
each run printed and every file written under ram://. A separate process, because ram:// lives
only as long as the process.
"""

import contextlib
import io
import json
import os
import sys

from tt_zoo.cli import pretrain  # first: the package sets Keras 2 as tf.keras

import tensorflow as tf  # noqa: E402

pairs_dir, vocab, local_copy = sys.argv[1:4]
for name in tf.io.gfile.listdir(pairs_dir):
    tf.io.gfile.makedirs("ram://pairs")
    tf.io.gfile.copy(os.path.join(pairs_dir, name), f"ram://pairs/{name}")

argv = ["--variant", "ict_bfs_wlp_128", "--pairs", "ram://pairs", "--vocab", vocab,
        "--steps", "6", "--batch-size", "8", "--checkpoint-every", "3",
        "--tower-shape", "1,16,2", "--query-length", "16", "--document-length", "24",
        "--workdir", "ram://run", "--token-cache", "ram://cache", "--export", "ram://export",
        "--no-progress"]
printed = []
for _ in range(2):
    tf.keras.backend.clear_session()  # as a new process: layer names are part of the settings
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert pretrain.main(argv) == 0
    printed.append(out.getvalue())

written = sorted(os.path.join(root, f) for top in ("ram://run", "ram://cache", "ram://export")
                 for root, _, files in tf.io.gfile.walk(top) for f in files)
for path in written:
    if path.startswith("ram://export/"):
        target = os.path.join(local_copy, path[len("ram://export/"):])
        tf.io.gfile.makedirs(os.path.dirname(target))
        tf.io.gfile.copy(path, target)
print(json.dumps({"printed": printed, "written": written}))
