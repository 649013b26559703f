"""The typed model card (`tt_zoo.artifacts.model_card`): every shipped export's metadata loads and
round-trips unchanged, the card's body renders as before under Hugging Face front matter, a
fresh export carries the front matter, and a bad value is refused naming its field."""

import dataclasses
import json
import pathlib
import re
import shutil

import pytest
import yaml

from tt_zoo.errors import ArtifactError, TtZooError
from tt_zoo.artifacts.card_rendering import TERM_WEIGHT_TABLE, TWO_TOWER_TABLE, render_card
from tt_zoo.artifacts.model_card import (FineTuning, ModelCard, Origin, PairSet, Training, _HIDDEN,
                                       _Record)

SAVED_MODELS = pathlib.Path(__file__).resolve().parents[1] / "saved_models"
SHIPPED_METADATA = sorted(SAVED_MODELS.glob("*/metadata.json"))
# conftest's `exported` fixture writes this metadata.
TINY_EXPORT_METADATA = {"name": "tiny_test", "encoder": "bert", "pretraining": "none",
                        "license": "Apache-2.0 (weights trained on CC BY-SA text)",
                        "warm_start": {"from": "saved_models/ict_bfs_wlp_512", "train_steps": 7}}


def front_matter(card_text: str) -> dict:
    """The YAML between the leading ``---`` lines of a MODEL_CARD.md."""
    assert card_text.startswith("---\n"), card_text[:80]
    matter, _, _ = card_text[len("---\n"):].partition("\n---\n")
    return yaml.safe_load(matter)


def body(card_text: str) -> str:
    return card_text.split("\n---\n\n", 1)[1]


# ------------------------------------------------------------------ old exports (no TF)

def test_every_shipped_export_is_there():
    assert len(SHIPPED_METADATA) >= 14


@pytest.mark.parametrize("path", SHIPPED_METADATA, ids=lambda p: p.parent.name)
def test_shipped_metadata_loads_and_round_trips_unchanged(path):
    meta = json.loads(path.read_text(encoding="utf-8"))
    card = ModelCard.from_dict(meta)
    assert card.to_dict() == meta
    assert list(card.to_dict()) == list(meta)  # and in its order
    assert card.extra == {}  # every key it holds is named by the card
    assert card.name == path.parent.name


@pytest.mark.parametrize("path", SHIPPED_METADATA, ids=lambda p: p.parent.name)
def test_shipped_card_body_renders_as_before(path):
    """The shipped MODEL_CARD.md to the byte: the whole card for an export written with the
    typed card (front matter included), the body below the front matter for an older one."""
    card = ModelCard.from_dict(json.loads(path.read_text(encoding="utf-8")))
    text = render_card(card)
    shipped = (path.parent / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert text == shipped if shipped.startswith("---\n") else body(text) == shipped
    matter = front_matter(text)
    assert matter["library_name"] == "tt_zoo" and matter["license"] == "apache-2.0"
    assert matter["tags"][:2] == ["tt_zoo", card.artifact_kind.replace("_", "-")]


def test_front_matter_of_a_warm_started_late_interaction_model():
    meta = json.loads((SAVED_MODELS / "colbert_ict_bfs_wlp_crop_span_qgen_64" / "metadata.json")
                      .read_text(encoding="utf-8"))
    card = ModelCard.from_dict(meta)
    assert card.artifact_kind == "late_interaction"
    assert card.lineage.warm_start.source == "saved_models/ict_bfs_wlp_512"
    assert front_matter(render_card(card)) == {
        "library_name": "tt_zoo", "license": "apache-2.0", "base_model": "ict_bfs_wlp_512",
        "datasets": ["wikispeedia"], "metrics": ["recall", "mrr"],
        "tags": ["tt_zoo", "late-interaction", "colbert",
                 "pretraining:ict_bfs_wlp_crop_span_qgen"]}


def test_front_matter_of_a_model_trained_from_scratch_names_no_base_or_data():
    card = ModelCard.from_dict({"name": "none_x", "encoder": "bert", "pretraining": "none",
                                "training_data": "none (initialised, not trained)"})
    assert front_matter(render_card(card)) == {
        "library_name": "tt_zoo", "tags": ["tt_zoo", "two-tower", "bert", "pretraining:none"]}


def test_a_fine_tuned_card_names_its_base_model_and_squad():
    card = ModelCard.from_dict({
        "name": "m_reqa", "base_model": {"name": "ict_bfs_wlp_512", "sha256": "ab"},
        "finetune": {"steps": 3, "steps_run": 3, "best_value": None},
        "metrics": {"ReQA (%)": {"R@1": 1.0, "MRR": 2.0}}})
    matter = card.front_matter()
    assert (matter["base_model"], matter["datasets"], matter["metrics"]) == (
        "ict_bfs_wlp_512", ["squad"], ["recall", "mrr"])


def test_a_base_model_given_by_name_round_trips():
    # What a user passes to export_saved_model (notebook 03 does): the name, not a record.
    meta = {"name": "m_wikitext", "base_model": "ict_bfs_wlp_512", "train_steps": 4}
    card = ModelCard.from_dict(meta)
    assert card.to_dict() == meta
    assert card.front_matter()["base_model"] == "ict_bfs_wlp_512"
    assert "ict_bfs_wlp_512" in render_card(card)
    with pytest.raises(TtZooError, match="'base_model' must be a JSON object"):
        ModelCard.from_dict({"name": "m", "base_model": 3})


# ------------------------------------------------------------------ the dataclass (no TF)

def test_fields_are_typed_and_grouped():
    card = ModelCard.from_dict({"name": "m", "train_steps": 3, "batch_size": 8,
                                "pairs": {"num_pairs": 10, "make_pairs_config": {"seed": 0}},
                                "fine_tuning": {"optimizer_steps": 3, "finished": "today"}})
    assert card.training.train_steps == 3 and card.training.batch_size == 8
    assert card.training.pairs == PairSet(num_pairs=10, make_pairs_config={"seed": 0})
    assert card.lineage.fine_tuning == FineTuning(optimizer_steps=3, finished="today")


def test_a_card_built_in_code_writes_the_flat_metadata():
    card = ModelCard(name="m", training=Training(train_steps=3, batch_size=8))
    card.lineage.warm_start = Origin(source="saved_models/x", train_steps=2)
    assert card.to_dict() == {"name": "m", "train_steps": 3, "batch_size": 8,
                              "warm_start": {"from": "saved_models/x", "train_steps": 2}}


def test_unknown_keys_are_kept_at_the_top_and_inside_records():
    meta = {"name": "m", "from_a_later_version": {"x": [1, 2]},
            "warm_start": {"from": "a", "something_new": 1}}
    card = ModelCard.from_dict(meta)
    assert card.extra == {"from_a_later_version": {"x": [1, 2]}}
    assert card.lineage.warm_start.extra == {"something_new": 1}
    assert card.to_dict() == meta


def test_recorded_nulls_stay_null_and_unset_fields_stay_out():
    meta = {"name": "m", "tower_size": None, "warm_start": {"from": "a", "batch_size": None}}
    assert ModelCard.from_dict(meta).to_dict() == meta
    assert ModelCard(name="m").to_dict() == {"name": "m"}


@pytest.mark.parametrize("meta, field, expected", [
    ({"train_steps": "abc"}, "train_steps", "an integer"),
    ({"train_steps": True}, "train_steps", "an integer"),
    ({"learning_rate": "fast"}, "learning_rate", "a number"),
    ({"warm_start": {"train_steps": 1.5}}, "warm_start.train_steps", "an integer"),
    ({"warm_start": "ict_512"}, "warm_start", "a JSON object"),
    ({"signatures": "encode_query"}, "signatures", "a list"),
    ({"reexported": [{"date": 3}]}, "reexported[0].date", "a string"),
    ({"measured_by": {"bench.py": {"tables": "t"}}}, "measured_by.bench.py.tables", "a list"),
    ({"kind": "sparse"}, "kind", "one of"),
])
def test_a_bad_value_is_refused_naming_the_field(meta, field, expected):
    message = f"metadata field '{field}' must be {expected}"
    with pytest.raises(TtZooError, match=re.escape(message)):
        ModelCard.from_dict(meta)


def test_a_bad_value_set_in_code_is_refused_when_written():
    card = ModelCard(name="m")
    card.training.train_steps = "abc"
    with pytest.raises(TtZooError, match="'train_steps' must be an integer .got 'abc'"):
        card.to_dict()


def test_numbers_accept_ints_and_keep_them():
    assert ModelCard.from_dict({"learning_rate": 1, "final_loss": 2}).to_dict() == {
        "learning_rate": 1, "final_loss": 2}


def test_one_place_names_every_key():
    """The card's tables show only keys the card names; no key is named twice (checked when
    the keys are listed); no record names a key as its bookkeeping fields are named."""
    keys = ModelCard.metadata_keys()
    assert set(TWO_TOWER_TABLE) <= set(keys) and set(TERM_WEIGHT_TABLE) <= set(keys)
    for record in [ModelCard, *_Record.__subclasses__()]:
        hidden = {f.name: f for f in dataclasses.fields(record) if f.name in _HIDDEN}
        assert set(hidden) == set(_HIDDEN) and all(f.kw_only for f in hidden.values())


# ------------------------------------------------------------------ exports (TensorFlow)

def test_a_fresh_export_carries_the_typed_card(exported):
    _, path, meta = exported
    text = (path / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert front_matter(text) == {
        "library_name": "tt_zoo", "license": "apache-2.0", "base_model": "ict_bfs_wlp_512",
        "tags": ["tt_zoo", "two-tower", "bert", "pretraining:none"]}
    assert body(text).startswith("# tiny_test\n")
    card = ModelCard.from_dict(json.loads((path / "metadata.json").read_text()))
    assert card.to_dict() == meta and card.extra == {}
    assert card.architecture.embedding_dim == 8 and card.lineage.warm_start.train_steps == 7
    assert card.provenance.sha256 == meta["sha256"]


def test_export_refuses_a_bad_value_before_writing(exported, tmp_path):
    from tt_zoo.artifacts.export import export_saved_model
    with pytest.raises(TtZooError, match="'train_steps' must be an integer .got 'abc'"):
        export_saved_model(exported.model, tmp_path / "bad", {"train_steps": "abc"})
    assert not (tmp_path / "bad").exists()


def test_update_metadata_refuses_a_bad_value_and_leaves_the_files(exported, tmp_path):
    from tt_zoo.artifacts.export import update_metadata
    copy = tmp_path / "copy"
    shutil.copytree(exported.path, copy)
    before = {n: (copy / n).read_text() for n in ("metadata.json", "MODEL_CARD.md")}
    with pytest.raises(TtZooError, match="'metrics' must be a JSON object"):
        update_metadata(copy, metrics=["R@1"])
    assert {n: (copy / n).read_text() for n in before} == before


def test_verify_names_the_file_and_field_of_a_bad_card(exported, tmp_path):
    from tt_zoo.artifacts.export import verify_export
    copy = tmp_path / "copy"
    shutil.copytree(exported.path, copy)
    meta = json.loads((copy / "metadata.json").read_text())
    meta["train_steps"] = "abc"
    (copy / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match=r"metadata.json is not a valid model card: "
                                            r"metadata field 'train_steps'"):
        verify_export(copy)
