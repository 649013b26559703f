"""Evaluation: the benchmarks, and the scores of any searcher on them.

`reqa` (ReQA-SQuAD, Ahmad et al. 2019, as Chang et al. 2020 evaluate on it, Sec. 4.1 and 5:
the benchmark and its cold-start splits), `metrics` (R@k and MRR of any searcher;
`evaluate_encoder` for a two-tower model, `evaluate_bm25` for the BM25 baseline),
`open_domain` (open-domain ReQA, Chang et al. 2020, Sec. 5.3, Table 6: the candidates of an
article corpus), `odqa` (DPR's open-domain QA answer recall over 100-word passages),
`text_benchmarks` (one evaluation path for text-query searchers over the three) and
`document_embeddings` (a model's document embeddings of a collection, streamed to a file in
bounded memory, resumably, under one name per model; all of them use it). It stands above
what it scores (the searchers of `tt_zoo.retrieval`, the towers of `tt_zoo.modeling`) and below
training, which monitors with it, and the commands.
"""
