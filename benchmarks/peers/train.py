"""Section `train` of benchmarks.peers: one two-tower training step, tt_zoo against PyTorch.

tt_zoo's step is what `recipes/pretrain.py` runs at CPU scale (`tt_zoo.zoo.registry.CPU_SCALE`:
one BERT tower shared by queries and documents, mean pooling, L2-normalised embeddings,
in-batch softmax at temperature 0.05, with the corrected sampled softmax's logQ correction and
accidental-hit removal, Chang et al. 2020 Sec. 2) on token ids made once on the host and served
by `tt_zoo.training.step_data.step_batches`, through `model.fit`.

The PyTorch step is the one DPR / Tevatron-style code writes: a `transformers.BertModel` of the
same shape and vocabulary size, mean pooling over the attention mask, a linear projection to the
same dimension, L2 normalisation, scores / temperature, cross-entropy over the in-batch
negatives, `loss.backward()`, AdamW. It reads the same token arrays, served by the same
`step_batches`. Both run in float32, dropout 0.1, on the same threads, in interleaved rounds; with
--train-bfloat16, tt_zoo's step also runs under the mixed_bfloat16 policy (a processor with
AVX512_BF16 doubles its matmul throughput in bfloat16).
"""

from __future__ import annotations

# Registry variants whose towers are the "tiny" (2 layers, hidden 128, 2 heads) and "mini"
# (4/256/4) BERT at CPU scale.
VARIANTS = {"tiny": "ict_bfs_wlp_512", "mini": "bert_mini_ict_bfs_wlp_512"}
PEER_MODULES = ("torch", "transformers")
LEARNING_RATE = 1e-4


def settings(args) -> dict:
    if args.quick:
        return {"sizes": args.sizes[:1], "batch": 16, "query_length": 16,
                "document_length": 32, "steps": 2, "warmup": 1, "rounds": min(args.rounds, 2),
                "bfloat16": args.train_bfloat16}
    return {"sizes": args.sizes, "batch": args.batch, "query_length": args.query_length,
            "document_length": args.document_length, "steps": args.steps,
            "warmup": args.warmup, "rounds": args.rounds, "bfloat16": args.train_bfloat16}


def tt_zoo_contender(variant: str, vocab_path: str, s: dict, log, policy: str = "float32"):
    """A compiled tt_zoo model of the registry `variant` under the Keras dtype `policy`
    (`recipes/pretrain.py --dtype-policy`), the token arrays it trains on, and a runner timing
    `steps` training steps."""
    import tensorflow as tf

    from tt_zoo.zoo import build, registry
    from tt_zoo.training.step_data import step_batches, tokenize_pair_set
    from benchmarks.train_step import StepTimer, synthetic_pairs

    tf.keras.utils.set_random_seed(0)
    spec = registry.get_spec(variant)
    tf.keras.mixed_precision.set_global_policy(policy)
    try:
        model = build.build_untrained(spec, vocab_path, query_length=s["query_length"],
                                    document_length=s["document_length"])
        model.build_by_calling()
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
    model.compile(optimizer=tf.keras.optimizers.Adam(LEARNING_RATE))
    vocab = list(model.query_preprocessor.vocabulary)
    pairs = synthetic_pairs(vocab, s["batch"], s["query_length"], s["document_length"])
    arrays = tokenize_pair_set(model, pairs.take(4).unbatch(), log=log)
    batches = iter(step_batches(arrays, s["batch"], seed=0, start_step=0))

    def run() -> float:
        timer = StepTimer()
        model.fit(batches, steps_per_epoch=s["steps"], epochs=1, verbose=0, callbacks=[timer])
        return sum(timer.times)

    model.fit(batches, steps_per_epoch=s["warmup"], epochs=1, verbose=0)  # tracing
    return model, arrays, run


def bert_config(shape, vocab_size: int, max_length: int, **extra):
    """A `transformers.BertConfig` of a tt_zoo BERT tower's shape (`resolve_bert_shape`)."""
    import transformers

    return transformers.BertConfig(
        vocab_size=vocab_size, hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_attention_heads,
        intermediate_size=shape.inner_dim, max_position_embeddings=max_length, **extra)


class _TorchTwoTower:
    """The PyTorch two-tower model: a shared BertModel, mean pooling, projection, L2 norm."""

    def __init__(self, shape, vocab_size: int, max_length: int, dim: int, dropout: float = 0.1):
        import torch
        import transformers

        torch.manual_seed(0)
        config = bert_config(shape, vocab_size, max_length, hidden_dropout_prob=dropout,
                             attention_probs_dropout_prob=dropout)
        self.encoder = transformers.BertModel(config, add_pooling_layer=False)
        self.projection = torch.nn.Linear(shape.hidden_size, dim)
        self.modules = torch.nn.ModuleList([self.encoder, self.projection])

    def embed(self, ids, mask, types):
        import torch

        states = self.encoder(input_ids=ids, attention_mask=mask,
                              token_type_ids=types).last_hidden_state
        weights = mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return torch.nn.functional.normalize(self.projection(pooled), dim=-1)


def _torch_contender(shape, vocab_size: int, dim: int, arrays, s: dict, temperature: float):
    """The PyTorch model and a runner timing `steps` training steps on the same arrays."""
    import torch

    from benchmarks.measure import stopwatch
    from tt_zoo.data import features as F
    from tt_zoo.training.step_data import step_batches

    model = _TorchTwoTower(shape, vocab_size, max(s["query_length"], s["document_length"]), dim)
    model.modules.train()
    optimizer = torch.optim.AdamW(model.modules.parameters(), lr=LEARNING_RATE)
    batches = step_batches(arrays, s["batch"], seed=0, start_step=0).as_numpy_iterator()

    def tensors(packed):
        return [torch.as_tensor(packed[k], dtype=torch.long)  # a copy: the arrays are read-only
                for k in ("input_word_ids", "input_mask", "input_type_ids")]

    def step():
        batch = next(batches)
        queries = model.embed(*tensors(batch[F.QUERY_INPUTS]))
        documents = model.embed(*tensors(batch[F.DOCUMENT_INPUTS]))
        scores = queries @ documents.T / temperature
        labels = torch.arange(scores.shape[0])
        loss = torch.nn.functional.cross_entropy(scores, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(s["warmup"]):
        step()
    return model, stopwatch(lambda: [step() for _ in range(s["steps"])])


def matmul_gflops(dtype: str, size: int = 2048, reps: int = 10, rounds: int = 3) -> float:
    """TensorFlow's square matmul throughput on this machine (median of `rounds`): the rate a
    dense step could at best reach, the yardstick of the steps' model GFLOP/s."""
    import statistics

    import tensorflow as tf

    from benchmarks.measure import stopwatch

    a = tf.cast(tf.random.stateless_normal([size, size], seed=[0, 1]), dtype)
    b = tf.cast(tf.random.stateless_normal([size, size], seed=[0, 2]), dtype)
    product = tf.function(lambda x, y: tf.reduce_sum(tf.cast(tf.matmul(x, y), tf.float32)))
    product(a, b).numpy()  # tracing, first allocations
    run = stopwatch(lambda: [product(a, b).numpy() for _ in range(reps)])
    times = [run() for _ in range(rounds)]
    return 2 * size ** 3 * reps / statistics.median(times) / 1e9


def run(args, log) -> dict:
    """Measures both steps for each tower size; returns this section's results."""
    from benchmarks.measure import (add_ratio, interleaved_rounds, library_threads, rate_row,
                                    unavailable_reason)
    from tt_zoo.modeling.towers import resolve_bert_shape
    from tt_zoo.zoo import registry

    s = settings(args)
    peer_reason = unavailable_reason(PEER_MODULES)
    runners, meta = {}, {}
    for size in s["sizes"]:
        log(f"train: building tt_zoo {size}")
        model, arrays, run_tt = tt_zoo_contender(VARIANTS[size], args.vocab, s, log)
        runners[f"tt_zoo/{size}"] = run_tt
        meta[f"tt_zoo/{size}"] = {"size": size, "framework": "tt_zoo",
                                  "what": "TwoTowerModel.fit (tf-keras), Adam",
                                  "parameters": int(model.count_params())}
        if s["bfloat16"]:
            log(f"train: building tt_zoo {size} (mixed_bfloat16)")
            bf16_model, _, run_bf16 = tt_zoo_contender(VARIANTS[size], args.vocab, s, log,
                                                       policy="mixed_bfloat16")
            runners[f"tt_zoo-bf16/{size}"] = run_bf16
            meta[f"tt_zoo-bf16/{size}"] = {
                "size": size, "framework": "tt_zoo mixed_bfloat16",
                "what": "the same, --dtype-policy mixed_bfloat16 (bfloat16 matmuls, float32 "
                        "weights, scores and loss)",
                "parameters": int(bf16_model.count_params())}
        if peer_reason:
            continue
        log(f"train: building PyTorch {size}")
        spec = registry.get_spec(VARIANTS[size])
        torch_model, run_torch = _torch_contender(
            resolve_bert_shape(spec.tower_size), model.query_preprocessor.vocab_size,
            spec.embedding_dim, arrays, s, spec.options.temperature)
        runners[f"pytorch/{size}"] = run_torch
        meta[f"pytorch/{size}"] = {
            "size": size, "framework": "pytorch",
            "what": "transformers.BertModel + mean pool + Linear, loss.backward(), AdamW",
            "parameters": sum(p.numel() for p in torch_model.modules.parameters())}

    seconds = interleaved_rounds(runners, s["rounds"], log=lambda m: log(f"train: {m}"))
    from benchmarks.train_step import train_step_flops
    matmul = {dtype: matmul_gflops(dtype) for dtype in ("float32", "bfloat16")}
    log(f"train: TensorFlow 2048x2048 matmul {matmul['float32']:.0f} GFLOP/s in float32, "
        f"{matmul['bfloat16']:.0f} in bfloat16")
    rows = []
    for name, secs in seconds.items():
        row = {**meta[name], **rate_row(secs, s["batch"] * s["steps"], "pairs_per_s")}
        spec = registry.get_spec(VARIANTS[meta[name]["size"]])
        step_flops = train_step_flops(s["batch"], s["query_length"], s["document_length"],
                                      resolve_bert_shape(spec.tower_size), spec.embedding_dim)
        gflops = step_flops * row["median_pairs_per_s"] / s["batch"] / 1e9
        dtype = "bfloat16" if "bfloat16" in meta[name]["framework"] else "float32"
        rows.append({**row, "model_gflops": gflops, "fraction_of_matmul": gflops / matmul[dtype]})

    def same_size(framework):
        return lambda row: next((r for r in rows if r["size"] == row["size"]
                                 and r["framework"] == framework), None)

    add_ratio(rows, "median_pairs_per_s", "vs_tt_zoo", same_size("tt_zoo"))
    # the targets are stated as tt_zoo's speed over PyTorch's
    add_ratio([r for r in rows if r["framework"] != "pytorch"], "median_pairs_per_s",
              "vs_pytorch", same_size("pytorch"))
    if peer_reason:
        rows += [{"size": size, "framework": "pytorch", "skipped": peer_reason}
                 for size in s["sizes"]]
    return {"settings": s, "rows": rows, "matmul_gflops": matmul, "threads": library_threads()}


def render(part: dict) -> list:
    from benchmarks.measure import speed_cells

    s = part["settings"]
    lines = [f"Batch {s['batch']} pairs, query length {s['query_length']}, document length "
             f"{s['document_length']}; median over {s['rounds']} interleaved rounds of "
             f"{s['steps']} steps (after {s['warmup']} untimed warm-up step(s)).", ""]
    if "matmul_gflops" in part:
        m = part["matmul_gflops"]
        lines += [f"The bound: model GFLOP/s counts the dense matmuls of the towers and scores "
                  "(forward + backward = 3x forward; `benchmarks/train_step.py`), against "
                  f"TensorFlow's own 2048x2048 matmul on this machine: {m['float32']:.0f} "
                  f"GFLOP/s in float32, {m['bfloat16']:.0f} in bfloat16.", ""]
    lines += ["| tower | framework | step | parameters | median pairs/s | range | model GFLOP/s "
              "(of matmul) | vs tt_zoo float32 | speed over PyTorch |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in part["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['size']} | {r['framework']} | {r['skipped']} | | | | | | |")
            continue
        over = f"x{r['vs_pytorch']:.2f}" if "vs_pytorch" in r else ""
        flops = (f"{r['model_gflops']:.0f} ({100 * r['fraction_of_matmul']:.0f}%)"
                 if "model_gflops" in r else "")
        lines.append(f"| {r['size']} | {r['framework']} | {r['what']} | {r['parameters']:,} | "
                     f"{speed_cells(r, 'pairs_per_s', 1)} | {flops} | x{r['vs_tt_zoo']:.2f} | "
                     f"{over} |")
    return lines
