"""Training in bfloat16 on the matrix units by default (tt_zoo.training.precision): the choice and
the switch back, the mixed_bfloat16 training copy and its float32 export, the card's record,
and the recorded run configs of shipped models, which trained in float32 and still do."""

import json
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_ROOT
from helpers import pair_dataset, tiny_model
from test_finetune_recipe import squad_slice
from tt_zoo import hardware
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.pair_model import tower_dtype_policy, with_dtype_policy
from tt_zoo.artifacts.card_rendering import render_card
from tt_zoo.artifacts.model_card import ModelCard
from tt_zoo.training import precision, pretrain_run, shipped_recipes
from tt_zoo.training.finetune_run import FinetuneConfig, finetune
from tt_zoo.configs.run_config import RunError

BFLOAT16_UNIT = pytest.mark.skipif(not hardware.bfloat16_unit(),
                                   reason="this CPU has neither AMX nor AVX512-BF16 (or oneDNN "
                                          "is off)")


def test_auto_follows_the_cpu_and_the_switch_back(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"amx_bf16", "amx_tile"}))
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    monkeypatch.delenv(hardware.PRECISION_VARIABLE, raising=False)
    assert hardware.training_dtype_policy("auto") == "mixed_bfloat16"
    monkeypatch.setenv(hardware.PRECISION_VARIABLE, "float32")  # the switch back
    assert hardware.training_dtype_policy("auto") == "float32"
    assert hardware.training_dtype_policy("bfloat16") == "mixed_bfloat16"
    monkeypatch.delenv(hardware.PRECISION_VARIABLE)
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512f"}))  # no bf16 unit
    assert hardware.training_dtype_policy("auto") == "float32"


@pytest.mark.parametrize("flags", [{"amx_bf16", "amx_tile"}, {"avx512_bf16"}])
def test_auto_trains_transformer_towers_in_bfloat16_and_bag_of_words_in_float32(monkeypatch,
                                                                                 flags):
    """The family decides with the CPU: a BERT tower trains under mixed_bfloat16 on either
    bfloat16 unit; a BoW-MLP or static tower (one class), which learned
    less of a teacher's ranking in bfloat16 (tests/test_query_adaptation.py), in float32 unless
    --precision bfloat16 asks."""
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512f", *flags}))
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    monkeypatch.delenv(hardware.PRECISION_VARIABLE, raising=False)
    bert, bow = tiny_model(), tiny_model("bow_mlp")
    assert precision.bfloat16_pays(bert) and not precision.bfloat16_pays(bow)
    assert precision.training_policy(bert) == "mixed_bfloat16"
    assert precision.training_policy(bow) == "float32"
    assert precision.training_policy(bow, "bfloat16") == "mixed_bfloat16"
    assert precision.training_policy(bert, "float32") == "float32"
    with precision.training_copy(bow) as trained:
        assert trained is bow
    with precision.training_copy(bert) as trained:
        assert tower_dtype_policy(trained) == "mixed_bfloat16"
    pretrain = pretrain_run.PretrainConfig.from_dict({"model": {"variant": "ict_bfs_wlp_128"}})
    assert pretrain_run.training_policy(pretrain, bert) == "mixed_bfloat16"
    assert pretrain_run.training_policy(pretrain, bow) == "float32"
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512f", "avx2"}))
    assert precision.training_policy(bert) == "float32"  # nothing changes without the units


def test_pretrain_reads_precision_then_the_older_dtype_policy(monkeypatch):
    monkeypatch.setenv(hardware.PRECISION_VARIABLE, "bfloat16")

    def policy(**groups):
        return pretrain_run.training_policy(pretrain_run.PretrainConfig.from_dict(
            {"model": {"variant": "ict_bfs_wlp_128", **groups.get("model", {})},
             "compute": groups.get("compute", {})}))

    assert policy() == "mixed_bfloat16"
    # A recorded config of a shipped model says float32: it reproduces in float32.
    assert policy(model={"dtype_policy": "float32"}) == "float32"
    assert policy(model={"dtype_policy": "float32"},
                  compute={"precision": "bfloat16"}) == "mixed_bfloat16"
    assert policy(compute={"precision": "float32"}) == "float32"
    monkeypatch.setenv(hardware.PRECISION_VARIABLE, "fp8")
    with pytest.raises(RunError, match="--precision auto: TT_ZOO_PRECISION must be one of"):
        policy()
    with pytest.raises(TtZooError, match="precision must be one of .* 'half'"):
        with precision.training_copy(tiny_model(), "half"):
            pass


def test_the_training_copy_computes_in_bfloat16_and_writes_float32_weights_back():
    model = tiny_model()
    model.build_by_calling()
    before = [w.numpy().copy() for w in model.weights]
    with precision.training_copy(model, "bfloat16") as trained:
        assert trained is not model and type(trained) is type(model)
        assert tower_dtype_policy(trained) == "mixed_bfloat16"
        assert trained.retrieval_loss.dtype_policy.name == "float32"  # scores, loss: float32
        assert all(w.dtype == tf.float32 for w in trained.weights)
        assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, trained.weights))
        trained.compile(tf.keras.optimizers.Adam(1e-2))
        trained.fit(pair_dataset().repeat(), steps_per_epoch=2, verbose=0)
    assert tower_dtype_policy(model) == "float32"
    assert all(w.dtype == tf.float32 for w in model.weights)
    assert any(not np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights))
    assert all(np.array_equal(a.numpy(), b.numpy())
               for a, b in zip(model.weights, trained.weights))
    assert int(model.optimizer.iterations.numpy()) == 2  # ZooModel.export sees the steps
    with precision.training_copy(model, "float32") as same:
        assert same is model
    back = with_dtype_policy(trained, "float32")  # what an export of a bfloat16 run holds
    assert back.get_config()["query_tower"] == model.get_config()["query_tower"]


@BFLOAT16_UNIT
def test_the_default_training_step_runs_its_matmuls_on_the_bfloat16_units():
    """A training step of a BERT tower at --precision auto's choice on this CPU, read from
    oneDNN's verbose log (not the flag): matmuls in bfloat16 on the unit's kernel (AMX tiles,
    or AVX512-BF16 without AMX). Fails if training silently falls back to float32."""
    from benchmarks.measure import kernels_of
    from test_amx_precision import UNIT_KERNELS

    script = textwrap.dedent(f"""
        import os, sys
        os.environ["TT_ZOO_PRECISION"] = "auto"
        sys.path.insert(0, {str(REPO_ROOT / 'tests')!r})
        import tensorflow as tf
        from helpers import pair_dataset, tiny_model
        from tt_zoo.training.precision import training_copy
        model = tiny_model()
        with training_copy(model) as trained:
            trained.compile(tf.keras.optimizers.Adam(1e-3))
            batches = pair_dataset().repeat()
            trained.fit(batches, steps_per_epoch=1, verbose=0)  # traced, outside the log
            print("=== measure", flush=True)
            trained.fit(batches, steps_per_epoch=2, verbose=0)
    """)
    kernels = kernels_of(script, timeout=300)
    unit = UNIT_KERNELS[hardware.bfloat16_unit()]
    assert any(k.startswith(("matmul ", "inner_product ")) and unit in k and k.endswith(" bf16")
               for k in kernels), kernels


@pytest.mark.filterwarnings("ignore::UserWarning")
@BFLOAT16_UNIT
def test_finetune_on_this_cpu_trains_a_loaded_model_in_bfloat16_and_exports_float32(
        tmp_path, exported, monkeypatch):
    """The default run on a CPU with AMX or AVX512-BF16: a loaded float32 export fine-tuned as its
    mixed_bfloat16 copy, exported with float32 weights, a float32 config and the same
    signatures; the card records the policy and the matrix units."""
    import tt_zoo
    from tt_zoo.artifacts.export import load_keras_model

    monkeypatch.delenv(hardware.PRECISION_VARIABLE, raising=False)
    record = finetune(FinetuneConfig.from_dict({
        "model": {"model": str(exported.path)},
        "data": {"squad": str(squad_slice(tmp_path)), "train_fraction": 0.5,
                 "limit_questions": 40, "seed": 3},
        "training": {"steps": 2, "batch_size": 4},
        "output": {"output": str(tmp_path / "tuned"), "no_progress": True}}))
    assert record["finetune"]["dtype_policy"] == "mixed_bfloat16"
    meta = json.loads((tmp_path / "tuned" / "metadata.json").read_text())
    assert meta["dtype_policy"] == "mixed_bfloat16"
    units = meta["matrix_units"]
    assert units["bfloat16_unit"] == hardware.bfloat16_unit() and units["flags"]
    assert meta["run_config"]["compute"] == {"precision": "auto"}
    assert meta["train_steps"] == 2 and meta["base_model"]["path"] == str(exported.path)
    tuned, base = load_keras_model(tmp_path / "tuned"), load_keras_model(exported.path)
    assert tower_dtype_policy(tuned) == "float32"
    assert all(w.dtype == tf.float32 for w in tuned.weights)
    assert any(not np.array_equal(a.numpy(), b.numpy())
               for a, b in zip(tuned.weights, base.weights))  # trained
    signatures = [sorted(tf.saved_model.load(str(p)).signatures) for p in
                  (exported.path, tmp_path / "tuned")]
    assert signatures[0] == signatures[1] and signatures[0]
    assert "mixed_bfloat16" in render_card(ModelCard.from_dict(meta))
    assert tt_zoo.load(str(tmp_path / "tuned")).encode_queries(["a"]).dtype == np.float32


def test_the_card_shows_the_matrix_units():
    card = ModelCard.from_dict({"name": "m", "dtype_policy": "mixed_bfloat16",
                                "matrix_units": {"flags": ["amx_bf16", "amx_tile"], "amx": True,
                                                 "default_precision": "bfloat16"}})
    assert card.to_dict()["matrix_units"]["amx"] is True
    assert "AMX (amx_bf16, amx_tile)" in render_card(card)


def test_recorded_run_configs_of_shipped_models_still_parse():
    """Every recipe of a shipped model (its recorded run config) parses with ``--config`` and
    holds ``precision`` (auto: the run configs recorded before it existed have none); the
    pretrained ones record ``dtype_policy: float32``, the older spelling, and still reproduce in
    float32. (tests/test_shipped_models.py checks each recipe is the recorded run's.)"""
    paths = sorted(shipped_recipes.recipes_dir().glob("*/*.json"))
    assert len(paths) >= 10
    for path in paths:
        command = path.parent.name
        config = shipped_recipes.parse(command, ["--config", str(path)])
        if command == "train-term-weights":
            continue
        assert config.compute.precision == "auto", path
        if command == "pretrain" and config.model.dtype_policy == "float32":
            assert pretrain_run.training_policy(config) == "float32", path


def test_the_step_benchmark_says_what_auto_chose_for_its_model():
    """benchmarks/amx_training's step section names the policy `--precision auto` chose for
    the measured model (recorded at the run), and reads older records by their CPU alone."""
    from benchmarks.amx_training import markdown

    def step(**extra):
        rows = [{"policy": "float32", "median_step_ms": 81.2, "min_step_ms": 75.8,
                 "max_step_ms": 88.4, "pairs_per_s": 394.2},
                {"policy": "mixed_bfloat16", "median_step_ms": 77.9, "min_step_ms": 71.9,
                 "max_step_ms": 85.2, "pairs_per_s": 410.8, "speed_vs_float32": 1.04}]
        return {"step": {"model": "m", "batch": 32, "query_length": 64, "document_length": 128,
                         "rows": rows, **extra}}

    assert "`auto` trains this model in float32" in markdown(step(auto_policy="float32"))
    assert "| mixed_bfloat16 | 77.9 | 71.9 | 85.2 | 410.8 | x1.04 |" in markdown(step())
    assert "what `--precision auto` trains this model in" in markdown(
        step(auto_policy="mixed_bfloat16"))
    assert "`auto` trains this model in float32" in markdown(step())  # older, no AMX
    amx = {"cpu": "Intel Xeon", "cores": 2, "python": "3.11.7", "versions": {}, "date": "d",
           "matrix_units": {"amx": True}}
    assert "what `--precision auto` trains" in markdown(step(machine=amx, command="c"))


def test_the_variants_benchmark_renders_each_row_and_refuses_an_unknown_variant():
    """benchmarks/amx_training_variants: one table row per variant with both medians and the
    ratio as measured; an unknown variant stops the run naming it, before anything is timed."""
    from benchmarks import amx_training_variants as variants

    machine = {"cpu": "Intel Xeon", "cores": 2, "python": "3.11.7", "versions": {}, "date": "d",
               "matrix_units": {"amx": True}}
    record = {"model": "m", "rounds": 4, "steps": 3, "machine": machine, "command": "c",
              "rows": [{"variant": "shipped", "float32_ms": 2541.4, "bfloat16_ms": 1751.5,
                        "speed_vs_float32": 1.45}]}
    text = variants.markdown(record)
    assert "| shipped | 2,541.4 | 1,751.5 | x1.45 |" in text
    assert "4 interleaved rounds of 3 steps" in text
    with pytest.raises(SystemExit, match="unknown \\['nope'\\]"):
        variants.main(["--variants", "shipped,nope", "--output", "/nonexistent/x"])


def test_the_dropout_variant_drops_a_tenth_and_restores_what_it_swapped():
    """The ``inference_forward_dropout`` variant swaps the softmax and the residual + layer norm
    only while its forward is traced: after the softmax a tenth of the probabilities are zero,
    the rest scaled by 1 / 0.9 (uniform logits over 1,000 keys: 0.001 / 0.9 each)."""
    from benchmarks import amx_training_variants as variants
    from tt_zoo.modeling import fused_epilogues

    softmax, norm = tf.nn.softmax, fused_epilogues.residual_layer_norm
    swapped = []

    def forward(encoder, packed):
        swapped.append(tf.nn.softmax is not softmax
                       and fused_epilogues.residual_layer_norm is not norm)
        return tf.nn.softmax(tf.zeros([4, 1000]))

    probs = variants._with_unfused_dropout(forward)(None, None).numpy()
    assert swapped == [True]
    assert tf.nn.softmax is softmax and fused_epilogues.residual_layer_norm is norm
    assert 0.07 < (probs == 0).mean() < 0.13
    np.testing.assert_allclose(probs[probs > 0], 0.001 / 0.9, rtol=1e-6)
