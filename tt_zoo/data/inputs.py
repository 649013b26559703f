"""Opening input files: plain, bzip2 or gzip (told apart by their first bytes), with a
progress bar over the bytes read, for every reader of large dumps (MediaWiki XML, JSON Lines)."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import os
from typing import Optional

from tqdm.auto import tqdm


class _ProgressRaw(io.RawIOBase):
    """A raw byte stream that advances a progress bar by the bytes it reads."""

    def __init__(self, raw, bar):
        self._raw, self._bar = raw, bar

    def readable(self):
        return True

    def readinto(self, buffer):
        count = self._raw.readinto(buffer)
        if count:
            self._bar.update(count)
        return count

    def close(self):
        self._raw.close()
        super().close()


@contextlib.contextmanager
def open_input(path, progress: bool = True, desc: Optional[str] = None, unit_name: str = "B"):
    """Opens a plain, bzip2 or gzip file (told apart by magic bytes) as a binary stream.

    Yields ``(stream, bar)``: the decompressed stream and the tqdm bar that counts the
    *compressed* bytes read, so the bar's total is the file size.
    """
    path = os.fspath(path)
    bar = tqdm(total=os.path.getsize(path), unit=unit_name, unit_scale=True, unit_divisor=1024,
               desc=desc or os.path.basename(path), disable=not progress, leave=False)
    raw = open(path, "rb", buffering=0)
    try:
        buffered = io.BufferedReader(_ProgressRaw(raw, bar), buffer_size=1 << 20)
        magic = buffered.peek(3)[:3]
        if magic == b"BZh":
            stream = bz2.BZ2File(buffered)
        elif magic[:2] == b"\x1f\x8b":
            stream = gzip.GzipFile(fileobj=buffered)
        else:
            stream = buffered
        yield stream, bar
    finally:
        raw.close()
        bar.close()
