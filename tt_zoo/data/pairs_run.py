"""A make-pairs run: pretraining pairs (ICT, BFS, WLP; Chang et al. 2020, Sec. 3, and the
successor tasks of `tt_zoo.data.passage_pair_tasks`) or MLM examples from a corpus, written as
TFRecord shards with a manifest (`tt_zoo.data.pairs_io`), the pairs' Table 1 report
(`tt_zoo.data.pair_stats`, Sec. 4.1) saved as ``stats.json`` beside them. `tt-zoo make-pairs`
parses its flags into a `TaskConfig` and calls `make_pairs` (or `make_mlm`), then prints
`describe`.

The local runner streams ``generate_pairs`` into ``pairs_io.write_pair_shards`` on this
machine; the Beam runner runs ``beam_pairs.run_beam_pipeline``. Both give the same pairs for
the same seed. Nothing here imports TensorFlow (or Beam) at import time.

    config = pretraining_tasks.TaskConfig(tasks=("ict", "bfs", "wlp"), seed=0)
    written = make_pairs("wikispeedia", "runs/pairs/x", config, 8, vocab="vocab.txt")
    print(describe(written, "runs/pairs/x"))
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import os
import time
from typing import TYPE_CHECKING, Iterator, Optional, Sequence

from tt_zoo.data import pretraining_tasks
from tt_zoo.data.article_sources import read_articles as read_article_source
from tt_zoo.data.articles import Article, ReadReport

if TYPE_CHECKING:
    from tt_zoo.data.pair_stats import PairStats


@dataclasses.dataclass(frozen=True)
class WrittenPairs:
    """What a run wrote: its manifest, the reader's report (``ReadReport.as_dict()``) and the
    wall time of reading, generating and writing; for pairs also the runner ("local" or
    "beam:RUNNER") and the Table 1 statistics (None for MLM examples)."""

    manifest: dict
    read_report: dict
    wall_s: float
    runner: str = "local"
    stats: Optional[PairStats] = None


def read_articles(source, report: ReadReport, limit: Optional[int] = None,
                  progress: bool = True) -> Iterator[Article]:
    """The first `limit` articles (None: all) of any source `article_sources.read_articles`
    accepts, what the reader kept and skipped counted in `report`."""
    return itertools.islice(read_article_source(source, report=report, progress=progress),
                            limit)


def make_pairs(source, output_dir: str, config: pretraining_tasks.TaskConfig, num_shards: int,
               *, runner: str = "local", beam_runner: str = "DirectRunner",
               beam_args: Sequence[str] = (), vocab: Optional[str] = None,
               limit: Optional[int] = None, in_memory: bool = False,
               progress: bool = True) -> WrittenPairs:
    """Writes the pairs of `config` from the articles of `source` to `output_dir` (shards and
    manifest), then counts them (Table 1, in WordPiece tokens of `vocab`, else in whitespace
    words) and saves the report, with the runner, wall time and pairs/s, as ``stats.json``
    there.

    Args:
      runner: "local" (this process) or "beam" (an Apache Beam pipeline, the 'beam' extra) on
        `beam_runner` with the extra Beam options `beam_args`.
      limit: use only the first N articles.
      in_memory: local runner: read the corpus once and hold it in memory, instead of
        streaming it twice (WLP's reverse-link index needs a first pass).
      progress: show progress bars.
    """
    from tt_zoo.data import pair_stats, pairs_io  # noqa: PLC0415 (TensorFlow)

    start = time.perf_counter()
    if runner == "beam":
        manifest, read_report, counters = _make_pairs_beam(
            source, output_dir, config, num_shards, beam_runner, beam_args, limit)
    else:
        manifest, read_report, counters = _make_pairs_local(
            source, output_dir, config, num_shards, limit, in_memory, progress)
    wall = time.perf_counter() - start
    n = manifest["num_records"]
    stats = pair_stats.compute_pair_stats(pairs_io.iter_pair_records(output_dir), vocab,
                                          read_report=read_report, generator_counters=counters,
                                          progress=progress)
    runner_name = "local" if runner == "local" else f"beam:{beam_runner}"
    stats.extra.update({"runner": runner_name, "wall_s": round(wall, 3),
                        "pairs_per_s": round(n / wall, 1) if wall > 0 else None,
                        "num_pairs": n, "num_shards": manifest["num_shards"],
                        "config": manifest["config"]})
    stats.save(os.path.join(output_dir, "stats.json"))
    return WrittenPairs(manifest, read_report, wall, runner_name, stats)


def _make_pairs_local(source, output_dir, config, num_shards, limit, in_memory, progress):
    # generate_pairs reads the articles twice (pass 1: the reverse-link index for WLP; pass 2:
    # the pairs), streaming each time; the reader's report of the last pass is the one we keep.
    # With in_memory the articles are read once and held in a list instead.
    from tt_zoo.data import pairs_io  # noqa: PLC0415 (TensorFlow)
    reports = []

    def articles():
        reports.append(ReadReport())
        return read_articles(source, reports[-1], limit, progress)

    if in_memory:
        articles = list(articles())

    counters = collections.Counter()
    pairs = pretraining_tasks.generate_pairs(articles, config, counters)
    manifest = pairs_io.write_pair_shards(pairs, output_dir, num_shards,
                                          config=config.manifest_config(source, limit),
                                          progress=progress)
    return manifest, reports[-1].as_dict(), dict(sorted(counters.items()))


def _make_pairs_beam(source, output_dir, config, num_shards, beam_runner, beam_args, limit):
    from tt_zoo.data import beam_pairs  # noqa: PLC0415 (Beam is an optional extra)
    manifest = beam_pairs.run_beam_pipeline(source, output_dir, config, num_shards,
                                            runner=beam_runner, pipeline_args=list(beam_args),
                                            limit=limit)
    return manifest, manifest["read_report"], manifest["generator_counters"]


def make_mlm(source, output_dir: str, vocab: str, num_shards: int, *, seq_length: int,
             max_doc_tokens: int, seed: int = 0, limit: Optional[int] = None,
             progress: bool = True) -> WrittenPairs:
    """Writes MLM examples (the paper's token-level baseline: `pretraining_tasks.mlm_examples`)
    of `seq_length` WordPiece tokens of `vocab` to `output_dir`, from the passages (at most
    `max_doc_tokens` words) of the first `limit` articles of `source`."""
    from tt_zoo.data import pairs_io, passages as passages_lib  # noqa: PLC0415 (TensorFlow)

    start = time.perf_counter()
    report = ReadReport()
    passages = (p for a in read_articles(source, report, limit, progress)
                for p in passages_lib.make_passages(a, max_tokens=max_doc_tokens))
    examples = pretraining_tasks.mlm_examples(passages, vocab, seq_length, seed=seed)
    config = {"tasks": ["mlm"], "seq_length": seq_length, "seed": seed,
              "max_doc_tokens": max_doc_tokens, "source": str(source), "limit": limit,
              "vocab": vocab}
    manifest = pairs_io.write_mlm_shards(examples, output_dir, num_shards, config=config,
                                         progress=progress)
    return WrittenPairs(manifest, report.as_dict(), time.perf_counter() - start)


def describe(written: WrittenPairs, output: str) -> str:
    """What `tt-zoo make-pairs` prints of a run written to `output`: the pairs' Table 1, their
    count and the runner's speed; or the MLM examples' count, the reader's report and the
    speed."""
    manifest, wall = written.manifest, written.wall_s
    n = manifest["num_records"]
    if written.stats is None:
        return "\n".join([
            f"MLM examples: {n:,} (seq_length {manifest['feature_lengths']['input_word_ids']})"
            f" in {manifest['num_shards']} shards at {output}",
            f"reader: {written.read_report}",
            f"wall time {wall:.1f} s, {n / wall:.1f} examples/s"])
    from tt_zoo.data import pair_stats  # noqa: PLC0415 (TensorFlow)
    return "\n".join([
        pair_stats.format_table(written.stats),
        f"{n:,} pairs in {manifest['num_shards']} shards at {output}",
        f"runner {written.runner}: wall time {wall:.1f} s (read + generate + write), "
        f"{n / wall:.1f} pairs/s"])
