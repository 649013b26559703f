"""A query-adaptation run: a trained two-tower model's query tower trained against its own passage
index (ADORE, Zhan et al., SIGIR 2021; `tt_zoo.training.query_adaptation`); `adapt_queries(config)`
runs it (``tt-zoo adapt-queries`` parses its flags into `AdaptQueriesConfig` and calls it).

The questions are factoid questions with answers (WebQuestions JSON, CuratedTREC TSV, or JSONL of
``{"question", "answers" | "answer_regex"}``; named sets resolve under ``$TT_ZOO_DATA/odqa``,
`tt_zoo.data.question_sets`); the passages are an article source cut into 100-word blocks with
titles, as the ODQA benchmark cuts them. A question trains when some passage holds one of its
answers; those passages are its positives. The passages' embeddings are read from
``--passage-embeddings`` (the ``.npy`` `tt-zoo odqa` or the benchmarks cache, every row
checked finite and not zero, 64 of them against the model: `check_passage_embeddings`) or
encoded into the workdir first (resumable). Training checkpoints in the workdir and resumes
exactly (`tt_zoo.training.loop.train_resumable`); the
export's card records the base model, the questions, and its document side as the base
model's (``document_encoder``), so the base model's cached passage embeddings serve it.
"""

from __future__ import annotations

import pathlib
import time
from typing import List, Optional, Sequence

from tt_zoo.configs.adapt_queries import (AdaptQueriesConfig, DataArguments,  # noqa: F401
                                          ModelArguments, OutputArguments, TrainingArguments)
from tt_zoo.configs.run_config import RUN_CONFIG_KEY, RunError, recorded_command
from tt_zoo.data.question_sets import TRAIN
from tt_zoo.errors import TtZooError

COMMAND = AdaptQueriesConfig.COMMAND
DEFAULT_QUESTIONS = TRAIN  # webquestions-trainmodel


def workdir_of(config: AdaptQueriesConfig, name: str) -> pathlib.Path:
    return pathlib.Path(config.output.workdir or pathlib.Path("runs") / "adapt_queries" / name)


def training_questions(config: AdaptQueriesConfig, articles, data_dir, log=print):
    """(the passages, the question texts, their positive rows, per-set counts): every
    --questions set's answerable questions over `articles` cut into passages
    (`tt_zoo.data.answer_passages.answered_passages`; the answer rows cached where `tt-zoo odqa`
    and `tt-zoo multitask` keep theirs, keyed by the passages and the questions)."""
    from tt_zoo.configs.multitask import ODQA_CACHE  # noqa: PLC0415
    from tt_zoo.data.answer_passages import answered_passages  # noqa: PLC0415
    from tt_zoo.data.question_sets import load_question_set  # noqa: PLC0415

    given = config.data.questions or DEFAULT_QUESTIONS
    question_sets = []
    for name in given:
        try:
            question_sets.append(load_question_set(name, data_dir))
        except (OSError, ValueError) as e:
            raise RunError(f"--questions {name}: {e}") from None
    try:
        answered = answered_passages(articles, question_sets, config.data.words,
                                     limit_articles=config.data.limit_articles,
                                     progress=not config.output.no_progress,
                                     cache_dir=ODQA_CACHE)
    except (OSError, ValueError) as e:
        raise RunError(f"--articles {articles}: {e}") from None
    collection = answered.collection
    log(f"{len(collection):,} passages of {config.data.words} words from {articles}")
    texts: List[str] = []
    rows: list = []
    counts = {}
    for name, sets in zip(given, answered.sets):
        counts[sets.name] = {"questions": sets.num_questions, "answerable": sets.num_answerable}
        texts += [q.text for q in sets.questions]
        rows += [sorted(r) for r in sets.rows]
        log(f"--questions {name}: {sets.num_answerable:,} of {sets.num_questions:,} questions "
            f"have an answer in a passage")
    if not texts:
        raise RunError("--questions: no question has an answer in any passage: nothing to train "
                       "on (check the question files and --articles)")
    return collection, texts, rows, counts


def passage_embeddings(config: AdaptQueriesConfig, zoo_model, collection, workdir: pathlib.Path,
                       log=print):
    """The model's document embeddings of the passages: --passage-embeddings (checked), or
    encoded into the workdir (resumable)."""
    import numpy as np  # noqa: PLC0415

    from tt_zoo.evaluation.document_embeddings import (  # noqa: PLC0415
        cache_file, encode_documents_to_file)
    from tt_zoo.evaluation.text_benchmarks import OdqaBenchmark  # noqa: PLC0415
    from tt_zoo.training.query_adaptation import check_passage_embeddings  # noqa: PLC0415

    given = config.data.passage_embeddings
    if given is None:
        path = cache_file(workdir, OdqaBenchmark.cache_prefix, zoo_model, len(collection))
        log(f"Encoding the {len(collection):,} passages into {path} (resumable)")
        return np.asarray(encode_documents_to_file(
            zoo_model, collection.texts, collection.titles, path,
            progress=not config.output.no_progress))
    if not pathlib.Path(given).is_file():
        raise RunError(f"--passage-embeddings {given} does not exist (leave the flag out to "
                       "encode the passages into the workdir)")
    try:
        embeddings = np.load(given, mmap_mode="r")
    except (OSError, ValueError) as e:
        raise RunError(f"--passage-embeddings {given}: not a readable .npy array ({e})") from None
    try:
        cosines = check_passage_embeddings(zoo_model.keras_model, embeddings, collection.titles,
                                           collection.texts, f"--passage-embeddings {given}")
    except ValueError as e:
        raise RunError(str(e)) from None
    log(f"--passage-embeddings {given}: {len(cosines)} rows encoded again agree "
        f"(cosine >= {min(cosines):.5f})")
    return np.asarray(embeddings, np.float32)


def teacher_targets(config: AdaptQueriesConfig, collection, questions: Sequence[str],
                    temperature: float, log=print):
    """(`TeacherTargets` of every training question, the file's record for the card and the
    resume check) from --teacher-scores, or (None, None) without it. Raises `RunError` for a
    file of another collection, or a training question it does not score."""
    given = config.data.teacher_scores
    if given is None:
        return None, None
    from tt_zoo.data.teacher_scores import TeacherScoresError, read_teacher_scores  # noqa: PLC0415
    from tt_zoo.manifest import describe_file  # noqa: PLC0415
    from tt_zoo.training.teacher_targets import TeacherTargets  # noqa: PLC0415

    try:
        scores = read_teacher_scores(given, collection)
    except TeacherScoresError as e:
        raise RunError(f"--teacher-scores: {e}") from None
    where = {q: i for i, q in enumerate(scores.questions)}
    missing = [q for q in questions if q not in where]
    if missing:
        raise RunError(f"--teacher-scores {given}: {len(missing):,} of the {len(questions):,} "
                       f"training questions are not in it (the first: {missing[0]!r}); score "
                       "the same --questions with tt-zoo teacher-scores")
    rows, values = zip(*(scores.candidates(where[q])[:2] for q in questions))
    train = config.training
    targets = TeacherTargets.from_lists(rows, values, train.teacher_temperature or temperature)
    record = {"file": str(given), "sha256": describe_file(given)["sha256"],
              "teacher": scores.teacher,
              "distill_weight": train.distill_weight, "temperature": targets.temperature,
              "candidates": scores.summary()["per_question"]}
    log(f"--teacher-scores {given}: {scores.teacher}'s ranking of {targets.rows.shape[1]} "
        f"candidates at most per question, T {targets.temperature:g}, weight "
        f"{train.distill_weight:g}")
    return targets, record


def loaded_two_tower(name_or_path: str):
    """The zoo model, refused with a `RunError` unless it is a two-tower model with one query
    tower."""
    from tt_zoo.modeling.models import TwoTowerModel  # noqa: PLC0415
    from tt_zoo.modeling.routed_tower import TaskRoutedTower  # noqa: PLC0415
    from tt_zoo.zoo.loading import load  # noqa: PLC0415

    try:
        zoo_model = load(name_or_path)
    except (KeyError, OSError, TtZooError) as e:  # an unknown name, a damaged export, ...
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise RunError(f"--model {name_or_path}: {message}") from None
    model = zoo_model.keras_model
    if not isinstance(model, TwoTowerModel):
        raise RunError(f"--model {name_or_path}: a {type(model).__name__}; query adaptation "
                       "trains a two-tower model's single-vector query tower against its passage "
                       "embeddings")
    if isinstance(model.query_tower, TaskRoutedTower):
        raise RunError(f"--model {name_or_path}: its queries route to one tower per task class; "
                       "adapt a model with one query tower")
    return zoo_model


def default_temperature(model) -> float:
    """The model's own loss temperature (a cosine model's), else 1."""
    return float(model.retrieval_loss.temperature or 1.0)


def make_card(config, zoo_model, name: str, summary: dict, counts: dict, command: str,
              num_passages: int):
    """The export's card: the base model's lineage, the questions, and its document side as
    the base model's (`Lineage.document_encoder`)."""
    from tt_zoo.artifacts.model_card import Origin  # noqa: PLC0415

    card = zoo_model.fine_tuned_card(name, summary["steps_done"])
    options = card.architecture.model_options
    card.architecture.model_options = None if options is None else {**options,
                                                                    "share_towers": False}
    base_card = zoo_model.card
    card.lineage.document_encoder = base_card.lineage.document_encoder or Origin(
        name=zoo_model.name, sha256=base_card.provenance.sha256,
        copied="the document tower and preprocessor, unchanged")
    run = card.training
    run.training_data = (
        "query adaptation against a fixed passage index (ADORE, Zhan et al. 2021): "
        + " + ".join(f"{n} ({c['answerable']:,} answerable questions)" for n, c in counts.items())
        + f" over {num_passages:,} {config.data.words}-word passages")
    distilled = summary.get("distillation")
    if distilled:
        run.training_data += (
            f", distilling {distilled['teacher']}'s ranking of each question's candidates "
            f"(listwise KL, RocketQAv2; weight {distilled['distill_weight']:g}, T "
            f"{distilled['temperature']:g}; {pathlib.Path(distilled['file']).name}, sha256 "
            f"{distilled['sha256'][:12]})")
    run.batch_size, run.learning_rate = config.training.batch_size, config.training.learning_rate
    run.seed, run.command, run.run_config = config.training.seed, command, config.to_dict()
    run.dtype_policy, run.matrix_units = summary["dtype_policy"], summary["matrix_units"]
    card.result.train_wall_time_s = summary["train_wall_time_s"]
    card.result.final_loss = summary["final_loss"]
    return card


def adapt_queries(config: AdaptQueriesConfig, *, data_dir, argv: Sequence[str] = (),
                  log=print) -> dict:
    """Trains the query tower against the passage index and exports (module docstring);
    returns (and writes to WORKDIR/summary.json and --json-out) the run's record. Raises
    `RunError` naming the flag for bad input."""
    t_start = time.perf_counter()
    data_dir = pathlib.Path(data_dir)
    articles = config.data.articles or data_dir / "wikispeedia"
    collection, questions, positives, counts = training_questions(config, articles, data_dir,
                                                                  log)

    from tt_zoo.training import loop  # noqa: PLC0415
    from tt_zoo.training.multi_task import untie_towers  # noqa: PLC0415
    from tt_zoo.training.precision import (card_record, training_copy,  # noqa: PLC0415
                                           training_policy)
    from tt_zoo.training.query_adaptation import question_arrays  # noqa: PLC0415

    train = config.training
    loop.enable_checkpointable_randomness(train.seed)
    zoo_model = loaded_two_tower(config.model.model)
    name = config.model.name or f"{zoo_model.name}_adapted"
    workdir = workdir_of(config, name)
    embeddings = passage_embeddings(config, zoo_model, collection, workdir, log)
    model = untie_towers(zoo_model.keras_model)
    temperature = train.temperature or default_temperature(model)
    teacher, distilled = teacher_targets(config, collection, questions, temperature, log)
    arrays = question_arrays(model, questions)
    batch = min(train.batch_size, len(questions))
    steps = loop.steps_for_epochs(len(questions), batch, train.epochs)
    try:
        policy = training_policy(model, config.compute.precision)
    except TtZooError as e:  # TT_ZOO_PRECISION
        raise RunError(f"--precision {config.compute.precision}: {e}") from None
    log(f"Precision: {policy} (--precision {config.compute.precision})")
    with training_copy(model, config.compute.precision) as trained:
        result, settings = train_query_tower(
            config, trained, embeddings, positives, temperature, arrays, batch, steps, workdir,
            counts, zoo_model, len(collection), log, teacher=teacher, distilled=distilled)
    summary = {"steps_done": result.steps_done, "resumed_from": result.resumed_from,
               "train_wall_time_s": round(result.total_wall_time_s, 1),
               "final_loss": None if result.final_loss is None else round(result.final_loss, 4),
               **card_record(policy)}
    if distilled is not None:
        summary["distillation"] = distilled
    card = make_card(config, zoo_model, name, summary, counts,
                     recorded_command(COMMAND, argv), len(collection))
    if config.output.export:
        from tt_zoo.artifacts.export import export_saved_model  # noqa: PLC0415
        export_saved_model(model, config.output.export, card.to_dict())
        log(f"Exported the query-adapted model to {config.output.export}")
    output = {"name": name, "base_model": zoo_model.name, "workdir": str(workdir),
              "questions": counts, "passages": len(collection), "settings": settings,
              "train": summary, "export": config.output.export, "argv": list(argv),
              RUN_CONFIG_KEY: config.to_dict(),
              "wall_seconds": round(time.perf_counter() - t_start, 1)}
    from tt_zoo.atomic_io import write_json  # noqa: PLC0415
    write_json(workdir / "summary.json", output)
    if config.output.json_out:
        write_json(config.output.json_out, output)
        log(f"Wrote {config.output.json_out}")
    log(f"Wall time: {output['wall_seconds']:.1f} s ({summary['steps_done']} steps of {batch})")
    return output


def train_query_tower(config, model, embeddings, positives, temperature, arrays, batch, steps,
                      workdir, counts, zoo_model, passages, log, teacher=None, distilled=None):
    """Trains `model`'s query tower against the fixed passage `embeddings` (`QueryAdapter`;
    with `teacher`, distilling it: `distilled` is its record), resuming from
    WORKDIR/checkpoints; returns (`loop.train_resumable`'s result, the run's settings: what
    resuming checks)."""
    import tensorflow as tf  # noqa: PLC0415

    from tt_zoo.training import loop  # noqa: PLC0415
    from tt_zoo.training.query_adaptation import QUERY_INPUTS, QueryAdapter  # noqa: PLC0415
    from tt_zoo.training.step_data import step_batches  # noqa: PLC0415

    train = config.training
    adapter = QueryAdapter(model, embeddings, positives, temperature=temperature,
                           train_token_embeddings=train.train_token_embeddings, teacher=teacher,
                           distill_weight=train.distill_weight if teacher is not None else 0.0)
    tf.keras.utils.set_random_seed(train.seed)
    adapter.compile(optimizer=tf.keras.optimizers.Adam(train.learning_rate))
    # builds the variables before a restore
    adapter({k: v[:batch] for k, v in arrays[QUERY_INPUTS].items()})
    settings = {"kind": "query_adaptation", "steps": steps, "batch_size": batch,
                "learning_rate": train.learning_rate, "temperature": temperature,
                "train_token_embeddings": train.train_token_embeddings, "seed": train.seed,
                "questions": counts, "passages": passages,
                "base_model": zoo_model.card.provenance.sha256}
    if distilled is not None:
        settings["distillation"] = distilled
    log(f"Training the query tower: {len(positives):,} questions, {steps} steps of {batch}, "
        f"lr {train.learning_rate:g}, tau {temperature:g}, against {passages:,} passages")
    try:
        result = loop.train_resumable(
            adapter, lambda first: step_batches(arrays, batch, seed=train.seed, start_step=first),
            steps=steps, global_batch=batch, checkpoint_dir=str(workdir / "checkpoints"),
            checkpoint_every=config.output.checkpoint_every, settings=settings,
            progress=not config.output.no_progress, log=log)
    except TtZooError as e:  # a checkpoint of other settings in the workdir
        raise RunError(str(e)) from None
    adapter.release()
    return result, settings
