"""`tt-zoo odqa` (`tt_zoo.cli.odqa`): open-domain QA answer recall of models and BM25.

    python recipes/odqa.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.odqa import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
