"""Broken plugin: importing it raises."""

raise RuntimeError("this plugin cannot be imported")
