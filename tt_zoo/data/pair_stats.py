"""Table 1 of Chang et al. 2020 (Sec. 4.1) for any pair set: per task #pairs, #tokens,
average query tokens and average document tokens.

Token counts are WordPiece tokens of the towers' own tokenizer
(:meth:`tt_zoo.data.text.TextPreprocessor.count_wordpieces`) over the vocabulary the towers use
(uncased BERT by default), without special tokens:

- query tokens = tokens(query);
- doc tokens = tokens(doc_title) + tokens(doc_text) (the document is the text pair
  "title [SEP] passage", Sec. 3; [CLS]/[SEP] are not counted);
- #tokens = query tokens + doc tokens, summed over the task's pairs.

With ``vocab_file=None`` the counts are whitespace-separated words instead (``token_unit``
says which). The report also carries what the reader skipped (``ReadReport.as_dict()``) and the
generator's skip counters, so a table can be traced back to its input.

Example:

    stats = compute_pair_stats(pairs, vocab_file="vocab.txt", read_report=report)
    print(format_table(stats))
    json.dump(stats.to_json(), f)
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, Iterable, List, Mapping, Optional

import tensorflow as tf
from tqdm.auto import tqdm

from tt_zoo.data import features
from tt_zoo.atomic_io import json_text, write_text
from tt_zoo.data.text import TextPreprocessor

ALL = "all"


@dataclasses.dataclass
class TaskStats:
    """Totals for one task (or ``"all"``); averages are derived."""

    num_pairs: int = 0
    query_tokens: int = 0
    doc_tokens: int = 0

    @property
    def num_tokens(self) -> int:
        return self.query_tokens + self.doc_tokens

    @property
    def avg_query_tokens(self) -> float:
        return self.query_tokens / self.num_pairs if self.num_pairs else 0.0

    @property
    def avg_doc_tokens(self) -> float:
        return self.doc_tokens / self.num_pairs if self.num_pairs else 0.0

    def to_json(self) -> dict:
        return {"num_pairs": self.num_pairs, "num_tokens": self.num_tokens,
                "query_tokens": self.query_tokens, "doc_tokens": self.doc_tokens,
                "avg_query_tokens": self.avg_query_tokens,
                "avg_doc_tokens": self.avg_doc_tokens}


@dataclasses.dataclass
class PairStats:
    """The Table 1 report: per-task rows plus where the pairs came from.

    Args:
      tasks: task name -> totals, in first-seen order; ``ALL`` is computed, not stored.
      token_unit: "wordpiece" or "whitespace".
      vocab_file: the WordPiece vocabulary used, if any.
      read_report: the reader's ``ReadReport.as_dict()`` (kept / skipped by reason).
      generator_counters: the pair generator's skip counters.
      extra: anything else worth keeping beside the table (wall time, pairs/s, source).
    """

    tasks: Dict[str, TaskStats] = dataclasses.field(default_factory=dict)
    token_unit: str = "wordpiece"
    vocab_file: Optional[str] = None
    read_report: Optional[dict] = None
    generator_counters: Optional[dict] = None
    extra: dict = dataclasses.field(default_factory=dict)

    @property
    def total(self) -> TaskStats:
        total = TaskStats()
        for t in self.tasks.values():
            total.num_pairs += t.num_pairs
            total.query_tokens += t.query_tokens
            total.doc_tokens += t.doc_tokens
        return total

    def to_json(self) -> dict:
        return {"tasks": {k: v.to_json() for k, v in self.tasks.items()},
                ALL: self.total.to_json(),
                "token_unit": self.token_unit, "vocab_file": self.vocab_file,
                "read_report": self.read_report,
                "generator_counters": self.generator_counters, "extra": self.extra}

    @classmethod
    def from_json(cls, obj: Mapping) -> "PairStats":
        tasks = {k: TaskStats(v["num_pairs"], v["query_tokens"], v["doc_tokens"])
                 for k, v in obj["tasks"].items()}
        return cls(tasks, obj["token_unit"], obj.get("vocab_file"), obj.get("read_report"),
                   obj.get("generator_counters"), dict(obj.get("extra") or {}))

    def save(self, path: str) -> None:
        """Writes the JSON form to ``path`` via a temporary file and a rename (`write_text`)."""
        write_text(path, json_text(self.to_json(), where=path, indent=2, sort_keys=True))


class TokenCounter:
    """Counts tokens per string: the towers' WordPiece tokens with a vocab file, else words.

    WordPiece counts come from :meth:`tt_zoo.data.text.TextPreprocessor.count_wordpieces`, the
    towers' own tokenizer (same vocabulary handling, same text cleaning), so Table 1 counts the
    tokens the model sees before truncation and special tokens.

    Args:
      vocab_file: a BERT ``vocab.txt``; None counts whitespace-separated words.
      lower_case: lower-case and strip accents first (True for uncased BERT vocabularies).
    """

    def __init__(self, vocab_file: Optional[str] = None, lower_case: bool = True):
        self.vocab_file = None if vocab_file is None else str(vocab_file)
        self.lower_case = lower_case
        self._preprocessor = (None if self.vocab_file is None
                              else TextPreprocessor(self.vocab_file, lower_case=lower_case))

    @property
    def unit(self) -> str:
        return "whitespace" if self.vocab_file is None else "wordpiece"

    def __call__(self, texts: List[str]) -> List[int]:
        if not texts:
            return []
        if self._preprocessor is None:
            return [len(t.split()) for t in texts]
        return self._preprocessor.count_wordpieces(texts, batch_size=len(texts))


class PairStatsAccumulator:
    """Streams pairs into a ``PairStats``, tokenizing ``batch_size`` pairs at a time.

    Accepts ``Pair`` objects or dicts keyed by ``tt_zoo.data.features`` names (str or bytes values),
    so it can run on pairs as they are generated or on a written directory.
    """

    def __init__(self, vocab_file: Optional[str] = None, batch_size: int = 1024,
                 lower_case: bool = True):
        self._counter = TokenCounter(vocab_file, lower_case)
        self.batch_size = batch_size
        self._tasks: Dict[str, TaskStats] = {}
        self._buffer: List[tuple] = []

    def add(self, pair) -> None:
        if isinstance(pair, Mapping):
            fields = tuple(_text(pair[k]) for k in (features.TASK, features.QUERY,
                                                    features.DOC_TITLE, features.DOC_TEXT))
        else:
            fields = (pair.task, pair.query, pair.doc_title, pair.doc_text)
        self._buffer.append(fields)
        if len(self._buffer) >= self.batch_size:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        n = len(self._buffer)
        texts = [f[i] for i in (1, 2, 3) for f in self._buffer]
        counts = self._counter(texts)
        for j, (task, *_) in enumerate(self._buffer):
            row = self._tasks.setdefault(task, TaskStats())
            row.num_pairs += 1
            row.query_tokens += counts[j]
            row.doc_tokens += counts[n + j] + counts[2 * n + j]
        self._buffer = []

    def result(self, read_report: Optional[dict] = None,
               generator_counters: Optional[Mapping] = None) -> PairStats:
        self._flush()
        return PairStats({k: dataclasses.replace(v) for k, v in self._tasks.items()},
                         self._counter.unit, self._counter.vocab_file,
                         _as_dict(read_report), _as_dict(generator_counters))


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _as_dict(value) -> Optional[dict]:
    if value is None:
        return None
    if hasattr(value, "as_dict"):
        return value.as_dict()
    return {k: (int(v) if isinstance(v, (int, float)) and float(v).is_integer() else v)
            for k, v in sorted(dict(value).items())}


def compute_pair_stats(pairs: Iterable, vocab_file: Optional[str] = None, *,
                       read_report=None, generator_counters: Optional[Mapping] = None,
                       batch_size: int = 1024, progress: bool = False) -> PairStats:
    """Table 1 statistics of ``pairs`` (``Pair`` objects or feature dicts).

    Args:
      pairs: the pairs, any iterable (streamed, not held in memory).
      vocab_file: WordPiece vocabulary for token counts; None counts whitespace words.
      read_report: the reader's ``ReadReport`` (or its ``as_dict()``), reported alongside.
      generator_counters: the generator's skip counters, reported alongside.
      batch_size: strings tokenized per call.
      progress: show a tqdm bar.
    """
    acc = PairStatsAccumulator(vocab_file, batch_size)
    for pair in tqdm(pairs, desc="counting tokens", unit="pair", disable=not progress):
        acc.add(pair)
    return acc.result(read_report, generator_counters)


def format_table(stats: PairStats) -> str:
    """Renders the report as a plain-text table in the layout of the paper's Table 1."""
    unit = "WordPiece tokens" if stats.token_unit == "wordpiece" else "whitespace words"
    header = ("task", "#tokens", "#pairs", "avg #query tokens", "avg #doc tokens")
    rows = [(name, _human(t.num_tokens), _human(t.num_pairs), f"{t.avg_query_tokens:.2f}",
             f"{t.avg_doc_tokens:.2f}")
            for name, t in sorted(stats.tasks.items(), key=_task_order)]
    if len(stats.tasks) > 1:
        t = stats.total
        rows.append((ALL, _human(t.num_tokens), _human(t.num_pairs),
                     f"{t.avg_query_tokens:.2f}", f"{t.avg_doc_tokens:.2f}"))
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    lines = [f"Pair statistics (Table 1 of Chang et al. 2020; counts in {unit})",
             fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]
    if stats.read_report is not None:
        skipped = stats.read_report.get("skipped") or {}
        lines.append(f"reader: kept {stats.read_report.get('kept', 0)} articles; skipped "
                     + (", ".join(f"{k}={v}" for k, v in skipped.items()) or "none"))
    if stats.generator_counters is not None:
        lines.append("generator: " + (", ".join(
            f"{k}={v}" for k, v in stats.generator_counters.items()) or "no counters"))
    return "\n".join(lines)


def _task_order(item) -> tuple:
    """The paper's row order (ICT, BFS, WLP, MLM), then any other task alphabetically."""
    order = ("ict", "bfs", "wlp", "mlm")
    return (order.index(item[0]) if item[0] in order else len(order), item[0])


def _human(n: int) -> str:
    """1234 -> '1,234'; 11_200_000_000 -> '11.2B (11,200,000,000)' for large counts."""
    for unit, scale in (("B", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f}{unit} ({n:,})"
    return f"{n:,}"


def stats_for_directory(output_dir: str, vocab_file: Optional[str] = None, *,
                        progress: bool = False) -> PairStats:
    """Table 1 statistics of a written pair directory (``pairs_io`` layout).

    The reader and generator counts come from the manifest when the writer recorded them (the
    Beam pipeline does) or from a ``stats.json`` beside the shards (the recipe writes one).
    """
    from tt_zoo.data import pairs_io  # noqa: PLC0415 (pairs_io imports nothing from here)
    import os  # noqa: PLC0415

    manifest = pairs_io.read_manifest(output_dir)
    read_report = manifest.get("read_report")
    counters = manifest.get("generator_counters")
    saved = os.path.join(str(output_dir), "stats.json")
    if (read_report is None or counters is None) and tf.io.gfile.exists(saved):
        with tf.io.gfile.GFile(saved) as f:
            previous = json.loads(f.read())
        read_report = read_report or previous.get("read_report")
        counters = counters or previous.get("generator_counters")
    return compute_pair_stats(pairs_io.iter_pair_records(output_dir), vocab_file,
                              read_report=read_report, generator_counters=counters,
                              progress=progress)


def main(argv=None) -> int:
    """``python -m tt_zoo.data.pair_stats DIR [--vocab vocab.txt] [--json]``: print Table 1."""
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(description="Print Table 1 statistics of a pair directory.")
    parser.add_argument("output_dir")
    parser.add_argument("--vocab", default=None, help="WordPiece vocab.txt (else whitespace)")
    parser.add_argument("--json", action="store_true", help="print the JSON form instead")
    args = parser.parse_args(argv)
    stats = stats_for_directory(args.output_dir, args.vocab, progress=True)
    print(json.dumps(stats.to_json(), indent=2) if args.json else format_table(stats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
