"""What every result carries so it can be reproduced: code version, environment."""

import platform
import subprocess
from functools import lru_cache
from pathlib import Path

import torch

import faithbench


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The checkout's commit (with ``+dirty`` if it has changes), or None outside git."""
    root = Path(__file__).resolve().parents[2]  # benchmark/core/ -> the checkout
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def environment() -> dict:
    return {
        "faithbench": faithbench.__version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
    }
