"""TaskRoutedTower (Maillard et al. 2021, Sec. 4.3: task-specific query towers): each row goes to
the sub-tower of its marker id, exactly; config round trip; bad sub-towers refused."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import assert_layer_round_trip, json_round_trip
from tt_zoo.modeling.routed_tower import TaskRoutedTower
from tt_zoo.modeling.towers import BertTower, BowMlpTower

A, B = 17, 18  # the marker ids of classes "qa" and "sentence_qa" in a vocabulary of 20
IDS = tf.constant([[2, A, 7, 8, 3, 0],    # marker A -> tower 0
                   [2, B, 7, 8, 3, 0],    # marker B -> tower 1
                   [2, 7, 8, 9, 3, 0],    # no marker -> the default (tower 1)
                   [2, 9, A, 3, 0, 0],    # marker A later in the row -> tower 0
                   [2, B, A, 3, 0, 0]])   # both: the leftmost (B) -> tower 1
PACKED = {"input_word_ids": IDS, "input_mask": tf.cast(IDS > 0, tf.int32),
          "input_type_ids": tf.zeros_like(IDS)}
EXPECTED_ROUTE = [0, 1, 1, 0, 1]


def bow(seed, dim=4):
    tf.keras.utils.set_random_seed(seed)
    tower = BowMlpTower(vocab_size=20, embedding_dim=dim, token_embedding_dim=3, hidden_dim=5,
                        name=f"bow_{seed}")
    tower(PACKED)
    return tower


def bert(seed):
    tf.keras.utils.set_random_seed(seed)
    tower = BertTower(vocab_size=20, embedding_dim=4, size=None, num_layers=1, hidden_size=8,
                      num_attention_heads=2, inner_dim=16, max_sequence_length=8,
                      name=f"bert_{seed}")
    tower(PACKED)
    return tower


def routed(towers, default_index=1):
    return TaskRoutedTower(towers, marker_ids=[A, B], task_classes=["qa", "sentence_qa"],
                           default_index=default_index, name="query_tower")


def test_each_row_gets_its_marker_towers_output_exactly():
    first, second = bow(0), bow(1)
    tower = routed([first, second])
    assert tower.route(IDS).numpy().tolist() == EXPECTED_ROUTE
    out = tower(PACKED).numpy()
    a, b = first(PACKED).numpy(), second(PACKED).numpy()
    assert not np.allclose(a, b)  # the sub-towers differ, so the routing is seen
    np.testing.assert_array_equal(out, np.stack([a[0], b[1], b[2], a[3], b[4]]))
    assert tower.embedding_dim == 4
    # Default class 0: the unmarked row goes to the first tower instead.
    np.testing.assert_array_equal(routed([first, second], default_index=0)(PACKED).numpy()[2],
                                  a[2])


def test_bert_sub_towers_route_exactly_and_keep_plain_inference():
    first, second = bert(0), bert(1)
    tower = routed([first, second])
    for plain in (True, False):
        out = tower(PACKED, training=False, plain_inference=plain).numpy()
        a = first(PACKED, training=False, plain_inference=plain).numpy()
        b = second(PACKED, training=False, plain_inference=plain).numpy()
        np.testing.assert_array_equal(out, np.where(np.array(EXPECTED_ROUTE)[:, None], b, a))
    # The plain graph and the layers agree within float32 round-off, as for one BertTower.
    np.testing.assert_allclose(tower(PACKED, training=False).numpy(),
                               tower(PACKED, training=False, plain_inference=False).numpy(),
                               atol=1e-5)


def test_config_round_trip_and_one_fit_step():
    tower = routed([bow(0), bow(1)])
    clone = assert_layer_round_trip(tower, PACKED)
    config = json_round_trip(tower.get_config())
    assert (config["marker_ids"], config["task_classes"], config["default_index"]) == (
        [A, B], ["qa", "sentence_qa"], 1)
    assert [t["config"]["name"] for t in config["towers"]] == ["bow_0", "bow_1"]
    assert [type(t) for t in clone.towers] == [BowMlpTower, BowMlpTower]


def test_a_mixed_precision_config_gives_its_policy_to_the_sub_towers():
    config = json_round_trip(routed([bow(0), bow(1)]).get_config())
    config["dtype"] = "mixed_bfloat16"
    clone = TaskRoutedTower.from_config(config)
    assert [t.dtype_policy.name for t in clone.towers] == ["mixed_bfloat16"] * 2


def test_bad_sub_towers_are_refused():
    with pytest.raises(ValueError, match=r"one embedding size \(got \{'qa': 4, "
                                         r"'sentence_qa': 6\}\)"):
        routed([bow(0), bow(1, dim=6)])
    with pytest.raises(ValueError, match="at least two sub-towers"):
        TaskRoutedTower([bow(0)], marker_ids=[A], task_classes=["qa"])
    with pytest.raises(ValueError, match="one marker id and one task class per sub-tower"):
        TaskRoutedTower([bow(0), bow(1)], marker_ids=[A], task_classes=["qa", "x"])
    with pytest.raises(ValueError, match="marker_ids must be distinct"):
        TaskRoutedTower([bow(0), bow(1)], marker_ids=[A, A], task_classes=["qa", "x"])
    with pytest.raises(ValueError, match="marker id 25 of class 'x' is outside"):
        TaskRoutedTower([bow(0), bow(1)], marker_ids=[A, 25], task_classes=["qa", "x"])
    with pytest.raises(ValueError, match="default_index must index"):
        TaskRoutedTower([bow(0), bow(1)], marker_ids=[A, B], task_classes=["qa", "x"],
                        default_index=2)
    with pytest.raises(ValueError, match="is itself a TaskRoutedTower"):
        TaskRoutedTower([bow(0), routed([bow(1), bow(2)])], marker_ids=[A, B],
                        task_classes=["qa", "x"])


def test_auto_xla_for_routed_bert_sub_towers_only():
    from tt_zoo.modeling import inference

    layers = inference.EncodeOptions(jit_compile="auto", plain_inference=False)
    big = inference.XLA_AUTO_MIN_DOCUMENTS
    assert layers.resolve(big, routed([bert(0), bert(1)])).jit_compile is True
    assert layers.resolve(big - 1, routed([bert(0), bert(1)])).jit_compile is False
    assert layers.resolve(big, routed([bow(0), bow(1)])).jit_compile is False
    assert inference.EncodeOptions(jit_compile="auto").resolve(  # plain graph
        big, routed([bert(0), bert(1)])).jit_compile is False
