"""An independent BERT: a plain NumPy forward over Hugging Face-named weights, and tiny random
checkpoints written in the formats `tt_zoo.modeling.checkpoints` reads (a Hugging Face /
sentence-transformers folder, a Google BERT TF1 checkpoint). The import is checked against
this forward, which shares no code with the Model Garden encoder it fills.
"""

import json
import math
import pathlib

import numpy as np

from helpers import tiny_vocab


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _gelu(x, approximate):
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    from scipy.special import erf
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def numpy_bert_sentence_vectors(weights, ids, mask, *, heads, pooling="mean", normalize=True,
                                approximate_gelu=False):
    """Sentence vectors [batch, hidden] of a BERT given by Hugging Face names (linear weights
    [out, in]) on token ids and mask [batch, length] (token types 0): embeddings + LayerNorm,
    post-norm blocks with 1/sqrt(head size) attention, then mean (over mask) or [CLS] pooling,
    optionally L2-normalised. float64 throughout."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    ids, mask = np.asarray(ids), np.asarray(mask, np.float64)
    batch, length = ids.shape
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:length][None]
         + w["embeddings.token_type_embeddings.weight"][0][None, None])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    hidden = x.shape[-1]
    head = hidden // heads
    n = 0
    while f"encoder.layer.{n}.attention.self.query.weight" in w:
        p = f"encoder.layer.{n}."

        def lin(v, name):
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def split(v):
            return v.reshape(batch, length, heads, head).transpose(0, 2, 1, 3)
        q, k, v = (split(lin(x, f"attention.self.{t}")) for t in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head)
        scores = scores + (1.0 - mask)[:, None, None, :] * -1e9
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        x = _layer_norm(x + lin(context, "attention.output.dense"),
                        w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"])
        inner = _gelu(lin(x, "intermediate.dense"), approximate_gelu)
        x = _layer_norm(x + lin(inner, "output.dense"), w[p + "output.LayerNorm.weight"],
                        w[p + "output.LayerNorm.bias"])
        n += 1
    if pooling == "cls":
        out = x[:, 0]
    else:
        out = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    if normalize:
        out = out / np.linalg.norm(out, axis=-1, keepdims=True)
    return out


TINY_SHAPE = dict(hidden=16, layers=2, heads=4, inner=32, positions=40, types=2)


def random_bert_weights(vocab_size, seed=0, hidden=16, layers=2, inner=32, positions=40, types=2,
                        **_):
    """Random Hugging Face-named BERT weights of a tiny shape (std 0.3: attention that is far
    from uniform, so a wrong scale or head split shows)."""
    rng = np.random.default_rng(seed)

    def r(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)
    w = {"embeddings.word_embeddings.weight": r(vocab_size, hidden),
         "embeddings.position_embeddings.weight": r(positions, hidden),
         "embeddings.token_type_embeddings.weight": r(types, hidden),
         "embeddings.LayerNorm.weight": 1 + r(hidden), "embeddings.LayerNorm.bias": r(hidden)}
    for n in range(layers):
        p = f"encoder.layer.{n}."
        for t in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            w[p + t + ".weight"], w[p + t + ".bias"] = r(hidden, hidden), r(hidden)
        for t in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + t + ".weight"], w[p + t + ".bias"] = 1 + r(hidden), r(hidden)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = r(inner, hidden), r(inner)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = r(hidden, inner), r(hidden)
    w["pooler.dense.weight"], w["pooler.dense.bias"] = r(hidden, hidden), r(hidden)
    return w


def hf_config(vocab_size, hidden=16, layers=2, heads=4, inner=32, positions=40, types=2,
              **overrides):
    config = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
              "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": inner, "max_position_embeddings": positions,
              "type_vocab_size": types, "vocab_size": vocab_size, "layer_norm_eps": 1e-12,
              "position_embedding_type": "absolute"}
    config.update(overrides)
    return config


def write_hf_folder(folder, *, seed=0, sentence_transformers=True, tokenizer_json=False,
                    weights=None, vocab=None, config_overrides=None):
    """A tiny random BERT as a Hugging Face folder (a sentence-transformers one with mean
    pooling and Normalize by default; the vocabulary in tokenizer.json if `tokenizer_json`).
    Returns (folder, weights, vocab)."""
    from safetensors.numpy import save_file

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = vocab or tiny_vocab()
    weights = weights if weights is not None else random_bert_weights(len(vocab), seed,
                                                                      **TINY_SHAPE)
    (folder / "config.json").write_text(json.dumps(hf_config(len(vocab),
                                                             **(config_overrides or {}))))
    save_file(dict(weights, **{"embeddings.position_ids": np.arange(40)[None]}),
              str(folder / "model.safetensors"))
    if tokenizer_json:
        (folder / "tokenizer.json").write_text(json.dumps({
            "normalizer": {"type": "BertNormalizer", "lowercase": True},
            "model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(vocab)}}}))
    else:
        (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    if sentence_transformers:
        (folder / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling",
             "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}]))
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({
            "word_embedding_dimension": TINY_SHAPE["hidden"], "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False}))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
    return folder, weights, vocab


def tf1_name(hf_name):
    """The Google BERT TF1 variable name of a Hugging Face weight name."""
    name = "bert/" + hf_name.replace(".", "/")
    for n in range(10):
        name = name.replace(f"layer/{n}/", f"layer_{n}/")
    name = name.replace("LayerNorm/weight", "LayerNorm/gamma").replace("LayerNorm/bias",
                                                                         "LayerNorm/beta")
    if name.startswith("bert/embeddings/") and name.endswith("_embeddings/weight"):
        return name[:-len("/weight")]
    return name.replace("/weight", "/kernel")


def write_google_folder(folder, *, seed=0):
    """A tiny random BERT as a Google BERT checkpoint folder (TF1 variable names, kernels
    [in, out], an MLM head variable the import must skip). Returns (folder, weights, vocab)."""
    import tensorflow as tf

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = tiny_vocab()
    weights = random_bert_weights(len(vocab), seed, **TINY_SHAPE)
    config = hf_config(len(vocab))
    (folder / "bert_config.json").write_text(json.dumps(
        {k: v for k, v in config.items() if k not in ("architectures", "model_type")}))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(v.T if tf1_name(k).endswith("/kernel") else v,
                                           name=tf1_name(k)) for k, v in weights.items()]
        variables.append(tf.compat.v1.Variable(np.zeros(len(vocab), np.float32),
                                               name="cls/predictions/output_bias"))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(folder / "bert_model.ckpt"), write_meta_graph=False)
    return folder, weights, vocab
