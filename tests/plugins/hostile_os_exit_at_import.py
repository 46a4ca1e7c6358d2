"""Hostile plugin: ``os._exit(0)`` at import."""

import os

os._exit(0)
