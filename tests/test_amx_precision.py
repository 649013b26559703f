"""bfloat16 on the AMX units by default where the CPU has them (tt_zoo.hardware): the choice,
the switch back, and the kernel oneDNN actually runs (read from ONEDNN_VERBOSE, not a flag)."""

import textwrap

import numpy as np
import pytest

from benchmarks.measure import min_cosine
from conftest import REPO_ROOT
from helpers import tiny_model
from tt_zoo import hardware
from tt_zoo.errors import TtZooError
from tt_zoo.modeling import inference

TEXTS = [f"passage {i} about {'penicillin ' * (i % 7)}and mould" for i in range(70)]


def test_default_precision_follows_the_cpu_and_the_switch(monkeypatch):
    monkeypatch.delenv(hardware.PRECISION_VARIABLE, raising=False)
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512f", "amx_bf16",
                                                                  "amx_tile"}))
    assert hardware.default_precision() == "bfloat16"
    assert hardware.training_dtype_policy() == "mixed_bfloat16"
    assert hardware.training_dtype_policy(bfloat16_pays=False) == "float32"  # BoW towers
    assert hardware.training_dtype_policy("bfloat16", bfloat16_pays=False) == "mixed_bfloat16"
    monkeypatch.setenv(hardware.PRECISION_VARIABLE, "float32")
    assert hardware.default_precision() == "float32"
    assert hardware.training_dtype_policy() == "float32"
    monkeypatch.setenv(hardware.PRECISION_VARIABLE, "fp8")
    with pytest.raises(TtZooError, match="TT_ZOO_PRECISION must be one of .* 'fp8'"):
        hardware.default_precision()
    monkeypatch.delenv(hardware.PRECISION_VARIABLE)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")  # no oneDNN: no AMX
    assert hardware.default_precision() == "float32"
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS")
    # AVX512-BF16 without AMX (AMD Zen 4): bfloat16 encoding, and training of the towers for
    # which it pays; bag-of-words towers train in float32 unless asked.
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert hardware.bfloat16_unit() == "avx512_bf16"
    assert hardware.default_precision() == "bfloat16"
    assert hardware.training_dtype_policy() == "mixed_bfloat16"
    assert hardware.training_dtype_policy(bfloat16_pays=False) == "float32"
    monkeypatch.setenv(hardware.PRECISION_VARIABLE, "float32")
    assert hardware.training_dtype_policy() == "float32"
    monkeypatch.setenv(hardware.PRECISION_VARIABLE, "bfloat16")
    assert hardware.training_dtype_policy(bfloat16_pays=False) == "mixed_bfloat16"
    monkeypatch.delenv(hardware.PRECISION_VARIABLE)
    assert hardware.matrix_units() == {"flags": ["avx512_bf16"], "amx": False,
                                       "bfloat16_unit": "avx512_bf16",
                                       "default_precision": "bfloat16"}
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512f", "avx2"}))
    assert hardware.bfloat16_unit() is None
    assert hardware.default_precision() == "float32"
    assert hardware.training_dtype_policy() == "float32"


def test_auto_is_bfloat16_only_for_a_bert_plain_graph_on_many_texts(monkeypatch):
    monkeypatch.setattr(hardware, "default_precision", lambda: "bfloat16")
    bert, bow = tiny_model(), tiny_model("bow_mlp")
    auto = inference.EncodeOptions()
    many = inference.AUTO_BFLOAT16_MIN_TEXTS
    assert auto.resolve(many, bert.query_tower).precision == "bfloat16"
    assert auto.resolve(many, bert.query_tower).bounded_shapes
    assert auto.resolve(many - 1, bert.query_tower).precision == "float32"
    assert auto.resolve(many, bow.query_tower).precision == "float32"
    layers = inference.EncodeOptions(plain_inference=False)
    assert layers.resolve(many, bert.query_tower).precision == "float32"
    assert inference.EncodeOptions(precision="float32").resolve(
        many, bert.query_tower).precision == "float32"
    monkeypatch.setattr(hardware, "default_precision", lambda: "float32")
    assert auto.resolve(many, bert.query_tower).precision == "float32"


def test_bfloat16_encoding_stays_within_rounding_of_float32():
    model = tiny_model()
    f32 = model.encode_documents(TEXTS, titles=TEXTS[::-1], precision="float32")
    bf16 = model.encode_documents(TEXTS, titles=TEXTS[::-1], precision="bfloat16")
    assert min_cosine(f32, bf16) > 0.999
    assert np.abs(f32 - bf16).max() > 1e-5  # bfloat16 rounding shows: it ran
    # Lengths are cut to a multiple of 16 and the partial batch padded: the same vectors as
    # one text at a time.
    one = np.stack([model.encode_documents(t, titles=s, precision="bfloat16")
                    for t, s in zip(TEXTS[:3], TEXTS[::-1][:3])])
    np.testing.assert_allclose(one, bf16[:3], atol=2e-2)


def with_random_biases(model):
    """`model` with every bias drawn at random (a fresh model's are zeros, which TensorFlow's
    graph optimizer drops, and a projection without a bias is not fused with one)."""
    model.build_by_calling()
    rng = np.random.default_rng(1)
    for variable in model.weights:
        if variable.name.split("/")[-1].startswith("bias"):
            variable.assign(rng.normal(0, 0.1, variable.shape).astype(np.float32))
    return model


def test_bfloat16_encoding_follows_weights_that_change():
    """The bfloat16 towers are traced with the weights as constants: a change of the model's
    weights (training, loading) must reach the next call, not the constants of the last."""
    model = with_random_biases(tiny_model())
    before = model.encode_documents(TEXTS, precision="bfloat16")
    table = next(v for v in model.document_tower.weights if "word_embeddings" in v.name)
    table.assign(table[::-1])  # other vectors for every token
    after = model.encode_documents(TEXTS, precision="bfloat16")
    f32 = model.encode_documents(TEXTS, precision="float32")
    assert min_cosine(f32, after) > 0.999
    assert min_cosine(before, after) < 0.99
    np.testing.assert_array_equal(model.encode_documents(TEXTS, precision="bfloat16"), after)


# The oneDNN kernel each bfloat16 unit runs matmuls on.
UNIT_KERNELS = {"amx": "amx", "avx512_bf16": "avx512_core_bf16"}


@pytest.mark.skipif(hardware.bfloat16_unit() is None, reason="this CPU has no bfloat16 unit "
                    "(amx_bf16 + amx_tile, or avx512_bf16, in /proc/cpuinfo), or oneDNN is off")
def test_the_default_encoding_runs_on_the_bfloat16_units():
    """The default (precision="auto") of a corpus-sized call on this CPU: oneDNN's verbose log
    names the unit's kernel for the attention's bfloat16 matmuls and for the projections'
    inner products (bias and activation fused, constant weights: AMX tiles, or AVX512-BF16
    without AMX), and no float32 inner product (the float32 graph's) runs. Fails if the fast
    path falls back. (The tiny model's [CLS] projection, a Keras Dense on a variable, is the one
    bfloat16 inner product on another kernel.)"""
    from benchmarks.measure import kernels_of

    script = textwrap.dedent(f"""
        import os, sys
        os.environ["TT_ZOO_PRECISION"] = "auto"
        sys.path.insert(0, {str(REPO_ROOT / 'tests')!r})
        from helpers import tiny_model
        from test_amx_precision import with_random_biases
        model = with_random_biases(tiny_model())
        texts = {TEXTS!r}
        model.encode_documents(texts[:2], precision="float32")  # built, outside the log
        print("=== measure", flush=True)
        model.encode_documents(texts, titles=texts)
    """)
    kernels = kernels_of(script, timeout=300)
    unit = UNIT_KERNELS[hardware.bfloat16_unit()]
    assert any(k.startswith("matmul ") and unit in k and k.endswith(" bf16") for k in kernels), \
        kernels
    # The block's four projections, one call each (70 texts: one batch).
    assert sum(n for k, n in kernels.items() if k.startswith("inner_product ") and unit in k
               and k.endswith(" bf16")) >= 4, kernels
    assert not any(k.startswith("inner_product ") and k.endswith(" f32") for k in kernels), \
        kernels
