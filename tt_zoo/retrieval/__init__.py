"""Retrieval: searchers over candidates and the ReQA evaluation (Chang et al. 2020, Sec. 2, 5).

`search` (the `Searcher` protocol, `SearchResult`, exact search, and the `TextSearcher`
protocol over it that every model's index follows), `passage_index` (`PassageIndex`: BM25,
ColBERT, HDCT's weighted BM25 and fusion searched with text), `index` (`EmbeddingIndex`:
ScaNN or brute force, saved and loaded), `bm25`, `reqa` (the benchmark and its cold-start
splits) and `metrics` (R@k and MRR of any searcher); `embedding_storage`, `embedding_shards` and
`sharded_index` keep a large corpus's embeddings in shards and search them as one.
"""
