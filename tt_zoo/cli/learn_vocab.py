"""Learns a WordPiece vocabulary from an article corpus, so a model ships its own vocabulary.

Usage:
  python recipes/learn_vocab.py --input $TT_ZOO_DATA/wikispeedia --vocab-size 8192 \
      --output saved_models/vocab/vocab.txt
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from tt_zoo.data.article_sources import read_articles
from tt_zoo.data.text import learn_wordpiece_vocab, save_vocab


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="any source read_articles accepts")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--output", required=True, help="vocab.txt to write (atomically)")
    parser.add_argument("--sample", type=float, default=0.25,
                        help="fraction of paragraphs to learn from (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 0 < args.sample <= 1:
        sys.exit(f"--sample must be in (0, 1], got {args.sample}")

    rng = random.Random(args.seed)
    start = time.time()
    paragraphs = [p for article in read_articles(args.input)
                  for p in (article.title,) + article.paragraphs if rng.random() < args.sample]
    print(f"learning a {args.vocab_size}-token vocabulary from {len(paragraphs):,} paragraphs")
    tokens = learn_wordpiece_vocab(paragraphs, args.vocab_size)
    save_vocab(tokens, args.output)
    print(f"wrote {len(tokens):,} tokens to {args.output} in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
