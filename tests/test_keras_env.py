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


def test_listing_models_imports_no_tensorflow():
    result = run("import sys, time; t = time.perf_counter(); import tt_zoo; "
                 "names = tt_zoo.list_models(shipped_only=True); tt_zoo.get_spec(names[0]); "
                 "print(len(names), 'tensorflow' in sys.modules, time.perf_counter() - t)")
    assert result.returncode == 0, result.stderr[-2000:]
    count, tensorflow_imported, seconds = result.stdout.split()
    assert int(count) >= 3 and tensorflow_imported == "False", result.stdout
    print(f"import tt_zoo + list_models: {float(seconds):.2f} s")


def test_load_imports_tensorflow_with_keras_2():
    result = run("import tt_zoo, tensorflow as tf; tt_zoo.load; print(tf.keras.__name__)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().startswith("tf_keras")
