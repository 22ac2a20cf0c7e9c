"""`python -m runner` is the same program as the `soak` console script."""

import sys

from runner.cli import main

sys.exit(main())
