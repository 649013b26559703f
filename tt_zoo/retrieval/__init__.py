"""Retrieval: searchers over candidates and the indexes they search (Chang et al. 2020, Sec. 2).

`search` (the `Searcher` protocol, `SearchResult`, exact search, and the `TextSearcher`
protocol over it that every model's index follows), `passage_index` (`PassageIndex`: BM25,
ColBERT, HDCT's weighted BM25 and fusion searched with text), `index` (`EmbeddingIndex`:
ScaNN or brute force, saved and loaded), `bm25` (with HDCT's learned term weights, which
`term_weighting` computes), `fusion` (one searcher over two), late interaction (ColBERT:
`late_interaction` re-ranks by MaxSim, `token_store` keeps every document's token vectors,
`token_index` searches them end to end); `embedding_storage`, `embedding_shards` and
`sharded_index` keep a large corpus's embeddings in shards and search them as one. Scoring
searchers on benchmarks is `tt_zoo.evaluation`'s; mining training data with them,
`tt_zoo.mining`'s.
"""
