"""`tt-zoo search` (`tt_zoo.cli.search`): index a file of passages and query it.

    python recipes/search.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.search import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
