"""`tt-zoo index-corpus` (`tt_zoo.cli.index_corpus`): a JSONL corpus to embedding shards on Beam.

    python recipes/index_corpus.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.index_corpus import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
