"""``python -m faithbench.benchmark.cli``: the same as the ``faithbench`` command."""

import sys

from faithbench.benchmark.cli import main

sys.exit(main())
