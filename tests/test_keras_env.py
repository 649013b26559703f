"""`import tt_zoo` needs Keras 2 as tf.keras, and says so clearly when it cannot have it."""

import os
import subprocess
import sys


def run(code, **env):
    environment = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, timeout=300)


def test_import_sets_legacy_keras_before_tensorflow():
    result = run("import tt_zoo, tensorflow as tf; print(tf.keras.__name__)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().startswith("tf_keras")


def test_tensorflow_imported_first_with_keras3_fails_clearly():
    result = run("import tensorflow as tf; tf.keras.layers; import tt_zoo",
                 TF_USE_LEGACY_KERAS="0")
    assert result.returncode != 0
    assert "tt_zoo needs Keras 2 (tf-keras)" in result.stderr
    assert "TF_USE_LEGACY_KERAS" in result.stderr
