"""Issue 47: one text searcher for every kind (`tt_zoo.retrieval.passage_index`): fusion with
hand-worked scores, saving a ColBERT or HDCT index, and `tt-zoo search --model` of each kind.
(`test_shipped_models` searches every shipped model by name.)"""

import json

import numpy as np
import pytest

import tt_zoo
from tt_zoo import cli
from tt_zoo.retrieval.passage_index import PassageIndex
from tt_zoo.retrieval.search import Hit, SearchResult, TextSearcher

COLBERT = "colbert_ict_bfs_wlp_crop_span_qgen_64"
HDCT = "hdct_ict_bfs_wlp_crop_span_qgen"
TITLES = ["Penicillin", "Paris", "Seine", "Water"]
PASSAGES = ["Alexander Fleming discovered penicillin in 1928.", "Paris is the capital of France.",
            "The Seine flows through Paris.", "Water boils at 100 degrees Celsius."]
IDS = ["a", "b", "c", "d"]


class FixedSearcher:
    """A Searcher of strings over IDS that answers every query with the same ranked rows."""

    def __init__(self, rows, scores):
        self.ids, self.rows, self.scores = tuple(IDS), rows, scores

    def __len__(self):
        return len(self.ids)

    def search(self, queries, k):
        rows = [self.rows[:k] + [-1] * (k - len(self.rows[:k]))] * len(queries)
        scores = [self.scores[:k] + [0.0] * (k - len(self.scores[:k]))] * len(queries)
        return SearchResult.from_rows(rows, scores, self.ids)


def fixed(rows, scores):
    return PassageIndex(FixedSearcher(rows, scores), PASSAGES, TITLES, description="fixed")


def test_fuse_hand_worked_convex_and_rrf_scores():
    # first ranks a 3.0, b 2.0, c 1.0; second ranks b 0.9, c 0.5, a 0.1 (d in neither).
    first, second = fixed([0, 1, 2], [3.0, 2.0, 1.0]), fixed([1, 2, 0], [0.9, 0.5, 0.1])
    # min-max over each top 3: first a 1, b 0.5, c 0; second b 1, c 0.5, a 0.
    # convex, weight 0.7: a 0.7 * 1 = 0.7; b 0.7 * 0.5 + 0.3 * 1 = 0.65; c 0.3 * 0.5 = 0.15.
    fused = tt_zoo.fuse(first, second, weight=0.7)
    assert isinstance(fused, TextSearcher) and fused.description == \
        "convex(fixed, fixed, weight 0.7)"
    hits = fused.search("any question", k=4)
    assert [h.id for h in hits] == ["a", "b", "c"] and all(type(h) is Hit for h in hits)
    np.testing.assert_allclose([h.score for h in hits], [0.7, 0.65, 0.15], atol=1e-6)
    assert hits[0].title == "Penicillin" and hits[0].text == PASSAGES[0]
    # RRF (k = 60): b 1/62 + 1/61 = 0.032522; a 1/61 + 1/63 = 0.032266; c 1/63 + 1/62 = 0.032002.
    hits = tt_zoo.fuse(first, second).search_batch(["q1", "q2"], k=3)
    assert [[h.id for h in row] for row in hits] == [["b", "a", "c"]] * 2
    np.testing.assert_allclose([h.score for h in hits[0]], [0.032522, 0.032266, 0.032002],
                               atol=1e-6)
    # A fusion fuses again (the same passages); no queries, no hits.
    assert tt_zoo.fuse(fused, first, method="rrf").search_batch([], k=2) == []


def test_fuse_fills_a_missing_candidates_score_from_the_deeper_list():
    first, second = fixed([0, 1, 2], [3.0, 2.0, 1.0]), fixed([1, 2, 0], [0.9, 0.5, 0.1])
    # depth 2: first a 1, b 0, and c (1 - 2) / 1 = -1 from its third; second b 1, c 0, and a
    # (0.1 - 0.5) / 0.4 = -1. Weight 0.7: a 0.7 - 0.3 = 0.4; b 0.3; c -0.7 (the floor: 0.7, 0.3, 0).
    fused = tt_zoo.fuse(first, second, weight=0.7, depth=2, fill_depth=3)
    hits = fused.search("any question", k=3)
    assert [h.id for h in hits] == ["a", "b", "c"]
    np.testing.assert_allclose([h.score for h in hits], [0.4, 0.3, -0.7], atol=1e-6)
    assert fused.settings["fill_depth"] == 3
    floor = tt_zoo.fuse(first, second, weight=0.7, depth=2).search("any question", k=3)
    np.testing.assert_allclose([h.score for h in floor], [0.7, 0.3, 0.0], atol=1e-6)


def test_fuse_refuses_what_it_cannot_fuse():
    a = fixed([0], [1.0])
    with pytest.raises(ValueError, match="convex combination needs weight"):
        tt_zoo.fuse(a, a, method="convex")
    with pytest.raises(ValueError, match="takes no weight"):
        tt_zoo.fuse(a, a, method="rrf", weight=0.5)
    with pytest.raises(ValueError, match=r"weight must be a number in \[0, 1\]"):
        tt_zoo.fuse(a, a, weight=1.5)
    with pytest.raises(TypeError, match="text searcher over passages"):
        tt_zoo.fuse(a, FixedSearcher([0], [1.0]), weight=0.5)
    other = PassageIndex(FixedSearcher([0], [1.0]), PASSAGES[::-1], TITLES)
    with pytest.raises(ValueError, match="index different passages"):
        tt_zoo.fuse(a, other, weight=0.5)
    with pytest.raises(TypeError, match="cannot be saved"):  # a fusion saves when its parts do
        tt_zoo.fuse(a, a).save("anywhere")


@pytest.fixture(scope="module")
def colbert():
    return tt_zoo.load(COLBERT)


@pytest.fixture(scope="module")
def hdct():
    return tt_zoo.load(HDCT)


def test_colbert_indexes_in_its_cards_best_mode_and_fuses_with_bm25(colbert):
    assert colbert.best_mode == "rerank"  # its card: re-ranking BM25@100 beats the token index
    index = colbert.index(PASSAGES, titles=TITLES, ids=IDS)
    assert index.settings == {"kind": "late_interaction", "mode": "rerank", "depth": 100,
                              "first_stage": {"kind": "bm25"}}
    reranked = index.search("what river flows through paris?", k=3)
    # BM25 finds the two Paris passages; MaxSim orders them, the Seine first.
    assert [h.id for h in reranked] == ["c", "b"]
    scores = colbert.score(["what river flows through paris?"], PASSAGES[1:3], titles=TITLES[1:3])
    np.testing.assert_allclose([h.score for h in reranked], scores[0, ::-1], rtol=1e-3)
    tokens = colbert.index(PASSAGES, titles=TITLES, ids=IDS, mode="token_index")
    assert [h.id for h in tokens.search("what river flows through paris?", k=2)] == ["c", "b"]
    fused = tt_zoo.fuse(tt_zoo.bm25_index(PASSAGES, titles=TITLES, ids=IDS), index, weight=0.7)
    assert fused.search("who discovered penicillin?", k=1)[0].id == "a"


def test_colbert_and_hdct_indexes_save_and_load_with_their_model(colbert, hdct, tmp_path):
    queries = ["who discovered penicillin?", "what river flows through paris?"]
    for name, model, options in ((COLBERT, colbert, {}), (COLBERT, colbert,
                                                          {"mode": "token_index"}),
                                 (HDCT, hdct, {})):
        index = model.index(PASSAGES, titles=TITLES, ids=IDS, **options)
        path = index.save(tmp_path / f"{name}{len(options)}")
        again = model.load_index(path)
        assert again.description == index.description and again.settings == index.settings
        assert again.search_batch(queries, k=3) == index.search_batch(queries, k=3)
    with pytest.raises(tt_zoo.ArtifactError, match=f"built by '{HDCT}', not by the model "
                                                   f"loading it, '{COLBERT}'"):
        colbert.load_index(path)
    (path / "passages.jsonl").write_text("{}\n")
    with pytest.raises(tt_zoo.ArtifactError, match="passages.jsonl"):
        hdct.load_index(path)


def test_hdct_loads_by_name_with_the_weighter_load_term_weighter_gives(hdct):
    weighter = tt_zoo.load_term_weighter(HDCT)
    assert hdct.weigh(TITLES, PASSAGES) == weighter.weigh(TITLES, PASSAGES)
    index = hdct.index(PASSAGES, titles=TITLES)
    assert index.description == "HDCT-weighted BM25 (k1 10, b 0.75)"
    assert [h.id for h in index.search("who discovered penicillin?", k=2)] == ["0"]


@pytest.fixture
def passages_jsonl(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_text("".join(json.dumps({"id": i, "title": t, "text": p}) + "\n"
                            for i, t, p in zip(IDS, TITLES, PASSAGES)))
    return path


@pytest.mark.parametrize("name,label", [(COLBERT, f"{COLBERT} re-ranking BM25@100"),
                                        (HDCT, "HDCT-weighted BM25 (k1 10, b 0.75)")])
def test_search_command_with_a_colbert_or_hdct_model(name, label, colbert, hdct, passages_jsonl,
                                                     tmp_path, capsys, monkeypatch):
    """`tt-zoo search --model NAME` of each kind beside two-tower (`test_cli_zoo_commands`
    runs a two-tower model), in-process with the models loaded above."""
    loaded = {COLBERT: colbert, HDCT: hdct}
    monkeypatch.setattr(tt_zoo, "load", loaded.__getitem__)
    out = tmp_path / "hits.jsonl"
    code = cli.main(["search", str(passages_jsonl), "--model", name, "--query",
                     "who discovered penicillin?", "-k", "2", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0 and f"passage ({label})" in printed
    assert printed.splitlines()[2].split()[2:4] == ["a", "Penicillin"], printed
    code = cli.main(["search", str(passages_jsonl), "--model", name, "--query",
                     "what river flows through paris?", "-o", str(out), "--no-progress"])
    assert code == 0
    hits = json.loads(out.read_text())["hits"]
    assert hits[0]["id"] == "c" and hits[0]["title"] == "Seine"
    expected = loaded[name].index(PASSAGES, titles=TITLES, ids=IDS).search(
        "what river flows through paris?", k=10)
    assert [h["id"] for h in hits] == [h.id for h in expected]
    if name == HDCT:
        capsys.readouterr()
        assert cli.main(["search", str(passages_jsonl), "--model", name, "--mode", "rerank",
                         "--query", "q", "--no-progress"]) != 0
        assert "--mode is for late-interaction" in capsys.readouterr().err
