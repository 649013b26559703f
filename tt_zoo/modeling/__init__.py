"""Modeling: the two towers and their loss (Chang et al. 2020, Sec. 2 and 4.1).

`text` (in-graph WordPiece), `towers` (BERT and BoW-MLP), `losses` (the corrected sampled
softmax) and `models` (`TwoTowerModel`, `build_two_tower_model`).
"""
