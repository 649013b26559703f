"""Make sure TensorFlow runs with Keras 2 (tf-keras), which TFRS and the Model Garden need.

Importing this module before TensorFlow sets ``TF_USE_LEGACY_KERAS=1``. If TensorFlow was
already imported with Keras 3 as ``tf.keras``, nothing can be fixed in-process, so we fail with
a message that says what to do.
"""

import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


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
