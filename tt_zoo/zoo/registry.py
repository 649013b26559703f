"""Every named variant of the paper's Tables 3 and 5, and which of them ship trained weights.

A name reads like the paper: ``{pretraining}_{dim}`` for the default BERT tower
(``ict_bfs_wlp_512``, ``mlm_128``, ``none_512``), with an encoder prefix for the others
(``bert_base_ict_512``, ``bow_mlp_ict_bfs_wlp_512``). Chang et al. 2020, Table 3 (encoders ×
pretraining tasks) and Table 5 (ablations: 4 vs 12 layers, embedding dimension 128/256/512,
tasks ICT, BFS, WLP and their mix).

``colbert_{pretraining}_{m}`` (issue 23) is a late-interaction tiny BERT (ColBERT, Khattab &
Zaharia, SIGIR 2020; `tt_zoo.modeling.late_interaction_model`) with m-dimensional token vectors,
pretrained on the same pair sources, warm-started from the shipped single-vector flagship.

``hdct_{pretraining}`` (issue 23) is a term-weight model (HDCT, Dai & Callan, WWW 2020;
`tt_zoo.modeling.term_weights`): the flagship's tiny BERT and a linear head weigh each document
term for a BM25 index, trained on the query terms of those pairs (`tt-zoo train-term-weights`).

``multitask_bow_mlp_{pretraining}_{dim}`` (issue 24) is one BoW-MLP retriever trained on several
tasks at once (multi-task DPR, Maillard et al. 2021, *Multi-task Retrieval for
Knowledge-Intensive Tasks*, Sec. 3-4; `tt-zoo multitask`), warm-started from the shipped
``bow_mlp_{pretraining}_{dim}``: WebQuestions trainmodel and the training part of
ReQA-SQuAD(dev)'s 0.8 cold-start split, each example with one BM25 confounder
(`MULTITASK_RUN`).

``multitask_lexical_bow_mlp_{pretraining}_{dim}`` (issues 22, 24) adds BM25 as a teacher to those
two tasks: the ``lexical`` task, SPAR's training data for its lexical model (Chen et al. 2021;
`MULTITASK_LEXICAL_RUN`).

``multitask_colbert_{pretraining}_{m}`` (issues 23-24) is the shipped ColBERT model trained the
same way on the same two QA tasks (`MULTITASK_COLBERT_RUN`): supervision for the
late-interaction re-ranker, from ``colbert_{pretraining}_{m}``.

Every name has a second spelling in timm's form, ``ARCH.TAG`` (`ModelSpec.arch_tag`): the
architecture from the spec's encoder, tower size and embedding dimension (`architecture`:
``bert_tiny_512``, ``bow_mlp_512``; a public checkpoint's own: ``minilm_l6_384``) and a tag
saying how the weights were made (`ModelSpec.tag`: ``ict_bfs_wlp``,
``multitask_lexical_ict_bfs_wlp_crop_span_qgen``, ``imported``). `get_spec`, `list_models`'s
pattern and so `tt_zoo.load` and every ``--model`` take either (`registered_name`); the
registered name stays the key, the saved_models/ folder and the card's name.

Every spec has a ``kind`` (`tt_zoo.modeling.kinds.KINDS`): what its artifact is and how it
loads. ``two_tower`` and ``late_interaction`` exports load with ``tt_zoo.load``;
``term_weights`` exports with ``tt_zoo.load_term_weighter``. The shipped list records each
entry's kind.

A name's recipe is the run config of the command that trains it (`ModelSpec.run`: a
`tt_zoo.configs` instance, `PretrainConfig`, `MultitaskConfig`, `TermWeightConfig` or
`AdaptQueriesConfig`), and `ModelSpec.recipe_command` is that config's command line
(`RunConfig.command_line`), after ``tt-zoo make-pairs`` of the pair set it reads. A shipped
name's is what its run recorded: ``tt_zoo/zoo/recipes/COMMAND/NAME.json`` (package data, beside
the shipped list), the config's `to_dict` (`read_recipe`; `tt_zoo.training.shipped_recipes`
writes it from the export's metadata). Any other
name's is its `Series`' run config (`SERIES`, chosen by the name's prefix: encoder, tower size,
options, kind and that run config in one row) with the name's own variant, pair set, starting
model and export: a CPU-scale tower (mean pooling, shared, cosine / 0.05) the CPU-scale run its
shipped siblings ran (`CPU_PRETRAIN`), a paper-scale tower (``bert_small_``, ``bert_base_``:
[CLS], separate towers) the paper's (`PAPER_PRETRAIN`). Its tasks and dimensions make the names
(a cartesian product per series); ``tt_zoo/zoo/shipped_models.json`` records a shipped name's
artifact, its sha256 and measured numbers, not how it was trained.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import json
import os
import pathlib
import shlex
from typing import Dict, List, Optional, Tuple

from tt_zoo.configs.adapt_queries import AdaptQueriesConfig
from tt_zoo.configs.commands import RUN_CONFIGS
from tt_zoo.configs.multitask import MultitaskConfig
from tt_zoo.configs.pretrain import PretrainConfig
from tt_zoo.configs.run_config import RunConfig
from tt_zoo.configs.term_weights import TermWeightConfig
from tt_zoo.errors import UnknownModelError  # noqa: F401  (get_spec raises it)
from tt_zoo.modeling.kinds import KINDS, LATE_INTERACTION, TERM_WEIGHTS, TWO_TOWER
from tt_zoo.zoo.imported import CHECKPOINTS, ImportedCheckpoint, headline
# The options of every series (`ModelOptions`: pooling, tower sharing, score scale).
from tt_zoo.zoo.model_options import COLBERT, CPU_SCALE, PAPER, ModelOptions

PRETRAINING_TASKS = ("none", "mlm", "ict", "bfs", "wlp", "ict_bfs_wlp")
# Past the paper (issue 22; tt_zoo.data.passage_pair_tasks): Contriever crops, Spider recurring
# spans, ProQA generated questions, alone and mixed. Registered for the CPU-scale towers only.
SUCCESSOR_TASKS = ("crop", "span", "qgen", "crop_span", "span_qgen", "crop_span_qgen",
                   "ict_bfs_wlp_span", "ict_bfs_wlp_crop_span", "ict_bfs_wlp_crop_span_qgen")
SUCCESSOR_PREFIXES = ("", "bow_mlp_", "colbert_")
EMBEDDING_DIMS = (128, 256, 512)
TOKEN_DIMS = (32, 64, 128)  # the late-interaction (colbert_) models' token vector sizes
TERM_WEIGHT_PREFIX = "hdct_"
# The git clone's saved_models/ (absent from an installed wheel: `tt_zoo.artifacts.download` then finds
# the weights in the cache or downloads them).
SAVED_MODELS_DIR = pathlib.Path(__file__).resolve().parents[2] / "saved_models"
COLBERT_INIT_FROM = "ict_bfs_wlp_512"
TERM_WEIGHT_INIT_FROM = "ict_bfs_wlp_512"
TERM_WEIGHT_MAX_PAIRS = 200_000  # `tt-zoo train-term-weights --max-pairs` of the hdct_ recipe
MULTITASK_TASKS = ("webquestions", "reqa")  # the two QA tasks every multi-task name trains on
MULTITASK_PREFIX = "multitask_bow_mlp_"
# A template over the name's own pretraining and dimension: each multi-task name starts from
# its single-task BoW-MLP sibling.
MULTITASK_INIT_FROM = "bow_mlp_{pretraining}_{dim}"


@dataclasses.dataclass(frozen=True)
class PairRecipe:
    """The `tt-zoo make-pairs` settings of the pair set a recipe reads (the command takes no run
    config): its pairs per article and passage budget in whitespace words; the folder
    (`folder`) and its command (`command`) follow from them and the pretraining tasks."""

    pairs_per_article: int
    max_doc_tokens: int

    def folder(self, pretraining: str) -> str:
        """Where a recipe keeps the pairs (or MLM examples) of `pretraining`, as the reproduce
        grid does (`tt_zoo.reproduction.grid.data_dir`): runs/pairs/MIX_PAIRSPERARTICLE."""
        return f"runs/pairs/{pretraining}_{self.pairs_per_article}"

    def command(self, pretraining: str, output: str, document_length: int) -> str:
        """`tt-zoo make-pairs` of `pretraining` into `output` (MLM: examples of
        `document_length` tokens)."""
        start = "tt-zoo make-pairs --input $TT_ZOO_DATA/wikispeedia"
        if pretraining == "mlm":
            return (f"{start} --tasks mlm --vocab saved_models/vocab/vocab.txt --max-doc-tokens "
                    f"{self.max_doc_tokens} --mlm-seq-length {document_length} "
                    f"--output {shlex.quote(output)}")
        return (f"{start} --tasks {pretraining.replace('_', ',')} --pairs-per-article "
                f"{self.pairs_per_article} --max-doc-tokens {self.max_doc_tokens} "
                f"--output {shlex.quote(output)}")


# The paper's pairs (Chang et al. 2020, Sec. 5.1: 4 per article, documents of 288 tokens) and
# the CPU-scale ones, 128 pairs of 96-word passages per article (results/pretrain_curve.md).
PAPER_PAIRS = PairRecipe(pairs_per_article=4, max_doc_tokens=288)
CPU_PAIRS = PairRecipe(pairs_per_article=128, max_doc_tokens=96)
# The series' runs (each name fills in its own variant, pairs, start and export:
# `_named_run`). The paper's (Sec. 5.1): batch 8,192, 100K steps, Adam 1e-4 with 10% warm-up
# then linear decay (the warm-up is `tt-zoo pretrain`'s own default).
PAPER_PRETRAIN = PretrainConfig.from_dict(
    {"training": {"steps": 100_000, "batch_size": 8192, "learning_rate": 1e-4}})
# What learns on this project's CPU budget (results/pretrain_curve.md): the flagship's schedule
# (batch 128, Adam 1e-3) cut to 800 steps, so each Transformer cell of the reproduce grid takes
# about 15 minutes (`tt_zoo.reproduction.grid.GRID` is this run's budget).
CPU_PRETRAIN = PretrainConfig.from_dict(
    {"training": {"steps": 800, "batch_size": 128, "learning_rate": 1e-3}})
# The colbert_ variants: the flagship ict_bfs_wlp_512's CPU-scale pairs, batch and document
# length, ColBERT's smaller learning rate, warm-started from the flagship's encoder.
COLBERT_PRETRAIN = CPU_PRETRAIN.replace(steps=3500, learning_rate=3e-4)
# The hdct_ variants: the flagship's encoder, 2,000 steps x 64 documents of the pair set's first
# 200,000 pairs at 5e-4 (`tt-zoo train-term-weights`' own batch and rate).
TERM_WEIGHT_RUN = TermWeightConfig.from_dict(
    {"model": {"init_from": TERM_WEIGHT_INIT_FROM}, "data": {"max_pairs": TERM_WEIGHT_MAX_PAIRS},
     "training": {"steps": 2000, "batch_size": 64, "learning_rate": 5e-4}})
# The `tt-zoo multitask` run of the ``multitask_bow_mlp_`` names (Maillard et al. 2021, Sec. 3-4,
# at this project's CPU scale; their BERT took 2e-5, the BoW-MLP towers ~5e-4): the two QA tasks,
# 800 steps of 128 at 5e-4. Chosen by `benchmarks/multi_task.py` on the ODQA validation
# questions over three seeds: the two QA tasks alone beat them with 10,000 self-supervised pairs
# added (`results/multi_task.md`).
MULTITASK_RUN = MultitaskConfig.from_dict(
    {"tasks": {"task": list(MULTITASK_TASKS)},
     "training": {"steps": 800, "batch_size": 128, "learning_rate": 5e-4}})
# The `tt-zoo adapt-queries` run of the ``adapted_`` names: the `init_from` model's query tower
# trained alone against its own index of the Wikispeedia passages (ADORE, Zhan et al. 2021;
# `tt_zoo.training.query_adaptation`), on the WebQuestions questions it may train on, for 10
# epochs of 32 at 1e-5, chosen on webquestions-devtest's fused top-20 (docs/checkpoints.md).
ADAPTATION_RUN = AdaptQueriesConfig.from_dict(
    {"training": {"epochs": 10.0, "batch_size": 32, "learning_rate": 1e-5}})
# ``multitask_lexical_bow_mlp_``: the two QA tasks with BM25 as a teacher beside them (the lexical
# task: SPAR's lexical model, Chen et al. 2021) at 0.3 times its share by size; +1.0 ODQA top-20
# over MULTITASK_RUN in the median of three seeds, every seed above every seed without it
# (`benchmarks/multi_task.py --experiments lexical`, `results/multi_task.md`).
# The static model's query side taught by a teacher's ranking: its own token table
# (`--train-token-embeddings`) trained on the listwise KL of the teacher's softmax over each
# question's mined candidates against its own full-index softmax, 3 epochs of 32 at 1e-3 (chosen
# on webquestions-devtest; results/static_distill_queries.md). The teacher scores come first:
# `tt-zoo teacher-scores` with all-mpnet-base-v2 whose query tower was adapted on the same
# questions (WebQuestions trainmodel + the ReQA split's), the teacher that carries furthest to
# CuratedTREC (results/fusion_mpnet_union.md; one adapted on WebQuestions alone taught 1.9
# points less on the ODQA validation questions, results/distill_union_teacher.md).
STATIC_TEACHER_RUN = AdaptQueriesConfig.from_dict(
    {"data": {"questions": ["webquestions-trainmodel", "runs/questions/reqa80_train.jsonl"],
              "teacher_scores": "runs/distill/mpnetU_webq_reqa.npz"},
     "training": {"epochs": 3.0, "batch_size": 32, "learning_rate": 1e-3,
                  "train_token_embeddings": True, "distill_weight": 1.0}})
MULTITASK_LEXICAL_PREFIX = "multitask_lexical_bow_mlp_"
MULTITASK_LEXICAL_RUN = MULTITASK_RUN.replace(task=(*MULTITASK_TASKS, "lexical"),
                                              weight=("lexical=0.3",))
MULTITASK_COLBERT_PREFIX = "multitask_colbert_"
MULTITASK_COLBERT_INIT_FROM = "colbert_{pretraining}_{dim}"
# 500 steps of 64 (about 3.5 passes over the union) at 3e-4, the ColBERT pretraining rate: 1e-4
# gave the same ReQA R@1 and 0.4 less ODQA top-20 re-ranking BM25, and 1,000 steps overfit
# (`results/late_interaction_multitask.md`, `results/late_interaction_multitask_1000_steps.md`).
MULTITASK_COLBERT_RUN = MULTITASK_RUN.replace(steps=500, batch_size=64, learning_rate=3e-4)


def pair_folder(run: RunConfig) -> Optional[str]:
    """The pair set (or MLM examples) `run` reads, if any: its --pairs or --mlm-examples, or the
    folder of a multi-task ``--task pairs:DIR[:MAX]``."""
    for name in ("pairs", "mlm_examples"):
        if run.get(name):
            return run.get(name)
    for task in run.get("task") or ():
        if task.startswith("pairs:"):
            return task.split(":")[1]
    return None



@dataclasses.dataclass(frozen=True)
class Series:
    """What every name of one prefix shares: the encoder, its options and the run config that
    trains towers of those options (so the two never disagree), the kind, and the tasks and sizes
    that make the names.

    Args:
      encoder, tower_size: as `ModelSpec`.
      options: pooling, tower sharing, score scale.
      run: the run config that trains the names (`tt_zoo.configs`), before each name's own
        variant, pairs, start and export (`_named_run`).
      kind: one of `tt_zoo.modeling.kinds.KINDS`.
      tasks: the pretraining task mixes registered.
      dims: the embedding (late interaction: token vector) sizes registered; a term-weight
        name has none (one weight per token: ``hdct_{tasks}``).
      query_length, document_length: the towers' token budgets (query 0: a term-weight model
        reads documents).
      pairs: how the pair set the run reads is made (`PairRecipe`).
      init_from: the shipped model a recipe warm-starts from; ``{pretraining}`` and ``{dim}``
        in it are the name's own (`MULTITASK_INIT_FROM`).
    """

    encoder: str
    tower_size: Optional[str]
    options: ModelOptions
    run: RunConfig
    kind: str = TWO_TOWER
    tasks: Tuple[str, ...] = PRETRAINING_TASKS
    dims: Tuple[int, ...] = EMBEDDING_DIMS
    query_length: int = 64
    document_length: int = 128
    pairs: PairRecipe = CPU_PAIRS
    init_from: Optional[str] = None

    def names(self, prefix: str):
        """(name, pretraining, embedding_dim) of every registered name of this series."""
        for task in self.tasks:
            if self.kind == TERM_WEIGHTS:
                yield f"{prefix}{task}", task, 1
                continue
            for dim in self.dims:
                yield f"{prefix}{task}_{dim}", task, dim


_PAIR_TASKS = tuple(t for t in PRETRAINING_TASKS + SUCCESSOR_TASKS if t not in ("none", "mlm"))
# Prefix -> series. The default tower (no prefix) is the tiny BERT that fits CPU pretraining; the
# paper's BERT-base is "bert_base_". BoW-MLP has no MLM row (MLM pretrains a Transformer);
# ColBERT and term-weight models train on pairs, from the flagship's encoder; the multi-task
# BoW-MLPs on two QA tasks, from the two shipped BoW-MLPs they name; the multi-task ColBERT on
# the same tasks, from the shipped ColBERT.
SERIES: Dict[str, Series] = {
    "": Series("bert", "tiny", CPU_SCALE, CPU_PRETRAIN, tasks=PRETRAINING_TASKS + SUCCESSOR_TASKS),
    "bert_mini_": Series("bert", "mini", CPU_SCALE, CPU_PRETRAIN),
    "bert_small_": Series("bert", "small", PAPER, PAPER_PRETRAIN, document_length=288,
                          pairs=PAPER_PAIRS),
    "bert_base_": Series("bert", "base", PAPER, PAPER_PRETRAIN, document_length=288,
                         pairs=PAPER_PAIRS),
    "bow_mlp_": Series("bow_mlp", None, CPU_SCALE, CPU_PRETRAIN,
                       tasks=tuple(t for t in PRETRAINING_TASKS + SUCCESSOR_TASKS if t != "mlm")),
    "colbert_": Series("colbert", "tiny", COLBERT, COLBERT_PRETRAIN, kind=LATE_INTERACTION,
                       tasks=_PAIR_TASKS, dims=TOKEN_DIMS, query_length=32,
                       init_from=COLBERT_INIT_FROM),
    TERM_WEIGHT_PREFIX: Series("bert", "tiny", CPU_SCALE, TERM_WEIGHT_RUN, kind=TERM_WEIGHTS,
                               tasks=_PAIR_TASKS, dims=(), query_length=0,
                               init_from=TERM_WEIGHT_INIT_FROM),
    MULTITASK_PREFIX: Series("bow_mlp", None, CPU_SCALE, MULTITASK_RUN,
                             tasks=("ict_bfs_wlp", "ict_bfs_wlp_crop_span_qgen"), dims=(512,),
                             init_from=MULTITASK_INIT_FROM),
    MULTITASK_LEXICAL_PREFIX: Series("bow_mlp", None, CPU_SCALE, MULTITASK_LEXICAL_RUN,
                                     tasks=("ict_bfs_wlp_crop_span_qgen",), dims=(512,),
                                     init_from=MULTITASK_INIT_FROM),
    MULTITASK_COLBERT_PREFIX: Series("colbert", "tiny", COLBERT, MULTITASK_COLBERT_RUN,
                                     kind=LATE_INTERACTION, tasks=("ict_bfs_wlp_crop_span_qgen",),
                                     dims=(64,), query_length=32,
                                     init_from=MULTITASK_COLBERT_INIT_FROM),
}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One variant: architecture, pretraining, the run config that trains it and (if shipped)
    its artifact.

    Args:
      name: the registry key.
      encoder: "bert", "bow_mlp" or "colbert" (a term-weight model's encoder is "bert").
      tower_size: BERT size name ("tiny", "mini", "small", "base"), None for BoW-MLP.
      embedding_dim: output dimension of both towers (late interaction: of each token vector;
        term weights: 1, one weight per token).
      pretraining: one of PRETRAINING_TASKS or SUCCESSOR_TASKS.
      query_length, document_length: token budgets (paper: 64 and 288; a term-weight model
        reads documents only: query_length 0).
      run: the run config of the command that trains it (`tt_zoo.configs`: `PretrainConfig`,
        `MultitaskConfig`, `TermWeightConfig` or `AdaptQueriesConfig`; a shipped name's as its
        run recorded it, `read_recipe`); None for a model no run config makes (imported, or
        distilled by ``tt-zoo distill-static``).
      pairs: how the pair set its run reads is made (`PairRecipe`).
      init_from: the shipped model a recipe warm-starts from (`pretrain --init-from`), if any.
      options: pooling, tower sharing, score scale (see `ModelOptions`).
      artifact: the export's folder name when shipped (saved_models/<artifact> in a git
        clone, <cache>/models/<artifact> once downloaded: `tt_zoo.artifacts.download`), else None.
      sha256: sha256 of the artifact's file manifest (`tt_zoo.manifest.manifest_digest`).
      url: the folder URL its files are to be downloaded from (`tt_zoo.artifacts.download`).
      provenance: training data and license of the shipped weights.
      metrics: measured numbers (e.g. ReQA-SQuAD(dev) recall) of the shipped weights.
      kind: one of `tt_zoo.modeling.kinds.KINDS`: what the artifact is and how it loads.
      imported: the public checkpoint it is (`tt_zoo.zoo.imported`), built from its registry
        package into the cache instead of shipping in saved_models/; None for the others.
      architecture: what the weights fill, as timm names it (`architecture`: ``bert_tiny_512``,
        ``bow_mlp_512``, ``colbert_tiny_64``; a public checkpoint's family: ``minilm_l6_384``,
        ``static_minilm_l6_384``); with `tag` it makes `arch_tag`, the name's other spelling.
    """

    name: str
    encoder: str
    tower_size: Optional[str]
    embedding_dim: int
    pretraining: str
    query_length: int = 64
    document_length: int = 288
    run: Optional[RunConfig] = None
    pairs: PairRecipe = PAPER_PAIRS
    init_from: Optional[str] = None
    options: ModelOptions = PAPER
    artifact: Optional[str] = None
    sha256: Optional[str] = None
    url: Optional[str] = None
    provenance: str = ""
    metrics: Tuple[Tuple[str, float], ...] = ()
    kind: str = TWO_TOWER
    imported: Optional[ImportedCheckpoint] = None
    architecture: str = ""

    @property
    def multitask(self) -> Optional[MultitaskConfig]:
        """The `tt-zoo multitask` run that trains it from `init_from`, None for the others."""
        return self.run if isinstance(self.run, MultitaskConfig) else None

    @property
    def adapted(self) -> Optional[AdaptQueriesConfig]:
        """The `tt-zoo adapt-queries` run that adapts `init_from`'s query tower to its passage
        index (``adapted_`` names), None for the others."""
        return self.run if isinstance(self.run, AdaptQueriesConfig) else None

    @property
    def tag(self) -> str:
        """How the weights were made: the pretraining (``ict_bfs_wlp``, ``imported``,
        ``distilled``), after ``multitask_`` and the tasks the multi-task run adds to the two QA
        tasks (``multitask_lexical_ict_bfs_wlp_crop_span_qgen``) for a multi-task variant, and
        ``distilled_`` before it when the run learns a teacher's scores (``distill:FILE``);
        ``adapted_`` and its base's tag for a query-adapted one."""
        if self.adapted is not None:
            return f"adapted_{REGISTRY[self.init_from].tag}"
        if self.multitask is None:
            return self.pretraining
        tasks = self.multitask.tasks.task
        added = [t for t in tasks
                 if ":" not in t and t not in MULTITASK_TASKS]  # named tasks, not pairs:DIR
        # (the kind before the colon, as `parse_task_spec` reads it: that parser lives in
        # tt_zoo.training, a floor above the registry)
        distilled = ["distilled"] if any(t.partition(":")[0] == "distill" for t in tasks) else []
        return "_".join([*distilled, "multitask", *added, self.pretraining])

    @property
    def arch_tag(self) -> str:
        """``ARCH.TAG`` (timm's ``vit_base_patch16_224.augreg_in21k``): `architecture`, then
        `tag`; e.g. ``bert_tiny_512.ict_bfs_wlp`` for ``ict_bfs_wlp_512``. `get_spec`,
        `tt_zoo.load` and every ``--model`` take it beside `name`."""
        return f"{self.architecture}.{self.tag}"

    @property
    def shipped(self) -> bool:
        return self.artifact is not None

    @property
    def artifact_path(self) -> Optional[pathlib.Path]:
        """saved_models/<artifact> of the git clone (it may be absent: an installed wheel has
        no saved_models/; `tt_zoo.load` then uses the cache or downloads)."""
        return SAVED_MODELS_DIR / self.artifact if self.artifact else None

    def recipe_command(self) -> str:
        """The commands that train and export this variant: its run config's command line
        (`RunConfig.command_line`), after ``tt-zoo make-pairs`` of the pair set it reads
        (`pair_folder`; made as `pairs` says)."""
        if self.imported is not None:
            return f"tt-zoo import-checkpoint --name {self.name} --export saved_models/{self.name}"
        if self.run is None:  # a static model: tt-zoo distill-static takes no run config
            return (f"tt-zoo distill-static --model {self.init_from} --corpus "
                    f"$TT_ZOO_DATA/wikispeedia --dim {self.embedding_dim} "
                    f"--export saved_models/{self.name}")
        folder = pair_folder(self.run)
        make = [] if folder is None else [
            self.pairs.command(self.pretraining, folder, self.document_length)]
        return " && ".join([*make, self.run.command_line()])


def architecture(encoder: str, tower_size: Optional[str], embedding_dim: int,
                 kind: str = TWO_TOWER) -> str:
    """The architecture of a spec's fields: encoder, tower size, embedding dimension
    (``bert_tiny_512``, ``bert_base_128``, ``bow_mlp_512``, ``colbert_tiny_64``); a term-weight
    model's one weight per token makes it ``hdct_tiny`` (HDCT's head on the tiny BERT)."""
    if kind == TERM_WEIGHTS:
        return f"{TERM_WEIGHT_PREFIX}{tower_size}"
    return "_".join(part for part in (encoder, tower_size, str(embedding_dim)) if part)


def _named_run(template: RunConfig, name: str, pretraining: str, init_from: Optional[str],
               lengths: Tuple[int, int], pairs: PairRecipe) -> RunConfig:
    """The run config that trains `name`: its series' `template` with the name's own variant,
    token budgets (query, document), pair set (`PairRecipe.folder`), start and export."""
    export = f"saved_models/{name}"
    if isinstance(template, PretrainConfig):
        run = template.replace(variant=name, init_from=init_from, query_length=lengths[0],
                               document_length=lengths[1], export=export)
        if pretraining == "none":  # the initialised towers, exported
            return run.replace(steps=0, batch_size=None, learning_rate=None)
        source = "mlm_examples" if pretraining == "mlm" else "pairs"
        return run.replace(**{source: pairs.folder(pretraining)})
    if isinstance(template, TermWeightConfig):
        return template.replace(init_from=init_from, pairs=pairs.folder(pretraining),
                                export=export)
    if isinstance(template, MultitaskConfig):
        return template.replace(init=init_from, export=export)
    return template.replace(model=init_from, export=export)  # AdaptQueriesConfig


def _build_registry() -> Dict[str, ModelSpec]:
    """Every name of every series, with the series' options, lengths and run config filled in
    for the name (`_named_run`; an ``init_from`` template filled with the name's pretraining
    and dimension)."""
    specs = {}
    for prefix, series in SERIES.items():
        for name, task, dim in series.names(prefix):
            init_from = series.init_from and series.init_from.format(pretraining=task, dim=dim)
            specs[name] = ModelSpec(
                name=name, encoder=series.encoder, tower_size=series.tower_size,
                embedding_dim=dim, pretraining=task, query_length=series.query_length,
                document_length=series.document_length, pairs=series.pairs,
                run=_named_run(series.run, name, task, init_from,
                               (series.query_length, series.document_length), series.pairs),
                init_from=init_from, options=series.options, kind=series.kind,
                architecture=architecture(series.encoder, series.tower_size, dim, series.kind))
    return specs


# The family of a public checkpoint (`tt_zoo.zoo.imported`): the checkpoint as imported
# (``minilm_l6_384``), trained on the two QA tasks (``multitask_``), distilled into a static BoW
# model (``static_``, model2vec) and that trained on the two QA tasks in turn. MiniLM fine-tunes
# at BERT's rate (Maillard et al.: 2e-5) for about one pass over the union of the two tasks'
# 9,021 examples (600 x 16: a MiniLM step costs ~27 tiny-BERT steps on this machine's two cores,
# an hour here; docs/checkpoints.md compares it with a quarter pass, 150 x 16); the static
# table at the BoW-MLP run's (`MULTITASK_RUN`).
MULTITASK_CHECKPOINT_RUN = MULTITASK_RUN.replace(steps=600, batch_size=16, learning_rate=2e-5)
# ``distilled_multitask_``: the multi-task model taught a stronger teacher's ranking beside the
# ReQA task, the same 600 steps of 16: all-mpnet-base-v2 with its query tower adapted on the
# union of WebQuestions trainmodel and the ReQA split's training questions, its scores over each
# question's candidates (`tt-zoo teacher-scores`, the file the recipe reads, made first) learnt
# by listwise KL over 4 of them (RocketQAv2), 192-token passages. CuratedTREC is in neither
# teacher nor student: it reads R@20 76.6 there against 72.1 for its init
# (results/distill_general_minilm.md).
DISTILLED_CHECKPOINT_RUN = MULTITASK_CHECKPOINT_RUN.replace(
    task=("distill:runs/distill/mpnetU_webq_reqa.npz", "reqa"), document_length=192,
    distill_loss="kl", distill_candidates=4)
STATIC_DIM = 384  # all of MiniLM's dimensions: on the ODQA validation questions 56.6 top-20 after
# the two QA tasks against 56.0 for a PCA to 256 (`docs/checkpoints.md`)
DISTILLED = "distilled"  # the pretraining of a static model distilled from its init_from


def _checkpoint_specs() -> Dict[str, ModelSpec]:
    """For every public checkpoint of `tt_zoo.zoo.imported`: the imported model (a mean-pooled,
    normalised encoder of the checkpoint's architecture and shape, found in the cache, built
    there from its packages) and, unless it says otherwise, the four models made from it."""
    specs = {}
    for name, c in CHECKPOINTS.items():
        common = dict(query_length=c.query_length, document_length=c.document_length,
                      options=c.options, pairs=CPU_PAIRS)
        static = f"static_{name.rsplit('_', 1)[0]}_{STATIC_DIM}"
        # The checkpoint's name is its architecture (``minilm_l6_384``), ``static_`` that of the
        # static model distilled from it; the tag says which weights (`ModelSpec.tag`).
        specs[name] = ModelSpec(
            name=name, encoder=c.encoder, tower_size=None, embedding_dim=c.embedding_dim,
            pretraining="imported", artifact=name, imported=c, architecture=name, **common,
            metrics=tuple(sorted(headline(name).items())),
            provenance=f"{c.base_model} (revision {c.revision[:12]}, {c.license}) from "
                       f"{c.requirement}, as published; trained on {c.training_data}")
        if not c.derived_recipes:
            continue
        specs[f"multitask_{name}"] = ModelSpec(
            name=f"multitask_{name}", encoder="bert", tower_size=None,
            embedding_dim=c.embedding_dim, pretraining="imported", init_from=name,
            run=MULTITASK_CHECKPOINT_RUN.replace(init=name,
                                                 export=f"saved_models/multitask_{name}"),
            architecture=name, **common)
        specs[f"distilled_multitask_{name}"] = ModelSpec(
            name=f"distilled_multitask_{name}", encoder="bert", tower_size=None,
            embedding_dim=c.embedding_dim, pretraining="imported", init_from=f"multitask_{name}",
            run=DISTILLED_CHECKPOINT_RUN.replace(
                init=f"multitask_{name}", export=f"saved_models/distilled_multitask_{name}"),
            architecture=name, **common)
        specs[f"adapted_multitask_{name}"] = ModelSpec(
            name=f"adapted_multitask_{name}", encoder="bert", tower_size=None,
            embedding_dim=c.embedding_dim, pretraining="imported", init_from=f"multitask_{name}",
            run=ADAPTATION_RUN.replace(model=f"multitask_{name}",
                                       export=f"saved_models/adapted_multitask_{name}"),
            architecture=name, **common)
        specs[static] = ModelSpec(name=static, encoder="bow_mlp", tower_size=None,
                                  embedding_dim=STATIC_DIM, pretraining=DISTILLED,
                                  init_from=name, architecture=static, **common)
        specs[f"multitask_{static}"] = ModelSpec(
            name=f"multitask_{static}", encoder="bow_mlp", tower_size=None,
            embedding_dim=STATIC_DIM, pretraining=DISTILLED, init_from=static,
            run=MULTITASK_RUN.replace(init=static, export=f"saved_models/multitask_{static}"),
            architecture=static, **common)
        specs[f"adapted_multitask_{static}"] = ModelSpec(
            name=f"adapted_multitask_{static}", encoder="bow_mlp", tower_size=None,
            embedding_dim=STATIC_DIM, pretraining=DISTILLED, init_from=f"multitask_{static}",
            run=STATIC_TEACHER_RUN.replace(model=f"multitask_{static}",
                                           export=f"saved_models/adapted_multitask_{static}"),
            architecture=static, **common)
    return specs


# What each name is before its shipped entry (if any) and its recorded recipe are applied.
_CHECKPOINT_SPECS = _checkpoint_specs()
CHECKPOINT_FAMILY = frozenset(_CHECKPOINT_SPECS)  # the names made from public checkpoints
_REGISTERED: Dict[str, ModelSpec] = {**_build_registry(), **_CHECKPOINT_SPECS}
REGISTRY: Dict[str, ModelSpec] = dict(_REGISTERED)


def _arch_tag_index(specs: Dict[str, ModelSpec]) -> Dict[str, str]:
    """ARCH.TAG -> registered name of every spec; ValueError when two names share one."""
    index: Dict[str, str] = {}
    for name, spec in specs.items():
        other = index.setdefault(spec.arch_tag, name)
        if other != name:
            raise ValueError(f"{other!r} and {name!r} are both {spec.arch_tag!r}: an ARCH.TAG "
                             "names one model.")
    return index


# Every registered name's other spelling, timm's ``ARCH.TAG`` (`ModelSpec.arch_tag`) -> the
# registered name (the key of REGISTRY and shipped_models.json, the folder under saved_models/
# and the name its card records). Every lookup takes either (`registered_name`).
ARCH_TAGS: Dict[str, str] = _arch_tag_index(_REGISTERED)


# The hub names of the public checkpoints the zoo imports, as sentence-transformers users write
# them (``sentence-transformers/all-MiniLM-L6-v2``, ``all-MiniLM-L6-v2``), lower-cased -> the
# registered name of the imported model (`tt_zoo.zoo.imported.CHECKPOINTS`).
HUB_NAMES: Dict[str, str] = {
    alias.lower(): name for name, checkpoint in CHECKPOINTS.items()
    for alias in (checkpoint.base_model, checkpoint.base_model.rsplit("/", 1)[-1])}


def registered_name(name) -> Optional[str]:
    """The registered name of `name`, given as itself, as its ARCH.TAG
    (``bert_tiny_512.ict_bfs_wlp`` -> ``ict_bfs_wlp_512``) or, for an imported public
    checkpoint, as its hub name in any case (``sentence-transformers/all-MiniLM-L6-v2`` ->
    ``minilm_l6_384``); None when it is none of them."""
    if not isinstance(name, str):
        return None
    if name in REGISTRY:
        return name
    return ARCH_TAGS.get(name) or HUB_NAMES.get(name.strip().lower())


def _spellings(specs) -> List[str]:
    """Both names of each spec: the registered name and its ARCH.TAG."""
    return [n for spec in specs for n in (spec.name, spec.arch_tag)]


def list_models(pattern: str = "*", shipped_only: Optional[bool] = None,
                kind: Optional[str] = None, *, include_recipes: bool = False,
                arch_tag: bool = False) -> List[str]:
    """The model names that load, matching a glob pattern, sorted (as timm's
    ``list_models(pretrained=True)`` and keras-hub's presets list only what loads).

    A listed name has weights: shipped in saved_models/ (or downloaded by its URL), or a public
    checkpoint imported from its installed package (``minilm_l6_384``). ``tt_zoo.load(name)``
    loads it (``hdct_*`` term-weight models: `tt_zoo.load_term_weighter`). Every other variant
    of the paper's tables (and past them) is a recipe: registered, with the command that trains
    it (`get_spec(name).recipe_command()`), listed with ``include_recipes=True``.

    A model has two names, either of which loads: its registered name (``ict_bfs_wlp_512``)
    and its ``ARCH.TAG`` (``bert_tiny_512.ict_bfs_wlp``, `ModelSpec.arch_tag`). The pattern
    matches either; the registered names are listed, the ARCH.TAG names with ``arch_tag=True``.

    Args:
      pattern: a glob over the names (either spelling), e.g. "*ict_bfs_wlp*", "bow_mlp_512.*".
      shipped_only: the older spelling: True is the default (only names with weights); False
        is ``include_recipes=True``.
      kind: only the names of one of `KINDS` ("two_tower", "late_interaction",
        "term_weights").
      include_recipes: also the registered names without weights (the recipe catalogue).
      arch_tag: list the models' ARCH.TAG names instead of their registered names.

    Example:
      >>> list_models("ict_bfs_wlp_[0-9]*")
      ['ict_bfs_wlp_128', 'ict_bfs_wlp_256', 'ict_bfs_wlp_512']
      >>> list_models("bert_tiny_*.ict_bfs_wlp", arch_tag=True)
      ['bert_tiny_128.ict_bfs_wlp', 'bert_tiny_256.ict_bfs_wlp', 'bert_tiny_512.ict_bfs_wlp']
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)} (got {kind!r}).")
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a glob string such as '*ict*' (got "
                        f"{type(pattern).__name__} {pattern!r}).")
    if shipped_only is not None:
        include_recipes = include_recipes or not shipped_only
    return sorted(spec.arch_tag if arch_tag else spec.name for spec in REGISTRY.values()
                  if any(fnmatch.fnmatch(n, pattern) for n in (spec.name, spec.arch_tag))
                  and (include_recipes or loads_by_name(spec)) and kind in (None, spec.kind))


def loads_by_name(spec: "ModelSpec") -> bool:
    """True when `tt_zoo.load` (or `load_term_weighter`) takes the name without training: it
    records an artifact, shipped (saved_models/, the cache or its URL) or an imported public
    checkpoint's (built from its installed package into the cache; an optional one, such as
    the ``make teacher`` MPNet, once its import step has put it there)."""
    if spec.imported is not None and spec.imported.optional:
        from tt_zoo.zoo.imported import is_imported
        return is_imported(spec)
    return spec.shipped


def close_names(name: str, names, n: int = 3) -> List[str]:
    """Names like `name`: the same name in another case (alone), else difflib's close matches
    (compared in lower case)."""
    names = list(names)
    lowered = {candidate.lower(): candidate for candidate in names}
    key = name.strip().lower()
    if key in lowered:
        return [lowered[key]]
    return [lowered[c] for c in difflib.get_close_matches(key, lowered, n=n, cutoff=0.6)]


def unknown_model_message(name, where: str = "tt_zoo.list_models()") -> str:
    """'NAME' is not a tt_zoo model, with close matches and where to see the names."""
    if not isinstance(name, str) or not name.strip():
        return (f"A model name or an export directory is needed (got {name!r}). "
                f"{where} lists the models that load.")
    loadable = [s for s in REGISTRY.values() if loads_by_name(s)]
    hub = {alias: registered for alias, registered in HUB_NAMES.items()
           if REGISTRY[registered].shipped}
    close = (close_names(name, _spellings(loadable))
             or [hub[c.lower()] for c in close_names(name.rsplit("/", 1)[-1], hub)]
             or close_names(name, _spellings(REGISTRY.values())))
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return (f"{name!r} is not a tt_zoo model.{hint} {where} lists the {len(loadable)} models "
            "that load.")


def looks_like_path(name_or_path: str) -> bool:
    """True when `name_or_path` names a directory rather than a model: it exists and is no
    registered name, or it holds a path separator or starts with "." (`tt_zoo.load`'s rule)."""
    if pathlib.Path(name_or_path).exists():
        return registered_name(name_or_path) is None
    if name_or_path.strip().lower() in HUB_NAMES:  # "sentence-transformers/all-MiniLM-L6-v2"
        return False
    return os.sep in name_or_path or name_or_path.startswith(".")


def model_name_problem(name_or_path: str, where: str = "tt_zoo.list_models()") -> Optional[str]:
    """Why `tt_zoo.load(name_or_path)` would refuse a name before reading anything, or None (a
    name that loads, or a path, which the loader checks): checked without TensorFlow, so a
    command line fails at once. `where` is what lists the models in the message."""
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        return unknown_model_message(name_or_path, where)
    if looks_like_path(name_or_path):
        return None
    registered = registered_name(name_or_path)
    if registered is None:
        return unknown_model_message(name_or_path, where)
    spec = REGISTRY[registered]
    if spec.imported is not None:  # tt_zoo.load imports it when its packages are installed
        from tt_zoo.zoo import imported
        return None if imported.is_imported(spec) else imported.missing_packages(spec.imported)
    if not loads_by_name(spec):
        return (f"{name_or_path!r} is a recipe without weights: train it with\n  "
                f"{spec.recipe_command()}\nand pass the export's directory. {where} lists the "
                "models that load.")
    return None


def get_spec(name: str) -> ModelSpec:
    """The spec of a registered name or its ARCH.TAG (with weights or a recipe).

    Raises:
      UnknownModelError: (a KeyError) an unknown name; the message suggests close matches.
    """
    registered = registered_name(name)
    if registered is not None:
        return REGISTRY[registered]
    raise UnknownModelError(unknown_model_message(name))


def register_shipped(name: str, **fields) -> None:
    """Records a shipped artifact for a registered name (`read_shipped` gives the fields)."""
    REGISTRY[name] = dataclasses.replace(REGISTRY[name], **fields)


# -- What ships trained weights: tt_zoo/zoo/shipped_models.json (package data, so an installed
# wheel has it), name -> kind, artifact folder, sha256 of its files, download URL, provenance
# and measured metrics (written by `tt-zoo reproduce --stages ship` and `tt-zoo ship` from real
# runs; see each MODEL_CARD.md); how each was trained is its recipe, recipes/ (`read_recipe`).
# The weights themselves are in the clone's saved_models/.
SHIPPED_FILE = pathlib.Path(__file__).resolve().parent / "shipped_models.json"
# Beside it, package data too: the run config of every shipped model, RECIPES/COMMAND/NAME.json
# (`read_recipe`), so an installed wheel's shipped name holds its own run, not its series'.
RECIPES_FOLDER = "recipes"
RECIPES_DIR = SHIPPED_FILE.parent / RECIPES_FOLDER
_SHIPPED_FIELDS = ("kind", "artifact", "sha256", "url", "provenance", "metrics")


def read_shipped(path: Optional[pathlib.Path] = None) -> Dict[str, dict]:
    """The `ModelSpec` fields of every shipped artifact listed in ``path`` (default
    `SHIPPED_FILE`, read when called; {} if absent).

    Raises:
      ValueError: naming the file and the entry, when an entry is malformed or records a kind
        other than its name's (an entry without ``kind`` is of its name's kind).
    """
    path = SHIPPED_FILE if path is None else path
    if not path.is_file():
        return {}
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}).") from e
    shipped = {}
    for name, entry in entries.items():
        unknown = sorted(set(entry) - set(_SHIPPED_FIELDS))
        if name not in REGISTRY or unknown or "artifact" not in entry:
            raise ValueError(f"{path}: entry {name!r} must name a registered variant and hold "
                             f"'artifact' and only {', '.join(_SHIPPED_FIELDS)} "
                             f"(unknown: {unknown}).")
        kind = entry.get("kind", REGISTRY[name].kind)
        if kind != REGISTRY[name].kind:
            raise ValueError(f"{path}: entry {name!r} records kind {kind!r}, but {name!r} is "
                             f"a {REGISTRY[name].kind!r} variant.")
        fields = dict(entry, kind=kind)
        fields["metrics"] = tuple(sorted(fields.get("metrics", {}).items()))
        shipped[name] = fields
    return shipped


def recipe_files(root: Optional[pathlib.Path] = None) -> Dict[str, pathlib.Path]:
    """Model name -> its recipe file, ROOT/COMMAND/NAME.json (default ROOT `RECIPES_DIR`; {}
    where there is none)."""
    root = RECIPES_DIR if root is None else root
    found: Dict[str, pathlib.Path] = {}
    for path in sorted(root.glob("*/*.json")):
        other = found.setdefault(path.stem, path)
        if other != path:
            raise ValueError(f"{other} and {path} are both {path.stem}'s recipe: a model is "
                             "trained by one command.")
    return found


def read_recipe(path: pathlib.Path) -> RunConfig:
    """The run config of a recipe file, COMMAND/NAME.json: `RunConfig.from_dict` of the
    command's config (`tt_zoo.configs.commands.RUN_CONFIGS`); ValueError naming the file for a
    command that takes no run config or a file that is not one (`RunConfigError`)."""
    command = path.parent.name
    if command not in RUN_CONFIGS:
        raise ValueError(f"{path}: tt-zoo {command} trains no model from a run config (those "
                         f"that do: {', '.join(RUN_CONFIGS)})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} cannot be read as JSON ({e}).") from e
    return RUN_CONFIGS[command].from_dict(data, source=str(path))


_RECIPES = recipe_files()
_SHIPPED = read_shipped()
# A shipped name's run is the one it recorded; so is a retired name's (weights no longer
# shipped, its recipe kept: the command that made them, which `tt_zoo.load` names).
for _name in sorted(set(_SHIPPED) | (set(_RECIPES) & set(REGISTRY))):
    REGISTRY[_name] = dataclasses.replace(REGISTRY[_name], **_SHIPPED.get(_name, {}), **(
        {"run": read_recipe(_RECIPES[_name])} if _name in _RECIPES else {}))
