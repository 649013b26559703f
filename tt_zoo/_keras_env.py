"""The environment TensorFlow must start in: Keras 2 (tf-keras), and quiet C++ logs.

Importing this module before TensorFlow sets ``TF_USE_LEGACY_KERAS=1`` (TFRS and the Model Garden
need Keras 2). If TensorFlow was already imported with Keras 3 as ``tf.keras``, nothing can be
fixed in-process, so we fail with a message that says what to do.

It also sets ``TF_CPP_MIN_LOG_LEVEL=3`` when the user set no level: TensorFlow's C++ logs then
show FATAL lines only. On a CPU machine the ERROR lines TensorFlow prints are not errors of the
user's (``cuda_platform.cc ... failed call to cuInit`` at the first op, from the CUDA probe, and
``util.cc ... oneDNN supports DT_INT64 only on platforms with AVX-512`` at the first int64
transpose, e.g. when the tokenizer packs a pair); neither has a switch of its own (an empty
``CUDA_VISIBLE_DEVICES`` does not stop the probe), and TensorFlow's real failures reach the
user as Python exceptions. ScaNN's C++ logs follow the same variable (`tt_zoo._native_logs`).
A level set by the user is kept: ``TF_CPP_MIN_LOG_LEVEL=0`` shows everything again.
"""

import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def check_legacy_keras(import_tensorflow: bool = True):
    """Raises ImportError if TensorFlow's ``tf.keras`` is Keras 3 rather than tf-keras.

    With ``import_tensorflow=False`` TensorFlow is checked only if something already imported
    it (importing it here would cost seconds that listing models does not need).
    """
    if os.environ.get("TF_USE_LEGACY_KERAS") not in ("1", "true", "True"):
        raise ImportError(
            "tt_zoo needs Keras 2 (tf-keras): TF_USE_LEGACY_KERAS is set to "
            f"{os.environ.get('TF_USE_LEGACY_KERAS')!r}; set it to 1 before importing TensorFlow.")
    tf_was_imported = "tensorflow" in sys.modules
    if not (tf_was_imported or import_tensorflow):
        return
    import tensorflow as tf  # noqa: E402  (imported after the environment is set)

    keras_module = getattr(tf.keras, "__name__", "")
    if not keras_module.startswith("tf_keras"):
        hint = ("TensorFlow was imported before tt_zoo with Keras 3 as tf.keras. "
                if tf_was_imported else "")
        raise ImportError(
            f"tt_zoo needs Keras 2 (tf-keras) as tf.keras, got {keras_module!r}. {hint}"
            "Set TF_USE_LEGACY_KERAS=1 in the environment (or import tt_zoo first) and "
            "make sure tf-keras is installed.")
