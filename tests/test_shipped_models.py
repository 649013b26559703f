"""Every model shipped in saved_models/: golden outputs, a complete card, a sane retriever."""

import json
import pathlib

import numpy as np
import pytest

import tt_zoo
from helpers import assert_matches_golden, read_golden

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
SHIPPED = tt_zoo.list_models(shipped_only=True)
METRICS = ("R@1", "R@5", "R@10", "R@50", "R@100", "MRR")


@pytest.fixture(scope="module", params=SHIPPED)
def shipped(request):
    return request.param, tt_zoo.load(request.param)


def test_golden_outputs(shipped):
    name, model = shipped
    golden = read_golden(name)
    assert_matches_golden(golden, model.encode_queries(golden["queries"]),
                          model.encode_documents(golden["passages"], titles=golden["titles"]))


def test_card_records_the_measured_table_and_how_it_was_trained(shipped):
    name, model = shipped
    meta = model.metadata
    reqa = [t for table, t in meta.get("metrics", {}).items() if table.startswith("ReQA")]
    assert reqa and all(k in reqa[0] for k in METRICS), f"{name}: no measured ReQA table"
    assert "model_options" in meta or meta.get("pretraining") == "none"
    card = (model.path / "MODEL_CARD.md").read_text()
    assert "## Measured quality" in card


def test_pretrained_models_put_the_matching_passage_first(shipped):
    name, model = shipped
    if model.pretraining == "none":
        pytest.skip("an untrained model is not expected to rank")
    golden = json.loads((GOLDEN / f"{name}.json").read_text())
    scores = np.array(golden["scores"])
    assert (scores.argmax(axis=1) == np.arange(len(scores))).all(), scores


def test_every_grid_variant_is_shipped_within_the_size_budget():
    """The reproduce grid's ten variants (Tables 3 and 5) are all shipped, and saved_models/
    holds at most 150 MiB."""
    from helpers import load_recipe
    cells = load_recipe("reproduce").CELLS
    assert len(cells) == 10 and set(cells) <= set(SHIPPED), sorted(set(cells) - set(SHIPPED))
    saved_models = pathlib.Path(tt_zoo.__file__).resolve().parents[1] / "saved_models"
    size = sum(f.stat().st_size for f in saved_models.rglob("*") if f.is_file())
    assert size <= 150 * 2**20, f"saved_models/ holds {size / 2**20:.1f} MiB (budget 150)"
