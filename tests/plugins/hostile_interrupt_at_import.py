"""Hostile plugin: raises KeyboardInterrupt at import."""

raise KeyboardInterrupt
