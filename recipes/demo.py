"""`tt-zoo demo` (`tt_zoo.cli.demo`), at the path the design card and README name.

    python recipes/demo.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.demo import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
