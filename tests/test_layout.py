"""The five packages are this checkout's (their names are generic on PyPI), and
imports go one way: core <- tasks, metrics, submissions <- runner/CLI; the
leaderboard needs only records and stats (and cache/errors)."""

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("benchmark", "tasks", "metrics", "submissions", "leaderboard")


@pytest.mark.parametrize("name", PACKAGES)
def test_package_is_this_checkout(name):
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve().parent == REPO / name


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _ours(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in PACKAGES}


def _files(folder: str):
    return sorted((REPO / folder).rglob("*.py"))


def test_core_imports_only_core():
    for path in _files("benchmark/core"):
        bad = {n for n in _ours(_imports(path)) if not n.startswith("benchmark.core")
               and n != "benchmark"}
        assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("folder", ["tasks", "metrics", "submissions"])
def test_middle_layer_imports_core_only(folder):
    allowed = {"tasks": ("benchmark.core", "tasks"), "metrics": ("benchmark.core", "metrics"),
               "submissions": ("benchmark.core.api", "submissions")}[folder]
    for path in _files(folder):
        bad = {n for n in _ours(_imports(path)) if not n.startswith(allowed)}
        assert not bad, f"{path} imports {bad}"


def test_leaderboard_needs_only_records_and_stats():
    allowed = ("benchmark.core.records", "benchmark.core.stats", "benchmark.core.cache",
               "benchmark.core.errors", "leaderboard")
    for path in _files("leaderboard"):
        bad = {n for n in _ours(_imports(path)) if not n.startswith(allowed)}
        assert not bad, f"{path} imports {bad}"
        assert "torch" not in _imports(path)
