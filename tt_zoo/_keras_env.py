"""The environment TensorFlow must start in: Keras 2 (tf-keras), and quiet C++ logs.

Importing this module before TensorFlow sets ``TF_USE_LEGACY_KERAS=1`` (TFRS and the Model Garden
need Keras 2). TensorFlow reads that variable when ``tf.keras`` is first used, not when it is
imported, so ``import tensorflow as tf; import tt_zoo`` (the order most Keras code has) is the
same as the other order. If ``tf.keras`` was already used as Keras 3 before tt_zoo was imported,
`check_legacy_keras` routes ``tf.keras`` (and ``tf.losses``, ``tf.metrics``, ``tf.optimizers``,
``tf.initializers``) to tf-keras, as TensorFlow would have with the variable set, and warns once:
Keras 3 objects made before keep working through the ``keras`` package. Only a user who set
``TF_USE_LEGACY_KERAS`` to another value gets an ImportError that says what to do.

It also sets ``TF_CPP_MIN_LOG_LEVEL=3`` when the user set no level: TensorFlow's C++ logs then
show FATAL lines only. On a CPU machine the ERROR lines TensorFlow prints are not errors of the
user's (``cuda_platform.cc ... failed call to cuInit`` at the first op, from the CUDA probe, and
``util.cc ... oneDNN supports DT_INT64 only on platforms with AVX-512`` at the first int64
transpose, e.g. when the tokenizer packs a pair); neither has a switch of its own (an empty
``CUDA_VISIBLE_DEVICES`` does not stop the probe), and TensorFlow's real failures reach the
user as Python exceptions. ScaNN's C++ logs follow the same variable (`tt_zoo._native_logs`);
so do TensorFlow's when it was imported before tt_zoo, which reads the level once, at its import
(`tt_zoo._native_logs.follow_tf_cpp_min_log_level`; the lines TensorFlow printed while it was
imported are printed by then).
A level set by the user is kept: ``TF_CPP_MIN_LOG_LEVEL=0`` shows everything again.
"""

import os
import sys
import warnings

# What the user's environment held before the defaults below, and whether TensorFlow came first.
_USER_SET_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL" in os.environ
_TENSORFLOW_FIRST = "tensorflow" in sys.modules
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# TensorFlow's lazily loaded Keras modules: attribute of `tensorflow` -> Keras submodule.
_KERAS_ATTRIBUTES = {"keras": None, "losses": "losses", "metrics": "metrics",
                     "optimizers": "optimizers", "initializers": "initializers"}
_state = {"logs_followed": False}


def _legacy_keras_requested() -> bool:
    return os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True")


def _keras_module_name(tf) -> str:
    return getattr(tf.keras, "__name__", "")


def _route_tf_keras_to_tf_keras(tf) -> None:
    """Points ``tf.keras`` and its aliases at tf-keras: fresh copies of TensorFlow's own lazy
    loaders, read with ``TF_USE_LEGACY_KERAS=1`` (the loaders a TensorFlow imported with it
    set would have)."""
    from tensorflow.python.util.lazy_loader import \
        KerasLazyLoader  # pylint: disable=import-outside-toplevel

    module = sys.modules["tensorflow"]
    for attribute, submodule in _KERAS_ATTRIBUTES.items():
        loader = (KerasLazyLoader(vars(module)) if submodule is None else
                  KerasLazyLoader(vars(module), submodule=submodule, name=attribute))
        setattr(module, attribute, loader)
    if not _keras_module_name(tf).startswith("tf_keras"):
        raise ImportError(f"tt_zoo needs Keras 2 (tf-keras) as tf.keras, got "
                          f"{_keras_module_name(tf)!r}: install tf-keras (pip install tf-keras).")


def check_legacy_keras(import_tensorflow: bool = True):
    """Makes sure TensorFlow's ``tf.keras`` is tf-keras (Keras 2), which tt_zoo needs.

    With ``import_tensorflow=False`` TensorFlow is checked only if something already imported
    it (importing it here would cost seconds that listing models does not need). A ``tf.keras``
    already used as Keras 3 is routed to tf-keras, with a warning (see the module docstring).

    Raises:
      ImportError: the user set ``TF_USE_LEGACY_KERAS`` to something other than 1, or tf-keras
        is not installed.
    """
    if not _legacy_keras_requested():
        raise ImportError(
            "tt_zoo needs Keras 2 (tf-keras): TF_USE_LEGACY_KERAS is set to "
            f"{os.environ.get('TF_USE_LEGACY_KERAS')!r}; set it to 1 (or unset it) before "
            "importing TensorFlow.")
    if not ("tensorflow" in sys.modules or import_tensorflow):
        return
    import tensorflow as tf  # noqa: E402  (imported after the environment is set)

    if _TENSORFLOW_FIRST and not _USER_SET_LOG_LEVEL and not _state["logs_followed"]:
        _state["logs_followed"] = True
        from tt_zoo import _native_logs  # pylint: disable=import-outside-toplevel
        _native_logs.follow_tf_cpp_min_log_level()
    keras_module = _keras_module_name(tf)
    if not keras_module.startswith("tf_keras"):
        _route_tf_keras_to_tf_keras(tf)
        warnings.warn(
            f"tf.keras was Keras 3 ({keras_module}) when tt_zoo was imported; tt_zoo needs "
            "Keras 2 and routed tf.keras to tf-keras, as TF_USE_LEGACY_KERAS=1 does. Keras 3 "
            "objects made before keep working; set TF_USE_LEGACY_KERAS=1 before using tf.keras "
            "(or import tt_zoo first) to have one Keras throughout.", stacklevel=3)


# Keras 3 optimizer settings that tf-keras' optimizers do not take.
_KERAS3_ONLY_OPTIMIZER_FIELDS = ("loss_scale_factor", "gradient_accumulation_steps")


def tf_keras_optimizer(optimizer):
    """`optimizer` for a tf-keras model's ``compile``: a Keras 3 optimizer (``keras.optimizers.Adam``,
    or ``tf.keras.optimizers.Adam`` made before tt_zoo routed tf.keras to tf-keras) becomes the
    tf-keras optimizer of the same class and settings (a learning-rate schedule included); any
    other value (a tf-keras optimizer, a name such as "adam") is returned as it is.

    Raises:
      ValueError: naming the Keras 3 optimizer when tf-keras has no optimizer of its class.
    """
    module = type(optimizer).__module__
    if not (module == "keras" or module.startswith("keras.")):
        return optimizer
    import tf_keras  # pylint: disable=import-outside-toplevel

    config = {k: v for k, v in optimizer.get_config().items()
              if k not in _KERAS3_ONLY_OPTIMIZER_FIELDS}
    rate = config.get("learning_rate")
    if isinstance(rate, dict) and "class_name" in rate:  # a serialized Keras 3 schedule
        config["learning_rate"] = tf_keras.optimizers.schedules.deserialize(
            {"class_name": rate["class_name"], "config": rate["config"]})
    elif hasattr(optimizer.learning_rate, "get_config") and not isinstance(rate, (int, float)):
        schedule = optimizer.learning_rate
        config["learning_rate"] = tf_keras.optimizers.schedules.deserialize(
            {"class_name": type(schedule).__name__, "config": schedule.get_config()})
    import inspect  # pylint: disable=import-outside-toplevel

    try:
        cls = getattr(tf_keras.optimizers, type(optimizer).__name__)
        takes = inspect.signature(cls).parameters
        return cls(**{k: v for k, v in config.items() if k in takes})
    except (AttributeError, ValueError, TypeError) as e:
        raise ValueError(f"The Keras 3 optimizer {type(optimizer).__name__} (from {module}) has "
                         f"no tf-keras counterpart that takes its settings ({e}); tt_zoo's models "
                         "are tf-keras models: pass tf.keras.optimizers.X(...) after import "
                         "tt_zoo, or a name such as 'adam'.") from e
