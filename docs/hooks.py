"""The documentation build's glue: an MkDocs hook (mkdocs.yml ``hooks``) and a Griffe
extension (the python handler's ``extensions``).

``on_config``: mkdocstrings reads ``faithbench`` from a tree shaped like the installed
wheel. The repository keeps ``benchmark/``, ``tasks/``, ... beside ``faithbench/``; the wheel
maps them under it (``[tool.setuptools.package-dir]`` in pyproject.toml) and a checkout
extends ``faithbench.__path__`` at import. Griffe, reading the source without importing
it, finds only ``faithbench/`` and cannot resolve what ``faithbench.api`` re-exports
from ``faithbench.benchmark``. So, as ``.ci/typecheck`` does for mypy, a temporary
folder gets a ``faithbench/`` of symlinks laid out as package-dir says, and goes first
in the python handler's ``paths``.

``on_page_markdown``: a marker line ``<!-- faithbench-reference: NAME -->`` in a page
(the reference pages, and the erasers concept) is replaced by the section that
``docs/gen_reference.py`` generates from the code (the CLI's ``--help``, the registries'
specs, the module docstrings that are the cards, the JSON Schemas), so those pages are
never typed by hand and cannot go stale.

``DoctestBlocks``: the docstrings hold doctests (``>>>`` lines and their output, which
``tests/test_doctests.py`` runs) in running text, which Markdown would read as text
(``['a', 'b']`` as a link); each becomes a fenced ``pycon`` block.
"""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import tempfile
import tomllib
from pathlib import Path

import griffe
from mkdocs.plugins import event_priority

REPO = Path(__file__).resolve().parent.parent


def wheel_tree() -> Path:
    """A temporary folder holding ``faithbench/`` as the wheel lays it out (symlinks)."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    tree = Path(tempfile.mkdtemp(prefix="faithbench-docs-"))
    atexit.register(shutil.rmtree, tree, ignore_errors=True)
    for name, folder in sorted(package_dir.items()):  # "faithbench" sorts first
        target = tree.joinpath(*name.split("."))
        if name == "faithbench":
            target.mkdir()
            for module in (REPO / folder).glob("*.py"):
                (target / module.name).symlink_to(module)
        else:
            target.symlink_to(REPO / folder, target_is_directory=True)
    return tree


@event_priority(100)  # before mkdocstrings reads its handlers' configuration
def on_config(config):
    handlers = config.plugins["mkdocstrings"].config["handlers"]
    python = handlers.setdefault("python", {})
    python["paths"] = [str(wheel_tree()), *python.get("paths", [])]
    return config


def _gen_reference():
    """``docs/gen_reference.py`` as a module (docs/ is no package; the hook is loaded
    from its file path)."""
    spec = importlib.util.spec_from_file_location(
        "faithbench_docs_gen_reference", REPO / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen_reference()


def on_page_markdown(markdown, page, config, files):
    return GEN.expand(markdown) if GEN.MARKER.search(markdown) else markdown


# one rule for the docstrings mkdocstrings renders and for the generated cards
fence_doctests = GEN.fence_doctests


class DoctestBlocks(griffe.Extension):
    """Fences the doctests of every docstring Griffe reads (see ``fence_doctests``)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
