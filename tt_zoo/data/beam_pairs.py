"""Pair generation as an Apache Beam pipeline (Chang et al. 2020, Sec. 3: ICT, BFS, WLP).

The same pairs as the single-machine ``pretraining_tasks.generate_pairs`` for the same
``TaskConfig``, computed with Beam so that a full Wikipedia dump can run on Dataflow, Flink or
Spark; here it runs on the DirectRunner. The task logic is not repeated: the pipeline only
routes data to ``pretraining_tasks.linking_passages`` and ``pretraining_tasks.pairs_for_article``.

Graph::

    articles ──(title, article)─────────────────────────┐
        └─ linking_passages ─(target title, passage)────┴─ CoGroupByKey ─ pairs_for_article
                                                                              │ pairs
    count per doc_id ──(doc_id, n)──┐                                         │
    pairs ──(doc_id, pair)──────────┴─ CoGroupByKey ─ q(d) = n / num_pairs ─ tf.train.Example
                                              (num_pairs: a singleton side input)
    ─ WriteToTFRecord(pairs-SSSSS-of-NNNNN.tfrecord) ─ manifest.json (in the driver, last)

The output directory has exactly the layout of ``pairs_io.write_pair_shards`` and is read with
``pairs_io.read_pairs``. ``beam.io.WriteToTFRecord`` needs a CRC32C library (python-snappy,
google-crc32c or crcmod: the ``apache-beam[tfrecord]`` / ``[gcp]`` extras, present on Dataflow
workers); where none is installed the pipeline writes the same shards with
``tf.io.TFRecordWriter`` instead (``WriteShardsWithTF``). Either way each shard is written under
a temporary name and renamed when complete, and the manifest is written only after the pipeline
succeeded, so a failed run leaves a directory that readers refuse.

Reader skips and generator counters become Beam metrics (namespace ``tt_zoo``) and are copied
into the manifest (``read_report``, ``generator_counters``).
"""

from __future__ import annotations

import collections
import itertools
import os
import zlib
from typing import Iterable, Optional, Sequence, Union

import apache_beam as beam
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from tt_zoo.data import pairs_io
from tt_zoo.data import pretraining_tasks
from tt_zoo.data.sampling import sampling_probability
from tt_zoo.data.articles import Article, ReadReport

NAMESPACE = "tt_zoo"
_READ_KEPT = "read/kept"
_READ_SKIPPED = "read/skipped/"
_GEN = "generator/"
_BEAM = "beam/"


def _read_source(source: str, report: Optional[ReadReport] = None):
    """``article_sources.read_articles`` when present, else the Wikispeedia reader."""
    try:
        from tt_zoo.data.article_sources import read_articles
    except ImportError:
        from tt_zoo.data.wikispeedia import read_wikispeedia as read_articles
    return read_articles(source, report=report, progress=False)


class _MetricsReadReport(ReadReport):
    """A ``ReadReport`` that also counts into Beam metrics, so workers' counts reach the driver."""

    def keep(self) -> None:
        super().keep()
        Metrics.counter(NAMESPACE, _READ_KEPT).inc()

    def skip(self, reason: str) -> None:
        super().skip(reason)
        Metrics.counter(NAMESPACE, _READ_SKIPPED + reason).inc()


def _read_articles_fn(source: str):
    yield from _read_source(source, _MetricsReadReport())


def _count_kept(article: Article) -> Article:
    Metrics.counter(NAMESPACE, _READ_KEPT).inc()
    return article


def _pairs_for_group(element, config):
    """(title, {"article": [...], "candidates": [...]}) -> the pairs whose query is that article."""
    title, grouped = element
    articles = list(grouped["article"])
    candidates = list(grouped["candidates"])
    if not articles:
        # Some page links to a title that is not in the corpus: nothing to pair with.
        Metrics.counter(NAMESPACE, _BEAM + "wlp_candidates_without_target_article").inc(
            len(candidates))
        return
    if len(articles) > 1:
        Metrics.counter(NAMESPACE, _BEAM + "duplicate_title").inc(len(articles) - 1)
    for article in articles:
        counters = collections.Counter()
        pairs = pretraining_tasks.pairs_for_article(article, candidates, config, counters)
        for name, value in counters.items():
            Metrics.counter(NAMESPACE, _GEN + name).inc(int(value))
        yield from pairs


def _examples_for_doc(element, num_pairs):
    """(doc_id, {"pairs": [...], "count": [n]}) -> serialized examples with q(d) = n / num_pairs."""
    _, grouped = element
    (count,) = grouped["count"]
    prob = sampling_probability(count, num_pairs)
    for pair in grouped["pairs"]:
        yield pairs_io.pair_to_example(pair, prob)


def build_pipeline(articles, output_dir: str, config: pretraining_tasks.TaskConfig,
                   num_shards: int, sink: str = "auto"):
    """Adds the pair-generation transforms after ``articles``; returns the write result.

    Args:
      articles: a PCollection of ``Article``.
      sink: "beam" (``beam.io.WriteToTFRecord``), "tf" (``WriteShardsWithTF``) or "auto"
        ("beam" when a CRC32C library is installed, else "tf").
    """
    by_title = articles | "KeyByTitle" >> beam.Map(lambda a: (a.title, a))
    linking = articles | "LinkingPassages" >> beam.FlatMap(
        pretraining_tasks.linking_passages, config)
    pairs = ({"article": by_title, "candidates": linking}
             | "JoinCandidates" >> beam.CoGroupByKey()
             | "PairsForArticle" >> beam.FlatMap(_pairs_for_group, config))

    num_pairs = pairs | "CountPairs" >> beam.combiners.Count.Globally()
    doc_counts = (pairs | "DocIdOne" >> beam.Map(lambda p: (p.doc_id, 1))
                  | "CountPerDoc" >> beam.CombinePerKey(sum))
    by_doc = pairs | "KeyByDoc" >> beam.Map(lambda p: (p.doc_id, p))
    examples = ({"pairs": by_doc, "count": doc_counts}
                | "JoinCounts" >> beam.CoGroupByKey()
                | "ToExample" >> beam.FlatMap(_examples_for_doc,
                                              beam.pvalue.AsSingleton(num_pairs)))
    if sink == "auto":
        sink = "beam" if crc32c_library_available() else "tf"
    if sink == "beam":
        return examples | "WriteShards" >> beam.io.WriteToTFRecord(
            os.path.join(output_dir, pairs_io.PAIRS_PREFIX), file_name_suffix=".tfrecord",
            num_shards=num_shards, shard_name_template="-SSSSS-of-NNNNN")
    if sink == "tf":
        return examples | "WriteShards" >> WriteShardsWithTF(output_dir, num_shards)
    raise ValueError(f"sink must be 'auto', 'beam' or 'tf' (got {sink!r}).")


def crc32c_library_available() -> bool:
    """Whether ``beam.io.WriteToTFRecord`` can run: it needs python-snappy, google-crc32c or
    crcmod (the ``apache-beam[tfrecord]`` / ``[gcp]`` extras) for the records' CRC32C."""
    for module in ("google_crc32c", "snappy", "crcmod"):
        try:
            __import__(module)
            return True
        except ImportError:
            continue
    return False


class WriteShardsWithTF(beam.PTransform):
    """Writes serialized records as ``pairs-SSSSS-of-NNNNN.tfrecord`` with ``tf.io.TFRecordWriter``.

    The fallback for ``WriteToTFRecord`` where no CRC32C library is installed: records are
    keyed by ``zlib.crc32(record) % num_shards`` (deterministic), grouped per shard, and each
    shard is written to a temporary name and renamed when complete (``pairs_io``). Every shard
    index gets a file, empty if no record hashed to it. Yields ``(shard name, num_records)``.
    """

    def __init__(self, output_dir: str, num_shards: int, prefix: str = pairs_io.PAIRS_PREFIX):
        super().__init__()
        self.output_dir = output_dir
        self.num_shards = num_shards
        self.prefix = prefix

    def expand(self, records):
        n = self.num_shards
        keyed = records | "ShardKey" >> beam.Map(lambda r: (zlib.crc32(r) % n, r))
        every_shard = (records.pipeline | "AllShards" >> beam.Create(range(n))
                       | "EmptyMarker" >> beam.Map(lambda i: (i, None)))
        return ((keyed, every_shard) | "Merge" >> beam.Flatten()
                | "GroupShards" >> beam.GroupByKey()
                | "WriteShard" >> beam.Map(_write_shard, self.output_dir, n, self.prefix))


def _write_shard(element, output_dir: str, num_shards: int, prefix: str):
    index, records = element
    name = pairs_io.shard_name(prefix, index, num_shards)
    count = pairs_io.write_records_atomically(os.path.join(output_dir, name),
                                              (r for r in records if r is not None))
    return name, count


def run_beam_pipeline(articles_source: Union[str, Iterable[Article]], output_dir: str,
                      config: pretraining_tasks.TaskConfig, num_shards: int,
                      runner: str = "DirectRunner",
                      pipeline_args: Optional[Sequence[str]] = None,
                      limit: Optional[int] = None, sink: str = "auto") -> dict:
    """Generates pairs with Beam and writes them in the ``pairs_io`` layout.

    Args:
      articles_source: a path any ``read_articles`` accepts (read inside the pipeline, so the
        driver never holds the corpus), a ``*.jsonl`` file pattern of ``Article.to_json`` lines
        (read in parallel with ``ReadFromText``, the path for a large corpus on a cluster), or
        an iterable of ``Article`` (materialized into the pipeline with ``beam.Create``).
      output_dir: the output directory (its old manifest and shards are removed first).
      config: the ``TaskConfig``; the same config gives the same pairs as ``generate_pairs``.
      num_shards: how many TFRecord shards.
      runner: a Beam runner name ("DirectRunner", "DataflowRunner", "FlinkRunner", ...).
      pipeline_args: more Beam options, e.g. ``["--direct_num_workers=2",
        "--direct_running_mode=multi_processing"]`` or Dataflow's project/region/temp_location.
      limit: keep only the first N articles of a path source (for smoke tests).
      sink: how shards are written (see ``build_pipeline``); both give the same layout.

    Returns:
      The manifest dict, with ``read_report`` and ``generator_counters`` from Beam metrics.
    """
    pairs_io.check_num_shards(num_shards)
    output_dir = str(output_dir)
    import tensorflow as tf  # noqa: PLC0415 (only for gfile; keeps Beam workers' imports lean)
    tf.io.gfile.makedirs(output_dir)
    pairs_io.clear_previous_output(output_dir, pairs_io.PAIRS_PREFIX)

    options = PipelineOptions(list(pipeline_args or []), runner=runner)
    with beam.Pipeline(options=options) as p:
        if isinstance(articles_source, (str, os.PathLike)):
            source = str(articles_source)
            if ".jsonl" in os.path.basename(source) and limit is None:
                articles = (p | "ReadJsonl" >> beam.io.ReadFromText(source)
                            | "ParseJson" >> beam.FlatMap(_article_from_json_line))
            else:
                articles = (p | "Source" >> beam.Create([source])
                            | "ReadArticles" >> beam.FlatMap(_read_limited, limit)
                            | "Spread" >> beam.Reshuffle())
        else:
            articles = (p | "CreateArticles" >> beam.Create(list(articles_source))
                        | "CountKept" >> beam.Map(_count_kept))
        build_pipeline(articles, output_dir, config, num_shards, sink)
    result = p.result
    read_report, gen_counters, beam_counters = _collect_metrics(result)
    names = [pairs_io.shard_name(pairs_io.PAIRS_PREFIX, i, num_shards) for i in range(num_shards)]
    return pairs_io.write_manifest(
        output_dir, pairs_io.PAIRS_PREFIX, "pairs", names,
        config.manifest_config(articles_source, limit),
        {"sampling_probs": "count(doc_id)/num_pairs", "writer": f"beam:{runner}",
         "sink": sink if sink != "auto" else ("beam" if crc32c_library_available() else "tf"),
         "read_report": read_report, "generator_counters": gen_counters,
         "beam_counters": beam_counters})


def _read_limited(source: str, limit: Optional[int]):
    # islice stops without pulling article N+1, so the reader counts exactly N as kept.
    yield from itertools.islice(_read_articles_fn(source), limit)


def _article_from_json_line(line: str):
    """One ``Article.to_json`` line -> the article; a blank or invalid line is skipped and
    counted (``read_report.skipped["invalid_jsonl_line"]``)."""
    import json  # noqa: PLC0415
    if not line.strip():
        return
    try:
        article = Article.from_json(json.loads(line))
    except (ValueError, KeyError, TypeError, AttributeError):
        Metrics.counter(NAMESPACE, _READ_SKIPPED + "invalid_jsonl_line").inc()
        return
    Metrics.counter(NAMESPACE, _READ_KEPT).inc()
    yield article


def _collect_metrics(result):
    """Beam counters of namespace ``tt_zoo`` -> (read_report, generator counters, beam counters)."""
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    totals = collections.Counter()
    for c in counters:
        value = c.committed if c.committed is not None else c.attempted
        totals[c.key.metric.name] += int(value or 0)
    read_report = {"kept": totals.pop(_READ_KEPT, 0),
                   "skipped": {k[len(_READ_SKIPPED):]: v for k, v in sorted(totals.items())
                               if k.startswith(_READ_SKIPPED)}}
    gen = {k[len(_GEN):]: v for k, v in sorted(totals.items()) if k.startswith(_GEN)}
    beam_counters = {k[len(_BEAM):]: v for k, v in sorted(totals.items()) if k.startswith(_BEAM)}
    return read_report, gen, beam_counters
