"""tt_zoo's cache folder, ``$TT_ZOO_HOME`` (default ``~/.cache/tt_zoo``): downloaded models
(``models/``, `tt_zoo.artifacts.download`), the float32 copies of float16 artifacts (``float32/``,
`tt_zoo.artifacts.float16_storage`) and the data a clone-less install reads (``data/``,
`tt_zoo.cli.common.default_data_dir`). Defined once, below everything that keeps files there.
"""

from __future__ import annotations

import os
import pathlib

from tt_zoo.errors import TtZooError

HOME_ENV = "TT_ZOO_HOME"
DEFAULT_HOME = pathlib.Path("~") / ".cache" / "tt_zoo"


def home() -> pathlib.Path:
    """tt_zoo's cache folder: ``$TT_ZOO_HOME``, default ``~/.cache/tt_zoo``.

    Raises:
      TtZooError: the path exists and is not a folder (naming the variable)."""
    path = pathlib.Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()
    if path.exists() and not path.is_dir():
        raise TtZooError(f"{HOME_ENV}={str(path)!r}: {path} is not a folder; tt_zoo keeps "
                         "its cache of downloaded and materialised models there. Point "
                         f"{HOME_ENV} at a folder (it is created when missing).")
    return path


__all__ = ["HOME_ENV", "DEFAULT_HOME", "home"]
