"""Data: articles from Wikipedia-like sources, passages, and the pretraining pairs made from them.

Chang et al. 2020, Sec. 3: readers (`mediawiki`, `wikispeedia`, `article_sources`) give
`articles.Article`s; `passages` cuts them; `pretraining_tasks` makes ICT, BFS and WLP pairs (and
MLM examples); `sampling` gives q(d); `pairs_io` writes and reads them as TFRecord shards with a
manifest (`beam_pairs` does it at scale); `pair_stats` reports Table 1; `features` names the fields;
`text` is the one tokenizer (vocabulary, in-graph WordPiece) that the towers, MLM examples and
token counts share; `text_files` reads the files of texts the commands take. For open-domain QA,
`question_sets` reads the question sets (WebQuestions, CuratedTREC, JSONL) that training and the
benchmarks share, `passage_collection` cuts an article source into the passages they search, and
`answer_passages` finds which passages hold each question's answer (a QA task's positives, the
benchmark's relevance).
"""
