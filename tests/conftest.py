"""Shared fixtures: an isolated model cache, the synthetic task, ../shared/data, one
torch thread, and the tiny classifier and three-row batch the plugin tests share."""

import os
from pathlib import Path

import pytest
import torch

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
    from faithbench.tasks.classification import TaskOptions
    from faithbench.tasks.synthetic import TASK

    return TASK.prepare(TaskOptions(), progress=False)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: on a shared CPU one intra-op thread is ~10x faster than two. Restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


PLUGIN_BATCH_IDS = ("ex-a", "ex-b", "ex-c")


@pytest.fixture
def model():
    """A seeded, untrained 16-unit attention classifier over 50 ids, in eval mode."""
    from faithbench.benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig

    torch.manual_seed(0)
    return AttentionClassifier(ClassifierConfig(vocab_size=50, num_classes=2, embed_dim=16,
                                                hidden=16, attn_dim=16)).eval()


@pytest.fixture
def batch():
    """(batch of three rows of lengths 4, 2, 3 with ids PLUGIN_BATCH_IDS, targets (3,))."""
    from faithbench.benchmark.core.vocab import collate

    return collate([[5, 6, 7, 8], [9, 10], [11, 12, 13]], PLUGIN_BATCH_IDS), torch.tensor([0, 1, 0])
