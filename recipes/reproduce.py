"""`tt-zoo reproduce` (`tt_zoo.cli.reproduce`), at the path the design card and README name.

    python recipes/reproduce.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.reproduce import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
