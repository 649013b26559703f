"""`pretrain --init-from`: a warm start copies an export's weights, and refuses another shape."""

import numpy as np
import pytest

from helpers import tiny_model


def test_init_from_copies_the_exports_weights(exported):
    from tt_zoo.training.pretrain_run import init_from

    import tensorflow as tf
    tf.keras.utils.set_random_seed(1)  # a different initialisation than the export's
    model = tiny_model()
    model.build_by_calling()
    model.set_weights([w + 1.0 for w in model.get_weights()])
    record = init_from(model, exported.path)
    for ours, theirs in zip(model.get_weights(), exported.model.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    assert record.source == str(exported.path) and record.sha256 == exported.meta["sha256"]
    assert record.to_dict()["from"] == str(exported.path)  # the card's warm_start.from


def test_init_from_refuses_another_architecture(exported):
    from tt_zoo.training.pretrain_run import init_from

    other = tiny_model(encoder="bow_mlp")
    other.build_by_calling()
    from tt_zoo.training import RunError
    with pytest.raises(RunError, match="do not match"):
        init_from(other, exported.path)


def test_a_run_of_no_steps_records_its_sources_pretraining_not_its_variants():
    """A 0-step warm start trained nothing of its variant's tasks: the card's pretraining is the
    source's (an imported checkpoint's "imported"), or "none" without a source."""
    from types import SimpleNamespace

    from tt_zoo.artifacts.model_card import Origin
    from tt_zoo.training.pretrain_run import trained_pretraining

    spec = SimpleNamespace(pretraining="ict_bfs_wlp")
    imported = Origin(source="minilm_l6_384", pretraining="imported")
    assert trained_pretraining(spec, 0, imported) == "imported"
    assert trained_pretraining(spec, 0, None) == "none"
    assert trained_pretraining(spec, 0, Origin(source="x")) == "none"
    assert trained_pretraining(spec, 40, imported) == "ict_bfs_wlp"
