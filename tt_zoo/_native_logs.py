"""ScaNN's C++ logs follow ``TF_CPP_MIN_LOG_LEVEL``, as TensorFlow's own do.

ScaNN logs through absl: every tree-partitioned build prints INFO and WARNING lines
(``partitioner_factory_base.cc``, ``kmeans_tree_partitioner_utils.h``, ``gmm_utils.cc`` "...
zero norm", after absl's "All log messages before absl::InitializeLog() ..."). absl reads no
environment variable, so `import_scann` imports ScaNN and then sets absl's minimum log level to
the severity ``TF_CPP_MIN_LOG_LEVEL`` names (0 INFO, 1 WARNING, 2 ERROR, 3 FATAL;
`tt_zoo._keras_env` defaults it to 3 when the user set no level) in each absl copy ScaNN logs
through: the pybind module's own (``scann_pybind.so``, used by `tt_zoo.retrieval.index`), and
TensorFlow's (``libtensorflow_framework``), to which the absl symbols of ScaNN's TensorFlow ops
(``_scann_ops.so``, used by the `retrieve` SavedModel) bind (setting the ops library's own copy
changes nothing, as measured). A library that exports no such function is left as it was.

Every tt_zoo module that needs ScaNN imports it through `import_scann`. XLA logs through the
same absl copy of TensorFlow's (``device_compiler.h`` "Compiled cluster using XLA!" at the first
compilation): `quiet_xla` sets its level before tt_zoo compiles with XLA.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import pathlib
import re
import sys

# absl::SetMinLogLevel(absl::LogSeverityAtLeast), or absl::log_internal::RawSetMinLogLevel (what
# TensorFlow's library exports), mangled, with or without absl's inline LTS namespace (e.g.
# "lts_20250127" in ScaNN 1.4.2 and TensorFlow 2.20).
_SET_MIN_LOG_LEVEL = re.compile(rb"_ZN4absl(?:12lts_\d+)?(?:14SetMinLogLevel|12log_internal17Raw"
                                rb"SetMinLogLevel)ENS\d*_18LogSeverityAtLeastE")
_done = {}  # library path -> the level set there


def min_log_level() -> int:
    """``TF_CPP_MIN_LOG_LEVEL`` as absl's severity, 0-3 (0, as TensorFlow reads it, when unset
    or not a number)."""
    try:
        level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0
    return min(max(level, 0), 3)


def set_absl_min_log_level(library: pathlib.Path, level: int) -> bool:
    """Calls ``absl::SetMinLogLevel(level)`` (or ``RawSetMinLogLevel``) in the loaded shared
    library `library`; False when it exports neither (nothing is changed then)."""
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        # A name can also appear as a symbol the library uses but does not define.
        names = list(dict.fromkeys(m.group().decode() for m in _SET_MIN_LOG_LEVEL.finditer(data)))
    try:
        handle = ctypes.CDLL(str(library))
    except OSError:
        return False
    for name in names:
        function = getattr(handle, name, None)
        if function is not None:
            function.argtypes = [ctypes.c_int]
            function.restype = None
            function(level)
            return True
    return False


def _tensorflow_framework() -> list:
    """TensorFlow's ``libtensorflow_framework`` (the absl copy its C++ code logs through)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return sorted(pathlib.Path(tf.sysconfig.get_lib()).glob("libtensorflow_framework.so*"))[:1]


def _follow_min_log_level(libraries) -> None:
    level = min_log_level()
    for library in libraries:
        if library.is_file() and _done.get(library) != level:
            set_absl_min_log_level(library, level)
            _done[library] = level


def quiet_xla() -> None:
    """XLA's C++ logs follow ``TF_CPP_MIN_LOG_LEVEL`` (see the module docstring)."""
    _follow_min_log_level(_tensorflow_framework())


def _scann_log_libraries() -> list:
    """The loaded shared libraries whose absl ScaNN logs through (see the module docstring)."""
    libraries = []
    pybind = sys.modules.get("scann_pybind")
    if pybind is not None and getattr(pybind, "__file__", None):
        libraries.append(pathlib.Path(pybind.__file__))
    if "scann.scann_ops.py.scann_ops" in sys.modules:  # its ops, with TensorFlow loaded
        libraries.extend(_tensorflow_framework())
    return [path for path in libraries if path.is_file()]


def import_scann():
    """``import scann``, its C++ log level set from ``TF_CPP_MIN_LOG_LEVEL`` (see the module
    docstring); returns the module."""
    import scann  # pylint: disable=import-outside-toplevel

    _follow_min_log_level(_scann_log_libraries())
    return scann
