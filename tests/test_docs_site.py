"""The documentation site (mkdocs.yml over docs/): ``mkdocs build --strict`` passes, so no
broken link, anchor or unresolved API reference, and the site has every page, the API
reference of ``faithbench.api`` and the JSON Schemas.

MkDocs comes with the ``docs`` extra (which ``dev`` includes); without it the test is
skipped with the reason, except under CI=true, where it fails."""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = ("index", "guide", "reference", "results", "api", "schemas")


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


def test_every_page_is_built(site):
    for page in PAGES:
        assert (site / f"{page}.html").is_file(), page
    index = (site / "index.html").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f'href="{page}.html"' in index, page  # the navigation, and no server needed


def test_the_api_page_documents_faithbench_api(site):
    from faithbench import api

    html = (site / "api.html").read_text(encoding="utf-8")
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
    page = (site / "schemas.html").read_text(encoding="utf-8")
    for name in schemas:
        assert (site / "schemas" / name).is_file(), name
        assert f'href="schemas/{name}"' in page, name


def test_the_site_works_offline(site):
    """No Google Fonts fetch; search runs from the file system (the offline plugin)."""
    for page in PAGES:
        assert "fonts.googleapis.com" not in (site / f"{page}.html").read_text(encoding="utf-8")
    assert (site / "search" / "search_index.js").is_file()
