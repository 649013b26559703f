"""Where `tt_zoo.load(name)` finds a shipped model's files, and how it downloads them.

A shipped model is looked for, in order:

1. in the git clone: ``saved_models/<artifact>`` beside the ``tt_zoo`` package (today the
   weights ship there);
2. in the cache: ``$TT_ZOO_HOME/models/<artifact>`` (``TT_ZOO_HOME`` defaults to
   ``~/.cache/tt_zoo``);
3. at its URL: ``$TT_ZOO_BASE_URL/<artifact>`` when that variable is set, else the ``url`` its
   registry entry records (``tt_zoo/zoo/shipped_models.json``). The files are downloaded into
   the cache: first ``metadata.json``, whose file manifest must hash to the registry's sha256
   before anything else is fetched; then every file it lists (with a progress bar) and
   ``MODEL_CARD.md``, into a temp folder beside the cache entry, each checked against its size
   and sha256; the folder is renamed into place only when complete
   (`tt_zoo.atomic_io.write_directory`), so a cut or damaged download is never taken for a
   model. A download has a deadline (`deadline_s`: by default one a connection of
   `MIN_RATE` bytes a second meets, ``$TT_ZOO_DOWNLOAD_DEADLINE_S`` seconds when set), so a
   server that stalls or trickles ends in a `DownloadError`, never a hang.

A replace of either folder killed between its two renames is put back first
(`tt_zoo.atomic_io.recover_replaced`), as a load by path does.

`RELEASE_BASE_URL` is where tt_zoo's releases are to publish ``saved_models/``; **nothing is
published there yet** (the host is not chosen, and the placeholder's reserved ``.invalid``
domain never resolves), so today a model loads from a git clone, from files placed in the
cache by hand, or from a mirror named by ``TT_ZOO_BASE_URL`` (any folder served over HTTP(S),
or a ``file://`` URL, laid out like ``saved_models/``). Offline, the error names the URL that
failed and the folder where the files may be placed.
"""

from __future__ import annotations

import http.client
import math
import os
import pathlib
import posixpath
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from tt_zoo.atomic_io import recover_replaced
# The cache folder ($TT_ZOO_HOME): models are downloaded into its models/.
from tt_zoo.cache import HOME_ENV, home
from tt_zoo.errors import ArtifactError, DownloadError

BASE_URL_ENV = "TT_ZOO_BASE_URL"
# Where a release is to publish saved_models/ (one folder per artifact). A placeholder: no
# release is published yet and the host is not chosen (RFC 2606's `.invalid` never resolves).
# The ship stage of `tt-zoo reproduce` records `<RELEASE_BASE_URL>/<artifact>` per model.
RELEASE_BASE_URL = "https://tt-zoo-releases.invalid/v0.1.0/saved_models"
URL_SCHEMES = ("https", "http", "file")  # what $TT_ZOO_BASE_URL may name
TIMEOUT_S = 60  # per connection attempt and per read
# A download's deadline: TIMEOUT_S, plus its bytes at MIN_RATE (100 MiB: about 17 minutes), or
# $TT_ZOO_DOWNLOAD_DEADLINE_S seconds. A server that sends a byte now and then never trips the
# per-read timeout; the deadline ends it.
DEADLINE_ENV = "TT_ZOO_DOWNLOAD_DEADLINE_S"
MIN_RATE = 100 * 1024  # bytes a second
_CHUNK = 1 << 20
_MAX_METADATA_BYTES = 16 << 20


def cache_path(artifact: str) -> pathlib.Path:
    """Where a downloaded artifact is kept (and where its files may be placed by hand)."""
    return home() / "models" / artifact


def in_cache(path) -> bool:
    """Whether `path` is inside tt_zoo's cache folder."""
    return pathlib.Path(path).resolve().is_relative_to(home().resolve())


def release_url(artifact: str) -> str:
    """The URL a release publishes `artifact`'s folder at (not published yet: `RELEASE_BASE_URL`)."""
    return f"{RELEASE_BASE_URL}/{artifact}"


def artifact_url(spec) -> str:
    """The folder URL a shipped model downloads from: ``$TT_ZOO_BASE_URL/<artifact>`` if set,
    else its registry entry's ``url``, else `release_url`."""
    base = (os.environ.get(BASE_URL_ENV) or "").strip()
    if base:
        try:
            scheme = urllib.parse.urlsplit(base).scheme.lower()
        except ValueError:  # e.g. "http://[::1": an unclosed IPv6 host
            scheme = None
        if scheme not in URL_SCHEMES:
            raise DownloadError(f"{BASE_URL_ENV}={base!r} is not a URL tt_zoo can download "
                                f"from: expected {', '.join(f'{s}://' for s in URL_SCHEMES)} "
                                "and a folder laid out like saved_models/ (e.g. "
                                "https://host/tt_zoo/saved_models or file:///data/saved_models); "
                                f"unset {BASE_URL_ENV} to use the registry's URL.")
        return f"{base.rstrip('/')}/{spec.artifact}"
    return (spec.url or release_url(spec.artifact)).rstrip("/")


def locate(spec) -> pathlib.Path:
    """The folder of a shipped model's files: the clone's ``saved_models/<artifact>``, else the
    cache's, else the cache's after `download_export`. The caller verifies it
    (`tt_zoo.artifacts.export.verify_export`)."""
    clone = spec.artifact_path
    if clone is not None:
        recover_replaced(clone)  # a ship killed between its renames: the old version is back
        if clone.is_dir():
            return clone
    cached = cache_path(spec.artifact)
    recover_replaced(cached)
    if cached.is_dir() and any(cached.iterdir()):  # an empty folder is filled, not refused
        return cached
    return download_export(spec, cached)


def _file_url(base: str, relpath: str) -> str:
    return f"{base}/{urllib.parse.quote(relpath)}"


def _safe_relpath(relpath: str, listed_in: str) -> str:
    if (not isinstance(relpath, str) or posixpath.normpath(relpath) != relpath
            or relpath.startswith("/") or relpath.split("/")[0] == ".."):
        raise ArtifactError(f"{listed_in} lists {relpath!r}, which is not a relative path "
                            "inside the export.")
    return relpath


def _offline_message(spec, url: str, reason, dest: pathlib.Path) -> str:
    folder = artifact_url(spec)
    unpublished = ("" if os.environ.get(BASE_URL_ENV) or not folder.startswith(RELEASE_BASE_URL)
                   else " (tt_zoo's release location is not published yet: today the weights "
                        "ship in the git clone's saved_models/)")
    return (f"Could not download {spec.name!r}: {url} failed ({reason}){unpublished}. Place the "
            f"files of {folder}/ (the folder saved_models/{spec.artifact} of a tt_zoo git clone) "
            f"in {dest} by hand, or set {BASE_URL_ENV} to a reachable copy of saved_models/.")


def deadline_s(num_bytes: int) -> float:
    """Seconds a download of `num_bytes` may take: ``$TT_ZOO_DOWNLOAD_DEADLINE_S`` when set (a
    number above 0), else `TIMEOUT_S` plus the bytes at `MIN_RATE`."""
    given = os.environ.get(DEADLINE_ENV, "").strip()
    if not given:
        return TIMEOUT_S + num_bytes / MIN_RATE
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise DownloadError(f"{DEADLINE_ENV}={given!r} must be a number of seconds above 0 "
                            f"(unset it for the default: {TIMEOUT_S} s plus 1 s per "
                            f"{MIN_RATE // 1024} KiB).")
    return seconds


class _Deadline:
    """When a download must be done (`time.monotonic`), and the error once it is past."""

    def __init__(self, num_bytes: int):
        self.seconds = deadline_s(num_bytes)
        self.start = time.monotonic()

    def extend_to(self, num_bytes: int) -> None:
        """The deadline of `num_bytes` in all (once the manifest gives the total)."""
        self.seconds = deadline_s(num_bytes)

    def left(self) -> float:
        return self.start + self.seconds - time.monotonic()

    def check(self, spec, url: str, size: int, dest: pathlib.Path) -> None:
        if self.left() <= 0:
            rule = (f"{DEADLINE_ENV}" if os.environ.get(DEADLINE_ENV, "").strip() else
                    f"{TIMEOUT_S} s plus 1 s per {MIN_RATE // 1024} KiB; set {DEADLINE_ENV} "
                    "to allow more")
            raise DownloadError(_offline_message(
                spec, url, f"too slow: {size:,} bytes in {time.monotonic() - self.start:.1f} s, "
                f"past the download's deadline of {self.seconds:g} s ({rule})", dest))


def _open(spec, url: str, dest: pathlib.Path, deadline: _Deadline):
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "tt_zoo"})
        timeout = max(min(TIMEOUT_S, deadline.left()), 0.1)
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        raise DownloadError(_offline_message(spec, url, f"HTTP {e.code} {e.reason}", dest)) from e
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise DownloadError(_offline_message(spec, url, reason, dest)) from e


def _fetch(spec, url: str, target: pathlib.Path, dest: pathlib.Path, limit: int,
           deadline: _Deadline, progress=None) -> None:
    """Streams `url` into `target`, refusing more than `limit` bytes or a stream still going
    at `deadline`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    with _open(spec, url, dest, deadline) as response, open(target, "wb") as f:
        while True:
            deadline.check(spec, url, size, dest)
            try:
                block = response.read1(_CHUNK)  # what has arrived: the deadline is checked
            except (OSError, http.client.HTTPException) as e:
                raise DownloadError(_offline_message(spec, url, e, dest)) from e
            if not block:
                break
            size += len(block)
            if size > limit:
                raise ArtifactError(f"{url} is corrupted: it holds more than the {limit} bytes "
                                    f"expected. Nothing was saved in {dest}.")
            f.write(block)
            if progress is not None:
                progress.update(len(block))


def download_export(spec, dest: pathlib.Path) -> pathlib.Path:
    """Downloads a shipped model's export folder from `artifact_url(spec)` into `dest`.

    metadata.json comes first: its file manifest must hash to the registry's sha256
    (`tt_zoo.manifest.manifest_digest`), else nothing more is fetched. Then every listed file,
    with a progress bar, each checked against its size and sha256, and MODEL_CARD.md. All of it
    is built in a temp folder beside `dest` and renamed to `dest` only when complete.

    Raises:
      DownloadError: the server cannot be reached or answers with an error (names the URL and
        `dest`, where the files may be placed by hand).
      ArtifactError: what the server sent does not match the registry (names the file);
        nothing is left in `dest`.
    """
    import json

    from tqdm.auto import tqdm

    from tt_zoo.atomic_io import write_directory
    from tt_zoo.modeling.inference import bar_where_read  # (TensorFlow: only when downloading)
    from tt_zoo.artifacts.export import METADATA_FILE, MODEL_CARD_FILE, is_model_export
    from tt_zoo.manifest import manifest_digest, verify_file

    base = artifact_url(spec)
    meta_url = _file_url(base, METADATA_FILE)

    deadline = _Deadline(_MAX_METADATA_BYTES)

    def build(staging: pathlib.Path) -> None:
        _fetch(spec, meta_url, staging / METADATA_FILE, dest, _MAX_METADATA_BYTES, deadline)
        try:
            files = json.loads((staging / METADATA_FILE).read_text(encoding="utf-8"))["files"]
            digest = manifest_digest(files)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ArtifactError(f"{meta_url} is not a tt_zoo export's metadata with a file "
                                f"manifest ({type(e).__name__}: {e}). Nothing was saved in "
                                f"{dest}.") from e
        if digest != spec.sha256:
            raise ArtifactError(
                f"{meta_url} describes other files than the registry's {spec.name!r}: its file "
                f"manifest hashes to {digest[:16]}…, the registry records {spec.sha256[:16]}…. "
                f"Nothing was fetched into {dest}.")
        total = sum(int(entry["size"]) for entry in files.values())
        deadline.extend_to(total + _MAX_METADATA_BYTES)
        print(f"tt_zoo: downloading {spec.name} ({total / 2**20:.1f} MiB) from {base}/ to {dest}",
              file=sys.stderr)
        with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                  desc=spec.name, **bar_where_read()) as progress:
            for relpath, entry in sorted(files.items()):
                relpath = _safe_relpath(relpath, meta_url)
                url = _file_url(base, relpath)
                _fetch(spec, url, staging / relpath, dest, int(entry["size"]), deadline,
                       progress)
                try:
                    verify_file(staging / relpath, entry, listed_in=meta_url)
                except ArtifactError as e:
                    raise ArtifactError(f"The download of {url} is damaged: {e} Nothing was "
                                        f"saved in {dest}.") from e
        _fetch(spec, _file_url(base, MODEL_CARD_FILE), staging / MODEL_CARD_FILE, dest,
               _MAX_METADATA_BYTES, deadline)

    return write_directory(dest, build, is_replaceable=is_model_export,
                           what="tt_zoo model export")


__all__ = ["HOME_ENV", "BASE_URL_ENV", "DEADLINE_ENV", "RELEASE_BASE_URL", "home",
           "cache_path", "in_cache", "release_url", "artifact_url", "locate", "deadline_s",
           "download_export"]
