"""`tt-zoo multitask` (tt_zoo.cli.multitask; Maillard et al. 2021): a tiny model trained on two
task files and exported with its tasks and markers on the card; markers at query time
(`ZooModel.encode_queries`); bad --task / --weight / --few-shot values and malformed task files
named; the task cache; repeatable run-config flags."""

import json

import numpy as np
import pytest

from helpers import tiny_colbert, tiny_vocab
from tt_zoo import cli
from tt_zoo.cli import multitask
from tt_zoo.data.tasks import Document, Task, TaskExample
from tt_zoo.artifacts.card_rendering import render_card
from tt_zoo.artifacts.model_card import ModelCard, MultiTaskRun, TaskRecord
from tt_zoo.training import multi_task_tasks

TINY_MODEL = ["--init", "none", "--num-layers", "1", "--hidden-size", "16",
              "--num-attention-heads", "2", "--inner-dim", "32", "--embedding-dim", "8",
              "--query-length", "16", "--document-length", "24"]
QA = [("who discovered penicillin?", "penicillin", "alexander fleming discovered penicillin."),
      ("what is the capital of france?", "paris", "paris is the capital of france."),
      ("what river flows through paris?", "seine", "the seine flows through paris."),
      ("when does water boil?", "water", "water boils at 100 degrees."),
      ("where is the seine?", "seine", "the seine is in france.")]
PAIRS = [("the cat", "a cat is the cat"), ("the dog", "a dog"), ("paris city", "the city of paris"),
         ("london city", "london is a city"), ("the river", "the river flows"),
         ("water at", "water boils at")]


def write_lines(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records), encoding="utf-8")
    return path


@pytest.fixture
def task_files(tmp_path):
    """a.jsonl: 5 QA examples with a confounder each; b.jsonl: 6 pairs (bare strings)."""
    london = {"title": "london", "text": "london is a city in england."}
    a = write_lines(tmp_path / "a.jsonl", [
        {"query": q, "positives": [{"title": t, "text": x}], "negatives": [london]}
        for q, t, x in QA])
    b = write_lines(tmp_path / "b.jsonl", [{"query": q, "positives": [d]} for q, d in PAIRS])
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n", encoding="utf-8")
    return a, b, vocab


def test_trains_two_task_files_exports_the_tasks_and_the_markers(task_files, tmp_path,
                                                                 monkeypatch):
    import tt_zoo
    from tt_zoo.evaluation import odqa

    a, b, vocab = task_files
    # --eval on a four-passage stand-in for the ODQA validation benchmark (the real one takes
    # minutes): the model's row and BM25's go on the card.
    collection = odqa.Collection(["p0", "p1", "p2", "p3"], ["penicillin", "paris", "seine", "x"],
                                 ["alexander fleming discovered penicillin.",
                                  "paris is the capital of france.",
                                  "the seine flows through paris.", "water boils at degrees."])
    questions = odqa.QuestionSet("webquestions-val", (
        odqa.OdqaQuestion("0", "who discovered penicillin?", ("fleming",)),
        odqa.OdqaQuestion("1", "what is the capital of france?", ("paris",))))
    bench = odqa.Benchmark(collection, [odqa.answerable(questions,
                                                        odqa.AnswerIndex(collection.texts))],
                           "tiny", 100)
    monkeypatch.setattr(odqa, "validation_benchmark", lambda *args, **kwargs: bench)
    export = tmp_path / "model"
    argv = [*TINY_MODEL, "--vocab", str(vocab), "--task", f"jsonl:{a}",
            "--task", f"jsonl:{b}:self_supervised", "--markers", "--weight", "b=2",
            "--few-shot", "a=3", "--steps", "3", "--batch-size", "4", "--learning-rate", "1e-2",
            "--workdir", str(tmp_path / "work"), "--export", str(export), "--eval",
            "--json-out", str(tmp_path / "out.json"), "--no-progress"]
    result = multitask.main(argv)

    assert result["train"]["steps_done"] == 3
    # Weights: W times the union's share: a 3 examples x 1, b 6 x 2 -> 3/15, 12/15.
    assert [(t["name"], t["examples"], t["weight"]) for t in result["tasks"]] == [
        ("a", 3, 0.2), ("b", 6, 0.8)]
    assert json.loads((tmp_path / "out.json").read_text())["tasks"] == result["tasks"]
    assert (tmp_path / "work" / "summary.json").is_file()

    card = ModelCard.from_dict(json.loads((export / "metadata.json").read_text()))
    run = card.training.multi_task
    assert [(t.name, t.task_class, t.examples, t.weight) for t in run.tasks] == [
        ("a", "qa", 3, 0.2), ("b", "self_supervised", 6, 0.8)]
    assert run.markers == {"qa": "ttzootaskqa", "self_supervised": "ttzootaskselfsupervised"}
    assert run.batching == "mixed" and run.tasks[0].stats["subsample"]["of"] == 5
    assert card.architecture.task_markers == run.markers
    assert card.architecture.default_task_class == "qa"
    assert card.training.train_steps == 3 and card.training.run_config["tasks"]["task"] == [
        f"jsonl:{a}", f"jsonl:{b}:self_supervised"]
    (table, values), = card.evaluation.metrics.items()
    assert "ODQA answer recall after multi-task training" in table
    assert set(values) == {"none_8_multitask", "BM25"} and values["BM25"]["R@1"] == 100.0
    text = (export / "MODEL_CARD.md").read_text()
    assert "## Tasks" in text and "| a | qa | 3 | 0.2 |" in text
    assert "| b | self_supervised | 6 | 0.8 |" in text

    # The markers round-trip: the loaded export's vocabulary holds them, and its
    # encode_queries prepends them (the default class's when none is named).
    loaded = tt_zoo.load(str(export))
    assert loaded.keras_model.query_preprocessor.vocabulary[-2:] == [
        "ttzootaskqa", "ttzootaskselfsupervised"]
    plain = loaded.keras_model.encode_queries  # no markers added
    marked = plain(["ttzootaskqa who discovered penicillin?"])
    np.testing.assert_allclose(
        loaded.encode_queries(["who discovered penicillin?"], task_class="qa"), marked,
        atol=1e-6)
    np.testing.assert_allclose(loaded.encode_queries(["who discovered penicillin?"]), marked,
                               atol=1e-6)
    np.testing.assert_allclose(
        loaded.encode_queries("the cat", task_class="self_supervised"),
        plain("ttzootaskselfsupervised the cat"), atol=1e-6)
    assert np.abs(marked - plain(["who discovered penicillin?"])).max() > 1e-5  # it mattered
    with pytest.raises(ValueError, match=r"no task marker for task class 'fact_checking': it "
                                         r"has markers for \['qa', 'self_supervised'\]"):
        loaded.encode_queries(["q"], task_class="fact_checking")

    # The same command again resumes at the end: nothing more is trained.
    again = multitask.main([*argv[:argv.index("--export")], "--no-progress"])
    assert again["train"]["resumed_from"] == 3 and again["train"]["steps_done"] == 3


BOW_MODEL = ["--init", "none", "--encoder", "bow_mlp", "--embedding-dim", "8",
             "--query-length", "16", "--document-length", "24"]


def test_the_library_entry_point_runs_a_config_without_the_command(task_files, tmp_path):
    """`tt_zoo.training.multitask(config)` as a notebook calls it: the typed run config the
    command builds, no flags, logs to a callable; a setting it cannot run raises
    `MultitaskError` (the command exits with it), never SystemExit."""
    from tt_zoo.training import MultitaskError
    from tt_zoo.training import multitask as run_multitask

    a, b, vocab = task_files
    config = multitask.MultitaskConfig.from_dict({
        "model": {"init": "none", "encoder": "bow_mlp", "embedding_dim": 8, "vocab": str(vocab)},
        "lengths": {"query_length": 16, "document_length": 24},
        "tasks": {"task": [f"jsonl:{a}", f"jsonl:{b}:self_supervised"], "markers": True},
        "training": {"steps": 2, "batch_size": 4, "learning_rate": 0.05},
        "output": {"workdir": str(tmp_path / "work"), "no_progress": True}})
    logs = []
    record = run_multitask(config, log=logs.append)
    assert record["name"] == "none_8_multitask" and record["train"]["steps_done"] == 2
    assert record["task_classes"] == {"a": "qa", "b": "self_supervised"}
    assert record["markers"] == {"qa": "ttzootaskqa", "self_supervised": "ttzootaskselfsupervised"}
    assert record[multitask.RUN_CONFIG_KEY] == config.to_dict() and record["export"] is None
    assert json.loads((tmp_path / "work" / "summary.json").read_text())["tasks"] == record["tasks"]
    assert any(line.startswith("Task markers:") for line in logs), logs

    # A named task reads the shared data folder, which a library call must name.
    named = multitask.MultitaskConfig.from_dict({"model": {"init": "none"},
                                                 "tasks": {"task": ["reqa"]}})
    with pytest.raises(MultitaskError, match="data_dir: the named tasks"):
        run_multitask(named)


# From an export (~21 s) is slow: the command routes the same from scratch; a per-class export
# (BoW-MLP) is tests/test_multi_task.py::test_a_per_class_model_exports_its_routing and the
# per-class BERT towers test_task_query_towers_start_as_the_shared_tower.
@pytest.mark.parametrize("init", [pytest.param("export", marks=pytest.mark.slow), "none"])
def test_per_class_query_towers_route_the_export_by_task_class(init, task_files, tmp_path,
                                                              exported):
    """--query-towers per-class with --task-class (Maillard et al. 2021, Sec. 4.3): from an
    export (the tiny BERT, --init PATH) or from scratch (a BoW-MLP, --init none), two task files
    of class qa, one made sentence_qa; the export routes each class to its own query tower."""
    import tt_zoo
    from tt_zoo.data.tasks import with_marker
    from tt_zoo.modeling.routed_tower import TaskRoutedTower

    a, _, vocab = task_files
    c = write_lines(tmp_path / "c.jsonl", [
        {"query": f"the {w} ?", "positives": [{"title": w, "text": f"{w} is a word."}]}
        for w in ("cat", "dog", "river", "water")])
    model = ["--init", str(exported.path)] if init == "export" else [*BOW_MODEL,
                                                                     "--vocab", str(vocab)]
    export = tmp_path / "model"
    argv = [*model, "--task", f"jsonl:{a}", "--task", f"jsonl:{c}", "--task-class",
            "c=sentence_qa", "--markers", "--query-towers", "per-class", "--steps", "2",
            "--batch-size", "4", "--learning-rate", "5e-2", "--workdir", str(tmp_path / "work"),
            "--export", str(export), "--no-progress"]
    result = multitask.main(argv)
    assert result["query_towers"] == "per-class"
    assert result["task_classes"] == {"a": "qa", "c": "sentence_qa"}
    assert result["train"]["settings"]["query_towers"] == "per-class"
    assert result["tasks"][1]["stats"]["task_class"] == "sentence_qa (--task-class; built as qa)"
    assert result[multitask.RUN_CONFIG_KEY]["tasks"]["query_towers"] == "per-class"
    assert list(result[multitask.RUN_CONFIG_KEY]["tasks"]["task_class"]) == ["c=sentence_qa"]

    card = ModelCard.from_dict(json.loads((export / "metadata.json").read_text()))
    run = card.training.multi_task
    assert run.query_towers == "per-class"
    assert [(t.name, t.task_class) for t in run.tasks] == [("a", "qa"), ("c", "sentence_qa")]
    text = (export / "MODEL_CARD.md").read_text()
    assert ("`ttzootaskqa` → the qa tower (a); `ttzootasksentenceqa` → the sentence_qa tower "
            "(c); a query without a marker → the qa tower.") in text

    loaded = tt_zoo.load(str(export))
    tower = loaded.keras_model.query_tower
    assert isinstance(tower, TaskRoutedTower)
    assert tower.task_classes == ["qa", "sentence_qa"]
    expected_tower = "BertTower" if init == "export" else "BowMlpTower"
    assert {type(t).__name__ for t in tower.towers} == {expected_tower}
    queries = ["who discovered penicillin?", "the cat ?"]
    plain = loaded.keras_model.encode_queries
    by_class = {k: loaded.encode_queries(queries, task_class=k) for k in ("qa", "sentence_qa")}
    for k, value in by_class.items():
        np.testing.assert_allclose(value, plain([with_marker(q, k) for q in queries]), atol=1e-6)
    assert np.abs(by_class["qa"] - by_class["sentence_qa"]).max() > 1e-4
    np.testing.assert_allclose(loaded.encode_queries(queries), by_class["qa"], atol=1e-6)

    if init == "export":
        # Trained further, a per-class model keeps its towers; --query-towers shared on it is
        # refused before training.
        with pytest.raises(SystemExit, match=r"--init .*model has one query tower per task "
                                             r"class \(qa, sentence_qa\); train it with "
                                             r"--query-towers per-class --markers"):
            multitask.main(["--init", str(export), "--task", f"jsonl:{a}", "--steps", "1",
                            "--batch-size", "4", "--workdir", str(tmp_path / "again"),
                            "--no-progress"])
        assert not (tmp_path / "again" / "checkpoints").exists()


def test_per_class_query_towers_refuse_a_colbert_init(task_files, tmp_path):
    from tt_zoo.artifacts.export import export_saved_model

    a, b, _ = task_files
    colbert = tiny_colbert()
    export_saved_model(colbert, tmp_path / "colbert", {"name": "colbert_tiny"})
    with pytest.raises(SystemExit, match=r"--query-towers per-class: with_task_query_towers: a "
                                         r"late-interaction \(ColBERT\) model"):
        multitask.main(["--init", str(tmp_path / "colbert"), "--task", f"jsonl:{a}",
                        "--task", f"jsonl:{b}:self_supervised",
                        "--markers", "--query-towers", "per-class", "--steps", "1",
                        "--workdir", str(tmp_path / "work"), "--no-progress"])


def test_untie_towers_gives_the_document_side_its_own_tower(task_files, tmp_path):
    """--untie-towers: a model sharing one tower (the CPU-scale BoW-MLP's option) trains and
    exports with two, and its card says share_towers false; a ColBERT init is refused."""
    import tt_zoo
    from helpers import tiny_model
    from tt_zoo.artifacts.export import export_saved_model

    a, _, _ = task_files
    shared = tiny_model("bow_mlp", share_towers=True)
    shared.build_by_calling()
    export_saved_model(shared, tmp_path / "shared", {
        "name": "tiny_bow", "encoder": "bow_mlp", "pretraining": "none",
        "model_options": {"share_towers": True, "pooling": "mean"}})
    export = tmp_path / "untied"
    result = multitask.main(["--init", str(tmp_path / "shared"), "--task", f"jsonl:{a}",
                             "--untie-towers", "--steps", "2", "--batch-size", "4",
                             "--learning-rate", "5e-2", "--workdir", str(tmp_path / "work"),
                             "--export", str(export), "--no-progress"])
    assert result[multitask.RUN_CONFIG_KEY]["tasks"]["untie_towers"] is True
    loaded = tt_zoo.load(str(export)).keras_model
    assert not loaded.share_towers and loaded.document_tower is not loaded.query_tower
    card = ModelCard.from_dict(json.loads((export / "metadata.json").read_text()))
    assert card.architecture.model_options == {"share_towers": False, "pooling": "mean"}
    # the two sides trained apart: the same text embeds differently as query and document
    text = ["paris is the capital of france."]
    assert np.abs(loaded.encode_queries(text) - loaded.encode_documents(text)).max() > 1e-4

    colbert = tiny_colbert()
    export_saved_model(colbert, tmp_path / "colbert", {"name": "colbert_tiny"})
    with pytest.raises(SystemExit, match=r"--untie-towers: untie_towers: a late-interaction "
                                         r"\(ColBERT\) model"):
        multitask.main(["--init", str(tmp_path / "colbert"), "--task", f"jsonl:{a}",
                        "--untie-towers", "--steps", "1", "--workdir", str(tmp_path / "cw"),
                        "--no-progress"])


def test_a_model_without_markers_encodes_queries_as_given(exported):
    from tt_zoo.zoo.loading import ZooModel

    model = ZooModel(exported.model, path=exported.path, metadata=exported.meta)
    queries = ["who discovered penicillin?", "paris"]
    np.testing.assert_allclose(model.encode_queries(queries),
                               exported.model.encode_queries(queries), atol=1e-6)
    with pytest.raises(ValueError, match="no task marker for task class 'qa': it was trained "
                                         "without task markers"):
        model.encode_queries(queries, task_class="qa")


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, message", [
    (["--task", "wikipedia"], "--task 'wikipedia': expected webquestions, curatedtrec, reqa, "
                              "lexical[:N], pairs:DIR[:MAX], jsonl:PATH[:CLASS] or distill:FILE"),
    (["--task", "csv:x.csv"], "--task 'csv:x.csv': expected webquestions"),
    (["--task", "jsonl:{a}:Fact"], "--task 'jsonl:{a}:Fact': CLASS: task class must be a "
                                   "lower-case word"),
    (["--task", "jsonl:{a}", "--task", "jsonl:{a}"], "another --task is also named 'a'"),
    (["--task", "jsonl:{a}", "--weight", "c=2"],
     "--weight 'c=2': no task named 'c' (the tasks given with --task: a)"),
    (["--task", "jsonl:{a}", "--weight", "a"], "--weight 'a': expected NAME=W, W a positive"),
    (["--task", "jsonl:{a}", "--weight", "a=-1"], "--weight 'a=-1': expected NAME=W"),
    (["--task", "jsonl:{a}", "--weight", "a=1", "--weight", "a=2"],
     "--weight 'a=2': task 'a' is given twice"),
    (["--task", "jsonl:{a}", "--few-shot", "a=0"],
     "--few-shot 'a=0': expected NAME=N, N a positive number of examples"),
    (["--task", "jsonl:{a}", "--few-shot", "b=5"], "--few-shot 'b=5': no task named 'b'"),
    (["--task", "jsonl:{a}", "--positives", "0"], "argument --positives: must be a whole number from 1 to 2147483647 (got '0')"),
    (["--task", "jsonl:{tmp}/missing.jsonl"], "missing.jsonl does not exist"),
    (["--task", "pairs:{tmp}:x"], "MAX must be a positive number of pairs (got 'x')"),
    (["--task", "lexical:0"], "--task 'lexical:0': lexical:N needs N, a positive number of "
                              "queries (got '0')"),
    (["--task", "jsonl:{a}", "--remine-with", "m"],
     "--remine-with re-mines the confounders of the tasks over Wikispeedia"),
    ([], "give at least one --task SPEC"),
    (["--task", "jsonl:{a}", "--task-class", "c=qa"],
     "--task-class 'c=qa': no task named 'c' (the tasks given with --task: a)"),
    (["--task", "jsonl:{a}", "--task-class", "a=Sentence"],
     "--task-class 'a=Sentence': expected NAME=CLASS, CLASS a lower-case word such as qa or "
     "sentence_qa"),
    (["--task", "jsonl:{a}", "--task-class", "a=qa", "--task-class", "a=x"],
     "--task-class 'a=x': task 'a' is given twice"),
    (["--task", "jsonl:{a}", "--query-towers", "both"],
     "argument --query-towers: invalid choice: 'both'"),
    (["--task", "jsonl:{a}", "--task", "jsonl:{tmp}/b.jsonl:self_supervised",
      "--query-towers", "per-class"],
     "--query-towers per-class picks each query's tower by its task class's marker word: give "
     "--markers too"),
    (["--task", "jsonl:{a}", "--task", "jsonl:{tmp}/b.jsonl", "--markers",
      "--query-towers", "per-class"],
     "--query-towers per-class: every task is of class 'qa', and one query tower for one class "
     "is the shared tower (--query-towers shared); give tasks of two classes, e.g. "
     "--task-class reqa=sentence_qa"),
    (["--task", "jsonl:{a}", "--task", "jsonl:{tmp}/b.jsonl:self_supervised", "--markers",
      "--task-class", "b=qa", "--query-towers", "per-class"], "every task is of class 'qa'"),
])
def test_bad_task_flags_are_named(flags, message, task_files, tmp_path, capsys):
    a = task_files[0]
    flags = [f.format(a=a, tmp=tmp_path) for f in flags]
    assert cli.main(["multitask", "--init", "none", "--vocab", str(task_files[2]), *flags]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message.format(a=a, tmp=tmp_path) in err, err


def test_a_malformed_task_file_names_the_flag_file_and_line(task_files, tmp_path, capsys):
    bad = write_lines(tmp_path / "bad.jsonl", [
        {"query": "q", "positives": ["p"]}, {"query": "q2", "negative": ["n"]}])
    code = cli.main(["multitask", "--init", "none", "--vocab", str(task_files[2]),
                     "--task", f"jsonl:{bad}", "--workdir", str(tmp_path / "w"),
                     "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"tt-zoo multitask: --task 'jsonl:{bad}': {bad}:2: unknown key(s) ['negative']" in err
    assert not (tmp_path / "w" / "checkpoints").exists()  # refused before any training


def test_an_export_folder_of_other_files_is_refused_before_training(task_files, tmp_path,
                                                                    capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    assert cli.main(["multitask", "--init", "none", "--vocab", str(task_files[2]),
                     "--task", f"jsonl:{task_files[0]}", "--export", str(folder)]) == 2
    assert "--export:" in capsys.readouterr().err and (folder / "notes.txt").is_file()


def test_task_specs_and_names():
    assert multi_task_tasks.parse_task_spec("reqa") == multi_task_tasks.TaskSpec("reqa", "reqa", "reqa")
    spec = multi_task_tasks.parse_task_spec("pairs:runs/pairs/ict_128/:500")
    assert (spec.kind, spec.name, spec.path, spec.max_pairs, spec.task_class) == (
        "pairs", "ict_128", "runs/pairs/ict_128/", 500, "self_supervised")
    spec = multi_task_tasks.parse_task_spec("jsonl:data/fever.jsonl.gz:fact_checking")
    assert (spec.name, spec.path, spec.task_class) == (
        "fever", "data/fever.jsonl.gz", "fact_checking")
    assert multi_task_tasks.parse_task_spec("jsonl:x/nq.jsonl").task_class == "qa"
    assert multi_task_tasks.parse_task_spec("lexical") == multi_task_tasks.TaskSpec(
        "lexical", "lexical", "lexical", num_queries=100_000)
    spec = multi_task_tasks.parse_task_spec("lexical:5000")
    assert (spec.kind, spec.name, spec.num_queries, spec.task_class) == (
        "lexical", "lexical", 5000, "qa")


def test_repeatable_flags_in_a_config_file_and_flags_replace_them(task_files, tmp_path):
    a, b, vocab = task_files
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"model": {"init": "none", "vocab": str(vocab)},
                                  "tasks": {"task": [f"jsonl:{a}", f"jsonl:{b}"],
                                            "weight": ["b=3"]}}))
    parsed = multitask.parse_args(["--config", str(config)])
    assert parsed.tasks.task == (f"jsonl:{a}", f"jsonl:{b}") and parsed.tasks.weight == ("b=3",)
    parsed = multitask.parse_args(["--config", str(config), "--task", f"jsonl:{b}",
                                   "--weight", "b=2"])
    assert parsed.tasks.task == (f"jsonl:{b}",) and parsed.tasks.weight == ("b=2",)
    assert multitask.MultitaskConfig.from_dict(json.loads(json.dumps(parsed.to_dict()))) == parsed
    config.write_text(json.dumps({"tasks": {"task": "reqa"}}))
    with pytest.raises(SystemExit):
        multitask.parse_args(["--config", str(config)])


# -- the task cache -------------------------------------------------------------------------

def test_a_built_task_is_cached_by_its_key(tmp_path):
    doc = Document("d1", "paris", "paris is the capital of france.")
    built = []

    def build():
        built.append(1)
        return Task("wq", "qa", (TaskExample("capital of france?", (doc,), (doc,), ("paris",)),),
                    knowledge_source="k", validation=("webquestions-val",),
                    stats={"questions": 3})

    logs = []
    first = multi_task_tasks.cached_task(tmp_path, "wq", {"v": 1}, build, logs.append)
    again = multi_task_tasks.cached_task(tmp_path, "wq", {"v": 1}, build, logs.append)
    assert len(built) == 1 and again == first  # read back: examples, class, source, stats
    other = multi_task_tasks.cached_task(tmp_path, "wq", {"v": 2}, build, logs.append)
    assert len(built) == 2 and other == first and "building it anew" in logs[-2]
    (tmp_path / "wq.jsonl").write_text("")  # a damaged file is built again
    multi_task_tasks.cached_task(tmp_path, "wq", {"v": 2}, build, logs.append)
    assert len(built) == 3


# -- the card (no TensorFlow) ---------------------------------------------------------------

def test_the_multi_task_record_round_trips_and_renders_its_tasks():
    meta = {"name": "mt", "task_markers": {"qa": "ttzootaskqa"}, "default_task_class": "qa",
            "multi_task": {"tasks": [
                {"name": "webquestions", "task_class": "qa", "examples": 2474, "weight": 0.25,
                 "knowledge_source": "Wikispeedia", "validation": ["webquestions-val"],
                 "negatives": "BM25 top 100", "stats": {"questions": 2834}},
                {"name": "reqa", "task_class": "qa", "examples": 7422, "weight": 0.75}],
                "markers": None, "batching": "mixed", "negatives_borrowed": 0,
                "remined_with": {"from": "bow_mlp_ict_bfs_wlp_512", "sha256": "ab"}}}
    card = ModelCard.from_dict(meta)
    assert card.to_dict() == meta  # "markers": null stays null
    run = card.training.multi_task
    assert isinstance(run, MultiTaskRun) and isinstance(run.tasks[0], TaskRecord)
    assert run.tasks[1].examples == 7422 and run.remined_with.source == "bow_mlp_ict_bfs_wlp_512"
    text = render_card(card)
    assert ("| name | class | examples | weight |\n| --- | --- | --- | --- |\n"
            "| webquestions | qa | 2,474 | 0.25 |\n| reqa | qa | 7,422 | 0.75 |") in text
    assert "Task markers: none; batches: mixed." in text
    assert "Query towers" not in text  # not recorded (cards before the field): nothing said
    assert "Confounders re-mined with bow_mlp_ict_bfs_wlp_512" in text
    shared = ModelCard.from_dict({**meta, "multi_task": {**meta["multi_task"],
                                                         "query_towers": "shared"}})
    assert "Query towers: shared (one query tower for every task)." in render_card(shared)
    per_class = ModelCard.from_dict({**meta, "multi_task": {
        **meta["multi_task"], "query_towers": "per-class",
        "markers": {"qa": "ttzootaskqa", "sentence_qa": "ttzootasksentenceqa"},
        "tasks": [{"name": "webquestions", "task_class": "qa"},
                  {"name": "reqa", "task_class": "sentence_qa"}]}})
    assert per_class.to_dict()["multi_task"]["query_towers"] == "per-class"
    assert ("Query towers: per-class (Maillard et al. 2021, Sec. 4.3): one per task class, each "
            "started from the same query tower, picked in the graph by the query's marker word: "
            "`ttzootaskqa` → the qa tower (webquestions); `ttzootasksentenceqa` → the "
            "sentence_qa tower (reqa); a query without a marker → the qa tower. One document "
            "tower for every task.") in render_card(per_class)
    assert "| task_markers | {'qa': 'ttzootaskqa'} |" in text
    # Training further keeps the markers: the vocabulary and the weights still expect them.
    later = card.fine_tuned(name="x", base_name="mt", base_path=None, steps=2, finished="now")
    assert later.architecture.task_markers == {"qa": "ttzootaskqa"}
    assert later.architecture.default_task_class == "qa"
    with pytest.raises(Exception, match="'multi_task.tasks\\[0\\].examples' must be an integer"):
        ModelCard.from_dict({"multi_task": {"tasks": [{"examples": "many"}]}})
