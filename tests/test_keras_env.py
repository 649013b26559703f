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


def test_tensorflow_imported_first_then_tt_zoo_gives_keras_2():
    """The order most Keras code has: TensorFlow reads TF_USE_LEGACY_KERAS when tf.keras is
    first used, so tt_zoo's default still applies; no warning."""
    result = run("import warnings; warnings.simplefilter('error')\n"
                 "import tensorflow as tf\nimport tt_zoo\nprint(tf.keras.__name__)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().startswith("tf_keras")


def test_tf_keras_used_as_keras_3_before_tt_zoo_is_routed_to_tf_keras_with_a_warning():
    """tf.keras already used as Keras 3 (TF_USE_LEGACY_KERAS unset): tt_zoo routes it to
    tf-keras as the variable would have, warns once, and loads and encodes; the Keras 3 layer
    made before keeps working."""
    code = ("import tensorflow as tf\n"
            "layer = tf.keras.layers.Dense(2)\n"
            "import tt_zoo\n"
            "from tt_zoo.modeling.models import TwoTowerModel\n"
            "print(tf.keras.__name__, tf.losses.__name__, layer(tf.ones([1, 3])).shape)\n")
    result = run(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["tf_keras.api._v2.keras", "tf_keras.api._v2.keras.losses",
                                     "(1,", "2)"], result.stdout
    assert result.stderr.count("UserWarning: tf.keras was Keras 3") == 1, result.stderr[-2000:]
    assert "routed tf.keras to tf-keras" in result.stderr


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
