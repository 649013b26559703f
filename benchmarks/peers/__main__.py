"""tt_zoo side by side with PyTorch, sentence-transformers and FAISS, in one run on one machine.

Users weigh tt_zoo against what they know: a PyTorch two-tower training loop (DPR, Tevatron),
sentence-transformers' `encode`, FAISS. Absolute times on a shared machine say little, so each
section measures tt_zoo and its peers in the same process, in interleaved rounds (A B A B ...,
medians over rounds; `benchmarks.measure`), and reports the peers' speed relative to tt_zoo:

- train  (`peers.train`): two-tower training step, tt_zoo's CPU-scale step against a PyTorch
  step of the same BERT towers ("tiny" 2/128/2 and "mini" 4/256/4) and shapes: pairs/s.
- encode (`peers.encode`): `TwoTowerModel.encode_documents` (and the exported SavedModel's
  `encode_document` signature) against sentence-transformers' `encode` (BERT of the same shape;
  StaticEmbedding for the BoW-MLP): docs/s on 100-word Wikispeedia passages with titles and on
  ReQA candidates, each reported on its own.
- minilm (`peers.minilm`): the imported all-MiniLM-L6-v2 (`tt_zoo.load("minilm_l6_384")`)
  against the same checkpoint folder in sentence-transformers and a PyTorch training loop, the
  peer in its own process (--peer-python): docs/s, queries/s, training pairs/s, identical
  token ids and vectors.
- mpnet (`peers.mpnet`, not run by default: it needs `make teacher`): the imported
  all-mpnet-base-v2 (`tt_zoo.load("mpnet_base_768")`, an MPNet tower) against the same folder in
  sentence-transformers, one pass a side: token agreement and the smallest cosine on 1,024
  passages with titles and the README quick start's texts (results/mpnet_import).
- search (`peers.search`): ScaNN (tt_zoo `EmbeddingIndex`, and variants with more leaves,
  anisotropic quantization and SOAR: other `ScannConfig`s) against FAISS IVF-PQ and
  HNSW and exact search on the open-domain embeddings: queries/s at recall@10 >= 0.95, build
  time, memory, and the cost per scanned candidate.

The peers are benchmark-only (`pip install -e .[bench]`); a section whose peer is not installed
measures tt_zoo alone and says so. Models are built from configs with random weights; nothing is
downloaded (HF_HUB_OFFLINE=1). Each section rewrites only its own part of OUTPUT.json (and
OUTPUT.md from all parts), so a later run can measure the remaining sections.

  python -m benchmarks.peers                                  # all sections, 5 rounds
  python -m benchmarks.peers --sections search --search-embeddings ict_bfs_wlp_512
  python -m benchmarks.peers --sections search \
      --search-embeddings-file runs/index_recall/MODEL-open_domain_reqa-578086.npy
  python -m benchmarks.peers --quick                          # smoke run, runs/peers_quick/
  python -m benchmarks.peers --sections mpnet --output results/mpnet_import \
      --peer-python /path/to/peers-venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

from benchmarks import arguments, text_rows

os.environ.setdefault("HF_HUB_OFFLINE", "1")      # models come from configs, never the hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no fork warnings; 2 cores anyway

from benchmarks.measure import is_busy, machine_info  # noqa: E402
from benchmarks.peers.report import (DEFAULT_SECTIONS, SECTIONS, merge_section,  # noqa: E402
                                     read_existing, render, section_module)

REPO = arguments.REPO
ENCODE_INPUTS = ("passages", "reqa")


def _names(text: str) -> list:
    return [x.strip() for x in text.split(",") if x.strip()]


def _some_of(p, flag: str, text: str, allowed) -> list:
    """The comma-separated names of `text`, each one of `allowed` (else a parser error)."""
    names = _names(text)
    unknown = sorted(set(names) - set(allowed))
    if unknown or not names:
        p.error(f"{flag}: unknown {unknown}; expected some of {', '.join(allowed)}")
    return names


def parse_args(argv=None):
    from tt_zoo.cli.common import PROJECT_VOCAB

    p = arguments.parser(__doc__, prog="python -m benchmarks.peers")
    p.add_argument("--sections", default=",".join(DEFAULT_SECTIONS),
                   help=f"comma-separated, of {', '.join(SECTIONS)} (default: "
                        f"{', '.join(DEFAULT_SECTIONS)})")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median over them)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes for a smoke run (a couple of minutes); writes "
                        "runs/peers_quick/performance.* unless --output is given")
    arguments.add_output(p, help="writes OUTPUT.md and OUTPUT.json (default results/performance)")
    p.add_argument("--vocab", default=str(PROJECT_VOCAB), help="the vocabulary of every model")
    arguments.add_squad(p, type=str, help="SQuAD v1.1 dev JSON")
    train = p.add_argument_group("train")
    train.add_argument("--sizes", default="tiny,mini", help="BERT tower sizes")
    train.add_argument("--batch", type=int, default=128)
    train.add_argument("--query-length", type=int, default=64)
    train.add_argument("--document-length", type=int, default=128)
    train.add_argument("--steps", type=int, default=5, help="timed training steps per round")
    train.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing)")
    train.add_argument("--train-bfloat16", action=argparse.BooleanOptionalAction, default=True,
                       help="also time tt_zoo's step under mixed_bfloat16")
    encode = p.add_argument_group("encode")
    encode.add_argument("--encode-inputs", default=",".join(ENCODE_INPUTS),
                        help="comma-separated, of passages (Wikispeedia 100-word passages with "
                             "titles) and reqa (ReQA-SQuAD(dev) candidates); default both")
    encode.add_argument("--documents", type=int, default=2000,
                        help="ReQA-SQuAD(dev) candidates encoded per round")
    encode.add_argument("--passages", type=int, default=2000,
                        help="Wikispeedia 100-word passages encoded per round")
    encode.add_argument("--wikispeedia", type=pathlib.Path,
                        default=arguments.data_dir() / "wikispeedia",
                        help="the SNAP Wikispeedia release (the passages' articles)")
    encode.add_argument("--encode-signature", action=argparse.BooleanOptionalAction,
                        default=True, help="also time the exported SavedModel's "
                                           "encode_document signature")
    encode.add_argument("--encode-batch", type=int, default=256)
    minilm = p.add_argument_group("minilm")
    minilm.add_argument("--minilm-passages", type=int, default=2048,
                        help="100-word passages with titles encoded a round")
    minilm.add_argument("--minilm-queries", type=int, default=2048,
                        help="ReQA-SQuAD(dev) questions encoded a round")
    minilm.add_argument("--minilm-batches", default="16,32,64,128",
                        help="batch sizes tried for each side; the fastest is timed")
    minilm.add_argument("--peer-python", default=sys.executable,
                        help="an interpreter with torch, transformers and sentence-transformers "
                             "(the peer's own process; default: this one)")
    mpnet = p.add_argument_group("mpnet")
    mpnet.add_argument("--mpnet-passages", type=int, default=1024,
                       help="100-word passages with titles encoded by each side (once)")
    search = p.add_argument_group("search")
    search.add_argument("--embeddings-dir", default=str(REPO / "runs" / "open_domain"),
                        help="NAME.npy + NAME.json of benchmarks/open_domain.py (read only)")
    search.add_argument("--search-embeddings", default=None,
                        help="comma-separated NAMEs in --embeddings-dir (default: all)")
    search.add_argument("--search-embeddings-file", action="append", default=None,
                        metavar="PATH.npy",
                        help="candidate embeddings [n, dim] to search instead of "
                             "--embeddings-dir (repeatable); PATH.json beside it must say it is "
                             "finished (shape, done) and name its model, else pass "
                             "--search-model")
    search.add_argument("--search-model", default=None,
                        help="the model that encoded --search-embeddings-file (a name or "
                             "path); the queries are encoded by it")
    search.add_argument("--scann-variants", default=None,
                        help="ScaNN indexes of other ScannConfig knobs beside tt_zoo's default, "
                             "comma-separated LEAVES[/avq=T][/soar=L][/over=F][/dims=D]"
                             "[/sample=N] "
                             "(LEAVES sqrt, Ksqrt or a number; 'none' for none; default "
                             "DEFAULT_SCANN_VARIANTS of peers.indexes, --quick: the first two)")
    search.add_argument("--synthetic", action="store_true",
                        help="search a seeded Gaussian mixture (64-d) instead of the cache")
    search.add_argument("--num-queries", type=int, default=2000)
    search.add_argument("--max-candidates", type=int, default=None,
                        help="use only the first N candidates (default all)")
    search.add_argument("--target-recall", type=float, default=0.95)
    search.add_argument("--hnsw-m", type=int, default=32)
    search.add_argument("--hnsw-ef-construction", type=int, default=40)
    args = p.parse_args(argv)

    args.sections = _some_of(p, "--sections", args.sections, SECTIONS)
    args.sizes = _names(args.sizes)
    if args.search_embeddings:
        args.search_embeddings = [x.strip() for x in args.search_embeddings.split(",")]
    if args.search_embeddings_file and (args.search_embeddings or args.synthetic):
        p.error("--search-embeddings-file replaces --embeddings-dir's NAMEs and --synthetic: "
                "pass one source")
    if args.search_model and not args.search_embeddings_file:
        p.error("--search-model names the model of --search-embeddings-file; pass that too")
    from benchmarks.peers.indexes import DEFAULT_SCANN_VARIANTS, parse_scann_variants
    try:
        if args.scann_variants is None:
            args.scann_variants = parse_scann_variants(DEFAULT_SCANN_VARIANTS)
            if args.quick:
                args.scann_variants = args.scann_variants[:2]
        else:
            args.scann_variants = parse_scann_variants(args.scann_variants)
    except ValueError as e:
        p.error(f"--scann-variants: {e}")
    args.encode_inputs = _some_of(p, "--encode-inputs", args.encode_inputs, ENCODE_INPUTS)
    try:
        args.minilm_batches = [int(x) for x in args.minilm_batches.split(",") if x.strip()]
    except ValueError:
        p.error(f"--minilm-batches: comma-separated integers (got {args.minilm_batches!r})")
    if not args.minilm_batches or min(args.minilm_batches) < 1:
        p.error(f"--minilm-batches: positive integers (got {args.minilm_batches})")
    for name in ("rounds", "batch", "steps", "documents", "passages", "encode_batch",
                 "num_queries", "minilm_passages", "minilm_queries", "mpnet_passages"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(args, name)})")
    if not 0 < args.target_recall <= 1:
        p.error(f"--target-recall must be in (0, 1] (got {args.target_recall})")
    if args.output is None:
        args.output = (REPO / "runs" / "peers_quick" / "performance" if args.quick
                       else REPO / "results" / "performance")
    if ("search" in args.sections and not args.synthetic and not args.search_embeddings_file
            and not os.path.isdir(args.embeddings_dir)):
        if not args.quick:  # fail before measuring the other sections, not after
            p.error(f"--embeddings-dir {args.embeddings_dir} does not exist (section search): "
                    "pass --search-embeddings-file PATH.npy, run benchmarks/open_domain.py, or "
                    "pass --synthetic")
        print(f"benchmarks.peers --quick: no --embeddings-dir {args.embeddings_dir}; the search "
              "smoke run searches the synthetic set (--synthetic)", file=sys.stderr)
        args.synthetic = True
    needs = {"train": ["vocab"],
             "encode": ["vocab"] + (["squad"] if "reqa" in args.encode_inputs else [])
             + (["wikispeedia"] if "passages" in args.encode_inputs else []),
             "search": [] if args.synthetic else ["squad"],
             "minilm": ["wikispeedia", "squad"], "mpnet": ["wikispeedia"]}
    for section in args.sections:
        for what in needs[section]:
            exists = os.path.isdir if what == "wikispeedia" else os.path.isfile
            if not exists(getattr(args, what)):
                p.error(f"--{what} {getattr(args, what)} does not exist (section {section}; "
                        "set TT_ZOO_DATA or pass the path)")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    import tt_zoo  # noqa: F401  (before TensorFlow: Keras 2 as tf.keras)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    results = read_existing(args.output)
    try:
        merge_section(results, "check", {})  # refuse someone else's file before measuring
    except ValueError as e:
        raise SystemExit(f"{args.output.with_suffix('.json')}: {e}")
    for name in args.sections:
        log(f"section {name}{' (quick)' if args.quick else ''}")
        start = time.perf_counter()
        machine = machine_info()
        if is_busy(machine):
            log(f"WARNING: other processes keep {machine['other_busy_cores_at_start']} of "
                f"{machine['cores']} cores busy: that costs the OpenMP-based peers (PyTorch, "
                "FAISS) far more than TensorFlow and ScaNN; measure on a quiet machine")
        part = section_module(name).run(args, log)
        machine["threads"] = part.pop("threads", {})
        part.update(machine=text_rows.machine_end(machine), quick=args.quick,
                    wall_s=time.perf_counter() - start)
        results = merge_section(results, name, part)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        text_rows.write(results, args.output, render)
        log(f"section {name} done in {part['wall_s']:.0f} s; wrote "
            f"{args.output.with_suffix('.md')} and .json")
    print(render(results))
    return results


if __name__ == "__main__":
    main()
