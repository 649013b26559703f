"""The real all-MiniLM-L6-v2 (from its registry package) imported exactly: the same token ids
and sentence vectors as sentence-transformers gives (a golden file made by the reference
library, tests/golden/reference/minilm_sentence_transformers.py), and the public quickstart's
similarities."""

import json
import pathlib
import zipfile

import numpy as np
import pytest

GOLDEN = pathlib.Path(__file__).parent / "golden" / "minilm_l6_384_sentence_transformers.json"


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    from tt_zoo.errors import TtZooError
    from tt_zoo.modeling.checkpoints import import_checkpoint
    from tt_zoo.zoo.imported import MINILM_L6, package_member

    try:
        member = package_member(MINILM_L6)
    except TtZooError as e:
        pytest.skip(f"the checkpoint package is not installed ({e})")
    folder = tmp_path_factory.mktemp("minilm")
    with zipfile.ZipFile(member) as archive:
        archive.extractall(folder)
    # Queries as long as documents: the golden texts are tokenized to 256 like the reference.
    model, origin = import_checkpoint(folder, expected_sha256=MINILM_L6.weights_sha256,
                                      query_length=256)
    return model, origin


def test_same_tokens_and_vectors_as_sentence_transformers(minilm):
    model, origin = minilm
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    texts = golden["texts"]
    assert len(texts) >= 20
    packed = model.query_preprocessor(np.array(texts))
    for text, want, ids, mask in zip(texts, golden["input_ids"],
                                     packed["input_word_ids"].numpy(),
                                     packed["input_mask"].numpy()):
        assert ids[mask == 1].tolist() == want, text
    got = model.encode_queries(texts)
    want = np.asarray(golden["vectors"], np.float32)
    cosines = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cosines.min() >= 0.9999, dict(zip(texts, cosines))
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert origin["new"] == []


def test_documents_as_title_passage_pairs_match_sentence_transformers(minilm):
    """A document is packed as the pair (title, passage), as sentence-transformers tokenizes a
    tuple; the texts hold characters BERT's lower-casing keeps and NFKC folding would change
    ("km²", "…", "λόγος"): the ids must still be the checkpoint's own."""
    model, _ = minilm
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    titles, passages = zip(*golden["pairs"])
    packed = model.document_preprocessor((np.array(titles), np.array(passages)))
    for pair, want, ids, mask in zip(golden["pairs"], golden["pair_input_ids"],
                                     packed["input_word_ids"].numpy(),
                                     packed["input_mask"].numpy()):
        assert ids[mask == 1].tolist() == want, pair
    got = model.encode_documents(list(passages), titles=list(titles))
    np.testing.assert_allclose(got, np.asarray(golden["pair_vectors"], np.float32), atol=1e-4)


def test_the_published_quickstart_similarities(minilm):
    """sentence-transformers' quickstart: 0.6660 (1-2), 0.1046 (1-3), 0.1411 (2-3)."""
    model, _ = minilm
    e = model.encode_queries(["The weather is lovely today.", "It's so sunny outside!",
                              "He drove to the stadium."])
    similarity = e @ e.T
    np.testing.assert_allclose([similarity[0, 1], similarity[0, 2], similarity[1, 2]],
                               [0.6660, 0.1046, 0.1411], atol=5e-5)
