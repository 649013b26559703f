"""`tt-zoo train-term-weights` (`tt_zoo.cli.train_term_weights`): HDCT term weights.

    python recipes/train_term_weights.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.train_term_weights import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
