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
   model.

`RELEASE_BASE_URL` is where tt_zoo's releases are to publish ``saved_models/``; **nothing is
published there yet** (the host is not chosen, and the placeholder's reserved ``.invalid``
domain never resolves), so today a model loads from a git clone, from files placed in the
cache by hand, or from a mirror named by ``TT_ZOO_BASE_URL`` (any folder served over HTTP(S),
or a ``file://`` URL, laid out like ``saved_models/``). Offline, the error names the URL that
failed and the folder where the files may be placed.
"""

from __future__ import annotations

import http.client
import os
import pathlib
import posixpath
import sys
import urllib.error
import urllib.parse
import urllib.request

from tt_zoo.errors import ArtifactError, DownloadError

HOME_ENV = "TT_ZOO_HOME"
DEFAULT_HOME = pathlib.Path("~") / ".cache" / "tt_zoo"
BASE_URL_ENV = "TT_ZOO_BASE_URL"
# Where a release is to publish saved_models/ (one folder per artifact). A placeholder: no
# release is published yet and the host is not chosen (RFC 2606's `.invalid` never resolves).
# The ship stage of `tt-zoo reproduce` records `<RELEASE_BASE_URL>/<artifact>` per model.
RELEASE_BASE_URL = "https://tt-zoo-releases.invalid/v0.1.0/saved_models"
URL_SCHEMES = ("https", "http", "file")  # what $TT_ZOO_BASE_URL may name
TIMEOUT_S = 60  # per connection attempt and per read
_CHUNK = 1 << 20
_MAX_METADATA_BYTES = 16 << 20


def home() -> pathlib.Path:
    """tt_zoo's cache folder: ``$TT_ZOO_HOME``, default ``~/.cache/tt_zoo``."""
    return pathlib.Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


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
    base = os.environ.get(BASE_URL_ENV)
    if base:
        if urllib.parse.urlsplit(base.strip()).scheme.lower() not in URL_SCHEMES:
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
    (`tt_zoo.serving.export.verify_export`)."""
    clone = spec.artifact_path
    if clone is not None and clone.is_dir():
        return clone
    cached = cache_path(spec.artifact)
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


def _open(spec, url: str, dest: pathlib.Path):
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "tt_zoo"})
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        raise DownloadError(_offline_message(spec, url, f"HTTP {e.code} {e.reason}", dest)) from e
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise DownloadError(_offline_message(spec, url, reason, dest)) from e


def _fetch(spec, url: str, target: pathlib.Path, dest: pathlib.Path, limit: int,
           progress=None) -> None:
    """Streams `url` into `target`, refusing more than `limit` bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    with _open(spec, url, dest) as response, open(target, "wb") as f:
        while True:
            try:
                block = response.read(_CHUNK)
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
    from tt_zoo.serving.export import METADATA_FILE, MODEL_CARD_FILE, is_model_export
    from tt_zoo.manifest import manifest_digest, verify_file

    base = artifact_url(spec)
    meta_url = _file_url(base, METADATA_FILE)

    def build(staging: pathlib.Path) -> None:
        _fetch(spec, meta_url, staging / METADATA_FILE, dest, _MAX_METADATA_BYTES)
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
        print(f"tt_zoo: downloading {spec.name} ({total / 2**20:.1f} MiB) from {base}/ to {dest}",
              file=sys.stderr)
        with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                  desc=spec.name, **bar_where_read()) as progress:
            for relpath, entry in sorted(files.items()):
                relpath = _safe_relpath(relpath, meta_url)
                url = _file_url(base, relpath)
                _fetch(spec, url, staging / relpath, dest, int(entry["size"]), progress)
                try:
                    verify_file(staging / relpath, entry, listed_in=meta_url)
                except ArtifactError as e:
                    raise ArtifactError(f"The download of {url} is damaged: {e} Nothing was "
                                        f"saved in {dest}.") from e
        _fetch(spec, _file_url(base, MODEL_CARD_FILE), staging / MODEL_CARD_FILE, dest,
               _MAX_METADATA_BYTES)

    return write_directory(dest, build, is_replaceable=is_model_export,
                           what="tt_zoo model export")


__all__ = ["HOME_ENV", "BASE_URL_ENV", "RELEASE_BASE_URL", "home", "cache_path", "in_cache",
           "release_url", "artifact_url", "locate", "download_export"]
