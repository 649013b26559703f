"""`tt-zoo learn-vocab` (`tt_zoo.cli.learn_vocab`), at the path the design card and README name.

    python recipes/learn_vocab.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.learn_vocab import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
