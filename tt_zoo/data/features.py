"""Names of the features that flow from pair data into the two-tower model.

A pair dataset (``tf.data``) yields dicts with these keys; the model's ``compute_loss`` reads
them. The document side is a *text pair*: (title, passage) for pretraining (Chang et al. 2020,
Sec. 3: ICT documents are "title [SEP] passage"), (sentence, passage) for ReQA.
"""

QUERY = "query"                          # tf.string []: the query text
DOC_TITLE = "doc_title"                  # tf.string []: first segment of the document
DOC_TEXT = "doc_text"                    # tf.string []: second segment (the passage)
DOC_ID = "doc_id"                        # tf.string []: identifies the document (accidental hits)
DOC_SAMPLING_PROB = "doc_sampling_prob"  # tf.float32 []: q(d) for the logQ correction
TASK = "task"                            # tf.string []: which pretraining task made the pair

# Tokenized on the host (`PairModel.tokenize_pairs`): dicts of input_word_ids, input_mask,
# input_type_ids [seq_length], in place of QUERY and DOC_TITLE/DOC_TEXT.
QUERY_INPUTS = "query_inputs"
DOCUMENT_INPUTS = "document_inputs"

# Optional hard negatives, H per example (e.g. BM25-mined), shared as extra candidates.
HARD_NEGATIVE_TITLES = "hard_negative_titles"  # tf.string [H]
HARD_NEGATIVE_TEXTS = "hard_negative_texts"    # tf.string [H]
HARD_NEGATIVE_IDS = "hard_negative_ids"        # tf.string [H]
HARD_NEGATIVE_SAMPLING_PROBS = "hard_negative_sampling_probs"  # tf.float32 [H]
# Or tokenized on the host, flattened over the batch: packed ids [batch * H, seq_length] (row
# b * H + h is example b's h-th hard negative), with HARD_NEGATIVE_IDS hashed to int64 [batch * H]
# and HARD_NEGATIVE_SAMPLING_PROBS [batch * H].
HARD_NEGATIVE_INPUTS = "hard_negative_inputs"

# Distillation (`tt_zoo.training.distill_data`): the teacher's scores of each example's K
# candidates, the document first and its K - 1 hard negatives after: float32 [batch, K]; a batch
# of another task in the same run carries [batch, 0].
TEACHER_SCORES = "teacher_scores"

# MLM examples use the Model Garden's feature names.
MLM_FEATURES = ("input_word_ids", "input_mask", "input_type_ids",
                "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
