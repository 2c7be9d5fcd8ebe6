"""`python -m kscperf` is `run-benchmarks`."""

import sys

from kscperf.cli import main

sys.exit(main())
