"""Mining: training data made by searching, beside the training that consumes it.

`hard_negatives` (BM25 hard confounders for pretraining pairs, ReQA fine-tuning questions or
any ranking, stored beside the pairs; Karpukhin et al. 2020, Maillard et al. 2021) and
`task_sources` (multi-task training tasks built from the benchmarks and pair sets we have:
positives by answer match in BM25's top 100, DPR's BM25 confounder, SPAR's lexical task,
confounders re-mined by a trained model). Its floor: the miners search with BM25
(`tt_zoo.retrieval.bm25`) and build tasks from the open-domain QA question sets and passage
collections (`tt_zoo.evaluation.odqa`), so they cannot sit in `tt_zoo.data`, below the
searchers; training (`tt_zoo.training.finetuning`) and the commands take what they make, so
they stand under those: above retrieval and evaluation, below training.
"""
