"""`tt-zoo import-checkpoint` (`tt_zoo.cli.import_checkpoint`), at the path the design card and README name.

    python recipes/import_checkpoint.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.import_checkpoint import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
