"""The benchmarks: each script measures one thing and writes its results/ files (OUTPUT.md the
report, OUTPUT.json the numbers). Run from the repository root as ``python -m benchmarks NAME``
(the one runner, benchmarks/__main__.py: with no NAME it lists them from this index) or, the
same, ``python -m benchmarks.NAME`` (``--help`` lists a script's flags); the scripts import one
another as ``from benchmarks import NAME``. results/README.md says which docs page reads each
results file.

Scripts (results/ file written by default):

- amx_parts: where one bfloat16 Transformer block's time goes on the AMX units, beside float32
  (amx_parts)
- amx_training: training in bfloat16 on the AMX units against float32 (amx_training)
- amx_training_variants: the bfloat16 training step with its parts swapped: where its time
  goes (amx_training_variants)
- batch_signal: learning curves with clustered batches, BM25 hard negatives, GradCache, larger
  batches (batch_signal.{md,json}, batch_signal_{bert,bow}.png)
- beam_encode: `tt-zoo index-corpus` on Beam's DirectRunner against plain encoding; float16 / int8
  storage recall (beam_encode)
- bm25_reqa: BM25 on ReQA-SQuAD(dev) by text field, stemmer and stopwords (prints the table;
  --json-out FILE)
- bm25_speed: BM25 search speed, tt_zoo's BM25Retriever against bm25s's retrieve (bm25_speed)
- checkpoints: all-MiniLM-L6-v2 imported, distilled, trained on two QA tasks, beside BM25
  (checkpoints; checkpoints_* with --output)
- docs_tables: rewrites README.md's shipped-models table and results/README.md (--check: exit 1 when
  stale)
- encode_throughput: document encoding throughput by encode setting (encode_throughput; encode_speed
  with --output)
- finetune_hard_negatives: ReQA fine-tuning with and without one BM25 hard negative
  (finetune_hard_negatives)
- fusion: BM25 fused with the single-vector flagships, RRF and convex; --fuse-with adds a third
  retriever (fusion; fusion_* with --output)
- grad_cache_memory: peak memory and step time with and without GradCache (grad_cache_memory, with
  --output)
- index_recall: recall through the default ScaNN index against exact search, by corpus size
  (index_recall, index_recall_open_domain); --single-queries N also times one question at a time;
  open_domain's ScaNN-against-brute-force table is its `against_exact`
- late_interaction: a ColBERT model beside BM25 and the single-vector flagships (late_interaction;
  late_interaction_* with --output)
- make_pairs: single-machine against Beam pair generation, same input and seed (prints; exit 1 when
  they differ)
- multi_task: Maillard et al. 2021's multi-task experiments at this scale (multi_task.{md,json,png})
- odqa: open-domain QA answer recall of BM25 and the shipped models (odqa)
- open_domain: open-domain ReQA, the paper's Table 6 on this data (open_domain)
- peers (a package, one entry point: `python -m benchmarks.peers`): tt_zoo beside PyTorch,
  sentence-transformers and FAISS (performance); its sections train, encode, search and minilm are
  modules of it (search's indexes and embeddings too, report the results document, torch_worker
  the PyTorch side in its own process)
- precision_cost: what bfloat16 encoding costs in recall against float32 on ReQA and ODQA
  (precision_cost)
- pretrain_curve: learning curves of pretraining configurations (pretrain_curve)
- pretrain_tasks: the pretraining-task grid (pretrain_tasks.{md,json,png}); pretrain_tasks_eval
  scores one cell, pretrain_tasks_report writes the report
- qgen_questions: generated questions over the ODQA passages as a question file, for
  distillation (a step, no results file)
- qgen_samples: sample questions of the offline question generator, its yield and speed
  (qgen_samples.md)
- reqa_questions: the ReQA split's training questions as an ODQA question file, for query
  adaptation and distillation over the ODQA passages (a step, no results file)
- reqa_misses: where ReQA's R@1 misses go (a sibling sentence of the gold paragraph or another
  paragraph), BM25 and models, and how many BM25 hard negatives are siblings (reqa_misses)
- search_loop: the retrieval loop timed end to end as a user runs it (`tt-zoo index`, `search`,
  `evaluate`), every kind of index, on the sample corpus (search_loop)
- term_weights: HDCT-weighted BM25 beside BM25 and the flagships (term_weights; term_weights_* with
  --output)
- train_step: training-step throughput, pairs/s and fraction of peak FLOP/s (train_step,
  train_step_xla, with --output)

Shared modules: arguments (the flags and paths every script shares: --output, --model,
--data-dir, --squad, the data folder), measure (the one way to time: interleaved rounds, rates,
recall, the machine line), text_rows (the run, rows and report of fusion, term_weights,
late_interaction and checkpoints; the writer of OUTPUT.json and OUTPUT.md).
"""
