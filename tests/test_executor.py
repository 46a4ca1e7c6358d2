"""Executors give the same results in the same order whichever runs the jobs."""

import os

import pytest
import torch

from benchmark.core.cache import weights_hash
from benchmark.core.executor import InProcessExecutor, ProcessPoolExecutor


def _train(seed: int) -> tuple[str, int]:
    """A seeded little training run: the weights hash it ends with, and the process."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
    for _ in range(20):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return weights_hash(model.state_dict()), os.getpid()


def test_a_process_pool_returns_what_in_process_returns_in_job_order():
    seeds = [3, 1, 4, 1, 5]
    here = InProcessExecutor().map(_train, seeds)
    pool = ProcessPoolExecutor(workers=2).map(_train, seeds)
    assert [h for h, _ in pool] == [h for h, _ in here]  # same weights, bit for bit
    assert len({h for h, _ in here}) == 4  # and the seeds matter (1 appears twice)
    assert {pid for _, pid in pool} - {os.getpid()}  # the jobs ran in other processes


def test_closures_reach_the_workers_and_errors_come_back():
    offset = 10
    assert ProcessPoolExecutor(workers=2).map(lambda j: j + offset, [1, 2, 3]) == [11, 12, 13]
    assert ProcessPoolExecutor().map(lambda j: j, []) == []

    def fail(j):
        if j == 2:
            raise ValueError(f"job {j} failed")
        return j

    with pytest.raises(ValueError, match="job 2 failed"):
        ProcessPoolExecutor(workers=2).map(fail, [1, 2, 3])
