"""Every document's token vectors of a corpus, stored flat, for late interaction (ColBERT).

Khattab & Zaharia, SIGIR 2020, Sec. 3.4 ("Offline indexing"): documents are encoded once and
their token vectors (padding and punctuation dropped) saved with 16 (or 32) bits a dimension,
then read back by re-ranking (Sec. 3.5) and by the token index (Sec. 3.6).

A `TokenStore` is `vectors` `[total_tokens, m]` (float16 by default, float32 optional) and
`offsets` int64 `[num_docs + 1]`: document i is `vectors[offsets[i]:offsets[i + 1]]`; and the
documents' ids. On disk (a directory):

    token_store.json   format, dtype, dim, counts, encoder name, the sha256 manifest of the rest
    vectors.bin        the raw little-endian vectors, row-major (memory-mapped on load)
    offsets.npy        int64 [num_docs + 1]
    ids.txt            UTF-8, one id per line

`TokenStore.build` encodes a corpus chunk by chunk into ``.NAME.partial/`` beside the target
(appending to vectors.bin and recording each finished chunk in a state file), so a killed build
rerun with the same inputs continues after the last finished chunk; a finished chunk is never
encoded or written again. When every chunk is done the files move into the final directory
(`tt_zoo.atomic_io.write_directory`: temp, manifest last, rename) and the partial folder goes.

Size: m * 2 bytes per token in float16 (+ 8 bytes per document of offsets): 128 dims x ~130
tokens of a 100-word passage = 33 KB a passage (`bytes_per_passage`); the token index's
module (`tt_zoo.retrieval.token_index`) says where that stops fitting.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import sys
from typing import Callable, Optional, Sequence

import numpy as np

from tt_zoo.atomic_io import check_replaceable, write_directory, write_json
from tt_zoo.errors import ArtifactError
from tt_zoo.manifest import describe_files, manifest_digest, verify_files
from tt_zoo.retrieval.late_interaction import check_token_vectors, flatten, gather_flat
from tt_zoo.retrieval.search import check_ids, default_ids

STORE_FORMAT = "tt_zoo.TokenStore"
STORE_FORMAT_VERSION = 1
CONFIG_FILE = "token_store.json"
VECTORS_FILE = "vectors.bin"
OFFSETS_FILE = "offsets.npy"
IDS_FILE = "ids.txt"
LENGTHS_FILE = "lengths.bin"  # int64 per document, only while building
STATE_FILE = "state.json"  # only while building
DTYPES = {"float16": np.dtype("<f2"), "float32": np.dtype("<f4")}


class TokenStoreError(ArtifactError):
    """A saved token store is missing a file, holds a corrupt one, or does not match its
    manifest."""


def _check_dtype(dtype: str) -> np.dtype:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)} (got {dtype!r}).")
    return DTYPES[dtype]


def _is_store(path: pathlib.Path) -> bool:
    return (pathlib.Path(path) / CONFIG_FILE).is_file()


class TokenStore:
    """The token vectors of every document of a corpus, flat with offsets (ColBERT Sec. 3.4).

    Args:
      vectors: float `[total_tokens, m]` (kept as float16 or float32, `dtype`).
      offsets: int `[num_docs + 1]`, from 0 to `total_tokens`, non-decreasing.
      ids: one unique str id per document; default their positions.
      dtype: "float16" (default) or "float32".
      encoder: a name for the document encoder, recorded on save.

    Build one with `TokenStore.from_documents` (in memory) or `TokenStore.build` (a corpus,
    in resumable chunks, to disk); `TokenStore.load` memory-maps a saved one.

    Example:
    >>> store = TokenStore.from_documents([np.eye(2), np.ones((1, 2))], ids=["a", "b"])
    >>> len(store), store.num_tokens, store.dim, store.document(1)
    (2, 3, 2, array([[1., 1.]], dtype=float16))
    """

    def __init__(self, vectors, offsets, ids: Optional[Sequence[str]] = None, *,
                 dtype: str = "float16", encoder: str = ""):
        np_dtype = _check_dtype(dtype)
        vectors = check_token_vectors(vectors, "document token vectors")
        if vectors.shape[1] == 0:
            raise ValueError(f"The document token vectors have no dimensions ({vectors.shape}).")
        offsets = np.asarray(offsets, np.int64)
        if (offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0
                or offsets[-1] != vectors.shape[0] or (np.diff(offsets) < 0).any()):
            raise ValueError(f"offsets must be [num_docs + 1] rising from 0 to the number of "
                             f"token vectors ({vectors.shape[0]}) (got shape {offsets.shape}).")
        if vectors.dtype != np_dtype:
            vectors = vectors.astype(np_dtype)
        self.vectors = vectors
        self.offsets = offsets
        self.lengths = np.diff(offsets)
        self.dtype = dtype
        self.encoder = encoder
        num = offsets.size - 1
        self.ids = tuple(check_ids(default_ids(num) if ids is None else ids, num))

    @classmethod
    def from_documents(cls, documents: Sequence[np.ndarray], ids=None, *,
                       dtype: str = "float16", encoder: str = "") -> "TokenStore":
        """A store of `documents`, one float `[n_i, m]` array each."""
        vectors, offsets = flatten(documents)
        return cls(vectors, offsets, ids, dtype=dtype, encoder=encoder)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __repr__(self) -> str:
        return (f"TokenStore(num_docs={len(self)}, num_tokens={self.num_tokens}, dim={self.dim}, "
                f"dtype={self.dtype!r}, bytes_per_passage={self.bytes_per_passage:,.0f})")

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def num_tokens(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the vectors and offsets (what `load` maps; ids not counted)."""
        return int(self.num_tokens * self.dim * self.vectors.itemsize + self.offsets.nbytes)

    @property
    def bytes_per_passage(self) -> float:
        return self.nbytes / len(self)

    def document(self, row: int) -> np.ndarray:
        """The token vectors `[n, m]` of document `row` (a view)."""
        return self.vectors[self.offsets[row]:self.offsets[row + 1]]

    def gather(self, rows):
        """The documents `rows` as their own flat `(vectors [tokens, m], offsets)` (a copy,
        in this store's dtype), for `tt_zoo.retrieval.late_interaction.maxsim_flat`."""
        rows = np.asarray(rows, np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self)):
            raise ValueError(f"Document rows must be in [0, {len(self)}) (got {rows.min()} .. "
                             f"{rows.max()}).")
        return gather_flat(self.vectors, self.offsets, self.lengths, rows)

    @property
    def files(self) -> dict:
        """The saved store's manifest (set by `load`; empty for an unsaved store)."""
        return getattr(self, "_files", {})

    @property
    def digest(self) -> str:
        """The sha256 of the saved store's manifest (`tt_zoo.manifest.manifest_digest`): its
        identity, which a `TokenIndex` records. Only for a saved (loaded) store."""
        if not self.files:
            raise ValueError("This token store was not loaded from disk; save and load it to "
                             "give it a digest.")
        return manifest_digest(self.files)

    # -- saving and loading ---------------------------------------------------------------------
    def save(self, path, overwrite: bool = False) -> pathlib.Path:
        """Writes the store to directory `path` (temp directory, manifest last, rename)."""

        def build(tmp: pathlib.Path) -> None:
            with open(tmp / VECTORS_FILE, "wb") as f:
                for start in range(0, self.num_tokens, 1 << 16):
                    f.write(np.ascontiguousarray(self.vectors[start:start + (1 << 16)]).tobytes())
            _finish(tmp, self.offsets, self.ids, self.dim, self.dtype, self.encoder)

        return write_directory(path, build, overwrite=overwrite, what="saved tt_zoo TokenStore",
                               is_replaceable=_is_store)

    @classmethod
    def load(cls, path, check: str = "sha256") -> "TokenStore":
        """Memory-maps a store written by `save` or `build`, after checking every file against
        its manifest (`check`: "sha256", "size" or "none", as `tt_zoo.manifest.verify_files`)."""
        root = pathlib.Path(path)
        config_file = root / CONFIG_FILE
        if not config_file.is_file():
            raise TokenStoreError(f"{config_file} is missing; is {root} a saved tt_zoo "
                                  "TokenStore?")
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
            if config.get("format") != STORE_FORMAT:
                raise ValueError(f"format is {config.get('format')!r}, expected {STORE_FORMAT!r}")
            if config.get("format_version") != STORE_FORMAT_VERSION:
                raise ValueError(f"format_version {config.get('format_version')!r} is not "
                                 f"{STORE_FORMAT_VERSION}")
            num, num_tokens, dim = (int(config["num_docs"]), int(config["num_tokens"]),
                                    int(config["dim"]))
            np_dtype, files = _check_dtype(config["dtype"]), dict(config["files"])
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError, KeyError, TypeError,
                ValueError) as e:
            raise TokenStoreError(f"{config_file} is malformed: {e}") from e
        missing = {VECTORS_FILE, OFFSETS_FILE, IDS_FILE} - set(files)
        if missing:
            raise TokenStoreError(f"{config_file} lists no {sorted(missing)}.")
        verify_files(root, files, listed_in=config_file, check=check, error=TokenStoreError)

        expected_bytes = num_tokens * dim * np_dtype.itemsize
        if os.path.getsize(root / VECTORS_FILE) != expected_bytes:
            raise TokenStoreError(f"{root / VECTORS_FILE} has "
                                  f"{os.path.getsize(root / VECTORS_FILE)} bytes; {config_file} "
                                  f"says {num_tokens} x {dim} {config['dtype']} "
                                  f"({expected_bytes} bytes).")
        vectors = (np.memmap(root / VECTORS_FILE, dtype=np_dtype, mode="r",
                             shape=(num_tokens, dim)) if num_tokens
                   else np.zeros((0, dim), np_dtype))
        try:
            offsets = np.load(root / OFFSETS_FILE, allow_pickle=False)
        except ValueError as e:
            raise TokenStoreError(f"{root / OFFSETS_FILE} is not a plain .npy array: {e}") from e
        ids = (root / IDS_FILE).read_text(encoding="utf-8").split("\n")
        if ids and ids[-1] == "":
            ids.pop()
        if offsets.shape != (num + 1,) or len(ids) != num:
            raise TokenStoreError(f"{root} holds {offsets.shape} offsets and {len(ids)} ids; "
                                  f"{config_file} says {num} documents.")
        try:
            store = cls(vectors, offsets, ids, dtype=config["dtype"],
                        encoder=config.get("encoder", ""))
        except ValueError as e:
            raise TokenStoreError(f"{root} is inconsistent: {e}") from e
        store._files = files
        return store

    @classmethod
    def build(cls, path, encode_document_tokens: Callable, texts: Sequence[str],
              titles: Optional[Sequence[str]] = None, ids: Optional[Sequence[str]] = None, *,
              chunk: int = 4096, dtype: str = "float16", encoder: str = "",
              progress: bool = True, overwrite: bool = False) -> "TokenStore":
        """Encodes `texts` (and `titles`) `chunk` documents at a time into a store at `path`,
        resumably, and returns it loaded (memory-mapped).

        Args:
          path: the store's directory; ``.NAME.partial/`` beside it holds an unfinished build.
          encode_document_tokens: `(texts, titles=None) -> [float32 [n_i, m]]`.
          texts, titles, ids: the corpus (`ids` default to positions).
          chunk: documents per `encode_document_tokens` call and per committed chunk.
          dtype: "float16" (default) or "float32".
          encoder: the encoder's name; part of what a rerun must match to resume.
          progress: a tqdm bar (on stderr).
          overwrite: replace whatever is at `path` (a saved store is always replaceable).

        A rerun whose inputs (texts, titles, ids, chunk, dtype, encoder) match the partial build
        continues after its last finished chunk; other inputs start over.
        """
        from tqdm.auto import tqdm  # noqa: PLC0415

        path = pathlib.Path(path)
        np_dtype = _check_dtype(dtype)
        texts = list(texts)
        n = len(texts)
        if n == 0:
            raise ValueError("TokenStore.build: no texts to encode.")
        if titles is not None and len(titles) != n:
            raise ValueError(f"TokenStore.build: {len(titles)} titles for {n} texts.")
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive int (got {chunk!r}).")
        ids = check_ids(default_ids(n) if ids is None else ids, n)
        check_replaceable(path, overwrite=overwrite, is_replaceable=_is_store,
                          what="saved tt_zoo TokenStore")
        partial = path.parent / f".{path.name}.partial"
        fingerprint = _fingerprint(texts, titles, ids, chunk, dtype, encoder)
        state = _resume(partial, fingerprint, np_dtype)

        with tqdm(total=n, initial=state["docs"], desc="encode tokens", unit="doc",
                  file=sys.stderr, mininterval=10, disable=not progress) as bar:
            for start in range(state["docs"], n, chunk):
                stop = min(n, start + chunk)
                encoded = list(encode_document_tokens(
                    texts[start:stop], titles=None if titles is None else list(titles[start:stop])))
                vectors, offsets = _check_chunk(encoded, start, stop, state["dim"])
                state["dim"] = vectors.shape[1]
                for name, array in ((VECTORS_FILE, vectors.astype(np_dtype)),
                                    (LENGTHS_FILE, np.diff(offsets).astype("<i8"))):
                    with open(partial / name, "ab") as f:
                        f.write(array.tobytes())
                        f.flush()
                        os.fsync(f.fileno())
                state["docs"], state["tokens"] = stop, state["tokens"] + vectors.shape[0]
                write_json(partial / STATE_FILE, state)  # the chunk is finished once this lands
                bar.update(stop - start)

        lengths = np.fromfile(partial / LENGTHS_FILE, dtype="<i8")
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])

        def finish(tmp: pathlib.Path) -> None:
            os.replace(partial / VECTORS_FILE, tmp / VECTORS_FILE)
            _finish(tmp, offsets, ids, state["dim"], dtype, encoder)

        write_directory(path, finish, overwrite=overwrite, what="saved tt_zoo TokenStore",
                        is_replaceable=_is_store)
        shutil.rmtree(partial, ignore_errors=True)
        return cls.load(path)


# -- building -------------------------------------------------------------------------------------

def _finish(tmp: pathlib.Path, offsets, ids, dim: int, dtype: str, encoder: str) -> None:
    """Writes offsets, ids and, last, the config with the manifest of everything in `tmp`."""
    np.save(tmp / OFFSETS_FILE, np.asarray(offsets, "<i8"), allow_pickle=False)
    with open(tmp / IDS_FILE, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(i + "\n" for i in ids)
    config = {"format": STORE_FORMAT, "format_version": STORE_FORMAT_VERSION, "dtype": dtype,
              "dim": int(dim), "num_docs": len(ids), "num_tokens": int(offsets[-1]),
              "encoder": encoder, "files": describe_files(tmp)}
    write_json(tmp / CONFIG_FILE, config, indent=2, sort_keys=True)


def _fingerprint(texts, titles, ids, chunk: int, dtype: str, encoder: str) -> str:
    """The sha256 of everything a resumed build must share with the interrupted one."""
    digest = hashlib.sha256(json.dumps([chunk, dtype, encoder, len(texts)]).encode())
    for column in (texts, titles or (), ids):
        for value in column:
            digest.update(value.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
        digest.update(b"\x01")
    return digest.hexdigest()


def _resume(partial: pathlib.Path, fingerprint: str, np_dtype: np.dtype) -> dict:
    """The state of the partial build to continue (its files cut back to the last finished
    chunk), or a fresh one in an emptied `partial` folder."""
    state_file = partial / STATE_FILE
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
        if state.get("fingerprint") == fingerprint:
            sizes = {VECTORS_FILE: state["tokens"] * (state["dim"] or 0) * np_dtype.itemsize,
                     LENGTHS_FILE: state["docs"] * 8}
            # Bytes past the recorded sizes belong to a chunk cut short: drop them.
            if all((partial / name).is_file() and (partial / name).stat().st_size >= size
                   for name, size in sizes.items()):
                for name, size in sizes.items():
                    os.truncate(partial / name, size)
                return state
    except (OSError, ValueError, KeyError, TypeError):
        pass
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in (VECTORS_FILE, LENGTHS_FILE):
        (partial / name).touch()
    state = {"fingerprint": fingerprint, "docs": 0, "tokens": 0, "dim": None}
    write_json(partial / STATE_FILE, state)
    return state


def _check_chunk(encoded, start: int, stop: int, dim: Optional[int]):
    """One chunk's encoder output checked (count, shape, finite) and flattened."""
    if len(encoded) != stop - start:
        raise ValueError(f"encode_document_tokens returned {len(encoded)} arrays for documents "
                         f"{start}..{stop - 1} ({stop - start} documents).")
    vectors, offsets = flatten(encoded, dim)
    if not np.isfinite(vectors).all():
        bad = int(np.searchsorted(offsets, np.flatnonzero(~np.isfinite(vectors).all(1))[0],
                                  side="right")) - 1
        raise ValueError(f"The token vectors of document {start + bad} are not finite.")
    return vectors, offsets
