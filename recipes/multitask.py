"""`tt-zoo multitask` (`tt_zoo.cli.multitask`): one retriever trained on several tasks
(Maillard et al. 2021).

    python recipes/multitask.py --help
"""

import sys

from tt_zoo.cli import exit_code
from tt_zoo.cli.multitask import main

if __name__ == "__main__":
    sys.exit(exit_code(main()))
