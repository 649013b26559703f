"""A pretraining run: a registered two-tower variant pretrained on pretraining pairs, then
exported for serving; `pretrain(config)` runs it (`tt-zoo pretrain` parses its flags into the
`PretrainConfig` and calls it).

Chang et al. 2020, Sec. 5.1: Adam 1e-4 with 10% linear warm-up then linear decay, the corrected
sampled softmax over the (global) batch. Checkpoints every N steps and resumes after a kill;
TensorBoard scalars under WORKDIR/logs; a progress bar with pairs/s. `none` variants skip
training (0 steps) and export the initialised model; `mlm` variants pretrain the encoder with
the masked-LM objective (`tt_zoo.training.mlm`) and initialise both towers from it. Hard
negatives (`tt_zoo.mining.hard_negatives`), GradCache (`tt_zoo.training.grad_cache`),
clustered batches (ProQA, Xiong et al. 2020, Sec. 3.2; `tt_zoo.training.clustered_batches`), a
zero-shot ReQA curve and a warm start (--init-from) are settings of the config; `colbert_`
variants (`tt_zoo.modeling.late_interaction_model`) train the same way on the same pairs.

A setting the variant cannot train with raises `RunError` naming the flag, before TensorFlow
loads where it can be seen then. Nothing here imports TensorFlow at import time: the command's
``--help`` stays quick.

    from tt_zoo.training import PretrainConfig, pretrain
    config = PretrainConfig.from_dict({"model": {"variant": "ict_bfs_wlp_128",
                                                 "vocab": "vocab.txt"},
                                       "data": {"pairs": "runs/pairs/ict_bfs_wlp"},
                                       "training": {"steps": 100, "batch_size": 32}})
    run = pretrain(config)  # run.model, run.summary
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any, Optional

from tt_zoo import numbers
from tt_zoo.atomic_io import check_replaceable, is_remote, write_json
from tt_zoo.errors import TtZooError
# The config and its groups are declared in tt_zoo.configs.pretrain (below the registry, whose
# variants hold one each); named here too, as the run's own.
from tt_zoo.configs.pretrain import (STRATEGIES, ClusteringArguments,  # noqa: F401
                                     DataArguments, EvaluationArguments, ModelArguments,
                                     NegativeArguments, PretrainConfig, TrainingArguments)
from tt_zoo.configs.run_config import RunError, flag
from tt_zoo.zoo import registry


def tower_shape(text: Optional[str]) -> Optional[dict]:
    """--tower-shape LAYERS,HIDDEN,HEADS as BERT's keywords (None: not given); raises
    ValueError saying what is wrong: three whole numbers, each in range, HIDDEN a multiple of
    HEADS (each head gets HIDDEN / HEADS dimensions)."""
    if text is None:
        return None
    parts = text.split(",")
    names = ("num_layers", "hidden_size", "num_attention_heads")
    ranges = (numbers.count(high=48), numbers.count(high=8192), numbers.count(high=128))
    if len(parts) != 3:
        raise ValueError(f"expected LAYERS,HIDDEN,HEADS, three whole numbers (got {text!r})")
    shape = {}
    for name, label, number, part in zip(names, ("LAYERS", "HIDDEN", "HEADS"), ranges, parts):
        try:
            shape[name] = number(part.strip())
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"{label} {e}") from None
    if shape["hidden_size"] % shape["num_attention_heads"]:
        raise ValueError(f"HIDDEN {shape['hidden_size']} is not a multiple of HEADS "
                         f"{shape['num_attention_heads']} (got {text!r})")
    return shape


# Tower options a late-interaction (colbert_) model has no choice in (one BERT, per-token L2).
_NOT_FOR_COLBERT = ("pooling", "share_towers", "normalize", "bow_output_activation")


def model_options(spec, config: PretrainConfig) -> registry.ModelOptions:
    """The spec's training-time model options, with the command line's overrides."""
    given = config.model
    if spec.encoder == "colbert":
        named = [flag(k) for k in _NOT_FOR_COLBERT if getattr(given, k) is not None]
        if named:
            raise RunError(f"{', '.join(named)}: {spec.name} is a late-interaction model (one "
                           "shared BERT, every token kept and L2-normalised); only --temperature "
                           "applies")
    yes = {"yes": True, "no": False}
    options = dataclasses.asdict(spec.options)
    if given.pooling is not None:
        options["pooling"] = given.pooling
    if given.share_towers is not None:
        options["share_towers"] = yes[given.share_towers]
    if given.normalize is not None:
        options["normalize_embeddings"] = yes[given.normalize]
    if given.temperature is not None:
        options["temperature"] = given.temperature or None  # 0 means none
    if given.bow_output_activation is not None:
        options["bow_output_activation"] = {"tanh": "tanh", "linear": None}[
            given.bow_output_activation]
    return registry.ModelOptions(**options)


def build_model(spec, config: PretrainConfig, source=None):
    """The variant's model, untrained. `source`: the loaded --init-from export; a ColBERT tower
    takes its feed-forward activation (`warm_start_options`), which the warm start's weights
    were trained with."""
    from tt_zoo.zoo.build import build_untrained  # noqa: PLC0415 (TensorFlow)
    shape = tower_shape(config.model.tower_shape)
    if source is not None and spec.encoder == "colbert":
        from tt_zoo.modeling.late_interaction_model import warm_start_options  # noqa: PLC0415
        shape = {**(shape or {}), **warm_start_options(source.keras_model)}
    return build_untrained(spec, config.model.vocab, query_length=config.lengths.query_length,
                           document_length=config.lengths.document_length,
                           dropout_rate=config.model.dropout, tower_shape=shape,
                           options=model_options(spec, config))


def run_settings(model, config: PretrainConfig, batch, lr, warmup, steps, hard_negatives=None,
                 clustering=None) -> dict:
    """What defines a pretraining run: resuming with anything else is refused.

    `hard_negatives`: the `MiningSettings` when the run trains with mined negatives;
    `clustering`: `ClusteredStepOrder.settings()` when --cluster-every is on."""
    towers = {"query_tower": model.query_tower.get_config(),
              "document_tower": None if model.share_towers else model.document_tower.get_config(),
              "query_length": model.query_preprocessor.seq_length,
              "document_length": model.document_preprocessor.seq_length,
              "vocabulary_sha256": model.query_preprocessor.vocabulary_sha256,
              "normalize_embeddings": model.normalize_embeddings,
              "loss": model.retrieval_loss.get_config()}
    pairs = config.data.pairs if is_remote(config.data.pairs) else os.path.abspath(
        config.data.pairs)
    chunk = config.training.grad_cache_chunk
    return {"batch_size": batch, "learning_rate": lr, "warmup_fraction": warmup,
            "steps": steps, "seed": config.training.seed, "pairs": pairs,
            "max_pairs": config.data.max_pairs, "dtype_policy": training_policy(config, model),
            # Recorded only when on, so runs checkpointed before the flag existed still resume.
            **({"jit_compile": True} if jit_compile(config) else {}),
            **({"hard_negatives": {k: v for k, v in hard_negatives.as_dict().items()
                                   if k != "max_pairs"}} if hard_negatives else {}),
            **({"grad_cache_chunk": chunk} if chunk else {}),
            **({"clustered_batches": clustering} if clustering else {}), **towers}


def training_policy(config: PretrainConfig, model=None) -> str:
    """The Keras dtype policy `model`'s towers train under: --precision's
    (`tt_zoo.training.precision.training_policy`: for auto, mixed_bfloat16 for Transformer
    towers on a CPU with a bfloat16 unit), or, with --precision auto, the older --dtype-policy
    when a config records it. `model` None: the setting checked, as for a Transformer. Raises
    `RunError` naming TT_ZOO_PRECISION when it holds no precision."""
    from tt_zoo.hardware import training_dtype_policy  # noqa: PLC0415
    from tt_zoo.training.precision import bfloat16_pays  # noqa: PLC0415

    precision, legacy = config.compute.precision, config.model.dtype_policy
    if precision == "auto" and legacy is not None:
        return legacy
    try:
        return training_dtype_policy(precision, model is None or bfloat16_pays(model))
    except TtZooError as e:
        raise RunError(f"--precision {precision}: {e}") from e


def check_grad_cache_chunk(chunk: int, batch: int, replicas: int) -> None:
    """Exits with a clear message unless --grad-cache-chunk divides the batch per replica."""
    if chunk < 0:
        raise RunError(f"--grad-cache-chunk must be a number of pairs, or 0 for off (got {chunk})")
    per_replica, rest = divmod(batch, replicas)
    if chunk and (rest or per_replica % chunk):
        divisors = [d for d in range(1, per_replica + 1) if rest == 0 and per_replica % d == 0]
        hint = f" (e.g. {max(d for d in divisors if d <= chunk)})" if divisors else ""
        raise RunError(f"--grad-cache-chunk {chunk}: the batch of {batch} pairs over {replicas} "
                       f"replica(s) is {batch / replicas:g} pairs per replica, which must be a "
                       f"multiple of the chunk{hint}")


def jit_compile(config: PretrainConfig) -> bool:
    setting = config.training.jit_compile
    return setting == "yes" or (setting == "auto" and config.training.strategy == "tpu")


def mining_settings(config: PretrainConfig):
    """The hard-negative `MiningSettings` of --hard-negatives (None when off)."""
    negatives = config.negatives
    if not negatives.hard_negatives:
        return None
    from tt_zoo.mining.hard_negatives import DEFAULT_DEPTH, MiningSettings
    return MiningSettings(negatives.hard_negatives,
                          negatives.hard_negatives_depth or DEFAULT_DEPTH,
                          max_pairs=config.data.max_pairs)


def zero_shot_curve(config: PretrainConfig, workdir, batch, default_squad: Optional[str] = None):
    """The callback that scores ReQA-SQuAD(dev) zero-shot every --eval-every steps (on
    `default_squad` when the config names no SQuAD file)."""
    from tt_zoo.evaluation.reqa import build_reqa
    from tt_zoo.training import loop as training  # noqa: PLC0415 (TensorFlow)
    evaluation = config.evaluation
    squad = evaluation.squad or default_squad
    if squad is None:
        raise RunError("--eval-every needs SQuAD v1.1 dev: pass --squad")
    if not os.path.isfile(squad):
        raise RunError(f"--eval-every needs SQuAD v1.1 dev: {squad} not found (pass --squad)")
    return training.ZeroShotReqaCurve(build_reqa(squad), every_steps=evaluation.eval_every,
                                      num_questions=evaluation.eval_questions,
                                      global_batch=batch,
                                      output=os.path.join(workdir, "curve.jsonl"))


def clustered_order(config: PretrainConfig, arrays, batch, checkpoint_dir):
    """The clustered batch order of --cluster-every (None when off)."""
    clustering = config.clustering
    if not clustering.cluster_every:
        return None
    from tt_zoo.training.clustered_batches import CLUSTER_DIR, ClusteredStepOrder
    try:
        return ClusteredStepOrder(arrays, batch, seed=config.training.seed,
                                  every=clustering.cluster_every,
                                  directory=os.path.join(checkpoint_dir, CLUSTER_DIR),
                                  start_step=clustering.cluster_start,
                                  num_clusters=clustering.clusters,
                                  cluster_length=clustering.cluster_length,
                                  encode_batch=clustering.cluster_encode_batch,
                                  kmeans_threads=clustering.cluster_threads or None)
    except ValueError as e:
        raise RunError(f"--cluster-every: {e}") from e


def clustering_summary(order, train_wall_time_s: float) -> dict:
    """This run's cost of the clustered batches (for the train summary)."""
    stats = order.stats
    return {"rounds_clustered": stats["rounds_clustered"],
            "rounds_read": stats["rounds_loaded"],
            "reencoding_seconds": round(stats["encode_seconds"], 1),
            "kmeans_seconds": round(stats["kmeans_seconds"], 1),
            "cluster_seconds": round(stats["seconds"], 1),
            "fraction_of_train_wall_time": round(stats["seconds"] / train_wall_time_s, 4)
            if train_wall_time_s > 0 else None}


def init_from(model, name_or_path, source=None):
    """Copies an export's weights into `model` (a warm start); its name, sha256, steps and
    pretraining, for the card (a `tt_zoo.artifacts.model_card.Origin`). The vocabulary and every
    weight's shape must match; a late-interaction model takes a single-vector BERT export's
    encoder only (`warm_start_from`: its token projection starts fresh), recorded under
    "copied" and "new". `source`: the export already loaded (None: loaded here)."""
    from tt_zoo.modeling.late_interaction_model import LateInteractionModel, warm_start_from
    from tt_zoo.artifacts.model_card import Origin  # noqa: PLC0415
    from tt_zoo.zoo.loading import load  # noqa: PLC0415 (tt_zoo.load)

    source = source if source is not None else load(name_or_path)
    card = source.card
    record = Origin(source=str(name_or_path), sha256=card.provenance.sha256,
                    pretraining=card.training.pretraining, train_steps=card.training.train_steps,
                    batch_size=card.training.batch_size, pairs_seen=card.training.pairs_seen)
    if isinstance(model, LateInteractionModel) and not isinstance(source.keras_model,
                                                                  LateInteractionModel):
        try:
            return dataclasses.replace(record, **warm_start_from(model, source.keras_model))
        except TtZooError as e:
            raise RunError(f"--init-from {name_or_path}: {e}") from e
    theirs, ours = source.keras_model.get_weights(), model.get_weights()
    mismatch = [i for i, (a, b) in enumerate(zip(theirs, ours)) if a.shape != b.shape]
    if len(theirs) != len(ours) or mismatch:
        raise RunError(f"--init-from {name_or_path}: its towers do not match {model.name!r} "
                       f"({len(theirs)} weights against {len(ours)}; shapes differ at "
                       f"{mismatch[:5]})")
    if source.keras_model.document_preprocessor.vocabulary_sha256 != \
            model.document_preprocessor.vocabulary_sha256:
        raise RunError(f"--init-from {name_or_path}: its vocabulary differs from --vocab")
    model.set_weights(theirs)
    return record


# Chang et al. 2020, Sec. 5.1: 10% of the steps warm up, where neither the flags nor the
# variant's run config say.
WARMUP_FRACTION = 0.1


def resolve_schedule(spec, training: TrainingArguments) -> TrainingArguments:
    """The schedule a run trains with: the command line's steps, batch size, learning rate and
    warm-up where given, else the variant's recipe's (its run config, `spec.run`; the paper's,
    `registry.PAPER_PRETRAIN`, for a spec no pretraining run trains), else the paper's warm-up
    (`WARMUP_FRACTION`)."""
    run = spec.run if isinstance(spec.run, PretrainConfig) else registry.PAPER_PRETRAIN
    recipe = run.training
    names = ("steps", "batch_size", "learning_rate", "warmup_fraction")
    given = {name: getattr(training, name) for name in names}
    chosen = {name: getattr(recipe, name) if given[name] is None else given[name]
              for name in names}  # a value given is taken, 0 too
    chosen["steps"] = chosen["steps"] or 0
    if chosen["warmup_fraction"] is None:
        chosen["warmup_fraction"] = WARMUP_FRACTION
    if spec.pretraining == "none" and chosen["steps"]:
        print(f"{spec.name} has no pretraining: ignoring --steps {chosen['steps']}")
        chosen["steps"] = 0
    return dataclasses.replace(training, **chosen)


def check_settings(spec, config: PretrainConfig, steps: int):
    """Exits naming the first setting `spec` cannot train with (before TensorFlow loads);
    returns the hard-negative `MiningSettings` (None when off)."""
    data, negatives = config.data, config.negatives
    cluster_every = config.clustering.cluster_every
    training_policy(config)  # TT_ZOO_PRECISION holds a precision
    if steps and spec.pretraining != "mlm" and not data.pairs:
        raise RunError(f"{spec.name} pretrains on {spec.pretraining} pairs: pass --pairs DIR "
                       "(see tt-zoo make-pairs)")
    if cluster_every and (not steps or spec.pretraining == "mlm"):
        raise RunError("--cluster-every groups the batches of pair pretraining; "
                       f"{spec.name} trains {'no steps' if not steps else 'with MLM'}")
    if spec.encoder == "colbert":
        for name, value, why in (
                ("--cluster-every", cluster_every, "clusters one vector per document"),
                ("--eval-every", config.evaluation.eval_every, "scores ReQA with one vector per "
                 "text; evaluate the export with the MaxSim re-ranker of tt_zoo.retrieval")):
            if value:
                raise RunError(f"{name}: {spec.name} is a late-interaction model (token "
                               f"vectors) and {name} {why}")
    if steps and spec.pretraining == "mlm" and not data.mlm_examples:
        raise RunError(f"{spec.name} pretrains with MLM: pass --mlm-examples DIR "
                       "(tt-zoo make-pairs --tasks mlm)")
    if negatives.hard_negatives < 0:
        raise RunError(f"--hard-negatives must be >= 0 (got {negatives.hard_negatives})")
    if negatives.hard_negatives and (spec.pretraining in ("mlm", "none") or not steps):
        raise RunError(f"--hard-negatives {negatives.hard_negatives}: {spec.name} trains on no "
                       f"pairs ({spec.pretraining} pretraining, {steps} steps)")
    try:
        mining = mining_settings(config)
    except ValueError as e:
        raise RunError(f"--hard-negatives: {e}") from e
    if not (config.model.vocab and os.path.isfile(config.model.vocab)):
        raise RunError(f"tt-zoo pretrain: --vocab: vocabulary {config.model.vocab} not found "
                       "(pass --vocab PATH or set TT_ZOO_DATA; tt-zoo learn-vocab writes one)")
    return mining


def check_grad_cache(spec, config: PretrainConfig, schedule: TrainingArguments,
                     replicas: int) -> None:
    chunk = config.training.grad_cache_chunk
    if schedule.steps and chunk:
        if spec.pretraining == "mlm":
            raise RunError("--grad-cache-chunk applies to the two-tower loss, not to MLM "
                           "pretraining")
        check_grad_cache_chunk(chunk, schedule.batch_size, replicas)
        if jit_compile(config):
            raise RunError("--grad-cache-chunk runs without XLA: pass --jit-compile no")


def build_for_training(spec, config: PretrainConfig, schedule: TrainingArguments, strategy):
    """(the float32 model in `strategy`'s scope, warm-started by --init-from; the model that
    trains: its copy under `training_policy` (`tt_zoo.modeling.pair_model.with_dtype_policy`;
    the model itself in float32), compiled with the paper's schedule when it trains; the warm
    start's record, None without one). The float32 model is what the run exports."""
    import tensorflow as tf  # noqa: PLC0415
    from tt_zoo.modeling.pair_model import with_dtype_policy  # noqa: PLC0415
    from tt_zoo.training import loop as training  # noqa: PLC0415
    from tt_zoo.training.grad_cache import use_grad_cache  # noqa: PLC0415
    chunk = config.training.grad_cache_chunk
    source = None
    if config.model.init_from:
        from tt_zoo.zoo.loading import load  # noqa: PLC0415 (tt_zoo.load)
        source = load(config.model.init_from)
    with strategy.scope():
        model = build_model(spec, config, source)
        model.build_by_calling()
        warm_start = init_from(model, config.model.init_from, source) if source else None
        trained = model
        if schedule.steps:
            trained = with_dtype_policy(model, training_policy(config, model))
            learning_rate = training.paper_learning_rate(
                schedule.learning_rate, schedule.steps, schedule.warmup_fraction)
            trained.compile(optimizer=tf.keras.optimizers.Adam(learning_rate),
                            jit_compile=jit_compile(config))
            try:
                use_grad_cache(trained, chunk or None)
            except TtZooError as e:  # a model GradCache cannot train (late interaction)
                raise RunError(f"--grad-cache-chunk {chunk}: {e}") from e
    return model, trained, warm_start


@dataclasses.dataclass(frozen=True)
class TrainOutcome:
    """What a run's training left for its summary (all None: no steps to train)."""

    result: Any = None                  # training.TrainResult
    order: Any = None                   # the ClusteredStepOrder of --cluster-every
    clustering: Optional[dict] = None   # its cost in this run (`clustering_summary`)
    mined: Any = None                   # the hard negatives of --hard-negatives


def train(model, spec, config: PretrainConfig, schedule: TrainingArguments, strategy, workdir,
          mining, default_squad: Optional[str] = None) -> TrainOutcome:
    """Trains `model` for the schedule's steps (MLM or pairs), resuming from WORKDIR."""
    from tt_zoo.training import loop as training  # noqa: PLC0415
    if not schedule.steps:
        return TrainOutcome()
    if spec.pretraining == "mlm":
        from tt_zoo.training.mlm import pretrain_mlm
        try:
            return TrainOutcome(result=pretrain_mlm(
                model, config.data.mlm_examples, steps=schedule.steps,
                batch=schedule.batch_size, learning_rate=schedule.learning_rate,
                warmup_fraction=schedule.warmup_fraction, strategy=strategy, workdir=workdir,
                checkpoint_every=config.output.checkpoint_every, seed=config.training.seed,
                progress=not config.output.no_progress))
        except TtZooError as e:  # settings that differ; a non-finite loss
            raise RunError(str(e)) from e
    return train_on_pairs(model, config, schedule, strategy, workdir, mining, default_squad)


def train_on_pairs(model, config: PretrainConfig, schedule: TrainingArguments, strategy, workdir,
                   mining, default_squad: Optional[str] = None) -> TrainOutcome:
    """The two-tower loss on the pairs' batches (hard negatives, clustered batches, the
    zero-shot curve when asked)."""
    from tt_zoo.training import loop as training  # noqa: PLC0415
    from tt_zoo.training.step_data import cached_tokenize_pair_set, distribute_step_batches
    data, output, seed = config.data, config.output, config.training.seed
    steps, batch = schedule.steps, schedule.batch_size
    check_pairs(data.pairs)
    arrays = cached_tokenize_pair_set(model, data.pairs, data.token_cache or None,
                                      max_pairs=data.max_pairs)
    mined = None
    if mining:
        from tt_zoo.mining.hard_negatives import load_or_mine
        try:
            mined = load_or_mine(data.pairs, mining, output_dir=config.negatives.hard_negatives_dir,
                                 progress=not output.no_progress)
        except TtZooError as e:
            raise RunError(f"--hard-negatives: {e}") from e
    callbacks = ([zero_shot_curve(config, workdir, batch, default_squad)]
                 if config.evaluation.eval_every else [])
    checkpoint_dir = os.path.join(workdir, "checkpoints")
    order = clustered_order(config, arrays, batch, checkpoint_dir)
    try:
        result = training.train_resumable(
            model, lambda start: distribute_step_batches(
                strategy, arrays, batch, seed=seed, start_step=start, end_step=steps,
                hard_negatives=mined.rows if mined else None, order=order),
            steps=steps, global_batch=batch, checkpoint_dir=checkpoint_dir,
            checkpoint_every=output.checkpoint_every,
            settings=run_settings(model, config, batch, schedule.learning_rate,
                                  schedule.warmup_fraction, steps, mining,
                                  clustering=order and order.settings()),
            log_dir=os.path.join(workdir, "logs"), progress=not output.no_progress,
            callbacks=callbacks, data_callbacks=[order.callback()] if order else [])
    except TtZooError as e:  # settings that differ; a clustered round's order missing
        raise RunError(str(e)) from e
    clustering = None
    if order is not None and result.final_loss is not None:
        clustering = clustering_summary(order, result.wall_time_s)
        print(f"clustered batches: {clustering['rounds_clustered']} rounds clustered in "
              f"{clustering['cluster_seconds']:.1f} s (re-encoding "
              f"{clustering['reencoding_seconds']:.1f} s), "
              f"{100 * clustering['fraction_of_train_wall_time']:.1f}% of the training "
              "wall time")
    if result.final_loss is None:
        print(f"already trained to step {result.steps_done}: nothing to do")
    else:
        print(f"trained to step {result.steps_done} (resumed from {result.resumed_from}) in "
              f"{result.wall_time_s:.0f} s, {result.pairs_per_s:.1f} pairs/s (first 100 "
              f"steps {result.pairs_per_s_over(first=True):.1f}, last 100 "
              f"{result.pairs_per_s_over(first=False):.1f}), final loss "
              f"{result.final_loss:.4f}")
    return TrainOutcome(result=result, order=order, clustering=clustering, mined=mined)


def check_pairs(pairs: str) -> None:
    """Exits naming --pairs unless it is a pair directory holding at least one pair."""
    from tt_zoo.data.pairs_io import read_manifest  # noqa: PLC0415 (TensorFlow)
    try:
        count = read_manifest(pairs, verify="none")["num_records"]
    except (TtZooError, OSError) as e:
        raise RunError(f"--pairs: {e}") from e
    if not count:
        raise RunError(f"--pairs: {pairs} holds no pairs (its manifest counts 0): nothing to "
                       "train on (tt-zoo make-pairs writes them)")


def trained_pretraining(spec, steps: int, warm_start) -> str:
    """The card's pretraining: the variant's tasks when the run takes steps; with none, the
    warm start's source's (an imported checkpoint's "imported"), or "none" for initial weights,
    since a run of 0 steps trained nothing of its variant's tasks."""
    return spec.pretraining if steps else getattr(warm_start, "pretraining", None) or "none"


def train_summary(spec, config: PretrainConfig, schedule: TrainingArguments, outcome: TrainOutcome,
                  warm_start, command: Optional[str], summary_path: str, policy: str) -> dict:
    """The run's record (train_summary.json, and the export's metadata: a
    `tt_zoo.artifacts.model_card.ModelCard`): what was trained, on what, with which schedule (the
    dtype `policy` its towers trained under), at what cost, and the whole config under
    `RUN_CONFIG_KEY`. A rerun of a finished run trains nothing: the first run's costs stay the
    record."""
    import tensorflow as tf  # noqa: PLC0415
    from tt_zoo.artifacts.model_card import (WEIGHTS_LICENSE, Architecture,  # noqa: PLC0415
                                           Lineage, ModelCard, PairSet, Training,
                                           TrainingResult)
    from tt_zoo.training.precision import card_record  # noqa: PLC0415
    steps, batch, pairs = schedule.steps, schedule.batch_size, config.data.pairs
    card = ModelCard(
        name=spec.name, license=WEIGHTS_LICENSE,
        architecture=Architecture(encoder=spec.encoder, tower_size=spec.tower_size,
                                  model_options=dataclasses.asdict(model_options(spec, config))),
        training=Training(pretraining=trained_pretraining(spec, steps, warm_start),
                          train_steps=steps,
                          seed=config.training.seed,
                          training_data=(f"pairs from {pairs or config.data.mlm_examples}"
                                         if steps else "none (initialised, not trained)"),
                          command=command, run_config=config.to_dict()),
        lineage=Lineage(warm_start=warm_start))
    training = card.training
    if steps and pairs:
        from tt_zoo.data.pairs_io import read_manifest
        manifest = read_manifest(pairs, verify="none")
        training.pairs = PairSet(num_pairs=manifest["num_records"],
                                 num_distinct_docs=manifest.get("num_distinct_docs"),
                                 make_pairs_config=manifest.get("config", {}))
    if steps:
        training.batch_size, training.pairs_seen = batch, steps * batch
        training.learning_rate = schedule.learning_rate
        training.warmup_fraction = schedule.warmup_fraction
        training.strategy = config.training.strategy
        precision = card_record(policy)
        training.dtype_policy, training.matrix_units = (precision["dtype_policy"],
                                                        precision["matrix_units"])
        training.grad_cache_chunk = config.training.grad_cache_chunk or None
    if outcome.mined is not None:
        training.hard_negatives = outcome.mined.summary()
    if outcome.order is not None:
        training.clustered_batches = outcome.order.settings()
    result = outcome.result
    if result is not None and result.final_loss is not None:
        card.result = TrainingResult(
            train_wall_time_s=round(result.total_wall_time_s, 1),
            train_pairs_per_s=round(result.pairs_per_s, 1),
            train_pairs_per_s_first_100=round(result.pairs_per_s_over(True), 1),
            train_pairs_per_s_last_100=round(result.pairs_per_s_over(False), 1),
            final_loss=round(result.final_loss, 4), resumed_from=result.resumed_from,
            train_clustered_batches=outcome.clustering)
    elif result is not None and tf.io.gfile.exists(summary_path):
        with tf.io.gfile.GFile(summary_path) as f:
            card.result = ModelCard.from_dict(json.load(f)).result
    return card.to_dict()


@dataclasses.dataclass(frozen=True)
class PretrainResult:
    """What `pretrain` leaves: the trained model (Keras, in its strategy's scope), the run's
    record (train_summary.json's, a `tt_zoo.artifacts.model_card.ModelCard` as a dict), its work
    folder, and the export's metadata (None without one)."""

    model: Any
    summary: dict
    workdir: str
    export: Optional[dict] = None


def pretrain(config: PretrainConfig, *, command: Optional[str] = None,
             default_squad: Optional[str] = None) -> PretrainResult:
    """Pretrains (resuming from WORKDIR) and exports the variant of `config` (Chang et al.
    2020, Sec. 5.1). `command`: the command line the summary records (None: none);
    `default_squad`: the SQuAD v1.1 dev file the zero-shot curve scores when the config names
    none (the command's default is $TT_ZOO_DATA/squad/dev-v1.1.json). Raises `RunError` naming
    the setting that stops the run."""
    try:
        spec = registry.get_spec(config.model.variant)
    except KeyError as e:
        raise RunError(str(e.args[0])) from None
    schedule = resolve_schedule(spec, config.training)
    mining = check_settings(spec, config, schedule.steps)
    # TensorFlow loads here, after the settings are checked.
    from tt_zoo.artifacts.export import export_saved_model, is_model_export  # noqa: PLC0415
    from tt_zoo.training import loop as training  # noqa: PLC0415
    export = config.output.export
    if export:
        try:  # before training, so an hour's run never ends in a refused write
            check_replaceable(export, is_replaceable=is_model_export,
                              what="tt_zoo model export")
        except FileExistsError as e:
            raise RunError(f"--export: {e}") from e

    workdir = config.output.workdir or os.path.join("runs", "pretrain", spec.name)
    training.enable_checkpointable_randomness(config.training.seed)
    strategy = training.make_strategy(config.training.strategy, config.training.tpu)
    check_grad_cache(spec, config, schedule, strategy.num_replicas_in_sync)
    print(f"{spec.name}: {spec.encoder} {spec.tower_size or ''} dim {spec.embedding_dim}, "
          f"{schedule.steps} steps x batch {schedule.batch_size} on "
          f"{strategy.num_replicas_in_sync} replica(s) ({config.training.strategy})")
    model, trained, warm_start = build_for_training(spec, config, schedule, strategy)
    print(f"vocabulary: {config.model.vocab} ({model.query_preprocessor.vocab_size:,} tokens)")
    if schedule.steps:
        print(f"precision: {training_policy(config, model)} "
              f"(--precision {config.compute.precision})")
    outcome = train(trained, spec, config, schedule, strategy, workdir, mining, default_squad)
    if trained is not model:  # the float32 model takes the weights trained in bfloat16
        from tt_zoo.training.precision import write_back  # noqa: PLC0415
        with strategy.scope():
            write_back(model, trained)
    summary_path = os.path.join(workdir, "train_summary.json")
    summary = train_summary(spec, config, schedule, outcome, warm_start, command, summary_path,
                            training_policy(config, model))
    write_json(summary_path, summary, indent=2)
    # Without an export, the last checkpoint in WORKDIR/checkpoints holds the final weights;
    # tt-zoo export --variant ... --checkpoint WORKDIR exports it later.
    meta = export_saved_model(model, export, summary) if export else None
    return PretrainResult(model=model, summary=summary, workdir=workdir, export=meta)
