"""A Hugging Face / sentence-transformers folder, read without PyTorch or transformers.

The folder holds ``config.json`` (its ``model_type`` names a registered architecture,
`tt_zoo.modeling.architectures`: "bert", "mpnet"; that family's converter reads the config and
names the weights), ``model.safetensors``
(read into NumPy by the `safetensors` library), the vocabulary as ``vocab.txt`` or inside
``tokenizer.json`` (a WordPiece model), and, for a sentence-transformers model, the pooling
config (``1_Pooling/config.json``), ``modules.json`` (a ``Normalize`` module means cosine
scores) and ``sentence_bert_config.json`` (``max_seq_length``). A plain BERT folder pools
[CLS] and does not normalise, as BERT's own classifier input does.
"""

from __future__ import annotations

import json
import pathlib
from typing import Optional

from tt_zoo.errors import ArtifactError
from tt_zoo.manifest import describe_file, read_json_object as read_json
from tt_zoo.modeling.checkpoints.bert_checkpoint import Checkpoint, as_int

WEIGHTS_FILE = "model.safetensors"


def is_huggingface_folder(path: pathlib.Path) -> bool:
    return (path / "config.json").is_file() and not (path / "bert_config.json").is_file()


def read_config(folder: pathlib.Path):
    """(the architecture of config.json's ``model_type``, its config read by the family's
    converter: `tt_zoo.modeling.architectures.for_model_type`)."""
    from tt_zoo.modeling import architectures

    path = folder / "config.json"
    config = read_json(path, "the model's Hugging Face config")
    architecture = architectures.for_model_type(config.get("model_type"), str(path))
    return architecture, architecture.converter.read_config(config, str(path))


def read_vocabulary(folder: pathlib.Path, special_tokens=None) -> list:
    """``vocab.txt`` if present, else the WordPiece vocabulary of ``tokenizer.json``; it must
    hold the tokens of `special_tokens` (the architecture's mapping; None: BERT's)."""
    from tt_zoo.data.text import BERT_SPECIAL_TOKENS, load_vocab, validate_vocab
    special_tokens = special_tokens or BERT_SPECIAL_TOKENS
    if (folder / "vocab.txt").is_file():
        return load_vocab(folder / "vocab.txt", special_tokens)
    path = folder / "tokenizer.json"
    tokenizer = read_json(path, "a vocab.txt or a tokenizer.json with a WordPiece model")
    model = tokenizer.get("model") or {}
    if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise ArtifactError(f"{path}: expected a WordPiece model with a vocab (got model type "
                            f"{model.get('type')!r}).")
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ArtifactError(f"{path}: the WordPiece ids are not 0..{len(by_id) - 1}.")
    return validate_vocab([token for token, _ in by_id], source=str(path),
                          special_tokens=special_tokens)


def read_lower_case(folder: pathlib.Path) -> bool:
    """The tokenizer's casing: tokenizer_config.json's ``do_lower_case``, else the
    normaliser of tokenizer.json, else True (BERT uncased)."""
    config_path = folder / "tokenizer_config.json"
    if config_path.is_file():
        config = read_json(config_path, "the tokenizer config")
        if "do_lower_case" in config:
            return bool(config["do_lower_case"])
    if (folder / "tokenizer.json").is_file():
        normalizer = read_json(folder / "tokenizer.json", "the tokenizer").get("normalizer") or {}
        if "lowercase" in normalizer:
            return bool(normalizer["lowercase"])
    return True


def read_modules(path: pathlib.Path) -> list:
    """sentence-transformers' ``modules.json``: a JSON list of module objects (``type``,
    ``path``), or `ArtifactError` naming the file."""
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArtifactError(f"{path} is not valid JSON ({e}); expected sentence-transformers' "
                            "list of modules.") from e
    if not isinstance(modules, list) or not all(
            isinstance(m, dict) and isinstance(m.get("type", ""), str)
            and isinstance(m.get("path", ""), str) for m in modules):
        raise ArtifactError(f"{path} must hold a JSON list of module objects with a \"type\" "
                            f"and a \"path\" (sentence-transformers' modules.json; got "
                            f"{json.dumps(modules)[:120]}).")
    return modules


def read_sentence_transformers(folder: pathlib.Path, config):
    """(pooling, normalize, max_seq_length) of a sentence-transformers folder; a plain BERT
    folder gives ("cls", False, its position table's length)."""
    modules_path = folder / "modules.json"
    if not modules_path.is_file():
        return "cls", False, config.max_length
    modules = read_modules(modules_path)
    kinds = [str(m.get("type", "")) for m in modules]
    normalize = any(k.endswith("Normalize") for k in kinds)
    pooling_dirs = [m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")]
    pooling = "cls"
    if pooling_dirs:
        path = folder / pooling_dirs[0] / "config.json"
        p = read_json(path, "sentence-transformers' pooling config")
        modes = [k for k, v in p.items() if k.startswith("pooling_mode_") and v]
        known = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
        if len(modes) != 1 or modes[0] not in known:
            raise ArtifactError(f"{path}: pooling {modes} is not supported (expected one of "
                                "pooling_mode_mean_tokens, pooling_mode_cls_token).")
        pooling = known[modes[0]]
    max_len = config.max_length
    st_config = folder / "sentence_bert_config.json"
    if st_config.is_file():
        max_len = as_int(read_json(st_config, "sentence-transformers' config"), "max_seq_length",
                         str(st_config), max_len, low=3)  # [CLS], a token, [SEP]
    return pooling, normalize, min(max_len, config.max_length)


def read_huggingface_folder(folder, expected_sha256: Optional[str] = None) -> Checkpoint:
    """Reads a Hugging Face / sentence-transformers folder of a registered architecture.

    Args:
      folder: the folder (config.json, model.safetensors, vocab.txt or tokenizer.json).
      expected_sha256: the sha256 ``model.safetensors`` must have (a published checkpoint's).

    Raises:
      ArtifactError: naming the file, for a missing or unreadable file, a sha256 or shape
        mismatch, a vocabulary whose size differs from the embedding table, or a ``model_type``
        no registered architecture reads.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    folder = pathlib.Path(folder)
    architecture, config = read_config(folder)
    weights_path = folder / WEIGHTS_FILE
    if not weights_path.is_file():
        raise ArtifactError(f"{weights_path} is missing (the checkpoint's weights; tt_zoo reads "
                            "safetensors, not PyTorch pickles).")
    digest = describe_file(weights_path)["sha256"]
    if expected_sha256 is not None and digest != expected_sha256:
        raise ArtifactError(f"{weights_path}: sha256 {digest} does not match the published "
                            f"{expected_sha256} (a damaged or different file).")
    try:
        weights = load_file(str(weights_path))
    except (SafetensorError, OSError, ValueError) as e:
        raise ArtifactError(f"{weights_path} is not a readable safetensors file ({e}).") from e
    pooling, normalize, max_len = read_sentence_transformers(folder, config)
    return Checkpoint(config=config, weights=architecture.converter.weight_names(weights),
                      vocabulary=read_vocabulary(folder, architecture.special_tokens),
                      lower_case=read_lower_case(folder), pooling=pooling, normalize=normalize,
                      max_seq_length=max_len, source=str(folder), files={WEIGHTS_FILE: digest},
                      encoder=architecture.name)
