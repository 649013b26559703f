"""Open-domain ReQA, the paper's Table 6 on our data: SQuAD questions against Wikipedia too.

Chang et al. 2020, Sec. 5.3 / Table 6 add 1M (sentence, passage) candidates from DrQA's
Wikipedia to ReQA's, so a retriever must find the gold sentence among far more distractors.
Here the distractors are every (sentence, passage) candidate of the Wikispeedia articles (the
passages of `tt_zoo.data.passages.make_passages`, cut into sentences as ReQA cuts SQuAD's), about
700,000. For each model: R@1/5/10/50/100 and MRR by exact search and through ScaNN, then ScaNN
against brute force at that size (recall@10 of ScaNN against the exact top-10, queries/s of
both, build time, memory), with BM25 over the same candidates beside them.

Candidate embeddings are encoded in chunks into a float32 file under --work (bounded memory,
a progress bar, and a rerun resumes at the first chunk not yet written).

  python benchmarks/open_domain.py --model ict_bfs_wlp_512 --model bow_mlp_ict_bfs_wlp_512
  python benchmarks/open_domain.py --model none_512 --limit-articles 50 --output /tmp/od
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np
from tqdm import tqdm

from tt_zoo.retrieval import bm25, reqa as reqa_lib, metrics as retrieval_metrics
from tt_zoo.data.article_sources import read_articles
from tt_zoo.atomic_io import write_json, write_text
from tt_zoo.retrieval.index import EmbeddingIndex
from tt_zoo.data.passages import make_passages, split_sentences

REPO = pathlib.Path(__file__).resolve().parents[1]

COLUMNS = ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR")
CHUNK = 8192


def open_domain_reqa(reqa, wikipedia, limit_articles=None):
    """ReQA with every Wikispeedia (sentence, passage) candidate appended after SQuAD's own, so
    the gold indices are unchanged."""
    candidates = list(reqa.candidates)
    seen = {(c.sentence, c.passage) for c in candidates}
    passage_index = 1 + max(c.passage_index for c in candidates)
    articles = 0
    for article in read_articles(wikipedia, progress=True):
        if limit_articles is not None and articles >= limit_articles:
            break
        articles += 1
        for passage in make_passages(article):
            for sentence in split_sentences(passage.text):
                if (sentence, passage.text) not in seen:
                    seen.add((sentence, passage.text))
                    candidates.append(reqa_lib.Candidate(sentence, passage.text, passage_index))
            passage_index += 1
    added = len(candidates) - len(reqa.candidates)
    source = f"{reqa.source} + {added:,} Wikispeedia candidates ({articles:,} articles)"
    return reqa_lib.ReQA(reqa.questions, candidates, reqa.report, source=source), added


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def encode_candidates_streaming(model, reqa, path: pathlib.Path) -> np.ndarray:
    """All candidate embeddings in a float32 file ``path`` (memory-mapped), written chunk by
    chunk; ``path.with_suffix('.json')`` records the chunks done, so a rerun resumes."""
    n = len(reqa.candidates)
    dim = model.keras_model.embedding_dim
    state_path = path.with_suffix(".json")
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    if state.get("shape") != [n, dim] or state.get("model") != str(model.path):
        state = {"shape": [n, dim], "model": str(model.path), "done": 0}
    path.parent.mkdir(parents=True, exist_ok=True)
    array = np.lib.format.open_memmap(path, mode="r+" if state["done"] and path.is_file()
                                      else "w+", dtype=np.float32, shape=(n, dim))
    with tqdm(total=n, initial=state["done"], desc=f"encode {model.name}", unit="doc",
              file=sys.stderr, mininterval=10) as bar:
        for start in range(state["done"], n, CHUNK):
            chunk = reqa.candidates[start:start + CHUNK]
            array[start:start + len(chunk)] = model.encode_documents(
                [c.passage for c in chunk], titles=[c.sentence for c in chunk])
            array.flush()
            state["done"] = start + len(chunk)
            write_json(state_path, state)
            bar.update(len(chunk))
    return array


def evaluate_model(name: str, reqa, work: pathlib.Path, scann_benchmark) -> dict:
    import tt_zoo

    model = tt_zoo.load(name)
    t = time.perf_counter()
    embeddings = encode_candidates_streaming(model, reqa, work / f"{model.name}.npy")
    encode_s = time.perf_counter() - t
    embeddings = np.asarray(embeddings)  # the indexes hold their own copies in memory

    def scann_index(candidates):
        before = _rss_bytes()
        index = EmbeddingIndex(candidates, [str(i) for i in range(len(candidates))])
        scann_index.memory_bytes = _rss_bytes() - before
        return index

    m = retrieval_metrics.evaluate_encoder(model, reqa, candidate_embeddings=embeddings,
                                           build_index=scann_index)
    queries = model.encode_queries([q.text for q in reqa.questions])
    timing = scann_benchmark(embeddings, queries, k=10, runs=3, single_queries=500)
    return {"model": model.name, "exact": m["exact"], "scann": m["index"],
            "seconds": {**m["seconds"], "encode_candidates_streaming": encode_s},
            "scann_index_memory_bytes": scann_index.memory_bytes,
            "embeddings_bytes": int(embeddings.nbytes), "scann_vs_brute_force": timing}


def format_report(result: dict) -> str:
    lines = ["# Open-domain ReQA-SQuAD(dev): the paper's Table 6 on our data", "",
             f"Candidates: {result['num_candidates']:,} = {result['num_reqa_candidates']:,} "
             f"ReQA-SQuAD(dev) (sentence, passage) pairs + {result['num_added']:,} from "
             f"Wikispeedia; {result['num_questions']:,} questions (all of SQuAD dev, zero-shot). "
             "Generated by `python benchmarks/open_domain.py` "
             f"({result['wall_s'] / 60:.0f} min on this machine).", "",
             "| model | search | " + " | ".join(COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    b = result["bm25"]["exact"]
    lines.append("| BM25 | exact | " + " | ".join(f"{100 * b[c]:.1f}" for c in COLUMNS) + " |")
    for r in result["models"]:
        for search in ("exact", "scann"):
            lines.append(f"| {r['model']} | {search} | "
                         + " | ".join(f"{100 * r[search][c]:.1f}" for c in COLUMNS) + " |")
    lines += ["", "ScaNN against brute force over the same embeddings (`tt_zoo.retrieval.index."
              "EmbeddingIndex`, default `ScannConfig.for_size`; queries/s medians of 3 runs, "
              "one batch of all questions, and one question at a time over 500):", "",
              "| model | ScaNN recall@10 vs exact | ScaNN q/s (batch) | brute force q/s (batch) "
              "| ratio | ScaNN q/s (single) | brute force q/s (single) | ScaNN build s "
              "| ScaNN memory MiB | embeddings MiB | encoding s |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["models"]:
        t = r["scann_vs_brute_force"]
        lines.append(
            f"| {r['model']} | {t['scann_recall_at_10']:.3f} | {t['scann_batch_qps']:,.0f} | "
            f"{t['brute_force_batch_qps']:,.0f} | "
            f"{t['scann_batch_qps'] / t['brute_force_batch_qps']:.1f}x | "
            f"{t['scann_single_qps']:,.0f} | {t['brute_force_single_qps']:,.0f} | "
            f"{t['scann_build_s']:.0f} | {r['scann_index_memory_bytes'] / 2**20:,.0f} | "
            f"{r['embeddings_bytes'] / 2**20:,.0f} | "
            f"{r['seconds']['encode_candidates_streaming']:.0f} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    data = pathlib.Path(os.environ.get("TT_ZOO_DATA", REPO.parent / "shared" / "data"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--model", action="append", default=[], metavar="NAME_OR_PATH")
    p.add_argument("--squad", type=pathlib.Path, default=data / "squad" / "dev-v1.1.json")
    p.add_argument("--wikipedia", type=pathlib.Path, default=data / "wikispeedia",
                   help="any article source tt_zoo reads (default: $TT_ZOO_DATA/wikispeedia)")
    p.add_argument("--limit-articles", type=int, help="use only the first N articles")
    p.add_argument("--work", type=pathlib.Path, default=REPO / "runs" / "open_domain",
                   help="where candidate embeddings are streamed to")
    p.add_argument("--output", type=pathlib.Path, default=REPO / "results" / "open_domain",
                   help="writes OUTPUT.md and OUTPUT.json")
    args = p.parse_args(argv)
    for what in ("squad", "wikipedia"):
        if not getattr(args, what).exists():
            p.error(f"--{what}: {getattr(args, what)} does not exist (set TT_ZOO_DATA)")
    if args.limit_articles is not None and args.limit_articles < 1:
        p.error(f"--limit-articles must be at least 1 (got {args.limit_articles})")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    t0 = time.perf_counter()
    squad = reqa_lib.build_reqa(args.squad)
    reqa, added = open_domain_reqa(squad, args.wikipedia, args.limit_articles)
    print(reqa.summary(), file=sys.stderr)
    t = time.perf_counter()
    result = {"source": reqa.source, "num_candidates": len(reqa.candidates),
              "num_reqa_candidates": len(squad.candidates), "num_added": added,
              "num_questions": len(reqa.questions), "limit_articles": args.limit_articles,
              "bm25": bm25.evaluate_bm25(reqa, show_progress=True)}
    print(f"BM25 in {time.perf_counter() - t:.0f} s: "
          f"R@100 {100 * result['bm25']['exact']['R@100']:.1f}",
          file=sys.stderr)
    from scann_vs_brute_force import benchmark as scann_benchmark  # beside this file
    result["models"] = [evaluate_model(name, reqa, args.work, scann_benchmark)
                        for name in args.model]
    result["wall_s"] = time.perf_counter() - t0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output.with_suffix(".json"), result)
    report = format_report(result)
    write_text(args.output.with_suffix(".md"), report)
    print(report)
    return result


if __name__ == "__main__":
    main()
