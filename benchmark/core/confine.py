"""What keeps a plugin worker in its box: resource limits, death with its parent,
no writes outside its scratch folder (Landlock), and, with ``--sandbox``, a
bubblewrap container with no network and only a read-only environment.

Two layers, because they guard against different plugins:

- Always (``confine_self``, called by the worker before it imports a plugin): the
  worker dies with faithbench (``PR_SET_PDEATHSIG``); address space, file size and
  process count are limited; on Linux >= 5.13 a Landlock domain lets it write only
  beneath its scratch folder, connect or bind no TCP port, and signal no process
  outside its own domain. So a plugin cannot rewrite results, caches or entries,
  nor kill or trace faithbench. It can still read what your user can read.
- ``--sandbox`` (``sandbox_command``): the worker starts inside ``bwrap`` with new
  user, PID, network, IPC and UTS namespaces; it sees the Python installation, the
  installed packages, the plugin's folder and its model file read-only, a private
  /tmp, and nothing else (no home folder, no results, no data). When faithbench
  kills the container's first process, every process inside dies with it.

Without ``--sandbox`` a plugin that starts a daemon in a new session leaves this
process's session; faithbench is a child subreaper (``become_subreaper``), so such
orphans become its children and ``kill_orphans`` ends them when the worker closes.
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import shutil
import signal
import sys
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 36, 38
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # every arch
_RULE_PATH_BENEATH = 1
# Landlock filesystem rights that change the file system (ABI 1 .. 3): handled, so
# denied except beneath the scratch folder. Reading and executing stay allowed.
_FS_WRITE_ABI1 = sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
_SCOPE = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    return _libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_writes_only(writable: list[Path]) -> int:
    """Restrict this process (and its future children) to writing beneath
    ``writable``, with no TCP and no signals out of the domain. Returns the ABI used
    (0: the kernel has no Landlock; nothing restricted)."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    libc = _libc()
    fs = _FS_WRITE_ABI1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, _NET_TCP if abi >= 4 else 0, _SCOPE if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                allowed = fs if path.is_dir() else (1 << 1) | (_FS_TRUNCATE if abi >= 3 else 0)
                rule = _PathBeneath(allowed, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                                ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}) failed")
            finally:
                os.close(fd)
        if not _prctl(_PR_SET_NO_NEW_PRIVS, 1):
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def die_with_parent(parent_pid: int) -> bool:
    """SIGKILL this process when its parent ``parent_pid`` dies (Linux), so a worker
    never outlives a killed faithbench; False where it cannot be armed."""
    if not _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL):
        return False
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    return True


def confine_self(scratch: Path, memory_bytes: int | None, parent_pid: int | None) -> dict:
    """Called first thing in a worker, before any plugin code: what was applied."""
    applied: dict[str, object] = {}
    if parent_pid is not None and die_with_parent(parent_pid):
        applied["parent_death_signal"] = True
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _lower(resource.RLIMIT_FSIZE, 1 << 30)  # 1 GiB in scratch is plenty
    if memory_bytes is not None:
        _lower(resource.RLIMIT_AS, memory_bytes)
        applied["memory_bytes"] = memory_bytes
    if hasattr(resource, "RLIMIT_NPROC"):  # a user's process count; root is exempt
        _lower(resource.RLIMIT_NPROC, _user_processes() + 64)
    applied["landlock_abi"] = landlock_writes_only([scratch, Path(os.devnull)])
    return applied


def _lower(which: int, value: int) -> None:
    hard = resource.getrlimit(which)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value))


def _user_processes() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                pass
    return count


def limit_cpu(seconds: float | None) -> None:
    """Let this process use at most ``seconds`` more CPU time (SIGXCPU, then SIGKILL)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    total = used.ru_utime + used.ru_stime
    soft = resource.RLIM_INFINITY if seconds is None else int(total + seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.getrlimit(resource.RLIMIT_CPU)[1]))


# ------------------------------------------------------------------ the parent's side

def become_subreaper() -> bool:
    """Orphans of our descendants become our children (so ``kill_orphans`` finds them)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def outside_children() -> set[int]:
    """Our children in another session now (the caller's own, e.g. a server it started
    with a session of its own): ``kill_orphans`` must keep them."""
    me, session = os.getpid(), os.getsid(0)
    return {pid for pid, ppid, sid in _processes() if ppid == me and sid != session}


def kill_orphans(keep: set[int]) -> list[int]:
    """Kill our children that left our session (a plugin's daemons, re-parented here)
    except ``keep``; repeat until none is left. Returns the pids killed."""
    me, session = os.getpid(), os.getsid(0)
    killed: list[int] = []
    for _ in range(50):
        found = [pid for pid, ppid, sid in _processes()
                 if ppid == me and sid != session and pid not in keep]
        if not found:
            break
        for pid in found:
            for kill in (os.killpg, os.kill):  # its group first, then itself
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            killed.append(pid)
    return killed


def _processes():
    """(pid, ppid, session id) of every process we can see."""
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after the command name
        yield int(entry.name), int(fields[1]), int(fields[3])


def bwrap() -> str | None:
    return shutil.which("bwrap")


def sandbox_command(readable: list[Path], hidden: list[Path], scratch: Path) -> list[str]:
    """The ``bwrap`` prefix: the Python installation, ``readable`` paths read-only,
    ``hidden`` (results, data, caches that lie inside a readable path) replaced by
    empty folders, ``scratch`` writable, no network, its own PIDs; dies with us."""
    exe = bwrap()
    if exe is None:
        raise FileNotFoundError("bwrap")
    cmd = [exe, "--die-with-parent", "--new-session", "--unshare-all", "--proc", "/proc",
           "--dev", "/dev", "--tmpfs", "/tmp", "--clearenv"]
    system = [Path(p) for p in ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache",
                                "/sys/devices/system/cpu")]
    prefixes = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
                Path(sys.executable).resolve().parent.parent}
    for path in _outermost([*system, *prefixes, *(Path(p) for p in readable)]):
        cmd += ["--ro-bind-try", str(path), str(path)]
    for path in hidden:
        if any(_inside(path, r) for r in readable) and path.is_dir():
            cmd += ["--tmpfs", str(path)]
    cmd += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
    return cmd


def _outermost(paths: list[Path]) -> list[Path]:
    """Each path once, leaving out those inside another (bound with it)."""
    unique = sorted({p.absolute() for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for p in unique:
        if not any(_inside(p, k) for k in kept):
            kept.append(p)
    return kept


def _inside(path: Path, root: Path) -> bool:
    try:
        path.absolute().relative_to(root.absolute())
        return True
    except ValueError:
        return False
