"""Reading the text files `tt-zoo encode`, `tt-zoo search`, `tt-zoo export --corpus` and
`tt-zoo index-corpus` take.

Three formats, told apart by the file's extension:

- ``.jsonl``: one JSON object a line, ``{"text": ...}`` with optional ``"title"`` and ``"id"``
  (BEIR's ``"_id"`` is read as the id);
- ``.tsv``: a header line naming the columns (``text``, and optionally ``title`` and ``id``),
  then one tab-separated row a line (no quoting: a field holds no tab or newline);
- ``.txt``: one text a line.

Blank lines are skipped. Ids, when given, are given for every record and are unique; without
them a record's id is its position (``"0"``, ``"1"``, ...: `tt_zoo.retrieval.search.default_ids`).
A malformed record raises `TextFileError` naming the file and the line.

A folder in BEIR's layout (Thakur et al. 2021: ``corpus.jsonl`` of ``{"_id", "title", "text"}``,
``queries.jsonl``, ``qrels/test.tsv``) is read as it is: `read_texts` of the folder reads its
``corpus.jsonl``, `read_topics` of it its ``queries.jsonl`` (`beir_file` names the files).

`read_texts` reads a whole file; `read_topics` a file of queries with their ids (a run's
topics); `parse_jsonl_line` and `record_fields` read one JSON line, for a
reader that gets lines one at a time (the Beam pipeline of `tt_zoo.serving.corpus_index`).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Iterator, List, Optional, Tuple

from tt_zoo.errors import TtZooError

FORMATS = (".jsonl", ".tsv", ".txt")
COLUMNS = ("id", "title", "text")


class TextFileError(TtZooError):
    """A text file that cannot be read as records; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Texts:
    """The records of a text file, in order: `ids` is None when the file gives none."""

    texts: List[str]
    titles: List[str]
    ids: Optional[List[str]]
    path: str

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def has_titles(self) -> bool:
        return any(self.titles)

    def ids_or_positions(self) -> List[str]:
        return self.ids if self.ids is not None else [str(i) for i in range(len(self.texts))]


def _lines(path: pathlib.Path) -> Iterator[Tuple[int, str]]:
    """(line number, line without its end) of each non-blank line."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise TextFileError(f"{path}:{number}: not UTF-8 text ({e.reason} at byte "
                                    f"{e.start}).") from e
            if line.strip():
                yield number, line


def parse_jsonl_line(line: str, where: str) -> dict:
    """One line of a .jsonl file as its JSON object; `where` ("file:line") starts the message of
    the `TextFileError` a malformed line raises."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise TextFileError(f"{where}: not valid JSON ({e.msg} at column {e.colno}).") from e
    if not isinstance(record, dict):
        raise TextFileError(f"{where}: expected a JSON object with a \"text\" string "
                            f"(got {type(record).__name__}).")
    return record


def _jsonl(path: pathlib.Path) -> Iterator[Tuple[int, dict]]:
    for number, line in _lines(path):
        yield number, parse_jsonl_line(line, f"{path}:{number}")


def _tsv(path: pathlib.Path) -> Iterator[Tuple[int, dict]]:
    lines = _lines(path)
    header = next(lines, None)
    if header is None:
        return
    number, line = header
    columns = line.split("\t")
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or "text" not in columns or len(set(columns)) != len(columns):
        raise TextFileError(f"{path}:{number}: the first line must name the tab-separated "
                            f"columns: text, and optionally title and id, each once "
                            f"(got {columns}).")
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) != len(columns):
            raise TextFileError(f"{path}:{number}: {len(fields)} tab-separated fields where "
                                f"the header names {len(columns)} ({', '.join(columns)}).")
        yield number, dict(zip(columns, fields))


def _txt(path: pathlib.Path) -> Iterator[Tuple[int, dict]]:
    for number, line in _lines(path):
        yield number, {"text": line}


_READERS = {".jsonl": _jsonl, ".tsv": _tsv, ".txt": _txt}


def record_fields(record: dict, where: str) -> Tuple[str, str, Optional[str]]:
    """``(text, title, id)`` of one record (a JSON object or a TSV row as a dict): "text" a
    string, "title" a string (default ""), "id" None or a string or an integer, returned as a
    non-empty string without tab or newline. Raises `TextFileError` starting with `where`."""
    text, title = record.get("text"), record.get("title", "")
    record_id = record.get("id", record.get("_id"))
    if not isinstance(text, str):
        raise TextFileError(f"{where}: expected a \"text\" string "
                            f"(got {type(text).__name__ if 'text' in record else 'none'}).")
    if not isinstance(title, str):
        raise TextFileError(f"{where}: \"title\" must be a string "
                            f"(got {type(title).__name__}).")
    if isinstance(record_id, bool) or not isinstance(record_id, (str, int, type(None))):
        raise TextFileError(f"{where}: \"id\" must be a string or an integer "
                            f"(got {type(record_id).__name__}).")
    if record_id is not None:
        record_id = str(record_id)
        if not record_id or any(c in record_id for c in "\t\r\n"):
            raise TextFileError(f"{where}: id {record_id!r} is empty or holds a tab or "
                                "newline.")
    return text, title, record_id


def read_texts(path, what: str = "texts") -> Texts:
    """The records of a .jsonl, .tsv or .txt file (see the module docstring).

    Raises:
      TextFileError: a missing, empty or unknown kind of file, or a malformed record, named
        with its line.
    """
    path = beir_file(path, "queries" if what == "queries" else "corpus")
    if path.suffix.lower() not in _READERS:
        raise TextFileError(f"{path}: expected a {', '.join(FORMATS)} file of {what} "
                            f"(got '{path.suffix or 'no extension'}').")
    if not path.is_file():
        raise TextFileError(f"{path}: no such file.")
    texts, titles, ids, id_lines, first_line = [], [], [], {}, None
    for number, record in _READERS[path.suffix.lower()](path):
        first_line = first_line or number
        text, title, record_id = record_fields(record, f"{path}:{number}")
        if texts and (record_id is None) != (not ids):
            raise TextFileError(f"{path}:{number}: give an \"id\" for every record or for none "
                                f"(line {first_line} {'has one' if ids else 'has none'}).")
        if record_id is not None:
            if record_id in id_lines:
                raise TextFileError(f"{path}:{number}: id {record_id!r} repeats line "
                                    f"{id_lines[record_id]}; ids must be unique.")
            id_lines[record_id] = number
            ids.append(record_id)
        texts.append(text)
        titles.append(title)
    if not texts:
        raise TextFileError(f"{path}: holds no {what}.")
    return Texts(texts, titles, ids or None, str(path))


# -- BEIR folders and topics ----------------------------------------------------------------------

BEIR_FILES = {"corpus": "corpus.jsonl", "queries": "queries.jsonl",
              "qrels": pathlib.Path("qrels") / "test.tsv"}
# The fields a topic's id and text may have (BEIR and tt_zoo: _id / id, text; others: qid, query).
TOPIC_ID_FIELDS = ("_id", "id", "qid", "query_id")
TOPIC_TEXT_FIELDS = ("text", "query")


def beir_file(path, part: str) -> pathlib.Path:
    """`path` itself, or the file of `part` ("corpus", "queries", "qrels") inside a folder in
    BEIR's layout (`BEIR_FILES`)."""
    path = pathlib.Path(path)
    if path.is_dir():
        inner = path / BEIR_FILES[part]
        if not inner.is_file():
            raise TextFileError(f"{path} is a folder without {BEIR_FILES[part]} (a BEIR folder "
                                f"holds {', '.join(str(f) for f in BEIR_FILES.values())}).")
        return inner
    return path


def read_topics(path) -> Tuple[List[str], List[str]]:
    """``(ids, texts)`` of the queries of a run: a .jsonl of ``{"_id" or "id" or "qid", "text"
    or "query"}`` lines (BEIR's queries.jsonl), a .tsv of ``id<TAB>text`` lines (MS MARCO's
    queries; a header line naming ``id`` and ``text`` is read as one), or a BEIR folder (its
    queries.jsonl). Ids are unique, without tab, newline or space (a TREC run's columns).

    Raises:
      TextFileError: naming the file and line of a malformed topic.
    """
    path = beir_file(path, "queries")
    if path.suffix.lower() not in (".jsonl", ".tsv"):
        raise TextFileError(f"{path}: expected a .jsonl or .tsv file of topics "
                            f"(got '{path.suffix or 'no extension'}').")
    if not path.is_file():
        raise TextFileError(f"{path}: no such file.")
    ids, texts, seen = [], [], {}
    for number, line in _lines(path):
        where = f"{path}:{number}"
        if path.suffix.lower() == ".jsonl":
            record = parse_jsonl_line(line, where)
            topic_id = next((record[f] for f in TOPIC_ID_FIELDS if f in record), None)
            text = next((record[f] for f in TOPIC_TEXT_FIELDS if f in record), None)
        else:
            fields = line.split("\t")
            if len(fields) != 2:
                raise TextFileError(f"{where}: expected 2 tab-separated fields, id and text "
                                    f"(got {len(fields)}).")
            if not ids and [f.strip().lower() for f in fields] in (["id", "text"],
                                                                   ["qid", "query"]):
                continue  # a header line
            topic_id, text = fields
        if isinstance(topic_id, bool) or not isinstance(topic_id, (str, int)):
            raise TextFileError(f"{where}: a topic needs an id ({', '.join(TOPIC_ID_FIELDS)}: a "
                                "string or an integer).")
        topic_id = str(topic_id)
        if not topic_id or any(c.isspace() for c in topic_id):
            raise TextFileError(f"{where}: topic id {topic_id!r} is empty or holds white space "
                                "(a TREC run's columns are separated by it).")
        if not isinstance(text, str) or not text.strip():
            raise TextFileError(f"{where}: topic {topic_id!r} has no text "
                                f"({' or '.join(TOPIC_TEXT_FIELDS)}).")
        if topic_id in seen:
            raise TextFileError(f"{where}: topic id {topic_id!r} repeats line {seen[topic_id]}.")
        seen[topic_id] = number
        ids.append(topic_id)
        texts.append(text)
    if not ids:
        raise TextFileError(f"{path}: holds no topics.")
    return ids, texts
