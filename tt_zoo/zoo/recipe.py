"""How a variant is trained: one `Recipe` type for the registry, the shipped list and the grid.

A recipe is the pretraining schedule and data settings that `tt-zoo make-pairs` and `tt-zoo
pretrain` (or `tt-zoo train-term-weights`) run, plus the ReQA fine-tuning budget that `tt-zoo
reproduce` scores a pretrained model with. Each registered name carries the recipe of its
options (`tt_zoo.zoo.registry.Series`): the paper's towers the paper's (`PAPER_RECIPE`, Chang et
al. 2020, Sec. 5.1), the towers this project trains on a CPU the CPU-scale one (`CPU_RECIPE`,
also the reproduce grid's budget); a shipped name's recipe is what its run recorded
(``tt_zoo/zoo/shipped_models.json``).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a variant is pretrained, and how the reproduce grid fine-tunes it on ReQA.

    The defaults are the paper's (Chang et al. 2020, Sec. 5.1: batch 8,192, 100K steps, Adam
    1e-4 with 10% warm-up then linear decay, documents of 288 tokens; fine-tuning Adam 5e-5,
    2,000 steps x 512).

    Args:
      batch_size, steps, learning_rate, warmup_fraction: the pretraining schedule.
      pairs_per_article, max_doc_tokens: the pairs `tt-zoo make-pairs` makes (max_doc_tokens:
        the passage budget in whitespace words).
      vocab_size: the WordPiece vocabulary's size.
      document_length: the document tower's token budget (the query's is the spec's).
      finetune_steps, finetune_batch_size, finetune_learning_rate, finetune_eval_every: the
        ReQA cold-start fine-tuning (`tt_zoo.training.finetuning`), with early stopping on the
        validation loss every `finetune_eval_every` steps.
      seed: seeds the pairs, the pretraining and the fine-tuning splits.
    """

    batch_size: int = 8192
    steps: int = 100_000
    learning_rate: float = 1e-4
    warmup_fraction: float = 0.1
    pairs_per_article: int = 4
    vocab_size: int = 8192
    max_doc_tokens: int = 288
    document_length: int = 288
    finetune_steps: int = 2000
    finetune_batch_size: int = 512
    finetune_learning_rate: float = 5e-5
    finetune_eval_every: int = 20
    seed: int = 0


PAPER_RECIPE = Recipe()
# What learns on this project's CPU budget (results/pretrain_curve.md): the flagship's schedule
# (batch 128, Adam 1e-3) cut to 800 steps, so each Transformer cell of the reproduce grid takes
# about 15 minutes; documents of 128 tokens from pairs of 96-word passages, 128 per article.
# Fine-tuning scales the paper's down: fewer, smaller steps at a larger rate.
CPU_RECIPE = Recipe(batch_size=128, steps=800, learning_rate=1e-3, pairs_per_article=128,
                    max_doc_tokens=96, document_length=128, finetune_steps=100,
                    finetune_batch_size=64, finetune_learning_rate=2e-4)
# The colbert_ variants: the flagship ict_bfs_wlp_512's CPU-scale pairs, batch and document
# length, ColBERT's smaller learning rate, warm-started from the flagship's encoder.
COLBERT_RECIPE = dataclasses.replace(CPU_RECIPE, steps=3500, learning_rate=3e-4)
# The hdct_ variants: the flagship's encoder, 2,000 steps x 64 documents of the pair set's first
# 200,000 pairs (`tt-zoo train-term-weights`).
TERM_WEIGHT_RECIPE = dataclasses.replace(CPU_RECIPE, batch_size=64, steps=2000,
                                         learning_rate=5e-4)

