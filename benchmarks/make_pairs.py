#!/usr/bin/env python
"""Single-machine vs Beam pair generation on the same input and seed.

Runs ``tt-zoo make-pairs`` twice (``--runner local`` and ``--runner beam``), prints the wall
time and pairs/s of each (from their ``stats.json``), and checks that both wrote the same
multiset of pairs: sorted (query, doc_id, task) tuples, and also the full records (title, text,
q(d)).

    python -m benchmarks.make_pairs --input $TT_ZOO_DATA/wikispeedia \
        --vocab $TT_ZOO_DATA/bert-vocab/vocab.txt --workdir /tmp/make_pairs_bench

Exit status 1 when the two paths disagree.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

from benchmarks import arguments
from tt_zoo.data import features, pairs_io

REPO = pathlib.Path(__file__).resolve().parents[1]


def snapshot_code(workdir: str) -> str:
    """Copies tt_zoo/ to WORKDIR/code, so both runs use the very same code even while the
    working tree changes under them; returns the folder to put on PYTHONPATH."""
    code = os.path.join(workdir, "code")
    if os.path.exists(code):
        shutil.rmtree(code)
    shutil.copytree(REPO / "tt_zoo", os.path.join(code, "tt_zoo"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return code


def run_recipe(runner: str, output: str, args, code: str) -> dict:
    cmd = [sys.executable, "-m", "tt_zoo.cli", "make-pairs", "--input", args.input,
           "--output", output, "--runner", runner, "--tasks", args.tasks,
           "--seed", str(args.seed), "--pairs-per-article", str(args.pairs_per_article),
           "--num-shards", str(args.num_shards)]
    if args.vocab:
        cmd += ["--vocab", args.vocab]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if runner == "beam":
        cmd += [f"--beam-arg={a}" for a in args.beam_arg]
    elif args.in_memory:
        cmd.append("--in-memory")
    if args.no_progress:
        cmd.append("--no-progress")
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=code + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run(cmd, check=True, env=env)
    elapsed = time.perf_counter() - start
    with open(os.path.join(output, "stats.json")) as f:
        stats = json.load(f)
    stats["extra"]["process_s"] = elapsed
    return stats


def records(output: str):
    full = collections.Counter()
    keys = collections.Counter()
    for r in pairs_io.iter_pair_records(output, verify="sha256"):
        keys[(r[features.QUERY], r[features.DOC_ID], r[features.TASK])] += 1
        full[(r[features.QUERY], r[features.DOC_TITLE], r[features.DOC_TEXT], r[features.DOC_ID],
              r[features.TASK], round(r[features.DOC_SAMPLING_PROB], 9))] += 1
    return keys, full


def main(argv=None) -> int:
    parser = arguments.parser(__doc__, summary="paragraph")
    parser.add_argument("--input", required=True)
    parser.add_argument("--tasks", default="ict,bfs,wlp")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs-per-article", type=int, default=4)
    parser.add_argument("--num-shards", type=int, default=8)
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--workdir", default="/tmp/make_pairs_bench")
    parser.add_argument("--local-output", default=None,
                        help="where the local run writes (default WORKDIR/local)")
    parser.add_argument("--beam-output", default=None,
                        help="where the Beam run writes (default WORKDIR/beam)")
    parser.add_argument("--beam-arg", action="append", default=[])
    parser.add_argument("--in-memory", action="store_true",
                        help="local run reads the corpus once into memory (recipe --in-memory)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    local_out = args.local_output or os.path.join(args.workdir, "local")
    beam_out = args.beam_output or os.path.join(args.workdir, "beam")

    code = snapshot_code(args.workdir)
    print(f"code snapshot: {code}", flush=True)
    results = {"local": run_recipe("local", local_out, args, code),
               "beam": run_recipe("beam", beam_out, args, code)}
    local_keys, local_full = records(local_out)
    beam_keys, beam_full = records(beam_out)

    print("\n=== make_pairs benchmark ===")
    print(f"input {args.input}, tasks {args.tasks}, seed {args.seed}, "
          f"pairs/article {args.pairs_per_article}, limit {args.limit}, "
          f"local in-memory {args.in_memory}, beam args {args.beam_arg}")
    for name, stats in results.items():
        e = stats["extra"]
        print(f"{name:>5}: {e['num_pairs']:,} pairs, wall {e['wall_s']:.1f} s "
              f"(read+generate+write), {e['pairs_per_s']:.1f} pairs/s; "
              f"process incl. startup and stats {e['process_s']:.1f} s")
    same_keys = local_keys == beam_keys
    same_full = local_full == beam_full
    print(f"same multiset of (query, doc_id, task): {same_keys} "
          f"({sum(local_keys.values()):,} vs {sum(beam_keys.values()):,})")
    print(f"same full records incl. title, text, q(d): {same_full}")
    if not same_keys:
        only_local = local_keys - beam_keys
        only_beam = beam_keys - local_keys
        print(f"only local: {sum(only_local.values())}, e.g. {list(only_local)[:3]}")
        print(f"only beam: {sum(only_beam.values())}, e.g. {list(only_beam)[:3]}")
    return 0 if same_keys and same_full else 1


if __name__ == "__main__":
    sys.exit(main())
