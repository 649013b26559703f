"""The MLM baseline: masked-LM pretraining of the encoder, copied into both towers."""

import numpy as np
import tensorflow as tf

from helpers import assert_model_round_trip, tiny_model, tiny_vocab
from tt_zoo.training.mlm import pretrain_mlm
from tt_zoo.data.pairs_io import write_mlm_shards
from tt_zoo.data.pretraining_tasks import mlm_examples

TEXTS = ["the seine flows through paris the capital of france",
         "alexander fleming discovered penicillin in london england",
         "water boils at 100 degrees in the city of paris"] * 8


def test_mlm_pretraining_lowers_loss_and_initialises_both_towers(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    examples = list(mlm_examples(TEXTS, str(vocab), seq_length=16, seed=0))
    write_mlm_shards(examples, str(tmp_path / "mlm"), num_shards=1, progress=False)

    model = tiny_model()
    model.build_by_calling()
    from tt_zoo.training.mlm import MaskedLMPretrainer
    from tt_zoo.data.pairs_io import read_mlm_examples
    batch = next(iter(read_mlm_examples(str(tmp_path / "mlm")).batch(8)))
    before = float(MaskedLMPretrainer(model.query_tower.encoder).masked_lm_loss(batch))

    result = pretrain_mlm(model, str(tmp_path / "mlm"), steps=12, batch=8, learning_rate=5e-3,
                          warmup_fraction=0.1, strategy=tf.distribute.get_strategy(),
                          workdir=str(tmp_path / "work"), checkpoint_every=6, progress=False)
    assert result.steps_done == 12 and np.isfinite(result.final_loss)
    assert result.final_loss < before, (before, result.final_loss)
    for q, d in zip(model.query_tower.encoder.get_weights(),
                    model.document_tower.encoder.get_weights()):
        np.testing.assert_array_equal(q, d)
    # The MLM-initialised model is an ordinary two-tower model: the shared round trip holds.
    assert_model_round_trip(model, tmp_path / "export")
