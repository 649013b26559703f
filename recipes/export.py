"""`tt-zoo export` (`tt_zoo.cli.export`), at the path the design card and README name.

    python recipes/export.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.export import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
