"""Architecture families, one module each, each registering itself with
`tt_zoo.modeling.architectures`: ``bert`` (the paper's Transformer tower, the BERT miniatures,
all-MiniLM-L6-v2), ``bow_mlp`` (the paper's BoW-MLP and static towers) and ``mpnet``
(all-mpnet-base-v2: Song et al. 2020)."""
