"""Section `encode` of benchmarks/peers.py: documents/s, tt_zoo against sentence-transformers.

The documents are the first N (sentence, passage) candidates of ReQA-SQuAD(dev) (Chang et al.
2020, Sec. 5.2), encoded as a text pair at length 128. Every model has random weights (speed does
not depend on them) and the project's vocabulary (`tt_zoo.cli.common.PROJECT_VOCAB`):

- BERT "tiny" (2 layers, hidden 128): tt_zoo's `TwoTowerModel.encode_documents` (in-graph
  tokenizer, mean pooling, projection to 512, L2 norm: the CPU-scale tower) against
  sentence-transformers' `encode` of Transformer(BertModel of the same shape) + Pooling(mean) +
  Dense(512) + Normalize, whose tokenizer is a `BertTokenizer` over the same token list.
- Bag of words: tt_zoo's BoW-MLP tower (256-d unigram embeddings, mean, tanh 1024, linear 512)
  against sentence-transformers' `StaticEmbedding` (its bag-of-words model) at dimension 512,
  and against StaticEmbedding(256) + Dense(1024, tanh) + Dense(512): the same architecture.
  StaticEmbedding reads one string, so it gets "sentence passage" truncated to the pair's
  word-piece budget (length - 3 special tokens).

Both sides encode with the same batch size and pad each batch only to its longest text (tt_zoo
sorts by length first, `tt_zoo.modeling.inference`; sentence-transformers sorts too). For the
BERT tower tt_zoo is also timed with XLA (what `encode_documents`' default `jit_compile="auto"`
does for corpora of `XLA_AUTO_MIN_DOCUMENTS` documents and more; its compile time is in the
warm-up pass) and with bfloat16 matmuls (`precision="bfloat16"`).
"""

from __future__ import annotations

import os
import tempfile

BERT_VARIANT = "ict_bfs_wlp_512"
BOW_VARIANT = "bow_mlp_ict_bfs_wlp_512"
PEER_MODULES = ("torch", "transformers", "sentence_transformers", "tokenizers")


def settings(args) -> dict:
    if args.quick:
        return {"documents": 64, "batch": 32, "document_length": 128,
                "rounds": min(args.rounds, 2)}
    return {"documents": args.documents, "batch": args.encode_batch,
            "document_length": args.document_length, "rounds": args.rounds}


def hf_tokenizer(vocabulary):
    """A fast `transformers.BertTokenizer` over the same tokens and ids as tt_zoo's
    `TextPreprocessor` (lower-cased, accents stripped: BERT uncased)."""
    import transformers

    return transformers.BertTokenizer(vocab={t: i for i, t in enumerate(vocabulary)},
                                      do_lower_case=True)


def sentence_transformers_bert(vocabulary, shape, dim: int, max_length: int, work_dir: str):
    """SentenceTransformer: BertModel (random weights, built from a config) + mean + Dense + norm."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (Dense, Normalize, Pooling,
                                                                    Transformer)

    torch.manual_seed(0)
    tokenizer = hf_tokenizer(vocabulary)
    config = transformers.BertConfig(
        vocab_size=len(vocabulary), hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_attention_heads,
        intermediate_size=shape.inner_dim, max_position_embeddings=max_length)
    transformers.BertModel(config, add_pooling_layer=False).save_pretrained(work_dir)
    tokenizer.save_pretrained(work_dir)
    encoder = Transformer(work_dir, max_seq_length=max_length,
                          model_kwargs={"add_pooling_layer": False})
    return SentenceTransformer(modules=[
        encoder, Pooling(shape.hidden_size, "mean"),
        Dense(shape.hidden_size, dim, activation_function=torch.nn.Identity()), Normalize()],
        device="cpu")


def sentence_transformers_static(vocabulary, dims, max_tokens: int):
    """SentenceTransformer: StaticEmbedding(dims[0]) then Dense layers to dims[1:] (tanh between,
    linear last) + Normalize."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (Dense, Normalize,
                                                                    StaticEmbedding)
    from tokenizers import Tokenizer

    torch.manual_seed(0)
    tokenizer = Tokenizer.from_str(hf_tokenizer(vocabulary).backend_tokenizer.to_str())
    tokenizer.enable_truncation(max_length=max_tokens)
    modules = [StaticEmbedding(tokenizer, embedding_dim=dims[0])]
    for i, (d_in, d_out) in enumerate(zip(dims, dims[1:])):
        last = i == len(dims) - 2
        modules.append(Dense(d_in, d_out, activation_function=torch.nn.Identity() if last
                             else torch.nn.Tanh()))
    return SentenceTransformer(modules=modules + [Normalize()], device="cpu")


def token_agreement(preprocessor, tokenizer, texts) -> float:
    """Fraction of `texts` whose word-piece ids agree between tt_zoo and the peer tokenizer."""
    import numpy as np
    import tensorflow as tf

    ours = preprocessor.tokenize(tf.constant(texts)).to_list()
    theirs = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return float(np.mean([a == b for a, b in zip(ours, theirs)]))


def run(args, log) -> dict:
    from peers_measure import interleaved_rounds, rates, stopwatch, unavailable_reason
    from tt_zoo.modeling.towers import resolve_bert_shape
    from tt_zoo.retrieval.reqa import build_reqa
    from tt_zoo.serving import registry, zoo

    s = settings(args)
    candidates = build_reqa(args.squad).candidates[:s["documents"]]
    titles, texts = [c.sentence for c in candidates], [c.passage for c in candidates]
    b = s["batch"]
    length = s["document_length"]
    contenders, peer_reason = {}, unavailable_reason(PEER_MODULES)

    bert_spec, bow_spec = registry.get_spec(BERT_VARIANT), registry.get_spec(BOW_VARIANT)
    tt_bert = zoo.build_untrained(bert_spec, args.vocab, document_length=length)
    tt_bow = zoo.build_untrained(bow_spec, args.vocab, document_length=length)
    vocabulary = tt_bert.document_preprocessor.vocabulary
    contenders["tt_zoo/bert"] = (
        {"encoder": "BERT tiny", "implementation": "tt_zoo TwoTowerModel.encode_documents"},
        lambda: tt_bert.encode_documents(texts, titles=titles, batch_size=b))
    contenders["tt_zoo/bert-xla"] = (
        {"encoder": "BERT tiny", "implementation": "tt_zoo encode_documents(jit_compile=True): "
                                                   "XLA, as 'auto' does from 20,000 documents"},
        lambda: tt_bert.encode_documents(texts, titles=titles, batch_size=b, jit_compile=True))
    contenders["tt_zoo/bert-bf16"] = (
        {"encoder": "BERT tiny", "implementation": "tt_zoo encode_documents(precision="
                                                   "'bfloat16')"},
        lambda: tt_bert.encode_documents(texts, titles=titles, batch_size=b,
                                         precision="bfloat16"))
    contenders["tt_zoo/bow"] = (
        {"encoder": "bag of words", "implementation": "tt_zoo BoW-MLP encode_documents "
                                                      "(unigrams 256, tanh 1024, linear 512)"},
        lambda: tt_bow.encode_documents(texts, titles=titles, batch_size=b))
    extra = {}
    with tempfile.TemporaryDirectory(prefix="peers-st-") as work_dir:
        if not peer_reason:
            st_bert = sentence_transformers_bert(
                vocabulary, resolve_bert_shape(bert_spec.tower_size), bert_spec.embedding_dim,
                length, os.path.join(work_dir, "bert"))
            pairs = list(zip(titles, texts))
            joined = [f"{t} {x}" for t, x in pairs]
            static = sentence_transformers_static(vocabulary, [bow_spec.embedding_dim],
                                                  length - 3)
            bow = tt_bow.document_tower  # the same widths: unigram, hidden, output
            static_mlp = sentence_transformers_static(
                vocabulary, [bow.token_embedding_dim, bow.hidden_dim, bow.embedding_dim],
                length - 3)
            contenders["sentence-transformers/bert"] = (
                {"encoder": "BERT tiny", "same_architecture": True,
                 "implementation": "sentence-transformers encode "
                                   "(BertModel + mean + Dense + Normalize)"},
                lambda: st_bert.encode(pairs, batch_size=b))
            contenders["sentence-transformers/static"] = (
                {"encoder": "bag of words", "implementation": "sentence-transformers "
                                                              "StaticEmbedding(512) + Normalize"},
                lambda: static.encode(joined, batch_size=b))
            contenders["sentence-transformers/static_mlp"] = (
                {"encoder": "bag of words", "same_architecture": True,
                 "implementation": "sentence-transformers "
                 "StaticEmbedding(256) + Dense(1024, tanh) + Dense(512) + Normalize"},
                lambda: static_mlp.encode(joined, batch_size=b))
            extra["sentence_token_agreement"] = token_agreement(
                tt_bert.query_preprocessor, hf_tokenizer(vocabulary), titles)
            log(f"encode: tt_zoo and the peer tokenizer agree on "
                f"{100 * extra['sentence_token_agreement']:.1f}% of the sentences")
        for name, (_, work) in contenders.items():  # warm-up: tracing, first allocations
            log(f"encode: warm-up {name}")
            work()
        seconds = interleaved_rounds({n: stopwatch(w) for n, (_, w) in contenders.items()},
                                     s["rounds"], log=lambda m: log(f"encode: {m}"))
    rows = []
    for name, secs in seconds.items():
        r = rates(secs, len(texts))
        rows.append({**contenders[name][0], "median_docs_per_s": r["median_per_s"],
                     "min_docs_per_s": r["min_per_s"], "max_docs_per_s": r["max_per_s"],
                     "rounds": r["rounds"], "round_seconds": secs})
    for row in rows:
        base = next(r for r in rows if r["encoder"] == row["encoder"]
                    and r["implementation"].startswith("tt_zoo"))
        row["vs_tt_zoo"] = row["median_docs_per_s"] / base["median_docs_per_s"]
    for row in rows:  # the target is stated as tt_zoo's speed over the same architecture's
        peer = next((r for r in rows if r["encoder"] == row["encoder"]
                     and r.get("same_architecture")), None)
        if peer is not None and row["implementation"].startswith("tt_zoo"):
            row["vs_sentence_transformers"] = row["median_docs_per_s"] / peer["median_docs_per_s"]
    if peer_reason:
        rows.append({"encoder": "BERT tiny / bag of words",
                     "implementation": "sentence-transformers", "skipped": peer_reason})
    return {"settings": {**s, "source": args.squad, "num_documents": len(texts)},
            "rows": rows, **extra, "threads": _threads()}


def _threads() -> dict:
    from peers_train import _threads as threads
    return threads()


def render(part: dict) -> list:
    s = part["settings"]
    lines = [f"The first {s['num_documents']:,} ReQA-SQuAD(dev) (sentence, passage) candidates, "
             f"length {s['document_length']}, batch {s['batch']}; median over {s['rounds']} "
             "interleaved rounds (after one untimed warm-up pass each)."]
    if "sentence_token_agreement" in part:
        lines[0] += (f" Same vocabulary: the two tokenizers give the same word pieces for "
                     f"{100 * part['sentence_token_agreement']:.1f}% of the sentences.")
    lines += ["", "| encoder | implementation | median docs/s | range | vs tt_zoo default | "
              "speed over sentence-transformers (same architecture) |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in part["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['encoder']} | {r['implementation']}: {r['skipped']} | | | | |")
            continue
        over = f"x{r['vs_sentence_transformers']:.2f}" if "vs_sentence_transformers" in r else ""
        lines.append(f"| {r['encoder']} | {r['implementation']} | {r['median_docs_per_s']:,.0f} "
                     f"| {r['min_docs_per_s']:,.0f}–{r['max_docs_per_s']:,.0f} | "
                     f"x{r['vs_tt_zoo']:.2f} | {over} |")
    return lines
