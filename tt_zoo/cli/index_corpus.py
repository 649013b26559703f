"""Encode a JSONL corpus on Apache Beam into embedding shards, each with a ScaNN index.

Chang et al. 2020, Sec. 2: the candidate embeddings are computed once, offline, here with the
export's encode_document signature on a Beam runner's workers. The passages are JSON lines
{"id", "title"?, "text"}, one passage a line (a file pattern: many files are read in
parallel); every passage needs a unique id. A passage goes to shard crc32(id) % --num-shards;
each shard is written to a temp folder and renamed, with its ids (sorted), its embeddings
(.npy in --dtype) and its index; manifest.json (sha256 of every file) comes last. Run it again on the same --output to resume: shards already complete with the same
model and settings are checked, not encoded again. Search the result in Python with
tt_zoo.retrieval.sharded_index.ShardedIndex.load(OUTPUT). Needs apache-beam
(pip install tt_zoo[beam]); Beam's own options go after "--".

  tt-zoo index-corpus --model ict_bfs_wlp_512 --passages examples/squad_sample/corpus.jsonl \\
      --output runs/corpus --num-shards 4 --dtype float16
  tt-zoo index-corpus --model gs://BUCKET/models/ict_bfs_wlp_512 \\
      --passages 'gs://BUCKET/passages/*.jsonl' --output gs://BUCKET/corpus --num-shards 64 \\
      --runner DataflowRunner -- --project PROJECT --region us-central1 \\
      --temp_location gs://BUCKET/tmp --setup_file ./setup.py
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Tuple

from tt_zoo import numbers
from tt_zoo.cli import parsing

# Repeated from tt_zoo.retrieval.embedding_storage (DTYPES, SCALES) and
# tt_zoo.serving.corpus_index (DEFAULT_BATCH_SIZE) so that --help imports no Beam or TensorFlow
# (tests/test_corpus_index.py checks they agree).
DTYPES = ("float32", "float16", "int8")
INT8_SCALES = ("row", "dimension")
BACKENDS = ("scann", "brute_force")
DEFAULT_BATCH_SIZE = 256


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, type=parsing.model_name_or_path,
                   help="a registered model name (tt-zoo list --shipped) or an export directory "
                        "(local, or gs:// for workers that cannot read the driver's disk)")
    p.add_argument("--passages", required=True,
                   help="a .jsonl file or file pattern of {\"id\", \"title\"?, \"text\"} lines")
    p.add_argument("--output", required=True,
                   help="the output folder: new, or an earlier run's with the same settings "
                        "(resumed)")
    p.add_argument("--num-shards", type=numbers.count(high=1_000_000), default=1,
                   help="how many shards (one index each); each shard's embeddings pass "
                        "through one worker's memory, so keep shards to ~1M passages")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="how the embeddings are stored: float16 halves them, int8 quarters them "
                        "(with a float32 scale)")
    p.add_argument("--int8-scale", choices=INT8_SCALES, default="row",
                   help="with --dtype int8: one scale a passage (row) or one a dimension")
    p.add_argument("--backend", choices=BACKENDS, default="scann",
                   help="each shard's index: ScaNN sized for the shard, or brute force")
    p.add_argument("--batch-size", type=numbers.count(), default=DEFAULT_BATCH_SIZE,
                   help="passages a call of the encode_document signature")
    p.add_argument("--runner", default="DirectRunner",
                   help="the Beam runner: DirectRunner, DataflowRunner, FlinkRunner, "
                        "SparkRunner, ...")
    parsing.add_no_progress(p)
    p.add_argument("beam_args", nargs="*", metavar="-- BEAM_OPTION",
                   help="Beam pipeline options, after \"--\" (e.g. --project, --region, "
                        "--temp_location, --flink_master, --direct_num_workers=2)")


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    p = parsing.command_parser("index-corpus", __doc__, add_arguments)
    args = p.parse_args(argv)
    if args.beam_args and "--" not in argv:
        p.error(f"Beam options go after \"--\" (got {' '.join(args.beam_args)!r} before it)")
    if args.dtype != "int8" and "--int8-scale" in argv[:argv.index("--") if "--" in argv
                                                         else len(argv)]:
        p.error("--int8-scale goes with --dtype int8")
    return args


def export_of(model: str) -> Tuple[str, Optional[str]]:
    """(export folder, the sha256 the registry pins or None) of --model: a registered name is
    found as `tt_zoo.load` finds it (`tt_zoo.zoo.loading.find_artifact`: the clone, the cache,
    else a verified download); a gs:// export is passed on as it is."""
    from tt_zoo.atomic_io import is_remote  # noqa: PLC0415

    if is_remote(model):
        return model, None
    from tt_zoo.zoo.loading import find_artifact  # noqa: PLC0415 (TensorFlow)
    path, spec = find_artifact(model)
    return str(path), spec.sha256 if spec else None


def import_pipeline():
    """`tt_zoo.serving.corpus_index.index_corpus`, imported without Beam's import-time warnings
    about Google Cloud packages it did not find ("Failed to import GCSFileSystem", "apitools not
    found"): the DirectRunner needs none of them, and a gs:// path without them still fails
    with Beam's own error naming the scheme."""
    import logging  # noqa: PLC0415
    loggers = [logging.getLogger(), logging.getLogger("apache_beam")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        from tt_zoo.serving.corpus_index import index_corpus  # noqa: PLC0415 (Beam, TensorFlow)
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
    return index_corpus


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        from tt_zoo.errors import TtZooError  # noqa: PLC0415
        from tt_zoo.retrieval.embedding_storage import EmbeddingStorage  # noqa: PLC0415
        index_corpus = import_pipeline()
    except ImportError as e:
        sys.exit(f"tt-zoo index-corpus: {e.name or e} is not installed; pip install "
                 "tt_zoo[beam].")
    storage = EmbeddingStorage(args.dtype, args.int8_scale if args.dtype == "int8" else None)
    try:
        model, expected_sha256 = export_of(args.model)
        manifest = index_corpus(args.passages, args.output, model,
                                expected_sha256=expected_sha256,
                                num_shards=args.num_shards, storage=storage,
                                backend=args.backend, batch_size=args.batch_size,
                                runner=args.runner, pipeline_args=args.beam_args)
    except KeyError as e:  # an unknown model name, with close matches
        sys.exit(f"tt-zoo index-corpus: {e.args[0] if e.args else e}")
    except (FileNotFoundError, TtZooError) as e:
        sys.exit(f"tt-zoo index-corpus: {e}")
    settings = manifest["settings"]
    shards = settings["num_shards"]
    print(f"{manifest['num_passages']:,} passages in {shards} shard{'s' * (shards != 1)} "
          f"({manifest['counters'].get('shards/written', 0)} written, "
          f"{len(manifest['shards_reused'])} complete already), "
          f"{settings['dim']}-d {storage}, {args.backend} index a shard, model "
          f"{manifest['model']['name'] or args.model}: {args.output} (manifest sha256 "
          f"{manifest['sha256'][:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
