"""`tt-zoo make-pairs` (`tt_zoo.cli.make_pairs`), at the path the design card and README name.

    python recipes/make_pairs.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.make_pairs import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
