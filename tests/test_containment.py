"""Issue 44, attack 3: ``--plugin-memory`` limited each process, not the plugin. A
plugin whose ``explain`` started three children that each filled 700 MB held 3.3 GB
under ``--plugin-memory 1.5``, with ``--sandbox`` too (RLIMIT_NPROC does not bind
root). Now the worker's whole process tree is held to the limit: by a cgroup where
the host lets faithbench make one (the kernel kills within the tree; the plugin
fails, named), else by a seccomp filter that keeps the worker to one process (the
fork fails, the plugin fails, named). Both paths run here: the cgroup one where this
host has a writable cgroup, the other forced with ``FAITHBENCH_NO_CGROUP=1``."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import torch

from faithbench.benchmark.core import confine
from faithbench.benchmark.core.api import ExplainerSpec
from faithbench.benchmark.core.errors import PluginError
from faithbench.benchmark.core.isolation import Confinement, Worker, plugin_caller
from faithbench.benchmark.core.plugins import PluginExplainer

pytestmark = pytest.mark.usefixtures("one_thread")
LIMIT_GIB = 1.0  # the address-space limit must still fit torch (~0.8 GiB mapped)
CHILD_MB = 400  # three children: 1.2 GB plus the worker, over 1 GiB together

# Each child runs a fresh Python (so its own address space, not the worker's, holds
# the allocation: under 1 GiB alone) that writes CHILD_MB and waits.
FORKS_HOGS = '''
import os, sys, time
from faithbench.api import ExplainerSpec

HOG = "import time; hog = b'x' * ({mb} << 20); time.sleep(1)"


class ForksHogs:
    spec = ExplainerSpec(name="forks_hogs", version="1")

    def explain(self, model, batch, target, *, rng):
        kids = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                os.execv(sys.executable, [sys.executable, "-S", "-c", HOG])
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        return batch.mask.float()


EXPLAINER = ForksHogs()
'''

# No process of its own: torch on two intra-op threads (OpenMP), counted by the kernel.
THREADS = '''
import os
import torch
from faithbench.api import ExplainerSpec


class UsesThreads:
    spec = ExplainerSpec(name="uses_threads", version="1")

    def explain(self, model, batch, target, *, rng):
        assert torch.get_num_threads() == 2, torch.get_num_threads()
        torch.rand(4_000_000).exp().sum()  # parallel: starts the intra-op pool
        threads = len(os.listdir("/proc/self/task"))
        assert threads >= 2, f"only {{threads}} thread(s)"
        return batch.mask.float()


EXPLAINER = UsesThreads()
'''


def write(tmp_path: Path, name: str, text: str) -> PluginExplainer:
    """The plugin file, as loaded (its worker checks the spec it imports is this one)."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text.format(mb=CHILD_MB)))
    return PluginExplainer(ExplainerSpec(name=name, version="1"), str(path))


def has_cgroup() -> bool:
    group = confine.new_cgroup(1 << 30)
    if group is None:
        return False
    group.remove()
    return True


@pytest.fixture(params=["cgroup", "one_process"])
def mode(request, monkeypatch):
    if request.param == "cgroup":
        monkeypatch.delenv(confine.NO_CGROUP_ENV, raising=False)
        if not has_cgroup():
            pytest.skip("no writable cgroup (v2 with memory delegated, or v1 memory) here")
    else:
        monkeypatch.setenv(confine.NO_CGROUP_ENV, "1")
        if confine.seccomp_arch() is None:
            pytest.skip(f"no seccomp filter for {os.uname().machine}")
    return request.param


@pytest.fixture(params=[False, True], ids=["plain", "sandbox"])
def sandbox(request):
    if request.param and confine.bwrap() is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    return request.param


def ours() -> list[Path]:
    """cgroups this process made that still exist (memory and pids hierarchies)."""
    prefix = f"{confine.CGROUP_PREFIX}{os.getpid()}-"
    found = []
    for parent in (confine._own_cgroup_folder(2, "memory"), confine._own_cgroup_folder(1, "memory"),
                   confine._own_cgroup_folder(1, "pids")):
        if parent is not None:
            found += [p for p in parent.iterdir() if p.name.startswith(prefix)]
    return found


def test_a_plugin_whose_children_fill_memory_is_held_to_the_limit(tmp_path, model, batch,
                                                                  mode, sandbox):
    """Before: 3 x 700 MB children held 3.3 GB resident under --plugin-memory 1.5."""
    b, target = batch
    box = Confinement(sandbox=sandbox, memory_gib=LIMIT_GIB)
    explainer = write(tmp_path, "forks_hogs", FORKS_HOGS)
    with plugin_caller(explainer, model, time_budget_s=30.0, box=box) as caller:
        assert isinstance(caller, Worker)
        with pytest.raises(PluginError) as info:
            caller.explain(b, target, seed=0)
        err = info.value
        assert err.plugin == "forks_hogs" and err.stage == "explain"
        assert "forks_hogs" in str(err)
        if mode == "cgroup":
            assert caller.containment.startswith("cgroup v")
            assert "exceeded --plugin-memory 1 GiB (killed by the cgroup" in err.problem
            assert caller.cgroup is None  # the worker and its tree were closed
            peak = caller.cgroup_peak_bytes
            assert peak is None or peak <= int(LIMIT_GIB * 2 ** 30)
        else:
            assert caller.containment.startswith("no cgroup on this host: no extra processes")
            assert "PermissionError" in err.problem
            assert "it tried to start a process" in err.problem
            assert "a plugin is held to one process" in err.problem
            assert "starting a process (fork, subprocess, multiprocessing) is refused" \
                in err.problem
    assert ours() == []


def test_a_plugin_on_two_threads_works_in_either_mode(tmp_path, model, batch, mode):
    """Threads are not processes: torch's intra-op pool starts under either containment."""
    b, target = batch
    box = Confinement(memory_gib=2.0, threads=2)
    explainer = write(tmp_path, "uses_threads", THREADS)
    with plugin_caller(explainer, model, time_budget_s=30.0, box=box) as caller:
        scores = caller.explain(b, target, seed=0)
        assert torch.equal(scores, b.mask.float())
        assert (caller.cgroup is not None) == (mode == "cgroup")
        if mode == "cgroup":
            folders = list(caller.cgroup.folders)
            assert folders and all(f.is_dir() for f in folders)
            assert caller.process.pid in caller.cgroup.pids()
    assert ours() == []
    if mode == "cgroup":
        assert not any(f.exists() for f in folders)


def test_the_containment_is_said(monkeypatch):
    monkeypatch.setenv(confine.NO_CGROUP_ENV, "1")
    if confine.seccomp_arch() is not None:
        assert confine.containment_kind(1.5) == \
            "no cgroup on this host: no extra processes (seccomp) + address space 1.5 GiB"
    monkeypatch.delenv(confine.NO_CGROUP_ENV)
    if has_cgroup():
        said = confine.containment_kind(1.5)
        assert said in ("cgroup v2 memory.max 1.5 GiB for the worker's process tree",
                        "cgroup v1 memory.limit_in_bytes 1.5 GiB for the worker's process tree")
    assert confine.containment_kind(None).startswith("no memory limit")
    assert ours() == []


def test_a_cgroup_left_by_a_dead_faithbench_is_removed(monkeypatch):
    monkeypatch.delenv(confine.NO_CGROUP_ENV, raising=False)
    if not has_cgroup():
        pytest.skip("no writable cgroup here")
    group = confine.new_cgroup(1 << 30)
    parents = [f.parent for f in group.folders]
    dead = max(int(p) for p in os.listdir("/proc") if p.isdigit()) + 100_000
    while Path("/proc", str(dead)).exists():
        dead += 1
    stale = [p / f"{confine.CGROUP_PREFIX}{dead}-1" for p in parents]
    try:
        for folder in stale:
            folder.mkdir()
        group.remove()
        fresh = confine.new_cgroup(1 << 30)  # makes one: clears the stale ones first
        fresh.remove()
        assert not any(f.exists() for f in stale)
    finally:
        for folder in stale:
            if folder.exists():
                folder.rmdir()
    assert ours() == []


def test_a_worker_that_cannot_enter_its_cgroup_is_said_so(tmp_path, model, batch, monkeypatch):
    monkeypatch.delenv(confine.NO_CGROUP_ENV, raising=False)
    if not has_cgroup():
        pytest.skip("no writable cgroup here")
    enter = confine.Cgroup.enter_command
    monkeypatch.setattr(confine.Cgroup, "enter_command", lambda self: [
        *enter(self)[:4], str(tmp_path / "no-such-cgroup" / "cgroup.procs"), *enter(self)[4:]])
    b, target = batch
    with plugin_caller(write(tmp_path, "uses_threads", THREADS), model, time_budget_s=30.0,
                       box=Confinement(memory_gib=2.0)) as caller, \
            pytest.raises(PluginError, match="could not put its worker into the cgroup"):
        caller.explain(b, target, seed=0)
    assert ours() == []


def fake_proc(tmp_path: Path, own: str, subtree: str) -> Path:
    """A /proc/self that shows a pure cgroup v2 host (mounted at ``tmp_path/cg``) and
    this process in cgroup ``own``, whose ``cgroup.subtree_control`` is ``subtree``."""
    proc, mount = tmp_path / "proc", tmp_path / "c g"
    folder = mount / own.lstrip("/")
    folder.mkdir(parents=True)
    proc.mkdir()
    (folder / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (folder / "cgroup.subtree_control").write_text(subtree + "\n")
    (proc / "cgroup").write_text(f"0::{own}\n")
    escaped = str(mount).replace(" ", "\\040")
    (proc / "mountinfo").write_text(
        f"24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        f"30 25 0:26 / {escaped} rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n")
    return folder


def test_cgroup_v2_is_used_where_memory_is_delegated(tmp_path, monkeypatch):
    """No v2 memory controller on the hosts the other tests ran on: a fake one."""
    monkeypatch.delenv(confine.NO_CGROUP_ENV, raising=False)
    parent = fake_proc(tmp_path, "/user.slice/faithbench.scope", "cpu memory pids")
    monkeypatch.setattr(confine, "_PROC", tmp_path / "proc")
    group = confine.new_cgroup(3 << 29, pids_max=300)
    assert group is not None and group.version == 2 and group.memory.parent == parent
    assert group.memory.name.startswith(f"{confine.CGROUP_PREFIX}{os.getpid()}-")
    written = {f.name: f.read_text() for f in group.memory.iterdir()}
    assert written == {"memory.max": str(3 << 29), "memory.swap.max": "0",
                       "memory.oom.group": "1", "pids.max": "300"}
    assert group.describe(where=False) == \
        "cgroup v2 memory.max 1.5 GiB for the worker's process tree"
    assert group.enter_command()[-2:] == [str(group.memory / "cgroup.procs"), "--"]


def test_cgroup_v2_without_delegated_memory_is_not_used(tmp_path, monkeypatch):
    monkeypatch.delenv(confine.NO_CGROUP_ENV, raising=False)
    fake_proc(tmp_path, "/user.slice/session-1.scope", "cpu")
    monkeypatch.setattr(confine, "_PROC", tmp_path / "proc")
    assert confine.new_cgroup(1 << 30) is None
    if confine.seccomp_arch() is not None:
        assert confine.containment_kind(1.0).startswith("no cgroup on this host: no extra")
