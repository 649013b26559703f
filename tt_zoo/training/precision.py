"""The precision a training run computes in: bfloat16 on the matrix units where the CPU has them.

Every command that trains a two-tower model (`tt-zoo pretrain`, `finetune`, `multitask`,
`adapt-queries`) takes ``--precision {auto,float32,bfloat16}`` (`PrecisionArguments`, declared
once in `tt_zoo.configs.run_config`). "auto", the default, is bfloat16 for Transformer towers on a
CPU with a bfloat16 unit (AMX, or AVX512-BF16 without it) and float32 elsewhere
(`training_policy`: `tt_zoo.hardware.training_dtype_policy` for the model's towers,
`bfloat16_pays`); ``TT_ZOO_PRECISION=float32`` or ``--precision float32`` switch back. In
bfloat16 the run trains a copy of the model whose towers compute under Keras'
``mixed_bfloat16`` policy (float32 variables and optimizer state, bfloat16 matmuls: oneDNN's
AMX or AVX512-BF16 kernels), with the preprocessors, the scores and the loss in float32
(`tt_zoo.modeling.pair_model.with_dtype_policy`); the trained weights are written back to the
float32 model, which is what the run exports: float32 weights, a float32 config, the same
signatures. The card records the policy used and the CPU's matrix units (`card_record`).

From Python, `model.fit` keeps Keras' meaning (the model trains itself, in its own policy);
`training_copy` is the same fast path for a loop of one's own:

    with training_copy(model) as trained:        # precision="auto"
        trained.compile(tf.keras.optimizers.Adam(5e-5))
        trained.fit(pairs, steps_per_epoch=100)
    model.export(...)                             # float32 weights, trained
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from tt_zoo.hardware import matrix_units, training_dtype_policy


@contextlib.contextmanager
def training_copy(model, precision: str = "auto") -> Iterator:
    """Yields the model to compile and train at `precision` ("auto", "float32", "bfloat16"):
    `model` itself when that is float32, else its ``mixed_bfloat16`` copy
    (`tt_zoo.modeling.pair_model.with_dtype_policy`). When the block ends without an error, the
    copy's weights are written back to `model`, and `model` takes the copy's optimizer (so
    `ZooModel.export` sees the steps taken). A bad `precision` raises `TtZooError` naming it."""
    from tt_zoo.modeling.pair_model import with_dtype_policy  # noqa: PLC0415 (TensorFlow)

    trained = with_dtype_policy(model, training_policy(model, precision))
    yield trained
    if trained is not model:
        write_back(model, trained)


def bfloat16_pays(model) -> bool:
    """Whether "auto" trains `model` in bfloat16 on a CPU with a bfloat16 unit: False when one
    of its layers says it does not (``TRAINS_IN_BFLOAT16 = False``: the bag-of-words towers,
    `tt_zoo.modeling.towers.BowMlpTower`), True otherwise (the Transformer families, whose
    training step is matmul-bound: x1.29 measured on AVX512-BF16 alone, docs/speed.md)."""
    return all(getattr(layer, "TRAINS_IN_BFLOAT16", True) for layer in model.submodules)


def training_policy(model, precision: str = "auto") -> str:
    """The Keras dtype policy `model` trains under at `precision` ("auto", "float32",
    "bfloat16"): `tt_zoo.hardware.training_dtype_policy` for its towers (`bfloat16_pays`)."""
    return training_dtype_policy(precision, bfloat16_pays(model))


def write_back(model, trained) -> None:
    """Copies `trained`'s weights (a `with_dtype_policy` copy of `model`) to `model`, and its
    optimizer when it was compiled."""
    model.set_weights(trained.get_weights())
    optimizer = getattr(trained, "optimizer", None)
    if optimizer is not None:
        model.compile(optimizer=optimizer)


def card_record(policy: str) -> dict:
    """What a card records of a run's precision: ``dtype_policy`` (the Keras policy the towers
    trained under) and ``matrix_units`` (`tt_zoo.hardware.matrix_units`: the CPU's AMX, AVX512-BF16
    and VNNI flags, whether tt_zoo uses AMX, and the default precision)."""
    return {"dtype_policy": policy, "matrix_units": matrix_units()}
