"""Shared fixtures: an isolated model cache, the synthetic task, and ../shared/data."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Tests train their own models into a temp cache, never reading the user's."""
    old = os.environ.get("FAITHBENCH_CACHE")
    os.environ["FAITHBENCH_CACHE"] = str(tmp_path_factory.mktemp("faithbench-cache"))
    yield Path(os.environ["FAITHBENCH_CACHE"])
    if old is None:
        os.environ.pop("FAITHBENCH_CACHE", None)
    else:
        os.environ["FAITHBENCH_CACHE"] = old


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data; missing data skips locally but fails under CI=true."""
    if not (SHARED_DATA / "sst2" / "validation.jsonl").is_file():
        message = f"shared data not found at {SHARED_DATA} (needs ../shared/data beside the repo)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return SHARED_DATA


@pytest.fixture(scope="session")
def synthetic_ready(isolated_cache):
    from tasks.classification import TaskOptions
    from tasks.synthetic import TASK

    return TASK.prepare(TaskOptions(), progress=False)
