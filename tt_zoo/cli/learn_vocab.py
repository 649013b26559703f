"""Learns a WordPiece vocabulary from an article corpus, so a model ships its own vocabulary.

  tt-zoo learn-vocab --input $TT_ZOO_DATA/wikispeedia --vocab-size 8192 \\
      --output runs/vocab/vocab.txt
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from tt_zoo import numbers
from tt_zoo.cli import parsing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True,
                   help="any article source tt_zoo reads (Wikispeedia folder, XML dump, JSONL "
                        "of articles, HF dataset)")
    p.add_argument("--vocab-size", type=numbers.count(low=16, high=1_000_000), default=8192,
                   help="target number of WordPiece tokens (the result may be a little smaller)")
    p.add_argument("--output", required=True, help="vocab.txt to write (atomically)")
    p.add_argument("--sample", type=numbers.fraction(low_open=True), default=0.25,
                   help="fraction of paragraphs to learn from (seeded)")
    p.add_argument("--seed", type=numbers.SEED, default=0, help="seed of the paragraph sample")


def parse_args(argv=None):
    p = parsing.command_parser("learn-vocab", __doc__, add_arguments)
    args = p.parse_args(argv)
    return args


def main(argv=None):
    args = parse_args(argv)
    from tt_zoo.data.article_sources import read_articles  # noqa: PLC0415
    from tt_zoo.data.text import learn_wordpiece_vocab, save_vocab  # noqa: PLC0415 (TensorFlow)

    rng = random.Random(args.seed)
    start = time.time()
    paragraphs = [p for article in read_articles(args.input)
                  for p in (article.title,) + article.paragraphs if rng.random() < args.sample]
    print(f"learning a {args.vocab_size}-token vocabulary from {len(paragraphs):,} paragraphs")
    tokens = learn_wordpiece_vocab(paragraphs, args.vocab_size)
    save_vocab(tokens, args.output)
    print(f"wrote {len(tokens):,} tokens to {args.output} in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
