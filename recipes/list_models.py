"""`tt-zoo list` (`tt_zoo.cli.list_models`): the registered models, and the shipped ones' numbers.

    python recipes/list_models.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.list_models import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
