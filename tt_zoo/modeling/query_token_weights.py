"""Query-token weights for MaxSim: each query token counted by how well it tells documents apart.

ColBERT's MaxSim (Khattab & Zaharia, SIGIR 2020, Sec. 3.3) counts every query token once,
"the" as much as "penicillin", and every [MASK] of the query augmentation as much as a word of
the query. BERTScore (Zhang et al., ICLR 2020, Sec. 3, "Importance weighting") weighs each
token's best match by its idf; here the same on MaxSim's query side, and, given a log of
questions, a second factor for the words every question has ("what", "which", "?"), which are
rare in documents (a high idf) but tell no answer apart:

    S(q, d) = sum over query tokens i of  w(t_i) * max over document tokens j of <E_q[i], E_d[j]>
    w(t) = idf(t) ** alpha * (qidf(t) / qidf_max) ** beta      w([MASK]) = mask_weight

with idf BM25's, log(1 + (N - df + 0.5) / (df + 0.5)) over N documents (Robertson & Sparck Jones;
bm25s and Lucene use the same), qidf the same over the questions of the log and qidf_max that of
a token no question holds (so the factor is in (0, 1]; beta 0 or no log: 1). As every w >= 0,
w_i * max_j <q_i, d_j> = max_j <w_i q_i, d_j>: the weights scale the query token vectors
(`LateInteractionModel` does it), so the loss, re-ranking, the token index and the SavedModel
signatures score with them unchanged, and a token of weight 0 leaves the query.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

# Texts packed at once while counting frequencies.
COUNT_BATCH = 1024


def document_frequencies(preprocessor, titles: Sequence[str], texts: Sequence[str], *,
                         batch_size: int = COUNT_BATCH) -> Tuple[np.ndarray, int]:
    """(df, N): in how many of the N (title, text) documents each vocabulary id occurs, as
    `preprocessor` (the model's document `TextPreprocessor`) packs them: int64 [vocab_size];
    [CLS] and [SEP] occur in every document, padding in none."""
    titles, texts = list(titles), list(texts)
    if len(titles) != len(texts):
        raise ValueError(f"document_frequencies: {len(titles)} titles for {len(texts)} texts.")
    return _frequencies(preprocessor, lambda s, e: (titles[s:e], texts[s:e]), len(texts),
                        batch_size, "document")


def query_frequencies(preprocessor, queries: Sequence[str], *,
                      batch_size: int = COUNT_BATCH) -> Tuple[np.ndarray, int]:
    """(qdf, N): in how many of the N questions each vocabulary id occurs, as `preprocessor`
    (the model's query preprocessor) packs them (its [MASK] padding counts; its weight is
    `mask_weight` whatever the log says)."""
    queries = list(queries)
    return _frequencies(preprocessor, lambda s, e: queries[s:e], len(queries), batch_size,
                        "question")


def _frequencies(preprocessor, batch, n: int, batch_size: int, what: str):
    """(counts, n) of the ids `preprocessor` packs from ``batch(start, end)``'s texts (a tuple
    of title and text lists for documents, a list for questions), each id once per text."""
    import tensorflow as tf  # noqa: PLC0415

    if not n:
        raise ValueError(f"Counting {what} frequencies needs at least one {what}.")
    df = np.zeros([preprocessor.vocab_size], np.int64)
    for start in range(0, n, batch_size):
        texts = batch(start, start + batch_size)
        inputs = (tuple(tf.constant(t, tf.string) for t in texts) if isinstance(texts, tuple)
                  else tf.constant(texts, tf.string))
        ids = preprocessor(inputs)["input_word_ids"].numpy()
        present = np.zeros([len(ids), df.size], bool)
        present[np.repeat(np.arange(len(ids)), ids.shape[1]), ids.ravel()] = True
        present[:, preprocessor.pad_id] = False
        df += present.sum(axis=0)
    return df, n


def bm25_idf(df: np.ndarray, num_documents: int) -> np.ndarray:
    """log(1 + (N - df + 0.5) / (df + 0.5)) of each count (float64), after checking the counts."""
    df = np.asarray(df)
    if df.ndim != 1 or not np.issubdtype(df.dtype, np.integer):
        raise ValueError(f"df must be a 1-D integer array of counts (got {df.dtype}{df.shape}).")
    if num_documents < 1 or df.min(initial=0) < 0 or df.max(initial=0) > num_documents:
        raise ValueError(f"df must hold counts in [0, {num_documents}] over num_documents >= 1 "
                         f"documents (got {df.min(initial=0)} .. {df.max(initial=0)}).")
    return np.log1p((num_documents - df + 0.5) / (df + 0.5))


def idf_weights(df: np.ndarray, num_documents: int, *, alpha: float = 1.0,
                mask_id: Optional[int] = None, mask_weight: float = 0.0,
                questions: Optional[Tuple[np.ndarray, int]] = None,
                beta: float = 0.0) -> np.ndarray:
    """float32 [vocab_size] query-token weights, the module docstring's w: idf ** alpha times,
    with `questions` (`query_frequencies` of a question log), (qidf / qidf_max) ** beta;
    `mask_weight` at `mask_id` (the query augmentation's [MASK]; None: no such row)."""
    check_weight_settings(alpha, mask_weight, beta)
    weights = bm25_idf(df, num_documents) ** alpha
    if questions is not None and beta:
        qdf, num_questions = questions
        if np.shape(qdf) != np.shape(df):
            raise ValueError(f"The question counts cover {np.size(qdf)} ids, the document "
                             f"counts {np.size(df)}.")
        unseen = bm25_idf(np.zeros(1, np.int64), num_questions)[0]
        weights = weights * (bm25_idf(qdf, num_questions) / unseen) ** beta
    weights = weights.astype(np.float32)
    if mask_id is not None:
        if not 0 <= mask_id < weights.size:
            raise ValueError(f"mask_id {mask_id} is outside the {weights.size} vocabulary ids.")
        weights[mask_id] = mask_weight
    return weights


def check_weight_settings(alpha: float, mask_weight: float, beta: float = 0.0) -> None:
    """Each must be finite and >= 0 (a negative weight would turn MaxSim's max into a min)."""
    for name, value in (("alpha", alpha), ("mask_weight", mask_weight), ("beta", beta)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not np.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0 (got {value!r}).")


def require_query_token_weights(model) -> None:
    """Raises TypeError unless `model` keeps query-token weights (a `LateInteractionModel`: a
    single-vector model has no per-token scores to weigh); the message names --query-idf, the
    flag of every command that sets them."""
    if not hasattr(model, "set_query_token_weights"):
        raise TypeError("--query-idf weighs the query tokens of a late-interaction (ColBERT) "
                        f"model; this is a {type(model).__name__}")


def weigh_queries_over_documents(model, titles: Sequence[str], texts: Sequence[str], *,
                                 alpha: float, mask_weight: float, corpus: str,
                                 questions: Optional[Sequence[str]] = None, beta: float = 0.0,
                                 question_log: str = "", log=print) -> dict:
    """`weigh_queries_by_idf` with the frequencies counted here: idf ** `alpha` over the (title,
    text) documents named `corpus`, times the `questions` log's factor ** `beta`, [MASK]
    `mask_weight`; logs one line of what it did and returns the record. Raises TypeError for a
    model without query-token weights (`require_query_token_weights`), before counting."""
    require_query_token_weights(model)
    frequencies = document_frequencies(model.document_preprocessor, titles, texts)
    counted = None if not questions else query_frequencies(model.query_preprocessor, questions)
    record = weigh_queries_by_idf(model, frequencies, alpha=alpha, mask_weight=mask_weight,
                                  corpus=corpus, questions=counted, beta=beta,
                                  question_log=question_log)
    factor = (f", question factor ** {beta:g} over {record['questions']:,} questions of "
              f"{question_log}" if "questions" in record else "")
    log(f"Query-token weights: idf ** {alpha:g} over {record['documents']:,} documents of "
        f"{corpus}{factor}, [MASK] {mask_weight:g}")
    return record


def weigh_queries_by_idf(model, frequencies: Tuple[np.ndarray, int], *, alpha: float = 1.0,
                         mask_weight: float = 0.0, corpus: str = "",
                         questions: Optional[Tuple[np.ndarray, int]] = None, beta: float = 0.0,
                         question_log: str = "") -> dict:
    """Sets a `LateInteractionModel`'s query-token weights (`idf_weights`): idf ** `alpha` over
    `frequencies` (`document_frequencies` of the corpus searched, as BM25 takes its idf from it,
    or of the corpus the model was trained on), times the `questions` factor ** `beta`, [MASK]
    `mask_weight`; returns the record the model keeps, which names the `corpus` and the
    `question_log`."""
    df, num_documents = frequencies
    weights = idf_weights(df, num_documents, alpha=alpha,
                          mask_id=model.query_preprocessor.mask_id, mask_weight=mask_weight,
                          questions=questions, beta=beta)
    record = {"scheme": "idf", "alpha": alpha, "mask_weight": mask_weight, "corpus": corpus,
              "documents": int(num_documents)}
    if questions is not None and beta:
        record.update(beta=beta, question_log=question_log, questions=int(questions[1]))
    model.set_query_token_weights(weights, record)
    return record
