"""Modeling: the two towers and their loss (Chang et al. 2020, Sec. 2 and 4.1).

`towers` (BERT and BoW-MLP over `tt_zoo.data.text`'s token ids), `losses` (the corrected
sampled softmax), `pair_model` (`PairModel`: what every model trained on pairs shares) and
`models` (`TwoTowerModel`, `build_two_tower_model`); late interaction
(ColBERT, Khattab & Zaharia 2020): `late_interaction` (the token tower, query augmentation),
`maxsim` (the score), `late_interaction_model` (`LateInteractionModel`) and
`query_token_weights` (MaxSim's query tokens weighed by their idf, BERTScore's importance
weighting).
"""
