"""`tt-zoo mine-negatives` (`tt_zoo.cli.mine_negatives`).

    python recipes/mine_negatives.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.mine_negatives import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
