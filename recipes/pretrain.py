"""`tt-zoo pretrain` (`tt_zoo.cli.pretrain`), at the path the design card and README name.

    python recipes/pretrain.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.pretrain import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
