"""tt_zoo: two-tower retrieval models pretrained with paragraph-level tasks.

Chang, Yu, Chang, Yang, Kumar. Pre-training Tasks for Embedding-based Large-scale Retrieval.
ICLR 2020.
"""

from tt_zoo import _keras_env

_keras_env.check_legacy_keras()

__version__ = "0.1.0"
