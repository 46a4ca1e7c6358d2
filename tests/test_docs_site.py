"""The documentation site (mkdocs.yml over docs/): ``mkdocs build --strict`` passes, so no
broken link, anchor or unresolved API reference, and the site has every page of the nav,
the API reference of ``faithbench.api``, the JSON Schemas, and the reference pages that
``docs/gen_reference.py`` generates from the code (every CLI verb, task, reference
explainer and metric, each with its card).

MkDocs comes with the ``docs`` extra (which ``dev`` includes); without it the test is
skipped with the reason, except under CI=true, where it fails."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's ``nav`` names (``- Title: path.md`` lines), in order."""
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:\n"):]
    nav = nav[:re.search(r"\n\S", nav[1:]).start() + 1]  # up to the next top-level key
    return re.findall(r"^\s+- [^\n]*?:\s*(\S+\.md)\s*$", nav, re.MULTILINE)


PAGES = tuple(page.removesuffix(".md") for page in nav_pages())


def need_mkdocs() -> None:
    """Missing MkDocs skips locally but fails under CI=true (as conftest's shared_data)."""
    if importlib.util.find_spec("mkdocs") is None:
        message = "mkdocs is not installed: pip install -e '.[docs]' (or '.[dev]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; .ci/run installs .[dev], which includes it")
        pytest.skip(message)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    need_mkdocs()
    out = tmp_path_factory.mktemp("docs-site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True,
        text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return out


def test_every_nav_page_exists_and_is_built(site):
    assert len(PAGES) >= 25 and PAGES[0] == "index", PAGES
    for page in ("getting-started", "guides/run-and-resume", "concepts/statistics",
                 "reference/cli", "reference/explainers", "reference/metrics",
                 "reference/tasks", "reference/schemas", "reference/api", "results/index",
                 "results/sst2"):
        assert page in PAGES, page
    for page in PAGES:
        assert (REPO / "docs" / f"{page}.md").is_file(), page
        assert (site / f"{page}.html").is_file(), page
    index = (site / "index.html").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f'href="{page}.html"' in index, page  # the navigation, and no server needed
    # and every page is in the nav
    pages = {p.relative_to(REPO / "docs").with_suffix("").as_posix()
             for p in (REPO / "docs").rglob("*.md")}
    assert pages == set(PAGES), pages ^ set(PAGES)


def test_the_reference_pages_are_generated_from_the_code(site):
    """Every CLI verb, task, reference explainer and metric has its section, generated at
    build time from the parser and the registries: a new one cannot be left out, and one
    whose module has no docstring (its card) fails here."""
    from faithbench import metrics, submissions, tasks
    from faithbench.benchmark.cli import VERBS

    def page(name: str) -> str:
        return (site / "reference" / f"{name}.html").read_text(encoding="utf-8")

    cli = page("cli")
    assert 'id="faithbench"' in cli and "usage: faithbench" in cli
    verbs = [verb.NAME for verb in VERBS]
    assert len(verbs) >= 14 and "run" in verbs, verbs
    for verb in verbs:
        assert f'id="faithbench-{verb}"' in cli, verb
        assert f"usage: faithbench {verb}" in cli, verb
    explainers = page("explainers")
    assert len(submissions.REFERENCE) >= 17
    for name in submissions.REFERENCE:
        spec = submissions.get_explainer(name).spec
        assert f'id="{name}"' in explainers, name
        assert f"<code>{spec.id}</code>" in explainers, spec.id
    metrics_page = page("metrics")
    assert len(metrics.REGISTRY.names()) >= 20
    for name, metric in metrics.REGISTRY.items():
        assert f'id="{name}"' in metrics_page, name
        assert f"<code>{metric.spec.id}</code>" in metrics_page, metric.spec.id
    tasks_page = page("tasks")
    for name in tasks.REGISTRY.names():
        assert f'id="{name}"' in tasks_page, name
    assert "Metric card" in metrics_page  # the cards themselves, from the docstrings
    for name in ("cli", "explainers", "metrics", "tasks", "schemas"):
        html = page(name)
        assert "faithbench-reference:" not in html, name  # every marker was replaced
        assert "no module docstring" not in html, name
    schemas_page = page("schemas")
    for path in (REPO / "docs" / "schemas").glob("*.schema.json"):
        assert f'id="{path.name.removesuffix(".schema.json")}"' in schemas_page, path.name


def test_the_api_page_documents_faithbench_api(site):
    from faithbench import api

    html = (site / "reference" / "api.html").read_text(encoding="utf-8")
    functions = [name for name in api.__all__ if inspect.isfunction(getattr(api, name))]
    assert len(functions) >= 3, functions
    documented = [name for name in functions if f'id="faithbench.api.{name}"' in html]
    assert len(documented) >= 3, documented
    missing = [name for name in api.__all__ if f'id="faithbench.api.{name}"' not in html]
    assert not missing, f"not on the API page: {missing}"
    for name in ("feature_attributions", "ExplainerSpec", "example_generator"):
        assert f'id="faithbench.api.{name}"' in html, name
    # docstring doctests are rendered as code, not as Markdown text
    assert "&gt;&gt;&gt; </span>" in html


def test_the_schemas_are_published_and_linked(site):
    schemas = sorted(p.name for p in (REPO / "docs" / "schemas").glob("*.schema.json"))
    assert schemas
    page = (site / "reference" / "schemas.html").read_text(encoding="utf-8")
    for name in schemas:
        assert (site / "schemas" / name).is_file(), name
        assert f'href="../schemas/{name}"' in page, name


def test_the_site_works_offline(site):
    """No Google Fonts fetch; search runs from the file system (the offline plugin)."""
    for page in PAGES:
        assert "fonts.googleapis.com" not in (site / f"{page}.html").read_text(encoding="utf-8")
    assert (site / "search" / "search_index.js").is_file()
