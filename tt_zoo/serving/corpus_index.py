"""Corpus encoding and indexing on Apache Beam: passages through an export's ``encode_document``
signature into sharded embeddings, each shard with its own ScaNN index.

Chang et al., ICLR 2020, Section 2 ("Inference"): the candidate embeddings psi(d) are computed
once, offline, so retrieval is a maximum inner product search. For a corpus that one machine
encodes too slowly (an English Wikipedia of 21M 100-word passages is about 8 hours at 750
passages/s on two cores), this pipeline spreads the encoding over a Beam runner's workers
(DirectRunner here; Dataflow, Flink or Spark at scale) and writes the layout of
`tt_zoo.retrieval.embedding_shards`, which `tt_zoo.retrieval.sharded_index.ShardedIndex` searches.

Graph::

    ReadFromTextWithFilename(*.jsonl) ─ parse {"id", "title"?, "text"} ─ key by shard
        │                                              (crc32(utf-8 id) % num_shards)
        ├─ shards to write ─ RunInference(encode_document) ─ (shard, (id, embedding)) ─┐
        │                  every shard to write ─ (shard, None) ───────────────────────┴─
        │        GroupByKey ─ write_shard: sort by id, store (float32 | float16 | int8),
        │                     build the shard's EmbeddingIndex, temp folder, rename
        └─ shards complete already ─ (shard, id) ─ GroupByKey ─ check_shard_ids
    ─ manifest.json (in the driver, last)

The model runs through Beam's RunInference with a model handler of our own
(`EncodeDocumentHandler`), not Beam's `TFModelHandlerTensor`: that handler loads a Keras model
(``tf.keras.models.load_model``, through tensorflow_hub) and calls it on one stacked tensor,
whereas a tt_zoo export is a `tf.Module` SavedModel whose ``encode_document`` signature takes
two string tensors (``title``, ``passage``) and needs tensorflow-text's ops registered first.
RunInference still gives what a hand-written DoFn would have to rebuild: the model loaded once
per worker process and shared by its threads, batches of ``batch_size``
(``beam.BatchElements``), and its inference metrics.

Resuming and retries: the driver lists the shards already complete with the same settings
(model sha256, storage, backend, number of shards); their passages are not encoded again, only
checked to be the ones the shard holds. A shard is written to a temp folder and renamed; a
retried or duplicate worker finds it complete and writes nothing (`write_shard`). Duplicate ids
are an error naming the id. As in `tt_zoo.data.beam_pairs`, counters go to Beam metrics in the
namespace ``tt_zoo`` and into the manifest, which the driver writes last, after the pipeline
succeeded: a folder without one is an unfinished run, which `ShardedIndex` refuses. (The
shards are ``.npy`` files, not TFRecords, so `beam_pairs`' CRC32C fallback does not apply.)
"""

from __future__ import annotations

import collections
import glob
import os
import sys
from typing import Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
from apache_beam.io.textio import ReadFromTextWithFilename
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from tt_zoo.atomic_io import is_remote
from tt_zoo.data.text_files import TextFileError, parse_jsonl_line, record_fields
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.kinds import TWO_TOWER
from tt_zoo.retrieval import embedding_shards
from tt_zoo.retrieval.embedding_shards import ShardSettings, shard_name, shard_of
from tt_zoo.retrieval.embedding_storage import EmbeddingStorage

NAMESPACE = "tt_zoo"  # the Beam metrics namespace of tt_zoo's pipelines (`beam_pairs` too)
DEFAULT_BATCH_SIZE = 256


# -- reading passages ---------------------------------------------------------------------------

def parse_passage_line(element: Tuple[str, str]):
    """``(file name, line)`` of a .jsonl file -> ``(id, title, text)``; a blank line gives
    nothing. A malformed line, or one without an "id", raises `TextFileError` naming the file and
    the line's start (Beam's text reader does not number lines)."""
    filename, line = element
    if not line.strip():
        return
    where = f"{filename} (line {line[:60]!r}{'...' if len(line) > 60 else ''})"
    text, title, passage_id = record_fields(parse_jsonl_line(line, where), where)
    if passage_id is None:
        raise TextFileError(f"{where}: no \"id\"; index-corpus needs one for every passage (the "
                            "shards and the search results are keyed by it).")
    Metrics.counter(NAMESPACE, "passages/read").inc()
    yield passage_id, title, text


def check_passages(pattern: str) -> None:
    """A passages argument must be a .jsonl file pattern; a local one must match a file."""
    if ".jsonl" not in os.path.basename(pattern):
        raise TextFileError(f"{pattern}: expected a .jsonl file (or pattern) of "
                            "{\"id\", \"title\"?, \"text\"} lines.")
    if not is_remote(pattern) and not glob.glob(pattern):
        raise TextFileError(f"{pattern}: no such file.")


# -- the model ------------------------------------------------------------------------------------

class EncodeDocumentHandler(ModelHandler):
    """RunInference's model handler for a tt_zoo export: examples are ``(title, passage)``
    string pairs, predictions their float32 `[dim]` embeddings from ``encode_document``.

    Args:
      model_path: the export directory (a path every worker reads: gs:// on Dataflow).
      batch_size: passages a signature call (RunInference batches exactly this many, fewer at
        the end of a bundle).
    """

    def __init__(self, model_path: str, batch_size: int = DEFAULT_BATCH_SIZE):
        super().__init__(min_batch_size=batch_size, max_batch_size=batch_size)
        self.model_path = str(model_path)

    def load_model(self):
        """The export's `tt_zoo.artifacts.export.LoadedEncoder` (workers import TensorFlow here)."""
        from tt_zoo.artifacts.export import LoadedEncoder  # noqa: PLC0415
        return LoadedEncoder(self.model_path)

    def run_inference(self, batch, model, inference_args=None):
        titles, texts = zip(*batch)
        return list(model(titles, texts))

    def get_num_bytes(self, batch) -> int:
        return sum(len(title.encode("utf-8")) + len(text.encode("utf-8"))
                   for title, text in batch)


def resolve_model(model, expected_sha256: Optional[str] = None) -> Tuple[str, dict]:
    """``(export path, metadata)`` of an export directory (verified, against `expected_sha256`
    when given, e.g. the registry's for a shipped name: `tt_zoo.artifacts.export.verify_export`),
    or of a gs:// export (its metadata read, its files checked by nothing here). A registered
    name is found by its caller (`tt-zoo index-corpus`: `tt_zoo.cli.index_corpus.export_of`).
    Raises `TtZooError` for a model without one embedding a document (late interaction, term
    weights).
    """
    from tt_zoo.artifacts import export as export_lib  # noqa: PLC0415 (TensorFlow)
    from tt_zoo.artifacts.model_card import ModelCard  # noqa: PLC0415

    if is_remote(model):
        import json  # noqa: PLC0415
        import tensorflow as tf  # noqa: PLC0415
        with tf.io.gfile.GFile(f"{str(model).rstrip('/')}/{export_lib.METADATA_FILE}") as f:
            path, meta = str(model), json.loads(f.read())
    else:
        path, meta = str(model), export_lib.verify_export(model, expected_sha256)
    card = ModelCard.from_dict(meta)
    kind, signature = card.artifact_kind, export_lib.DOCUMENT_SIGNATURE
    if kind != TWO_TOWER or signature not in (card.architecture.signatures or [signature]):
        raise TtZooError(f"{model} is a {kind.replace('_', '-')} model: index-corpus needs a "
                         f"two-tower export with an {signature} signature (one vector a "
                         "passage).")
    if not card.provenance.sha256 or not card.architecture.embedding_dim:
        raise TtZooError(f"{model}: its metadata.json records no sha256 or embedding_dim.")
    return path, meta


# -- the pipeline ---------------------------------------------------------------------------------

def _key_by_shard(passage, num_shards: int):
    return shard_of(passage[0], num_shards), passage


def _write_shard(element, output_dir: str, settings: ShardSettings) -> str:
    index, rows = element
    rows = [r for r in rows if r is not None]
    ids = [passage_id for passage_id, _ in rows]
    embeddings = (np.stack([e for _, e in rows]) if rows
                  else np.zeros((0, settings.dim), np.float32))
    meta = embedding_shards.write_shard(output_dir, index, ids, embeddings, settings)
    Metrics.counter(NAMESPACE, "shards/written" if meta["written"]
                    else "shards/found_complete").inc()
    Metrics.counter(NAMESPACE, "passages/encoded").inc(len(ids))
    return meta["name"]


def _check_shard(element, output_dir: str, settings: ShardSettings) -> str:
    index, ids = element
    embedding_shards.check_shard_ids(output_dir, index, [i for i in ids if i is not None],
                                     settings)
    Metrics.counter(NAMESPACE, "shards/reused").inc()
    return shard_name(index, settings.num_shards)


def build_pipeline(p, passages: str, output_dir: str, model_path: str, settings: ShardSettings,
                   complete=frozenset(), batch_size: int = DEFAULT_BATCH_SIZE) -> None:
    """Adds the transforms of the module docstring's graph to pipeline `p`.

    Args:
      passages: a .jsonl file pattern of {"id", "title"?, "text"} lines (read in parallel).
      complete: the shards already complete (`embedding_shards.prepare_output`): not encoded,
        only checked.
    """
    n = settings.num_shards
    todo = sorted(set(range(n)) - set(complete))
    keyed = (p | "ReadPassages" >> ReadFromTextWithFilename(passages)
             | "ParseJsonl" >> beam.FlatMap(parse_passage_line)
             | "KeyByShard" >> beam.Map(_key_by_shard, n))
    if todo:
        handler = KeyedModelHandler(EncodeDocumentHandler(model_path, batch_size))
        to_write = set(todo)
        embedded = (keyed
                    | "ShardsToWrite" >> beam.Filter(lambda kv, s: kv[0] in s, to_write)
                    | "ToExample" >> beam.Map(lambda kv: ((kv[0], kv[1][0]),
                                                          (kv[1][1], kv[1][2])))
                    | "EncodeDocument" >> RunInference(handler)
                    | "ByShard" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1]))))
        every = (p | "EveryShardToWrite" >> beam.Create(todo)
                 | "WriteMarker" >> beam.Map(lambda i: (i, None)))
        _ = ((embedded, every) | "MergeToWrite" >> beam.Flatten()
             | "GroupToWrite" >> beam.GroupByKey()
             | "WriteShard" >> beam.Map(_write_shard, output_dir, settings))
    if complete:
        done = set(complete)
        ids = (keyed | "ShardsComplete" >> beam.Filter(lambda kv, s: kv[0] in s, done)
               | "IdOnly" >> beam.Map(lambda kv: (kv[0], kv[1][0])))
        every = (p | "EveryShardComplete" >> beam.Create(sorted(done))
                 | "CheckMarker" >> beam.Map(lambda i: (i, None)))
        _ = ((ids, every) | "MergeToCheck" >> beam.Flatten()
             | "GroupToCheck" >> beam.GroupByKey()
             | "CheckShard" >> beam.Map(_check_shard, output_dir, settings))


def index_corpus(passages: str, output_dir, model, *, num_shards: int,
                 expected_sha256: Optional[str] = None,
                 storage: Optional[EmbeddingStorage] = None, backend: str = "scann",
                 batch_size: int = DEFAULT_BATCH_SIZE, runner: str = "DirectRunner",
                 pipeline_args: Optional[Sequence[str]] = None) -> dict:
    """Encodes a corpus with a model's ``encode_document`` signature and writes it in shards,
    each with its own `EmbeddingIndex`; resumes a run that stopped (see the module docstring).

    Args:
      passages: a .jsonl file pattern (local or gs://) of {"id", "title"?, "text"} lines; ids
        unique.
      output_dir: the output folder (new, or an earlier run's with the same settings: resumed).
      model: an export directory (local or gs://; `tt-zoo index-corpus` finds a registered
        name's, `tt_zoo.cli.index_corpus.export_of`).
      num_shards: how many shards (each is one worker's GroupByKey value: choose shards that
        fit a worker's memory, e.g. 200K-1M passages of dim 512).
      expected_sha256: the sha256 a local export's file manifest must hash to (the registry's
        for a shipped name); None checks its files against its own manifest.
      storage: how the embeddings are stored (default float32).
      backend: each shard's index: "scann" (`ScannConfig.for_size` of the shard) or
        "brute_force".
      batch_size: passages a signature call.
      runner: a Beam runner ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner").
      pipeline_args: more Beam options (Dataflow's ``--project``, ``--region``,
        ``--temp_location``; ``--direct_num_workers=2``, ...).

    Returns:
      The manifest written (with the settings, each shard's files and sha256, the counters).
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise TtZooError(f"batch_size must be a positive int (got {batch_size!r}).")
    passages, output_dir = str(passages), str(output_dir)
    check_passages(passages)
    model_path, meta = resolve_model(model, expected_sha256)
    settings = ShardSettings(num_shards, int(meta["embedding_dim"]),
                             storage or EmbeddingStorage(), meta["sha256"], backend)
    if runner != "DirectRunner":
        local = [path for path in (model_path, output_dir) if not is_remote(path)]
        if local:
            print(f"index-corpus: {' and '.join(local)} must be readable (and the output "
                  f"writable) by every {runner} worker; on a cluster use gs:// paths.",
                  file=sys.stderr)
    if not is_remote(output_dir):
        os.makedirs(output_dir, exist_ok=True)
    complete = embedding_shards.prepare_output(output_dir, settings)
    options = PipelineOptions(list(pipeline_args or []), runner=runner)
    with beam.Pipeline(options=options) as p:
        build_pipeline(p, passages, output_dir, model_path, settings, complete, batch_size)
    counters = _counters(p.result)
    return embedding_shards.write_manifest(output_dir, settings, {
        "model": {"name": meta.get("name"), "path": model_path, "sha256": meta["sha256"]},
        "passages": passages, "runner": runner, "batch_size": batch_size,
        "shards_reused": [shard_name(i, num_shards) for i in sorted(complete)],
        "counters": counters})


def _counters(result) -> dict:
    """The pipeline's counters of namespace ``tt_zoo``, summed over steps: {name: value}."""
    totals = collections.Counter()
    for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        value = c.committed if c.committed is not None else c.attempted
        totals[c.key.metric.name] += int(value or 0)
    return dict(sorted(totals.items()))
