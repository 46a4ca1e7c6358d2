"""``benchmarks/gpu.py`` on the CPU with a one-layer MiniLM on the synthetic task: it
trains (never loads), times every stage beside the bare forward, and says why it
cannot run where the device is absent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"
TINY = ["--tasks", "synthetic", "--layers", "1", "--train-limit", "64", "--n", "16",
        "--explainers", "gradient", "occlusion", "--metrics", "comprehensiveness",
        "--threads", "1"]


def test_every_stage_is_timed_beside_the_bare_forward(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--out",
                           str(tmp_path), *TINY], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "gpu.json").read_text())
    stages = {s["stage"]: s for s in report["stages"]}
    tuned = stages["read data + fine-tune (1 epoch)"]
    assert tuned["from cache"] is False and tuned["rows"] == 64 and tuned["seconds"] > 0
    assert stages["bare forward (on the device)"]["rows"] == 16
    assert stages["forward through the boundary"]["rows"] == 16
    explained = [s for name, s in stages.items() if name.startswith("explain ")]
    scored = [s for name, s in stages.items() if name.startswith("score ")]
    assert [s["stage"] for s in explained] == ["explain gradient[norm=l2]@1",
                                               "explain occlusion[eraser=delete]@1"]
    assert all(s["rows"] == 16 and s["seconds"] > 0 for s in explained)
    assert explained[0]["forward rows"] == 16  # one forward (and backward) per example
    assert len(scored) == 1 and scored[0]["rows"] == 32  # two explainers' 16 examples
    assert report["device"] == "cpu" and report["bare_forward_rows_per_s"] > 0
    assert 0 <= report["padding"]["bucketed by length"] <= report["padding"]["split order"]
    assert "× bare forward" in done.stdout and "padding" in done.stdout


def test_an_absent_device_exits_2(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cuda", "--out",
                           str(tmp_path), *TINY], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 2 and "CUDA is not available" in done.stderr
