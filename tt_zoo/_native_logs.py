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


# -- TensorFlow's own C++ logs (tsl's LOG: ``cuda_platform.cc ... cuInit``, ``util.cc ...
# oneDNN``, tensorflow_text's kernels) read ``TF_CPP_MIN_LOG_LEVEL`` once, into a function-local
# static of ``tsl::internal::LogMessage::~LogMessage`` at the first line logged: TensorFlow's
# import logs one, so a TensorFlow imported before tt_zoo (``import tensorflow as tf; import
# tt_zoo``) keeps the level of that moment whatever tt_zoo sets later. The static is a local
# symbol of ``libtensorflow_framework``'s symbol table (not exported); `follow_tf_cpp_min_log_level`
# finds its address there (the library's load address from an exported tsl function) and writes
# the level, as if the variable had been set before TensorFlow started.
_TSL_MIN_LOG_LEVEL = b"_ZZN3tsl8internal10LogMessageD1EvE13min_log_level"
_TSL_MIN_LOG_LEVEL_GUARD = b"_ZGVZN3tsl8internal10LogMessageD1EvE13min_log_level"
_TSL_ANCHOR = "_ZN3tsl8internal18MinLogLevelFromEnvEv"  # exported: gives the load address
_SYMBOL = [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
           ("value", "<u8"), ("size", "<u8")]  # Elf64_Sym


def _elf_symbols(data, names) -> dict:
    """{name: (st_value, st_size)} of the symbols `names` (bytes) in the symbol table
    (``.symtab``) of the little-endian ELF64 image `data`; a name not there is left out."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    if data[:6] != b"\x7fELF\x02\x01":
        return {}
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize = int.from_bytes(data[0x3A:0x3C], "little")
    shnum = int.from_bytes(data[0x3C:0x3E], "little")

    def section(i):  # (type, offset, size, link)
        h = shoff + i * shentsize
        return (int.from_bytes(data[h + 4:h + 8], "little"),
                int.from_bytes(data[h + 24:h + 32], "little"),
                int.from_bytes(data[h + 32:h + 40], "little"),
                int.from_bytes(data[h + 40:h + 44], "little"))
    symtabs = [section(i) for i in range(shnum) if section(i)[0] == 2]  # SHT_SYMTAB
    if not symtabs:
        return {}
    _, offset, size, link = symtabs[0]
    _, str_offset, str_size, _ = section(link)
    symbols = np.frombuffer(data, dtype=np.dtype(_SYMBOL), count=size // 24, offset=offset)
    found = {}
    for name in names:
        at = data.find(b"\0" + name + b"\0", str_offset, str_offset + str_size)
        if at < 0:
            continue
        rows = np.flatnonzero(symbols["name"] == at + 1 - str_offset)
        if len(rows):
            found[name] = (int(symbols["value"][rows[0]]), int(symbols["size"][rows[0]]))
    return found


def set_tsl_min_log_level(library: pathlib.Path, level: int) -> bool:
    """Sets TensorFlow's cached C++ log level (see above) in the loaded `library` to `level`;
    False, changing nothing, when its symbol table lacks the variable (a stripped or other
    build) or the variable was not read yet (TensorFlow then reads the environment)."""
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        symbols = _elf_symbols(data, [_TSL_MIN_LOG_LEVEL, _TSL_MIN_LOG_LEVEL_GUARD,
                                      _TSL_ANCHOR.encode()])
    if len(symbols) != 3 or symbols[_TSL_MIN_LOG_LEVEL][1] not in (4, 8):
        return False
    try:
        anchor = ctypes.cast(getattr(ctypes.CDLL(str(library)), _TSL_ANCHOR), ctypes.c_void_p)
    except (OSError, AttributeError):
        return False
    base = anchor.value - symbols[_TSL_ANCHOR.encode()][0]
    if ctypes.c_uint8.from_address(base + symbols[_TSL_MIN_LOG_LEVEL_GUARD][0]).value == 0:
        return False  # not read yet: the first line logged reads TF_CPP_MIN_LOG_LEVEL
    value, size = symbols[_TSL_MIN_LOG_LEVEL]
    (ctypes.c_int32 if size == 4 else ctypes.c_int64).from_address(base + value).value = level
    return True


def follow_tf_cpp_min_log_level() -> None:
    """TensorFlow's own C++ logs follow ``TF_CPP_MIN_LOG_LEVEL`` as it is now, even when
    TensorFlow was imported (and read it) before tt_zoo set its default (see above)."""
    for library in _tensorflow_framework():
        if library.is_file():
            set_tsl_min_log_level(library, min_log_level())
