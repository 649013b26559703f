"""One model from several: the weighted mean of their weights (a "model soup", Wortsman et al.,
ICML 2022, Sec. 2: the uniform soup).

Models fine-tuned from the same weights with different settings (e.g. one warm start, a task at
two shares of the batches) often sit in one basin of the loss, and the mean of
their weights can keep what each one gained, at no cost at inference: the result is one model of
the same architecture and size. Models that did not start from the same weights have no such
guarantee; their mean is usually worse than either, so measure the result as any other export.

`average_models` checks that the models are one architecture (the same Keras config: encoder,
sizes, vocabulary, sequence lengths, and the same variables in the same shapes), takes the
weighted mean of every float variable in float32, requires every other variable (integer tables)
to be equal, and returns a `tt_zoo.zoo.zoo_model.ZooModel` whose card names each model
averaged and its weight (``lineage.averaged``, `tt_zoo.artifacts.model_card.WeightAverage`).
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import numpy as np

from tt_zoo.errors import TtZooError


def normalized_weights(weights: Optional[Sequence[float]], count: int) -> List[float]:
    """`weights` scaled to sum to 1 (None: uniform, 1/count each). Raises `TtZooError` unless
    there is one finite, non-negative weight per model and their sum is positive."""
    if count < 2:
        raise TtZooError(f"averaging needs at least two models (got {count}).")
    if weights is None:
        return [1.0 / count] * count
    weights = [float(w) for w in weights]
    if len(weights) != count:
        raise TtZooError(f"weights: one per model expected ({count} models, {len(weights)} "
                         f"weights: {weights}).")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise TtZooError(f"weights must be finite, non-negative and not all 0 (got {weights}).")
    total = sum(weights)
    return [w / total for w in weights]


def _first_difference(a, b, where: str = "") -> str:
    """Where two JSON-like values first differ (``config.layers[2].units``), else ""."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{where}.{key}".lstrip(".")
            found = _first_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where} (length {len(a)} vs {len(b)})".lstrip(".")
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return ""
    return "" if a == b else (where.lstrip(".") or "the config")


def check_same_architecture(keras_models, names: Sequence[str]) -> None:
    """Raises `TtZooError` naming the two models and what differs unless every model has the
    first one's Keras config and its variables (names and shapes) in the same order."""
    first_config = keras_models[0].artifact_config()
    first_vars = [(v.name, tuple(v.shape)) for v in keras_models[0].weights]
    for model, name in zip(keras_models[1:], names[1:]):
        differs = _first_difference(first_config, model.artifact_config())
        if differs:
            raise TtZooError(f"{name} is not the architecture of {names[0]}: their configs "
                             f"differ at {differs}; only models of one architecture (fine-tuned "
                             "from the same weights) can be averaged.")
        variables = [(v.name, tuple(v.shape)) for v in model.weights]
        if variables != first_vars:
            shown = next(((a, b) for a, b in zip(first_vars, variables) if a != b),
                         (len(first_vars), len(variables)))
            raise TtZooError(f"{name} does not hold the variables of {names[0]} (first "
                             f"difference: {shown[0]} vs {shown[1]}).")


def mean_weights(keras_models, weights: Sequence[float], names: Sequence[str]) -> list:
    """The weighted mean of each float variable across `keras_models` (float32, cast back to the
    variable's dtype); any other variable must be equal in every model (else `TtZooError`)."""
    means = []
    for i, variables in enumerate(zip(*(m.weights for m in keras_models))):
        arrays = [v.numpy() for v in variables]
        if np.issubdtype(arrays[0].dtype, np.floating):
            mean = sum(w * a.astype(np.float32) for w, a in zip(weights, arrays))
            means.append(mean.astype(arrays[0].dtype))
            continue
        for array, name in zip(arrays[1:], names[1:]):
            if not np.array_equal(array, arrays[0]):
                raise TtZooError(f"{name}'s variable {variables[0].name} (#{i}, "
                                 f"{arrays[0].dtype}) differs from {names[0]}'s and is not a "
                                 "float: it cannot be averaged.")
        means.append(arrays[0])
    return means


def average_models(names_or_paths: Sequence[str], weights: Optional[Sequence[float]] = None, *,
                   name: Optional[str] = None, command: Optional[str] = None, load=None):
    """The weighted mean of the models' weights, as a `ZooModel` ready to `export`.

    Args:
      names_or_paths: two or more registered names or export directories of one architecture.
      weights: one non-negative weight per model (scaled to sum to 1); None: uniform.
      name: the averaged model's name in its card (default: the first's + ``_averaged``).
      command: the command line recorded in the card (``training.command``).
      load: the loader (default `tt_zoo.zoo.loading.load`).

    Returns:
      a `ZooModel` holding the first model's Keras model with the mean weights, and a card of
      its own: the first model's architecture facts and license, the models averaged (name, path
      when given one, sha256, training) with their weights, and none of their metrics.
    """
    from tt_zoo.artifacts.model_card import Origin, WeightAverage  # noqa: PLC0415
    from tt_zoo.zoo.zoo_model import ZooModel  # noqa: PLC0415

    if load is None:
        from tt_zoo.zoo.loading import load  # noqa: PLC0415
    weights = normalized_weights(weights, len(names_or_paths))
    shown = [str(n) for n in names_or_paths]
    models = [load(n) for n in names_or_paths]
    if len({type(m.keras_model) for m in models}) != 1 or not hasattr(
            models[0].keras_model, "artifact_config"):
        raise TtZooError("only models of one kind and architecture can be averaged (got "
                         + ", ".join(f"{n}: {type(m.keras_model).__name__}"
                                     for n, m in zip(shown, models)) + ").")
    keras_models = [m.keras_model for m in models]
    check_same_architecture(keras_models, shown)
    means = mean_weights(keras_models, weights, shown)
    first = models[0]
    first.keras_model.set_weights(means)

    card = first.fine_tuned_card(name or f"{first.name}_averaged", steps=0)
    card.lineage.fine_tuning = None  # no optimizer step: the weights are a mean
    card.lineage.averaged = WeightAverage(
        models=[Origin(source=given, name=m.name,
                       path=str(m.path) if m.path and m.spec is None else None,
                       sha256=m.card.provenance.sha256, train_steps=m.card.training.train_steps,
                       training_data=m.card.training.training_data)
                for given, m in zip(shown, models)],
        weights=weights)
    card.training.train_steps = None
    card.training.training_data = "the weighted mean of the weights of " + " and ".join(
        f"{given} ({w:g})" for given, w in zip(shown, weights))
    card.training.command = command
    return ZooModel(first.keras_model, spec=None, path=None, metadata=card.to_dict())
