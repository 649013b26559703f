"""What a variant's towers are beyond their shape: `ModelOptions`, and the three sets in use.

`PAPER` (Chang et al. 2020), `CPU_SCALE` (what this project trains on a CPU, and what an imported
public checkpoint is: `tt_zoo.zoo.imported`) and `COLBERT` (Khattab & Zaharia 2020). The
registry (`tt_zoo.zoo.registry`) gives every name the options of its series; every export
records them (its card's ``model_options``).
"""

from __future__ import annotations

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class ModelOptions:
    """Architecture and loss choices beyond the tower shape; every export records them.

    The defaults are the paper's (Chang et al. 2020, Sec. 2 and 4.1): separate towers, the
    [CLS] state, raw inner products, a tanh BoW-MLP output. `CPU_SCALE` is what learns best from
    random initialisation on this project's CPU budget (`results/pretrain_curve.md`).
    """

    pooling: str = "cls"
    share_towers: bool = False
    normalize_embeddings: bool = False
    temperature: Optional[float] = None
    bow_output_activation: Optional[str] = "tanh"


PAPER = ModelOptions()
CPU_SCALE = ModelOptions(pooling="mean", share_towers=True, normalize_embeddings=True,
                         temperature=0.05, bow_output_activation=None)
# ColBERT (Sec. 3): one BERT, per-token L2 normalisation, raw MaxSim logits (no temperature).
COLBERT = ModelOptions(pooling="tokens", share_towers=True, normalize_embeddings=True,
                       temperature=None, bow_output_activation=None)
