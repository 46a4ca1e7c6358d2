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

``DoctestBlocks``: the docstrings hold doctests (``>>>`` lines and their output, which
``tests/test_doctests.py`` runs) in running text, which Markdown would read as text
(``['a', 'b']`` as a link); each becomes a fenced ``pycon`` block.
"""

from __future__ import annotations

import atexit
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


def fence_doctests(text: str) -> str:
    """Fence each doctest block (a line starting ``>>>`` at the margin, up to the next
    blank line: the examples and their expected output) as ``pycon``, with a blank line
    before it; text and fenced blocks are left as they are."""
    lines = text.split("\n")
    out: list[str] = []
    fenced = False
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            fenced = not fenced
        if fenced or not lines[i].startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        if out and out[-1].strip():
            out.append("")
        out.append("```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append("```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fences the doctests of every docstring Griffe reads (see ``fence_doctests``)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
