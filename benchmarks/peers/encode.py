"""Section `encode` of benchmarks.peers: documents/s, tt_zoo against sentence-transformers.

Two inputs, each reported on its own (`--encode-inputs`):

- ``passages``: what users index: the first N 100-word Wikispeedia passages with their article
  titles, the open-domain QA collection (`tt_zoo.evaluation.odqa.passage_collection`; DPR-style
  blocks, Karpukhin et al. 2020, Sec. 4.1), nearly all of which fill the 128 tokens;
- ``reqa``: the first N (sentence, passage) candidates of ReQA-SQuAD(dev) (Chang et al. 2020,
  Sec. 5.2), the first segment a sentence.

Each document is a pair (title or sentence, passage) at length 128: tt_zoo packs it as two
segments, ``[CLS] title [SEP] passage [SEP]``; sentence-transformers' BERT is given the same
pair (a tuple, tokenized as a text pair with ``longest_first`` truncation to 128), and the
report gives the share of documents whose packed token ids agree on both sides
(`packed_agreement`). Every model has random weights (speed does not depend on them) and the
project's vocabulary (`tt_zoo.cli.common.PROJECT_VOCAB`):

- BERT "tiny" (2 layers, hidden 128): tt_zoo's `TwoTowerModel.encode_documents` (in-graph
  tokenizer, mean pooling, projection to 512, L2 norm: the CPU-scale tower) against
  sentence-transformers' `encode` of Transformer(BertModel of the same shape) + Pooling(mean) +
  Dense(512) + Normalize, whose tokenizer is a `BertTokenizer` over the same token list.
- Bag of words: tt_zoo's BoW-MLP tower (256-d unigram embeddings, mean, tanh 1024, linear 512)
  against sentence-transformers' `StaticEmbedding` (its bag-of-words model) at dimension 512,
  and against StaticEmbedding(256) + Dense(1024, tanh) + Dense(512): the same architecture.
  StaticEmbedding reads one string, so it gets "title passage" truncated to the pair's
  word-piece budget (length - 3 special tokens).
- tt_zoo's serving path (`--encode-signature`, on by default): each model exported with
  `tt_zoo.artifacts.export.export_saved_model` and its ``encode_document(title, passage)``
  signature called on batches in corpus order, as a server receives them; the report gives the
  largest difference from `encode_documents`' embeddings.

Both library sides encode with the same batch size and pad each batch only to its longest text
(tt_zoo sorts by length first, `tt_zoo.modeling.inference`; sentence-transformers sorts too).
For the BERT tower tt_zoo is also timed through the Model Garden's Keras layers
(`plain_inference=False`: the training graph, instead of the fused plain-matmul inference
graph of `tt_zoo.modeling.bert_inference` that `encode_documents` and the signature run), with
XLA (`jit_compile=True`; its compile time is in the warm-up pass) and with bfloat16 matmuls
(`precision="bfloat16"`).
"""

from __future__ import annotations

import os
import tempfile

BERT_VARIANT = "ict_bfs_wlp_512"
BOW_VARIANT = "bow_mlp_ict_bfs_wlp_512"
PEER_MODULES = ("torch", "transformers", "sentence_transformers", "tokenizers")


def settings(args) -> dict:
    s = {"inputs": list(args.encode_inputs), "documents": args.documents,
         "passages": args.passages, "batch": args.encode_batch,
         "document_length": args.document_length, "rounds": args.rounds,
         "signature": args.encode_signature}
    if args.quick:
        s.update(documents=min(args.documents, 64), passages=min(args.passages, 64), batch=32,
                 document_length=128, rounds=min(args.rounds, 2))
    return s


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

    from benchmarks.peers.train import bert_config

    torch.manual_seed(0)
    tokenizer = hf_tokenizer(vocabulary)
    config = bert_config(shape, len(vocabulary), max_length)
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


def reqa_documents(squad: str, limit: int):
    """(titles, texts) of the first `limit` ReQA-SQuAD(dev) candidates: the answer sentence as
    the first segment, its paragraph as the second (Chang et al. 2020, Sec. 5.2)."""
    from tt_zoo.evaluation.reqa import build_reqa

    candidates = build_reqa(squad).candidates[:limit]
    return [c.sentence for c in candidates], [c.passage for c in candidates]


def passage_documents(wikispeedia, limit: int):
    """(titles, texts) of the first `limit` 100-word Wikispeedia passages with their article
    titles: the open-domain QA collection (`tt_zoo.evaluation.odqa.passage_collection`, DPR-style
    blocks, Karpukhin et al. 2020, Sec. 4.1), read from the first articles only."""
    from tt_zoo.evaluation.odqa import passage_collection

    articles = limit // 10 + 10  # about 29 passages an article: more than enough
    collection = passage_collection(wikispeedia, limit_articles=articles)
    if len(collection.ids) < limit:
        collection = passage_collection(wikispeedia)
    if len(collection.ids) < limit:
        raise SystemExit(f"--wikispeedia {wikispeedia} holds {len(collection.ids):,} passages; "
                         f"--passages asks for {limit:,}.")
    return list(collection.titles[:limit]), list(collection.texts[:limit])


def signature_encoder(model, path: str, batch: int):
    """Exports `model` (`tt_zoo.artifacts.export.export_saved_model`) to `path`, loads the
    SavedModel and returns a function (titles, texts) -> embeddings that calls its
    ``encode_document(title, passage)`` signature on `batch` documents at a time, in the
    order given (as a server receives them; no sorting by length)."""
    from tt_zoo.artifacts.export import LoadedEncoder, export_saved_model

    export_saved_model(model, path)
    encode = LoadedEncoder(path)
    return lambda titles, texts: encode(titles, texts, batch_size=batch)


def packed_agreement(preprocessor, st_model, titles, texts, batch: int) -> dict:
    """How often the packed model input is the same on both sides: tt_zoo's
    ``[CLS] title [SEP] passage [SEP]`` (`TextPreprocessor` on the pair, `RoundRobinTrimmer` to
    the length) and sentence-transformers' tokenization of the same (title, passage) pair
    (``longest_first`` truncation to its max_seq_length). ``ids``: the fraction of documents
    with the same token ids (same text, word pieces and truncation); ``length``: with the same
    number of tokens (what the speed depends on). They part where the two tokenizers split a
    rare character differently (SQuAD's "21⁄2": HF's [UNK], tensorflow-text's "21", "##⁄",
    "##2") and where both segments are longer than half the budget (the round robin gives the odd
    token to the title, ``longest_first`` to the passage)."""
    import numpy as np
    import tensorflow as tf

    same, same_length = [], []
    for i in range(0, len(texts), batch):
        t, x = titles[i:i + batch], texts[i:i + batch]
        ours = preprocessor((tf.constant(t), tf.constant(x)))
        ours = [row[mask.astype(bool)].tolist() for row, mask in
                zip(ours["input_word_ids"].numpy(), ours["input_mask"].numpy())]
        tokenize = getattr(st_model, "preprocess", None) or st_model.tokenize
        theirs = tokenize(list(zip(t, x)))
        theirs = [row[mask.bool()].tolist() for row, mask in
                  zip(theirs["input_ids"], theirs["attention_mask"])]
        same += [a == b for a, b in zip(ours, theirs)]
        same_length += [len(a) == len(b) for a, b in zip(ours, theirs)]
    return {"ids": float(np.mean(same)), "length": float(np.mean(same_length))}


INPUTS = {
    "reqa": "ReQA-SQuAD(dev) (sentence, passage) candidates",
    "passages": "Wikispeedia 100-word passages with their article titles (the ODQA collection)",
}


def run(args, log) -> dict:
    import numpy as np
    from benchmarks.measure import (interleaved_rounds, library_threads, stopwatch,
                                    unavailable_reason)
    from tt_zoo.modeling.towers import resolve_bert_shape
    from tt_zoo.zoo import build, registry

    s = settings(args)
    b = s["batch"]
    length = s["document_length"]
    peer_reason = unavailable_reason(PEER_MODULES)
    inputs = {}
    for name in s["inputs"]:
        inputs[name] = (reqa_documents(args.squad, s["documents"]) if name == "reqa"
                        else passage_documents(args.wikispeedia, s["passages"]))
        log(f"encode: {len(inputs[name][1]):,} {INPUTS[name]}")

    bert_spec, bow_spec = registry.get_spec(BERT_VARIANT), registry.get_spec(BOW_VARIANT)
    tt_bert = build.build_untrained(bert_spec, args.vocab, document_length=length)
    tt_bow = build.build_untrained(bow_spec, args.vocab, document_length=length)
    vocabulary = tt_bert.document_preprocessor.vocabulary
    # name -> (row fields, function of (titles, texts) that encodes them)
    contenders = {
        "tt_zoo/bert": (
            {"encoder": "BERT tiny", "implementation": "tt_zoo TwoTowerModel.encode_documents"},
            lambda t, x: tt_bert.encode_documents(x, titles=t, batch_size=b)),
        "tt_zoo/bert-layers": (
            {"encoder": "BERT tiny", "implementation": "tt_zoo encode_documents(plain_inference="
                                                       "False): the Model Garden layers, the "
                                                       "training graph"},
            lambda t, x: tt_bert.encode_documents(x, titles=t, batch_size=b,
                                                  plain_inference=False)),
        "tt_zoo/bert-xla": (
            {"encoder": "BERT tiny", "implementation": "tt_zoo encode_documents(jit_compile="
                                                       "True): XLA"},
            lambda t, x: tt_bert.encode_documents(x, titles=t, batch_size=b, jit_compile=True)),
        "tt_zoo/bert-bf16": (
            {"encoder": "BERT tiny", "implementation": "tt_zoo encode_documents(precision="
                                                       "'bfloat16')"},
            lambda t, x: tt_bert.encode_documents(x, titles=t, batch_size=b,
                                                  precision="bfloat16")),
        "tt_zoo/bow": (
            {"encoder": "bag of words", "implementation": "tt_zoo BoW-MLP encode_documents "
                                                          "(unigrams 256, tanh 1024, linear 512)"},
            lambda t, x: tt_bow.encode_documents(x, titles=t, batch_size=b)),
    }
    extra = {}
    with tempfile.TemporaryDirectory(prefix="peers-st-") as work_dir:
        if s["signature"]:
            for key, model, encoder in (("bert", tt_bert, "BERT tiny"),
                                        ("bow", tt_bow, "bag of words")):
                log(f"encode: exporting the {encoder} model (random weights) to time its "
                    "encode_document signature")
                encode = signature_encoder(model, os.path.join(work_dir, f"export-{key}"), b)
                titles, texts = next(iter(inputs.values()))
                library = contenders[f"tt_zoo/{key}"][1](titles[:b], texts[:b])
                extra[f"signature_max_abs_diff_{key}"] = float(
                    np.max(np.abs(encode(titles[:b], texts[:b]) - library)))
                contenders[f"tt_zoo/{key}-signature"] = (
                    {"encoder": encoder, "implementation": "tt_zoo exported SavedModel "
                     f"encode_document(title, passage), batches of {b} in corpus order"},
                    encode)
        st_bert = None
        if not peer_reason:
            st_bert = sentence_transformers_bert(
                vocabulary, resolve_bert_shape(bert_spec.tower_size), bert_spec.embedding_dim,
                length, os.path.join(work_dir, "bert"))
            static = sentence_transformers_static(vocabulary, [bow_spec.embedding_dim],
                                                  length - 3)
            bow = tt_bow.document_tower  # the same widths: unigram, hidden, output
            static_mlp = sentence_transformers_static(
                vocabulary, [bow.token_embedding_dim, bow.hidden_dim, bow.embedding_dim],
                length - 3)
            contenders["sentence-transformers/bert"] = (
                {"encoder": "BERT tiny", "same_architecture": True,
                 "implementation": "sentence-transformers encode of (title, passage) pairs "
                                   "(BertModel + mean + Dense + Normalize)"},
                lambda t, x: st_bert.encode(list(zip(t, x)), batch_size=b))
            contenders["sentence-transformers/static"] = (
                {"encoder": "bag of words", "implementation": "sentence-transformers "
                                                              "StaticEmbedding(512) + Normalize"},
                lambda t, x: static.encode([f"{a} {c}" for a, c in zip(t, x)], batch_size=b))
            contenders["sentence-transformers/static_mlp"] = (
                {"encoder": "bag of words", "same_architecture": True,
                 "implementation": "sentence-transformers "
                 "StaticEmbedding(256) + Dense(1024, tanh) + Dense(512) + Normalize"},
                lambda t, x: static_mlp.encode([f"{a} {c}" for a, c in zip(t, x)],
                                               batch_size=b))
        parts = {}
        for name, (titles, texts) in inputs.items():
            part = {"description": INPUTS[name], "num_documents": len(texts)}
            part["source"] = args.squad if name == "reqa" else str(args.wikispeedia)
            if st_bert is not None:
                if name == "reqa":
                    part["sentence_token_agreement"] = token_agreement(
                        tt_bert.query_preprocessor, hf_tokenizer(vocabulary), titles)
                part["packed_agreement"] = packed_agreement(
                    tt_bert.document_preprocessor, st_bert, titles, texts, b)
                log(f"encode: {name}: both sides pack the same [CLS] title [SEP] passage "
                    f"[SEP] ids for {100 * part['packed_agreement']['ids']:.1f}% of the "
                    f"documents, as many tokens for "
                    f"{100 * part['packed_agreement']['length']:.1f}%")
            for key, (_, work) in contenders.items():  # warm-up: tracing, first allocations
                log(f"encode: {name}: warm-up {key}")
                work(titles, texts)
            seconds = interleaved_rounds(
                {k: stopwatch(lambda w=w, t=titles, x=texts: w(t, x))
                 for k, (_, w) in contenders.items()},
                s["rounds"], log=lambda m, n=name: log(f"encode: {n}: {m}"))
            part["rows"] = compare_rows({k: (contenders[k][0], v) for k, v in seconds.items()},
                                        len(texts))
            if peer_reason:
                part["rows"].append({"encoder": "BERT tiny / bag of words",
                                     "implementation": "sentence-transformers",
                                     "skipped": peer_reason})
            parts[name] = part
    return {"settings": s, "inputs": parts, **extra, "threads": library_threads()}


def compare_rows(measured: dict, num_documents: int) -> list:
    """Rows of one input from {name: (row fields, round seconds)}: docs/s (median, range), the
    speed over tt_zoo's first row of the same encoder (`vs_tt_zoo`) and, for tt_zoo's rows,
    over the same architecture's sentence-transformers row (`vs_sentence_transformers`)."""
    from benchmarks.measure import add_ratio, rate_row

    rows = [{**fields, **rate_row(secs, num_documents, "docs_per_s")}
            for fields, secs in measured.values()]
    add_ratio(rows, "median_docs_per_s", "vs_tt_zoo", lambda row: next(
        r for r in rows if r["encoder"] == row["encoder"]
        and r["implementation"].startswith("tt_zoo")))
    # the target is stated as tt_zoo's speed over the same architecture's
    add_ratio([r for r in rows if r["implementation"].startswith("tt_zoo")], "median_docs_per_s",
              "vs_sentence_transformers", lambda row: next(
                  (r for r in rows if r["encoder"] == row["encoder"]
                   and r.get("same_architecture")), None))
    return rows


def render(part: dict) -> list:
    from benchmarks.measure import speed_cells

    s = part["settings"]
    inputs = part.get("inputs")
    if inputs is None:  # written before the passages input: ReQA candidates only
        inputs = {"reqa": {"description": INPUTS["reqa"], "rows": part["rows"],
                           "num_documents": s["num_documents"],
                           **{k: part[k] for k in ("sentence_token_agreement",) if k in part}}}
    lines = [f"Length {s['document_length']} (both sides truncate to it), batch {s['batch']}; "
             f"median over {s['rounds']} interleaved rounds (after one untimed warm-up pass "
             "each). tt_zoo packs each document as two segments, [CLS] title [SEP] passage "
             "[SEP]; sentence-transformers' BERT gets the same (title, passage) pair, "
             "StaticEmbedding the string \"title passage\"."]
    for key in ("bert", "bow"):
        diff = part.get(f"signature_max_abs_diff_{key}")
        if diff is not None:
            lines[0] += (f" The exported {key} signature's embeddings differ from "
                         f"encode_documents' by at most {diff:.1e}.")
    for name, entry in inputs.items():
        lines += ["", f"**{entry['description']}**: the first {entry['num_documents']:,}."]
        if "packed_agreement" in entry:
            agree = entry["packed_agreement"]
            lines[-1] += (f" Both sides pack the same token ids for {100 * agree['ids']:.1f}% "
                          f"of the documents and as many tokens for {100 * agree['length']:.1f}% "
                          "(the rest: rare characters the two tokenizers split differently, "
                          "and which segment gets the odd token when both are long).")
        if "sentence_token_agreement" in entry:
            lines[-1] += (f" Same vocabulary: the two tokenizers give the same word pieces for "
                          f"{100 * entry['sentence_token_agreement']:.1f}% of the sentences.")
        lines += ["", "| encoder | implementation | median docs/s | range | vs tt_zoo default | "
                  "speed over sentence-transformers (same architecture) |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for r in entry["rows"]:
            if "skipped" in r:
                lines.append(f"| {r['encoder']} | {r['implementation']}: {r['skipped']} "
                             "| | | | |")
                continue
            over = (f"x{r['vs_sentence_transformers']:.2f}" if "vs_sentence_transformers" in r
                    else "")
            lines.append(f"| {r['encoder']} | {r['implementation']} | "
                         f"{speed_cells(r, 'docs_per_s', 0)} | x{r['vs_tt_zoo']:.2f} | {over} |")
    return lines
