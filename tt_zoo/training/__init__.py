"""Training: pretraining and fine-tuning (Chang et al. 2020, Sec. 5).

`step_data` (pairs tokenized on the host, served by step), `loop` (the paper's schedule,
strategies, the resumable one-`fit` loop), `mlm` (the MLM baseline), `finetuning` (ReQA),
`multi_task` (one retriever on several tasks, Maillard et al. 2021).
"""
