"""`tt-zoo evaluate` (`tt_zoo.cli.evaluate`), at the path the design card and README name.

    python recipes/evaluate.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
