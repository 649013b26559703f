"""The PyTorch side of benchmarks.peers' `minilm` section, in its own process:
sentence-transformers and a PyTorch training loop on the same checkpoint folder tt_zoo imports.

Started by `benchmarks.peers.minilm.TorchPeer` with the interpreter of an environment that has
torch, transformers and sentence-transformers (`pip install -e .[bench]`, or any other), it
loads the model once and then answers one JSON command per line on stdin with one JSON line on
stdout, so the parent can interleave its rounds with tt_zoo's (A B A B ...) while each library
keeps its own process, threads and allocator:

  {"op": "encode_documents", "batch": 32}   -> {"seconds": s}   (the (title, passage) pairs;
                                                 "autocast": "bfloat16" runs them under
                                                 torch.autocast("cpu", torch.bfloat16);
                                                                  "limit": the first N only)
  {"op": "encode_queries", "batch": 64}     -> {"seconds": s}
  {"op": "train", "steps": 5}               -> {"seconds": s}   (in-batch softmax steps)
  {"op": "dump", "batch": 32}               -> {"vectors": path, "token_ids": path, "seconds": s}
                                               ("texts": "questions": the single texts)
  {"op": "quit"}

Inputs come from a JSON file written by the parent (titles, texts, questions) and an .npz of the
training batches' token ids (the arrays tt_zoo's own step reads), so both sides see the same data.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Trainer:
    """The step DPR / Tevatron-style code writes: the checkpoint's BertModel shared by both
    sides, mean pooling over the mask, L2 norm, scores / temperature, cross-entropy over the
    in-batch negatives, ``loss.backward()``, AdamW."""

    def __init__(self, folder: str, arrays: str, temperature: float, learning_rate: float):
        import numpy as np
        import torch
        import transformers

        torch.manual_seed(0)
        self.torch = torch
        self.encoder = transformers.BertModel.from_pretrained(folder, add_pooling_layer=False)
        self.encoder.train()
        self.optimizer = torch.optim.AdamW(self.encoder.parameters(), lr=learning_rate)
        self.temperature = temperature
        with np.load(arrays) as stored:
            self.batches = [{k: torch.as_tensor(stored[f"{i}/{k}"], dtype=torch.long)
                             for k in ("q_ids", "q_mask", "q_types", "d_ids", "d_mask",
                                       "d_types")}
                            for i in range(int(stored["num_batches"]))]
        self.next = 0

    def embed(self, ids, mask, types):
        states = self.encoder(input_ids=ids, attention_mask=mask,
                              token_type_ids=types).last_hidden_state
        weights = mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.torch.nn.functional.normalize(pooled, dim=-1)

    def step(self):
        b = self.batches[self.next % len(self.batches)]
        self.next += 1
        queries = self.embed(b["q_ids"], b["q_mask"], b["q_types"])
        documents = self.embed(b["d_ids"], b["d_mask"], b["d_types"])
        scores = queries @ documents.T / self.temperature
        loss = self.torch.nn.functional.cross_entropy(scores, self.torch.arange(len(scores)))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()


def autocast(torch, dtype):
    """PyTorch's own mixed precision on the CPU for `dtype` ("bfloat16"), or no change."""
    import contextlib

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=getattr(torch, dtype))


def main(folder: str, inputs: str, arrays: str, work: str, temperature: float,
         learning_rate: float) -> None:
    import numpy as np
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    data = json.loads(open(inputs, encoding="utf-8").read())
    pairs = list(zip(data["titles"], data["texts"]))
    model = SentenceTransformer(folder, device="cpu")
    trainer = Trainer(folder, arrays, temperature, learning_rate) if arrays else None
    reply({"ready": True, "versions": {"torch": torch.__version__,
                                       "sentence-transformers": sentence_transformers.__version__},
           "threads": torch.get_num_threads(), "max_seq_length": model.max_seq_length})
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        start = time.perf_counter()
        if op == "encode_documents":
            with autocast(torch, command.get("autocast")):
                model.encode(pairs[:command.get("limit")], batch_size=command["batch"])
        elif op == "encode_queries":
            model.encode(data["questions"], batch_size=command["batch"])
        elif op == "train":
            for _ in range(command["steps"]):
                trainer.step()
        elif op == "dump":
            # The (title, passage) pairs, or with "texts": "questions" the single texts.
            single = command.get("texts") == "questions"
            items = data["questions"] if single else pairs
            stem = "questions" if single else "peer"
            vectors = model.encode(items, batch_size=command["batch"], convert_to_numpy=True)
            seconds = time.perf_counter() - start
            ids = [model.tokenizer(*((x,) if single else x), truncation="longest_first",
                                   max_length=model.max_seq_length)["input_ids"]
                   for x in items]
            np.save(os.path.join(work, f"{stem}_vectors.npy"), vectors)
            with open(os.path.join(work, f"{stem}_token_ids.json"), "w", encoding="utf-8") as f:
                json.dump(ids, f)
            reply({"vectors": os.path.join(work, f"{stem}_vectors.npy"),
                   "token_ids": os.path.join(work, f"{stem}_token_ids.json"),
                   "seconds": seconds})
            continue
        elif op == "quit":
            return
        else:
            reply({"error": f"unknown op {op!r}"})
            continue
        reply({"seconds": time.perf_counter() - start})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] or None, sys.argv[4], float(sys.argv[5]),
         float(sys.argv[6]))
