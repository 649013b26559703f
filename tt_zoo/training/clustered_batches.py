"""Clustered (progressive) batches: each batch drawn from one cluster of the documents.

ProQA (Xiong et al. 2020, "Progressively Pretrained Dense Corpus Index for Open-Domain Question
Answering", Sec. 3.2) clusters the corpus with the current paragraph encoder and draws each
small batch from one cluster, re-clustering as training goes: a small batch then still holds
hard in-batch negatives, where a random batch of the same size holds mostly easy ones. We train
with ~128 pairs a batch on CPU, so the same problem applies.

Rounds of `every` steps. Round r (steps [r * every, (r + 1) * every)) serves exactly the rows
the baseline order (`step_data.StepOrder`) serves in those steps, so a run sees the same pairs
as a baseline run; only the grouping changes:

1. the round's documents are embedded by the document tower with the weights at step exactly
   r * every (truncated to their first `cluster_length` tokens, to make it cheaper);
2. mini-batch k-means (scikit-learn `MiniBatchKMeans`, random_state from (seed, r)) puts them
   into `num_clusters` clusters;
3. each cluster's members are permuted with an rng of (seed, r) and cut into batches; the
   leftovers (fewer than a batch per cluster) are pooled, in cluster order, into mixed batches;
   the batch order is shuffled.

Rounds before `start_step` (by default round 0 only) keep the baseline order: a freshly
initialised tower clusters by noise. The clustering of round r is computed in a Keras callback at
`on_train_batch_end` when the optimizer's step is r * every, and the data pipeline (which
prefetches ahead of the step) waits for it before serving round r's first batch. Each round's
order is written atomically to ``<checkpoint_dir>/clusters/round-<r>.npz`` before that step's
checkpoint, so a run resumed at step s reads round s // every's order (the weights it came from
are gone) and ends with the same weights as an uninterrupted run.

Number of clusters: ProQA clusters a whole corpus of millions of paragraphs; the number of
clusters it uses is not in the sources we could consult, so ours is scaled to what one round
holds: by default ``every // 4`` clusters (round rows / (4 * batch)), about four batches of
documents a cluster, so most batches come from one cluster and few leftovers are pooled.

Cost: a round embeds exactly the documents it then trains on, so the re-encoding is one
forward pass of the document tower (no gradients) per pair trained, whatever `every` is;
counting a backward pass as two forward ones and queries half as long as documents, that is
roughly a fifth of a BERT training step's work at full length (an estimate, not a
measurement). `cluster_length` is the knob (a BERT tower's cost falls at least linearly with
it), `encode_batch` a lesser one; each round's seconds are logged and totalled
(`ClusteredStepOrder.stats`), and `tt-zoo pretrain` records them in the train summary.
"""

from __future__ import annotations

import io
import os
import threading
import time
import warnings
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from tt_zoo.atomic_io import open_for_replace
from tt_zoo.data import features as F
from tt_zoo.errors import TtZooError
from tt_zoo.modeling.inference import PACKED_KEYS
from tt_zoo.training.step_data import Arrays, StepOrder, num_rows

CLUSTER_DIR = "clusters"
# The trailing element keeps these random streams apart from the epoch permutations, which are
# drawn from default_rng([seed, epoch]).
_STREAM = 1


class ClusterOrderError(TtZooError):
    """A round's clustered order is missing, or its file does not belong to this run."""


def default_num_clusters(every: int) -> int:
    """Clusters a round of `every` steps is cut into by default: about four batches each."""
    return max(1, every // 4)


def batches_from_clusters(labels: np.ndarray, batch_size: int,
                          rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """Groups positions 0..m-1 into batches by cluster.

    Args:
      labels: [m] the cluster of each position; m a multiple of `batch_size`.
      rng: permutes each cluster's members, then the batch order.

    Returns:
      (batches [m / batch_size, batch_size] of positions, source [m / batch_size]: the cluster
      a batch was cut from, or -1 for a batch of pooled leftovers). The leftovers of all
      clusters are concatenated in cluster order before they are cut, so a pooled batch joins
      the tails of a few clusters.
    """
    labels = np.asarray(labels)
    if len(labels) % batch_size:
        raise ValueError(f"{len(labels)} positions do not make whole batches of {batch_size}.")
    batches, sources, leftovers = [], [], []
    for cluster in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == cluster))
        full = len(members) // batch_size
        batches.append(members[:full * batch_size].reshape(full, batch_size))
        sources.extend([int(cluster)] * full)
        leftovers.append(members[full * batch_size:])
    pooled = np.concatenate(leftovers).reshape(-1, batch_size)
    batches = np.concatenate([*batches, pooled]).astype(np.int64)
    sources = np.asarray(sources + [-1] * len(pooled), np.int64)
    order = rng.permutation(len(batches))
    return batches[order], sources[order]


def cluster_round(embeddings: np.ndarray, batch_size: int, num_clusters: int, *, seed: int,
                  round_index: int, threads: Optional[int] = 1) -> Dict[str, np.ndarray]:
    """K-means of one round's document embeddings, grouped into batches (`batches_from_clusters`).

    Mini-batch k-means (Sculley 2010; scikit-learn `MiniBatchKMeans`, one k-means++ init on a
    sample): on a real round (12,800 BoW-MLP document embeddings, 512-d, 25 clusters) it took
    0.8 s against 4.8 s for full `KMeans`, for an inertia 0.9% higher; a batch grouping needs no
    better. `threads`: of scikit-learn's OpenMP and BLAS pools during the k-means (None: the
    libraries' default, every core). 1 by default: on our two cores shared with TensorFlow and
    other jobs, two threads made it about ten times slower (8.4 s).

    Returns {"positions": [batches, batch_size] indices into `embeddings`, "source": [batches]
    cluster of each batch or -1, "labels": [m] cluster of each embedding}. Deterministic in
    (embeddings, seed, round_index).
    """
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits  # scikit-learn's own dependency

    if not 1 <= num_clusters <= len(embeddings):
        raise ValueError(f"num_clusters must be in [1, {len(embeddings)}] for {len(embeddings)} "
                         f"documents (got {num_clusters}).")
    rng = np.random.default_rng([seed, round_index, _STREAM])
    kmeans = MiniBatchKMeans(n_clusters=num_clusters, n_init=1, batch_size=1024,
                             random_state=int(rng.integers(2**31 - 1)))
    with warnings.catch_warnings(), threadpool_limits(limits=threads):
        # Fewer distinct points than clusters (an untrained tower): some clusters stay empty.
        warnings.simplefilter("ignore", ConvergenceWarning)
        labels = kmeans.fit_predict(np.asarray(embeddings, np.float32))
    positions, source = batches_from_clusters(labels, batch_size, rng)
    return {"positions": positions, "source": source, "labels": labels.astype(np.int64)}


class ClusteredStepOrder:
    """The rows of each step, regrouped by cluster in every round from `start_step` on.

    Give it to `step_data.step_batches` / `distribute_step_batches` as `order`, and its
    `callback()` to `loop.train_resumable` as a data callback (it must run before the
    checkpoint callback, and be closed when `fit` ends, however it ends: `train_resumable`
    does both). `rows(step)` blocks, in the data pipeline's thread, until the round of `step`
    is ready.

    Args:
      arrays: the tokenized pair set (`step_data.tokenize_pair_set`).
      batch_size: the global batch.
      seed: the run's seed (the baseline order's and the clustering's).
      every: steps a round.
      directory: where each round's order is written (``<checkpoint_dir>/clusters``).
      start_step: the first clustered step, a multiple of `every` (default `every`).
      num_clusters: clusters a round (0: `default_num_clusters`).
      cluster_length: tokens of each document embedded for clustering (0: all).
      encode_batch: documents a forward pass when embedding.
      kmeans_threads: threads of the k-means (`cluster_round`).
    """

    def __init__(self, arrays: Arrays, batch_size: int, *, seed: int, every: int,
                 directory: str, start_step: Optional[int] = None, num_clusters: int = 0,
                 cluster_length: int = 0, encode_batch: int = 256,
                 kmeans_threads: Optional[int] = 1, log: Callable = print):
        n = num_rows(arrays)
        documents = arrays[F.DOCUMENT_INPUTS]
        document_length = documents["input_word_ids"].shape[1]
        start_step = every if start_step is None else start_step
        if every <= 0:
            raise ValueError(f"every must be a positive number of steps (got {every}).")
        if start_step < 0 or start_step % every:
            raise ValueError(f"start_step must be a multiple of every={every} (got {start_step}).")
        self.num_clusters = num_clusters or default_num_clusters(every)
        if not 1 <= self.num_clusters <= every * batch_size:
            raise ValueError(f"num_clusters must be in [1, {every * batch_size}] (the rows of a "
                             f"round of {every} steps x batch {batch_size}; got {num_clusters}).")
        self.cluster_length = cluster_length or document_length
        if not 1 <= self.cluster_length <= document_length:
            raise ValueError(f"cluster_length must be in [1, {document_length}] (the document "
                             f"length; got {cluster_length}).")
        if encode_batch <= 0:
            raise ValueError(f"encode_batch must be positive (got {encode_batch}).")
        self.arrays, self.n, self.batch_size, self.seed = arrays, n, batch_size, seed
        self.every, self.start_step, self.directory = every, start_step, directory
        self.encode_batch, self.kmeans_threads, self.log = encode_batch, kmeans_threads, log
        self._baseline = StepOrder(n, batch_size, seed)
        self._rounds: Dict[int, np.ndarray] = {}
        self._ready = threading.Condition()
        self._closed = False
        self.stats = {"rounds_clustered": 0, "rounds_loaded": 0, "encode_seconds": 0.0,
                      "kmeans_seconds": 0.0, "seconds": 0.0}

    # -- what the run records ---------------------------------------------------------------
    def settings(self) -> dict:
        """What defines the grouping (for the run's recorded settings)."""
        return {"every": self.every, "start_step": self.start_step,
                "clusters": self.num_clusters, "cluster_length": self.cluster_length}

    def round_path(self, round_index: int) -> str:
        return os.path.join(self.directory, f"round-{round_index}.npz")

    def is_clustered(self, round_index: int) -> bool:
        return round_index * self.every >= self.start_step

    # -- the data pipeline's side --------------------------------------------------------------
    def baseline_rows(self, round_index: int) -> np.ndarray:
        """[every, batch_size] the rows the baseline order serves in the round's steps."""
        first = round_index * self.every
        return np.stack([self._baseline.rows(step) for step in range(first, first + self.every)])

    def rows(self, step: int) -> np.ndarray:
        """The row indices of `step`'s (global) batch; waits until its round is ready."""
        round_index = step // self.every
        if not self.is_clustered(round_index):
            return self._baseline.rows(step)
        with self._ready:
            while round_index not in self._rounds:
                if self._closed:
                    raise ClusterOrderError(
                        f"The clustered order of round {round_index} (step {step}) was never "
                        "made: training stopped, or the ClusteredStepOrder's callback is not "
                        "in the fit call.")
                self._ready.wait(timeout=1.0)
            return self._rounds[round_index][step % self.every]

    def close(self) -> None:
        """Releases a data pipeline waiting for a round that will not come (`fit` ended)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def _publish(self, round_index: int, rows: np.ndarray) -> None:
        with self._ready:
            for old in [r for r in self._rounds if r < round_index]:
                del self._rounds[old]  # the pipeline has served them (it runs ahead)
            self._rounds[round_index] = rows
            self._ready.notify_all()

    # -- the callback's side ----------------------------------------------------------------
    def begin(self, model: tf.keras.Model, step: int, end_step: Optional[int]) -> None:
        """At the start of `fit` at `step`: makes the current round's order ready.

        A resumed run inside a clustered round reads the round's file (an error if it is
        missing); at a round's first step it reads the file if there is one (a resumed run:
        the file is the record) and otherwise clusters now (the weights are those of this
        step); a fresh run at step 0 always clusters.
        """
        with self._ready:
            self._closed = False
            self._rounds.clear()
        round_index = step // self.every
        if (end_step is not None and step >= end_step) or not self.is_clustered(round_index):
            return
        if step % self.every == 0 and (step == 0
                                       or not tf.io.gfile.exists(self.round_path(round_index))):
            self.compute_round(model, round_index)
        else:
            self.load_round(round_index)

    def load_round(self, round_index: int) -> np.ndarray:
        """Reads a round's order from its file and makes it ready; [every, batch_size] rows."""
        path = self.round_path(round_index)
        if not tf.io.gfile.exists(path):
            raise ClusterOrderError(
                f"{path} is missing: a run resumed at a step of clustered round {round_index} "
                f"(steps {round_index * self.every}-{(round_index + 1) * self.every - 1}) needs "
                "the order written when the round began, from weights that are gone. Restore "
                "the file, or start a new run with another --workdir.")
        with tf.io.gfile.GFile(path, "rb") as f, np.load(io.BytesIO(f.read())) as stored:
            rows = stored["rows"]
        expected = self.baseline_rows(round_index)
        if rows.shape != expected.shape or not np.array_equal(np.sort(rows, axis=None),
                                                              np.sort(expected, axis=None)):
            raise ClusterOrderError(
                f"{path} does not hold the rows of round {round_index} of this run (shape "
                f"{rows.shape}, expected {expected.shape} with the baseline's rows): it was "
                "written by a run with other data, batch, seed or rounds.")
        self.stats["rounds_loaded"] += 1
        self.log(f"clustered batches: round {round_index} order read from {path}")
        self._publish(round_index, rows)
        return rows

    def compute_round(self, model: tf.keras.Model, round_index: int) -> np.ndarray:
        """Embeds, clusters and groups the round's rows with the model's current weights;
        writes the order file, then makes it ready. Returns [every, batch_size] rows."""
        start = time.perf_counter()
        baseline = self.baseline_rows(round_index)
        flat = baseline.reshape(-1)
        embeddings = self.embed_documents(model, flat)
        encoded = time.perf_counter()
        grouped = cluster_round(embeddings, self.batch_size, self.num_clusters, seed=self.seed,
                                round_index=round_index, threads=self.kmeans_threads)
        rows = flat[grouped["positions"]]
        clustered = time.perf_counter()
        path = self.round_path(round_index)
        with open_for_replace(path, "wb") as f:
            np.savez(f, rows=rows, source=grouped["source"], round=round_index,
                     step=round_index * self.every, seed=self.seed, every=self.every,
                     batch_size=self.batch_size, clusters=self.num_clusters,
                     cluster_length=self.cluster_length)
        seconds = time.perf_counter() - start
        self.stats["rounds_clustered"] += 1
        self.stats["encode_seconds"] += encoded - start
        self.stats["kmeans_seconds"] += clustered - encoded
        self.stats["seconds"] += seconds
        from_one = int((grouped["source"] >= 0).sum())
        doc_ids = self.arrays.get(F.DOC_ID)
        distinct = ""
        if doc_ids is not None:
            mean_distinct = lambda batches: np.mean([len(np.unique(doc_ids[b]))  # noqa: E731
                                                     for b in batches])
            distinct = (f"; distinct documents a batch {mean_distinct(rows):.1f} "
                        f"(baseline {mean_distinct(baseline):.1f})")
        self.log(f"clustered batches: round {round_index} (step {round_index * self.every}): "
                 f"embedded {len(flat):,} documents ({self.cluster_length} tokens) in "
                 f"{encoded - start:.1f} s, k-means into {self.num_clusters} clusters in "
                 f"{clustered - encoded:.1f} s; {from_one} of {len(rows)} batches from one "
                 f"cluster{distinct}; {seconds:.1f} s in all")
        self._publish(round_index, rows)
        return rows

    def embed_documents(self, model: tf.keras.Model, rows: np.ndarray) -> np.ndarray:
        """[len(rows), dim] the document tower's embeddings (inference mode) of the rows'
        documents, truncated to `cluster_length` tokens, `encode_batch` at a time
        (`TwoTowerModel.encode_document_inputs`)."""
        documents = self.arrays[F.DOCUMENT_INPUTS]
        return model.encode_document_inputs(
            {name: documents[name][rows, :self.cluster_length] for name in PACKED_KEYS},
            batch_size=self.encode_batch)

    def callback(self) -> "ClusteringCallback":
        return ClusteringCallback(self)


class ClusteringCallback(tf.keras.callbacks.Callback):
    """Makes each clustered round's order from the weights at the round's first step (see
    `ClusteredStepOrder`); `close()` releases a data pipeline still waiting when `fit` ends."""

    def __init__(self, order: ClusteredStepOrder):
        super().__init__()
        self.order = order
        self._end_step = None

    def on_train_begin(self, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        steps = (self.params or {}).get("steps")
        self._end_step = None if steps is None else step + int(steps)
        try:
            self.order.begin(self.model, step, self._end_step)
        except BaseException:
            self.order.close()
            raise

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        round_index = step // self.order.every
        if (step % self.order.every or not self.order.is_clustered(round_index)
                or (self._end_step is not None and step >= self._end_step)):
            return
        try:
            self.order.compute_round(self.model, round_index)
        except BaseException:
            self.order.close()
            raise

    def on_train_end(self, logs=None):
        self.order.close()

    def close(self) -> None:
        self.order.close()
