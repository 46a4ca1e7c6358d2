"""faithbench engine: the public plugin surface lives in ``benchmark.core.api``."""

__version__ = "0.1.0"
