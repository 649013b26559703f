"""`tt-zoo finetune` (`tt_zoo.cli.finetune`), at the path the design card and README name.

    python recipes/finetune.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.finetune import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
