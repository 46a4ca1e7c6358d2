"""The worked examples in the package's docstrings (metric cards, id grammar, stats),
run on the modules as ``faithbench.*`` imports them: collecting the repository's
folders directly would load each module a second time under its folder name."""

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("benchmark", "tasks", "metrics", "leaderboard", "submissions")


def _modules() -> list[str]:
    names = ["faithbench", "faithbench.api", "faithbench.testing"]
    for sub in PACKAGES:
        package = importlib.import_module(f"faithbench.{sub}")
        names.append(package.__name__)
        names += [n for _, n, _ in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                  if not n.endswith(".__main__")]  # importing it runs the command
    return sorted(names)


MODULES = _modules()
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def test_every_subpackage_is_walked():
    top = {m.split(".")[1] for m in MODULES if "." in m}
    assert {"api", "testing", "benchmark", "tasks", "metrics", "leaderboard", "submissions"} <= top


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in finder.find(module, name, globs=dict(vars(module))):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
