"""Modeling: the two towers and their loss (Chang et al. 2020, Sec. 2 and 4.1).

`towers` (BERT and BoW-MLP over `tt_zoo.data.text`'s token ids), `losses` (the corrected
sampled softmax) and `models` (`TwoTowerModel`, `build_two_tower_model`).
"""
