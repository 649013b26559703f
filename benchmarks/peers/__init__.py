"""benchmarks.peers: tt_zoo beside PyTorch, sentence-transformers and FAISS, in one run on one
machine (results/performance.{md,json}). One entry point, ``python -m benchmarks.peers``
(`__main__`: the flags and the run); ``--help`` says what each section measures.

Modules, one idea each:

- report: the results document, one part per section, merged and rendered;
- train, encode, minilm, search: the sections, each with its `run(args, log)` and `render(part)`;
- indexes (the indexes `search` builds and sweeps) and embeddings (where its candidates and
  queries come from);
- torch_worker: the PyTorch side of `minilm`, run as a script in the peer's own interpreter
  (--peer-python), so it imports nothing from here.

How they time, rate and describe the machine is benchmarks.measure, shared with the other
benchmarks; results are written through benchmarks.text_rows.write.
"""
