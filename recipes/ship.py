"""`tt-zoo ship` (`tt_zoo.cli.ship`): ship an export (any kind) with its measured tables.

    python recipes/ship.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.ship import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
