"""The one place layering is checked. The five packages are this checkout's folders,
installed under the one import package ``faithbench``, and imports go one way: core <- tasks, metrics,
submissions <- session <- runner/verbs/CLI; the top layer sees tasks only through the
``Task`` protocol and the registry; the leaderboard needs only records, stats and the
shared name lists (no torch); a submission sees faithbench only through
``faithbench.api``, like an outsider."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("benchmark", "tasks", "metrics", "submissions", "leaderboard")


@pytest.mark.parametrize("name", PACKAGES)
def test_package_is_this_checkout(name):
    module = importlib.import_module(f"faithbench.{name}")
    assert Path(module.__file__).resolve().parent == REPO / name


@pytest.mark.parametrize("name", PACKAGES)
def test_no_folder_is_imported_under_its_own_name(name):
    """Code, tests and doctests import ``faithbench.<folder>``; the bare folder name
    would load a second copy of every module (two registries, two classes)."""
    for path in REPO.glob("*/**/*.py"):
        if path.name == "legacy_import.py":  # the plugin that tests the old name on purpose
            continue
        if path.parts[len(REPO.parts)] in (*PACKAGES, "faithbench", "tests", "benchmarks"):
            names = _imports(path, strip=False)
            assert not {n for n in names if n.split(".")[0] == name}, f"{path} imports {name}"


def _imports(path: Path, *, strip: bool = True) -> set[str]:
    """Every module ``path`` imports (``from faithbench import x`` counts as
    ``faithbench.x``); with ``strip``, faithbench's own without the prefix, so that
    layers read as folder names (``benchmark.core``, ``tasks``)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            if node.module == "faithbench":
                out |= {f"faithbench.{a.name}" for a in node.names}
            else:
                out.add(node.module)
    if strip:
        out = {n.removeprefix("faithbench.") if n.startswith("faithbench.") else n for n in out}
    return out


def _ours(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in PACKAGES or n == "api"}


def _files(folder: str):
    return sorted((REPO / folder).rglob("*.py"))


def test_core_imports_only_core():
    for path in _files("benchmark/core"):
        bad = {n for n in _ours(_imports(path)) if not n.startswith("benchmark.core")}
        assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("folder", ["tasks", "metrics"])
def test_middle_layer_imports_core_only(folder):
    for path in _files(folder):
        bad = {n for n in _ours(_imports(path)) if not n.startswith(("benchmark.core", folder))}
        assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", _files("submissions"), ids=lambda p: p.name)
def test_submissions_import_only_the_public_api(path):
    """The registry file may also use the shared Registry; no submission may import
    stdlib ``random`` (the ``rng`` argument is the only randomness allowed)."""
    allowed = {"api"} | (
        {"benchmark.core.registry", "benchmark.core.params", "submissions"}
        if path.name == "__init__.py" else set())
    names = _imports(path)
    bad = {n for n in _ours(names) if n not in allowed}
    assert not bad, f"{path.name} imports {bad}"
    assert "random" not in names, f"{path.name} imports stdlib random"


def test_top_layer_sees_no_concrete_task():
    """Runner, session, verbs and CLI reach tasks only through the registry (``tasks``)
    and the protocol in ``benchmark.core.api``: no ``tasks.<module>`` import."""
    for path in sorted((REPO / "benchmark").glob("*.py")):
        bad = {n for n in _imports(path) if n.startswith("tasks.")}
        assert not bad, f"{path} imports {bad}"


def test_leaderboard_needs_only_records_stats_and_names():
    # core.gate: the model reports records carry (what made a model, its gate check)
    allowed = ("benchmark.core.records", "benchmark.core.stats", "benchmark.core.files",
               "benchmark.core.errors", "benchmark.core.names", "benchmark.core.ids",
               "benchmark.core.gate", "leaderboard")
    for path in _files("leaderboard"):
        for name in _imports(path):
            top = name.split(".")[0]
            ok = (name.startswith(allowed) or top in ("tabulate", "numpy", "__future__")
                  or (top in sys.stdlib_module_names and top not in PACKAGES))
            assert ok, f"{path.name} imports {name}"


def test_the_leaderboard_loads_no_torch():
    """Ranking a results folder needs numpy, not torch: checked in a fresh process,
    whose modules are exactly what the imports pulled in."""
    code = ("import sys, faithbench.leaderboard, faithbench.leaderboard.render, "
            "faithbench.leaderboard.compare; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'captum', "
            "'transformers', 'datasets')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout
