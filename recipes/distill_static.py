"""`tt-zoo distill-static` (`tt_zoo.cli.distill_static`), at the path the design card and README name.

    python recipes/distill_static.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.distill_static import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
