"""`python -m tt_zoo.cli COMMAND [ARGS]`, the same as `tt-zoo COMMAND [ARGS]`."""

import sys

from tt_zoo.cli import main

sys.exit(main())
