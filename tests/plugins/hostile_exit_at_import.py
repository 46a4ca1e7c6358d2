"""Hostile plugin: ``sys.exit(0)`` at import (``validate`` once exited 0, silently)."""

import sys

sys.exit(0)
