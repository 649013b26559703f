"""`tt-zoo average` (`tt_zoo.zoo.weight_averaging`): the weighted mean of two tiny exports'
weights, worked by hand (b = a + 1 in every float weight), its card, and the refusals."""

import json

import numpy as np
import pytest

import tt_zoo
from helpers import tiny_model
from tt_zoo.artifacts.export import export_saved_model
from tt_zoo.artifacts.model_card import ModelCard
from tt_zoo.cli import average as average_cli
from tt_zoo.errors import TtZooError
from tt_zoo.zoo.weight_averaging import average_models, normalized_weights

META = {"name": "tiny_soup_part", "encoder": "bert", "pretraining": "none"}


@pytest.fixture(scope="module")
def two_exports(tmp_path_factory):
    """(a, b, root): two exports of one tiny architecture, b's float weights a's + 1."""
    root = tmp_path_factory.mktemp("average")
    model = tiny_model()
    model.build_by_calling()
    export_saved_model(model, root / "a", {**META, "train_steps": 3})
    a_weights = model.get_weights()
    model.set_weights([w + 1 if np.issubdtype(w.dtype, np.floating) else w for w in a_weights])
    export_saved_model(model, root / "b", {**META, "train_steps": 5})
    return root / "a", root / "b", root


def _floats(model):
    return [w for w in model.keras_model.get_weights() if np.issubdtype(w.dtype, np.floating)]


def test_weights_are_scaled_to_sum_to_one():
    assert normalized_weights(None, 4) == [0.25] * 4
    assert normalized_weights([3, 1], 2) == [0.75, 0.25]
    for bad in ([1], [1, -1], [0, 0], [float("nan"), 1]):
        with pytest.raises(TtZooError, match="weight"):
            normalized_weights(bad, 2)
    with pytest.raises(TtZooError, match="at least two"):
        normalized_weights(None, 1)


def test_the_mean_of_the_weights_is_exported_with_a_card_naming_each_model(two_exports,
                                                                          tmp_path):
    a, b, _ = two_exports
    argv = [str(a), str(b), "--weights", "3,1", "--name", "soup", "--export",
            str(tmp_path / "soup")]
    assert average_cli.main(argv) == 0

    soup, first = tt_zoo.load(tmp_path / "soup"), tt_zoo.load(a)
    for mean, base in zip(_floats(soup), _floats(first)):
        np.testing.assert_allclose(mean, base + 0.25, atol=1e-6)  # 0.75 a + 0.25 (a + 1)
    texts = ["the cat sat on the mat", "a dog"]
    assert not np.allclose(soup.encode_documents(texts), first.encode_documents(texts))

    meta = json.loads((tmp_path / "soup" / "metadata.json").read_text())
    assert ModelCard.from_dict(meta).to_dict() == meta
    averaged = meta["averaged"]
    assert averaged["weights"] == [0.75, 0.25]
    assert [m["from"] for m in averaged["models"]] == [str(a), str(b)]
    assert [m["train_steps"] for m in averaged["models"]] == [3, 5]
    assert [m["sha256"] for m in averaged["models"]] == [
        json.loads((p / "metadata.json").read_text())["sha256"] for p in (a, b)]
    assert meta["name"] == "soup" and "train_steps" not in meta and "fine_tuning" not in meta
    assert meta["command"].startswith("tt-zoo average ")
    card = (tmp_path / "soup" / "MODEL_CARD.md").read_text()
    assert "| averaged | a (sha256" in card and "x 0.75 + b (sha256" in card


def test_uniform_by_default(two_exports):
    a, b, _ = two_exports
    soup, first = average_models([a, b]), tt_zoo.load(a)
    for mean, base in zip(_floats(soup), _floats(first)):
        np.testing.assert_allclose(mean, base + 0.5, atol=1e-6)


def test_another_architecture_is_refused(two_exports):
    a, _, root = two_exports
    other = tiny_model(encoder="bow_mlp")
    other.build_by_calling()
    export_saved_model(other, root / "bow", dict(META))
    with pytest.raises(TtZooError, match=r"bow is not the architecture of .*a: their configs "
                                         r"differ at"):
        average_models([a, root / "bow"])


@pytest.mark.parametrize("argv, expected", [
    (["A"], "at least two models"),
    (["A", "B", "--weights", "1,2,3"], "one weight per model"),
    (["A", "B", "--weights", "1,x"], "comma-separated numbers"),
])
def test_bad_command_lines_are_refused_before_loading(two_exports, tmp_path, capsys, argv,
                                                      expected):
    a, b, _ = two_exports
    argv = [{"A": str(a), "B": str(b)}.get(x, x) for x in argv]
    with pytest.raises(SystemExit):
        average_cli.parse_args([*argv, "--export", str(tmp_path / "out")])
    assert expected in capsys.readouterr().err
