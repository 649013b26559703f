"""A Google BERT checkpoint (``bert_config.json``, ``bert_model.ckpt.*``, ``vocab.txt``), as
google-research/bert released BERT-base and the BERT miniatures (Turc et al. 2019).

Its TF1 variables (``bert/encoder/layer_0/attention/self/query/kernel`` as [in, out], LayerNorm
``gamma``/``beta``) are read with `tf.train.load_checkpoint` and renamed to the Hugging Face
names `Checkpoint` holds. Google's code computed "gelu" as the tanh approximation, so the
imported tower uses that form. The result pools [CLS] and does not normalise, as BERT does.
"""

from __future__ import annotations

import pathlib
import re

from tt_zoo.errors import ArtifactError
from tt_zoo.modeling.checkpoints.bert_checkpoint import (Checkpoint, BertConfig, as_int,
                                                         canonical_weight_names,
                                                         hidden_activation)
from tt_zoo.manifest import read_json_object as read_json

CONFIG_FILE = "bert_config.json"
CHECKPOINT_PREFIX = "bert_model.ckpt"


def is_google_folder(path: pathlib.Path) -> bool:
    return (path / CONFIG_FILE).is_file()


def huggingface_name(tf1_name: str) -> str:
    """``bert/encoder/layer_3/output/dense/kernel`` -> ``encoder.layer.3.output.dense.weight``
    (the caller transposes kernels)."""
    name = tf1_name[len("bert/"):] if tf1_name.startswith("bert/") else tf1_name
    name = re.sub(r"layer_(\d+)", r"layer.\1", name).replace("/", ".")
    if name.endswith(".kernel"):
        return name[:-len(".kernel")] + ".weight"
    if name.startswith("embeddings.") and name.count(".") == 1:
        return name + ".weight"  # the three embedding tables
    return name  # LayerNorm.gamma / .beta: renamed by canonical_weight_names


def is_uncased(vocabulary) -> bool:
    """Whether a BERT vocabulary is uncased: no token but the bracketed specials holds an
    upper-case letter (a cased one has "The", "London", ...). Google's bert_config.json does
    not say; its folder names do ("uncased_L-12_H-768_A-12")."""
    return not any(any(ch.isupper() for ch in t) for t in vocabulary
                   if not (t.startswith("[") and t.endswith("]")))


def read_google_checkpoint(folder) -> Checkpoint:
    """Reads a Google BERT checkpoint folder.

    Raises:
      ArtifactError: naming the file, for a missing config, checkpoint or vocabulary, a
        truncated checkpoint, or weights that do not fit the config.
    """
    import tensorflow as tf

    from tt_zoo.data.text import load_vocab

    folder = pathlib.Path(folder)
    config_path = folder / CONFIG_FILE
    raw = read_json(config_path, "Google BERT's model config")
    src = str(config_path)
    config = BertConfig(vocab_size=as_int(raw, "vocab_size", src),
                        hidden_size=as_int(raw, "hidden_size", src),
                        num_layers=as_int(raw, "num_hidden_layers", src),
                        num_attention_heads=as_int(raw, "num_attention_heads", src),
                        intermediate_size=as_int(raw, "intermediate_size", src),
                        max_position_embeddings=as_int(raw, "max_position_embeddings", src),
                        type_vocab_size=as_int(raw, "type_vocab_size", src, 2),
                        inner_activation=hidden_activation(raw.get("hidden_act", "gelu"), src,
                                                           tanh_gelu=True))
    prefix = folder / CHECKPOINT_PREFIX
    if not (folder / (CHECKPOINT_PREFIX + ".index")).is_file():
        raise ArtifactError(f"{prefix}.index is missing (expected the TF checkpoint "
                            f"{CHECKPOINT_PREFIX}.index and .data-* beside {CONFIG_FILE}).")
    try:
        reader = tf.train.load_checkpoint(str(prefix))
        weights = {}
        for name in reader.get_variable_to_shape_map():
            if not name.startswith("bert/"):
                continue  # the pretraining heads (cls/...) and optimizer slots
            value = reader.get_tensor(name)
            weights[huggingface_name(name)] = value.T if name.endswith("/kernel") else value
    except (tf.errors.OpError, ValueError, IndexError) as e:
        raise ArtifactError(f"{prefix}: the checkpoint cannot be read ({type(e).__name__}: "
                            f"{e}).") from e
    from tt_zoo.manifest import describe_files
    vocabulary = load_vocab(folder / "vocab.txt")
    files = {name: entry["sha256"] for name, entry in describe_files(
        folder, sorted(p.name for p in folder.glob(CHECKPOINT_PREFIX + ".*"))).items()}
    return Checkpoint(config=config, weights=canonical_weight_names(weights),
                          vocabulary=vocabulary,
                          lower_case=bool(raw.get("do_lower_case", is_uncased(vocabulary))),
                          pooling="cls",
                          normalize=False, max_seq_length=config.max_position_embeddings,
                          source=str(folder), files=files)
