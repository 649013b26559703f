"""The grid of `tt-zoo reproduce`: which runs to make, where their outputs live, and the data and
pretrain stages, each run a `tt-zoo` subprocess, skipped where its output already exists
(`tt_zoo.reproduction.runner`, the mechanics every grid shares).

Chang et al. 2020, Table 3 (encoder x pretraining: none, MLM, ICT+BFS+WLP; BoW-MLP and
Transformer) and Table 5 (the tasks alone, and embedding dimensions 128/256/512): every cell
is a registered variant with one budget (`GRID`).

On disk, under ``--runs``:
  pairs/MIX_PAIRSPERARTICLE/    the pairs (or MLM examples) of a pretraining mix (`data_dir`)
  reproduce/CELL/model/         a cell's export (`cell_dir`), its checkpoints in pretrain/
  reproduce/CELL/*.json         its scores (zero_shot.json, finetuned_Xpct.json: `result_file`)
  reproduce/flagship_NAME/      the scores of a shipped flagship (`evaluated_models`)
  reproduce/bm25.json           BM25 on the same test questions
  reproduce/logs/               the data stage's logs
"""

from __future__ import annotations

import pathlib
import shutil
from typing import List, Optional, Sequence, Tuple

from tt_zoo.configs.finetune import FinetuneConfig
from tt_zoo.configs.pretrain import PretrainConfig
from tt_zoo.errors import StageError
from tt_zoo.reproduction.config import Budget
from tt_zoo.reproduction.runner import read_json, run_logged, run_once, tt_zoo_command
from tt_zoo.artifacts.model_card import METADATA_FILE, ModelCard  # no TensorFlow
from tt_zoo.zoo import registry

# The cells' ReQA fine-tuning: the paper's (Sec. 5) scaled down to fewer, smaller steps at a
# larger rate, with early stopping on the validation loss every 20 steps.
GRID_FINETUNE = FinetuneConfig.from_dict(
    {"training": {"steps": 100, "batch_size": 64, "learning_rate": 2e-4, "eval_every": 20}})
# One pretraining budget and one fine-tuning budget for every cell: the registry's CPU-scale
# pretraining run (`registry.CPU_PRETRAIN`: the flagship's batch 128, Adam 1e-3 with 10% warm-up
# then linear decay, cut to 800 steps, on its pairs, documents of 128 tokens), the run every
# unshipped CPU-scale name's recipe prints, and `GRID_FINETUNE`. `--budget FIELD=VALUE` changes
# a field.
GRID = Budget.of(registry.CPU_PRETRAIN, registry.CPU_PAIRS, registry.SERIES[""].document_length,
                 GRID_FINETUNE)

# The grid's cells, each a registered variant; most informative first (the order the pretrain
# stage runs them in), so the grid is useful while it is still running.
CELLS = ("none_512", "bow_mlp_none_512", "ict_bfs_wlp_512", "mlm_512", "ict_512", "bfs_512",
         "wlp_512", "bow_mlp_ict_bfs_wlp_512", "ict_bfs_wlp_256", "ict_bfs_wlp_128")
# Shipped longer runs of grid variants, scored beside the grid's equal-budget cells.
FLAGSHIPS = ("ict_bfs_wlp_512", "bow_mlp_ict_bfs_wlp_512")
FLAGSHIP_SUFFIX = " (flagship)"  # a flagship's name in the results, after its variant's


# -- layout ---------------------------------------------------------------------------------

def pretraining_of(variant: str) -> str:
    return registry.get_spec(variant).pretraining


def cell_dir(runs: pathlib.Path, variant: str) -> pathlib.Path:
    return runs / "reproduce" / variant


def data_dir(runs: pathlib.Path, pretraining: str, budget: Budget) -> pathlib.Path:
    """Where the pairs (or MLM examples) of a pretraining mix live."""
    return runs / "pairs" / f"{pretraining}_{budget.pairs_per_article}"


def split_key(fraction: float) -> str:
    """A split as the results name it: 0.05 -> "5%"."""
    return f"{100 * fraction:g}%"


def result_file(out_dir: pathlib.Path, fraction: Optional[float] = None) -> pathlib.Path:
    """A model's zero-shot scores (`fraction` None), or its scores fine-tuned on a split."""
    if fraction is None:
        return out_dir / "zero_shot.json"
    return out_dir / f"finetuned_{100 * fraction:g}pct.json"


def bm25_file(runs: pathlib.Path) -> pathlib.Path:
    return runs / "reproduce" / "bm25.json"


def is_exported(model_dir: pathlib.Path) -> bool:
    return (model_dir / METADATA_FILE).is_file()


def read_card(model_dir: pathlib.Path) -> ModelCard:
    """The card of the export in `model_dir` (an empty one when there is none yet)."""
    return ModelCard.from_dict(read_json(model_dir / METADATA_FILE) or {})


def evaluated_models(cells: Sequence[str], runs: pathlib.Path) -> List[Tuple]:
    """(name, model directory, result directory) of every model the evaluate stage scores: the
    grid's cells, and the shipped flagships (longer runs, reported beside the grid)."""
    models = [(c, cell_dir(runs, c) / "model", cell_dir(runs, c)) for c in cells]
    for name in FLAGSHIPS:
        if name in cells:
            spec = registry.get_spec(name)
            if spec.shipped:
                models.append((name + FLAGSHIP_SUFFIX, spec.artifact_path,
                               runs / "reproduce" / f"flagship_{name}"))
    return models


# -- the commands ---------------------------------------------------------------------------

def make_data_command(pretraining: str, output: pathlib.Path, config) -> List[str]:
    """`tt-zoo make-pairs` of a pretraining mix (`config`: a `ReproduceConfig`)."""
    budget = config.budget
    command = tt_zoo_command("make-pairs", "--input", config.data / "wikispeedia",
                             "--output", output, "--max-doc-tokens", budget.max_doc_tokens,
                             "--seed", budget.seed, "--no-progress")
    if pretraining == "mlm":
        return command + ["--tasks", "mlm", "--vocab", str(config.vocab),
                          "--mlm-seq-length", str(budget.document_length)]
    return command + ["--tasks", pretraining.replace("_", ","), "--in-memory",
                      "--pairs-per-article", str(budget.pairs_per_article)]


def pretrain_run(variant: str, config) -> PretrainConfig:
    """The `tt-zoo pretrain` run config of a cell at the grid's budget, checkpointed (a rerun
    resumes), on its mix's pairs or MLM examples (`data_dir`)."""
    budget, where = config.budget, cell_dir(config.runs, variant)
    run = PretrainConfig.from_dict({}).replace(
        variant=variant, vocab=str(config.vocab), document_length=budget.document_length,
        seed=budget.seed, workdir=str(where / "pretrain"), export=str(where / "model"),
        no_progress=True, steps=0)
    pretraining = pretraining_of(variant)
    if pretraining == "none":
        return run
    source = "mlm_examples" if pretraining == "mlm" else "pairs"
    return run.replace(**{source: str(data_dir(config.runs, pretraining, budget))},
                       steps=budget.steps, batch_size=budget.batch_size,
                       learning_rate=budget.learning_rate,
                       checkpoint_every=max(1, budget.steps // 8))


def pretrain_command(variant: str, config) -> List[str]:
    """`tt-zoo pretrain` of a cell (`pretrain_run`), as its run config's flags."""
    return tt_zoo_command("pretrain", *pretrain_run(variant, config).argv())


# -- the stages -----------------------------------------------------------------------------

def stage_data(config) -> None:
    """The pairs (or MLM examples) of every pretraining mix the cells need (a mix that fails
    raises `StageError`: the cells that need it cannot run)."""
    for mix in sorted({pretraining_of(c) for c in config.cells} - {"none"}):
        out = data_dir(config.runs, mix, config.budget)
        if not run_once(f"data {mix}", out / "manifest.json",
                        make_data_command(mix, out, config),
                        config.runs / "reproduce" / "logs" / f"data_{mix}.log"):
            raise StageError(f"data {mix} failed: the cells that need it cannot run")


def committed_pretrained(variant: str, config) -> Optional[pathlib.Path]:
    """saved_models/VARIANT when it holds this variant pretrained at this grid budget (so a
    fresh clone does not retrain it), else None. The shipped flagships are longer runs."""
    if config.saved_models is None:  # not in a git clone: nothing committed to reuse
        return None
    path = config.saved_models / variant
    card = read_card(path)
    if variant in FLAGSHIPS or card.name != variant:
        return None
    budget, run = config.budget, card.training
    if pretraining_of(variant) == "none" or (
            run.train_steps == budget.steps and run.batch_size == budget.batch_size
            and run.learning_rate == budget.learning_rate):
        return path
    return None


def stage_pretrain(config) -> None:
    """Every cell pretrained and exported to RUNS/reproduce/CELL/model (or the committed
    export copied, when it was trained at this budget); a failed cell is retried once."""
    failed = []
    for variant in config.cells:
        where = cell_dir(config.runs, variant)
        committed = None if is_exported(where / "model") else committed_pretrained(variant,
                                                                                  config)
        if committed is not None:  # trained at this budget on another machine and committed
            shutil.copytree(committed, where / "model")
            print(f"pretrain {variant}: copied the committed {committed} (same budget)")
            continue
        if not run_once(f"pretrain {variant}", where / "model" / METADATA_FILE,
                        pretrain_command(variant, config), where / "pretrain.log"):
            failed.append(variant)
    if failed:  # checkpointed: a retry resumes where each one stopped
        print(f"pretrain failed for {', '.join(failed)}: retrying once")
        for variant in failed:
            run_logged(pretrain_command(variant, config), cell_dir(config.runs, variant) /
                       "pretrain.log")
