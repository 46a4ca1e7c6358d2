"""Executors give the same results in the same order whichever runs the jobs."""

import os
import sys

import pytest
import torch

from faithbench.benchmark.core.cache import weights_hash
from faithbench.benchmark.core.executor import InProcessExecutor, ProcessPoolExecutor


def _trainer():
    """A seeded little training run -> (weights hash, process id), as a closure: Ray
    pickles it by value, so workers that cannot import this test module run it too."""
    import os as os_

    import torch as torch_

    from faithbench.benchmark.core.cache import weights_hash as hash_

    def train(seed: int) -> tuple[str, int]:
        torch_.manual_seed(seed)
        model = torch_.nn.Linear(8, 2)
        opt = torch_.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch_.randn(64, 8), torch_.randint(0, 2, (64,))
        for _ in range(20):
            opt.zero_grad()
            torch_.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return hash_(model.state_dict()), os_.getpid()

    return train


_train = _trainer()


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


def test_on_done_sees_every_result_once_and_a_pool_job_may_start_processes():
    import multiprocessing

    def child(j):  # an isolated plugin starts a process inside the job: no daemon workers
        ctx = multiprocessing.get_context("fork")
        p = ctx.Process(target=lambda: None)
        p.start()
        p.join()
        return j * 2

    for executor in (InProcessExecutor(), ProcessPoolExecutor(workers=2)):
        seen = []
        assert executor.map(child, [1, 2, 3], on_done=lambda i, r, seen=seen: seen.append((i, r))) == [2, 4, 6]
        assert sorted(seen) == [(0, 2), (1, 4), (2, 6)]


def test_jobs_run_at_one_thread_and_the_callers_count_comes_back():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert InProcessExecutor().map(lambda _: torch.get_num_threads(), [0]) == [1]
        assert ProcessPoolExecutor(workers=1).map(lambda _: torch.get_num_threads(), [0]) == [1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_unknown_executor_is_named():
    from faithbench.benchmark.core.errors import InputError
    from faithbench.benchmark.core.executor import make_executor

    with pytest.raises(InputError, match="unknown executor 'dask'; choose one of in-process, pool, ray"):
        make_executor("dask")


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A real local Ray cluster (head node with 2 worker CPUs, its own processes), started
    with ``ray start --head`` and stopped with ``ray stop`` after the module. It and this
    driver share a fresh auth token: Ray 2.60 turns token auth on whenever it finds a
    token (``ray.init()`` writes ~/.ray/auth_token), so a token left by an earlier local
    cluster would otherwise lock the driver out."""
    import importlib.util
    import secrets
    import shutil
    import socket
    import subprocess

    if importlib.util.find_spec("ray") is None:  # not imported: Ray reads the auth env once
        pytest.skip("ray is in the dev extra: pip install -e '.[dev]'")
    ray_cli = shutil.which("ray")
    assert ray_cli, "the ray package is installed but its `ray` command is not on PATH"
    assert "ray" not in sys.modules, "ray imported before its auth settings were made"
    token = tmp_path_factory.mktemp("ray") / "auth_token"
    token.write_text(secrets.token_hex(32))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "token")
        env.setenv("RAY_AUTH_TOKEN_PATH", str(token))
        subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2",
                        "--include-dashboard=false", "--disable-usage-stats"],
                       check=True, capture_output=True, timeout=120)
        address = f"127.0.0.1:{port}"
        import ray

        # one driver connection for the module: RayExecutor.map uses it when present
        ray.init(address=address, log_to_driver=False, configure_logging=False)
        try:
            yield address
        finally:
            ray.shutdown()
            subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120,
                           check=False)


def test_ray_runs_jobs_on_the_cluster_with_the_same_results(ray_cluster):
    from faithbench.benchmark.core.executor import RayExecutor

    seeds = [3, 1, 4]
    here = InProcessExecutor().map(_train, seeds)
    seen = []
    on_ray = RayExecutor(address=ray_cluster).map(_trainer(), seeds,
                                                  on_done=lambda i, r: seen.append(i))
    assert [h for h, _ in on_ray] == [h for h, _ in here]  # same weights, bit for bit
    assert os.getpid() not in {pid for _, pid in on_ray}  # ran in the cluster's workers
    assert sorted(seen) == [0, 1, 2]

    def fail(j):
        if j == 2:
            raise ValueError(f"job {j} failed")
        return j

    with pytest.raises(ValueError, match="job 2 failed"):
        RayExecutor(address=ray_cluster).map(fail, [1, 2, 3])


def test_a_roar_retraining_job_gives_the_same_model_on_ray(ray_cluster, tmp_path, monkeypatch):
    """The sweep's own job (a synthetic model on 40 %-masked data) trained in the cluster's
    workers and here: the model file that comes back holds bit-identical weights."""
    import io

    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.benchmark.core.executor import RayExecutor
    from faithbench.benchmark.core.retrain import TrainJob, train_job
    from faithbench.metrics.masking import RandomMask
    from faithbench.tasks.synthetic import TASK

    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    jobs = [TrainJob(TASK, TaskOptions(seed=s, train_limit=400, epochs=2,
                                       transform=RandomMask(0.4, seed=s)))
            for s in (0, 1)]
    here = InProcessExecutor().map(train_job, jobs)
    there = RayExecutor(address=ray_cluster).map(train_job, jobs)

    def weights(trained):
        saved = torch.load(io.BytesIO(trained.blob), map_location="cpu", weights_only=True)
        return weights_hash(saved["state_dict"])

    assert [t.file for t in there] == [t.file for t in here]  # the same content keys
    assert [weights(t) for t in there] == [weights(t) for t in here]
    assert weights(here[0]) != weights(here[1])


def test_faithbench_errors_raised_in_a_worker_come_back_whole():
    """Their __init__ takes other arguments than their message: pickled by ``args``
    alone, a worker's PluginError broke the pool (seen in a ROAR sweep)."""
    from faithbench.benchmark.core.errors import DataFileError, NotUtf8Error, PluginError

    def fail(j):
        if j == 0:
            raise PluginError("occlusion", "explain", "NaN in the scores", ["test-3"])
        if j == 1:
            raise NotUtf8Error.at("a.jsonl", b'{"x": 1}\n\xff', 9)
        raise DataFileError("b.jsonl", 4, "label", "unknown label 7")

    for j, kind in [(0, PluginError), (1, NotUtf8Error), (2, DataFileError)]:
        with pytest.raises(kind) as info:
            ProcessPoolExecutor(workers=1).map(fail, [j])
        here = None
        try:
            fail(j)
        except kind as exc:
            here = exc
        assert str(info.value) == str(here) and vars(info.value) == vars(here)
    assert info.value.exit_code == 2 and PluginError.exit_code == 1


def test_a_retrained_model_comes_back_from_a_cluster_without_a_shared_disk(
        ray_cluster, tmp_path, monkeypatch):
    """The ROAR metric's retraining (``core.retrain.Retrainer``) on Ray: the cluster's
    workers write their own cache (the one the cluster was started with, not this
    driver's), the file comes back, and the driver loads it instead of training again
    (before, the metric trained on a worker and then once more here)."""
    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.benchmark.core.executor import RayExecutor
    from faithbench.benchmark.core.retrain import Retrainer
    from faithbench.metrics.masking import RandomMask
    from faithbench.tasks.synthetic import TASK

    driver = tmp_path / "driver-cache"
    monkeypatch.setenv("FAITHBENCH_CACHE", str(driver))  # the workers do not see this one
    trained_here = []
    real_prepare = type(TASK).prepare

    def watch(self, options, **kw):
        prepared = real_prepare(self, options, **kw)
        trained_here.append(not prepared.loaded_from_cache)
        return prepared

    retrain = Retrainer(TASK, TaskOptions(train_limit=400, epochs=2),
                        RayExecutor(address=ray_cluster))
    monkeypatch.setattr(type(TASK), "prepare", watch)  # here only: workers import their own
    transform = RandomMask(0.4, seed=3)
    assert not TASK.model_file(retrain.options(transform)).exists()
    prepared = retrain(transform)
    assert TASK.model_file(retrain.options(transform)).is_file()  # shipped into this cache
    assert prepared.checkpoint_file.is_relative_to(driver)
    assert trained_here == [False]  # loaded here, never trained here


def test_run_on_ray_writes_the_in_process_runs_results(ray_cluster, tmp_path, synthetic_ready):
    """``run --executor ray --address``: models and units as Ray tasks on the cluster's
    workers, the same result lines as in-process (``tests/test_distributed.py``)."""
    from faithbench.benchmark.cli import main
    from tests.test_distributed import SYNTHETIC, same_results

    here, there = tmp_path / "here", tmp_path / "ray"
    assert main(["run", "--out", str(here), *SYNTHETIC]) == 0
    assert main(["run", "--out", str(there), "--executor", "ray", "--address", ray_cluster,
                 *SYNTHETIC]) == 0
    same_results(here, there)
