"""The files here are deliberately broken plugins, loaded by path from
tests/test_plugins.py. Keep pytest (and its --doctest-modules) from importing them."""

collect_ignore_glob = ["*.py"]
