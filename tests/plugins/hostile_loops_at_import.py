"""Hostile plugin: an endless loop at import (``validate`` once hung for good)."""

while True:
    pass
