"""`tt-zoo encode` (`tt_zoo.cli.encode`): a file of texts to a .npy of embeddings.

    python recipes/encode.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.encode import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
