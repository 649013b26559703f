"""``python -m tt_zoo.cli.reproduce``: `tt-zoo reproduce` (`tt_zoo.cli.reproduce.main`)."""

import sys

from tt_zoo.cli.reproduce import main

sys.exit(main())
