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

The memory limit is the plugin's, not each process's: an address-space limit binds
one process, so a plugin that forks would get it once per child. Where this host lets
faithbench make a cgroup (``new_cgroup``: v2 with the memory controller delegated,
else v1 memory and pids), each worker starts inside its own, bubblewrap included, and
the kernel holds the whole tree to the limit; elsewhere the worker installs a seccomp
filter (``refuse_forks``) so it stays one process. ``containment_kind`` says which.
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


# ------------------------------------------------------------------ the plugin's process tree
#
# An address-space limit binds one process; a plugin that forks gets it once per child
# (and RLIMIT_NPROC does not bind root). So the whole tree of a worker is held to
# ``--plugin-memory``: where the host lets faithbench make a cgroup (v2 with the memory
# controller delegated to its cgroup, else v1 memory and pids), each worker starts in
# a fresh one and the kernel's OOM killer acts on the tree's total; elsewhere a seccomp
# filter keeps the worker to one process (threads allowed), so the address-space limit
# is the tree's.

NO_CGROUP_ENV = "FAITHBENCH_NO_CGROUP"  # "1": act as if no cgroup were usable (tests, CI)
CGROUP_PREFIX = "faithbench-"  # faithbench-<pid of the faithbench process>-<n>
PIDS_MAX = 256  # processes and threads in one worker's tree, where a pids cgroup exists
ENTER_FAILED = 97  # exit code of the wrapper that could not enter the cgroup
_CGROUP_NUMBERS = iter(range(1, 1 << 62))
_PROC = Path("/proc/self")  # where this process's cgroups and mounts are read
_ENTER = (f'for f; do [ "$f" = -- ] && break; echo $$ > "$f" || exit {ENTER_FAILED}; shift; '
          'done; shift; exec "$@"')


def _gib(memory_bytes: int) -> str:
    return f"{memory_bytes / 2 ** 30:g} GiB"


class Cgroup:
    """One worker's cgroup: ``folders`` (v2: one; v1: memory, then pids if usable)."""

    def __init__(self, version: int, folders: list[Path], memory_bytes: int):
        self.version, self.folders, self.memory_bytes = version, folders, memory_bytes

    @property
    def memory(self) -> Path:
        return self.folders[0]

    def describe(self, where: bool = True) -> str:
        """In words, with the folder if ``where``."""
        limit = "v2 memory.max" if self.version == 2 else "v1 memory.limit_in_bytes"
        folder = f" ({self.memory})" if where else ""
        return f"cgroup {limit} {_gib(self.memory_bytes)} for the worker's process tree{folder}"

    def enter_command(self) -> list[str]:
        """A prefix that puts the command's own process in this cgroup, then execs it:
        everything the command starts (bubblewrap, Python, the plugin) is inside."""
        return ["/bin/sh", "-c", _ENTER, "faithbench-cgroup",
                *(str(f / "cgroup.procs") for f in self.folders), "--"]

    def oom_kills(self) -> int:
        """Processes of the tree the kernel killed for exceeding the limit, so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _key_value(self.memory / name).get("oom_kill", 0)

    def peak_bytes(self) -> int | None:
        """The tree's peak memory (v2 ``memory.peak``, Linux >= 5.19; v1
        ``memory.max_usage_in_bytes``)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.memory / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return found

    def kill(self, wait_s: float = 5.0) -> bool:
        """SIGKILL every process in the cgroup until none is left (True: empty)."""
        import time

        deadline = time.monotonic() + wait_s
        while True:
            pids = self.pids()
            if not pids:
                return True
            if self.version == 2 and (self.memory / "cgroup.kill").exists():
                _write(self.memory / "cgroup.kill", "1")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def remove(self, wait_s: float = 5.0) -> bool:
        """Kill what is left and remove the folders (True: all gone)."""
        import time

        self.kill(wait_s)
        deadline = time.monotonic() + wait_s
        for folder in reversed(self.folders):
            while folder.exists():
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        log.warning("could not remove the worker's cgroup %s: %s", folder, exc)
                        return False
                    self.kill(0.0)
                    time.sleep(0.01)
        return True


def new_cgroup(memory_bytes: int, pids_max: int = PIDS_MAX) -> Cgroup | None:
    """A fresh cgroup for one worker, limited to ``memory_bytes`` (no swap) and
    ``pids_max`` tasks where possible; None where this host offers none we may use
    (or ``FAITHBENCH_NO_CGROUP=1``)."""
    if os.environ.get(NO_CGROUP_ENV, "") not in ("", "0") or not sys.platform.startswith("linux"):
        return None
    v2 = _own_cgroup_folder(2, "memory")
    if v2 is not None:
        group = _make(v2, 2, memory_bytes, pids_max)
        if group is not None:
            return group
    v1 = _own_cgroup_folder(1, "memory")
    return None if v1 is None else _make(v1, 1, memory_bytes, pids_max)


def _make(parent: Path, version: int, memory_bytes: int, pids_max: int) -> Cgroup | None:
    name = f"{CGROUP_PREFIX}{os.getpid()}-{next(_CGROUP_NUMBERS)}"
    _remove_stale(parent)
    folder = parent / name
    try:
        folder.mkdir()
    except OSError as exc:
        log.debug("no cgroup under %s: %s", parent, exc)
        return None
    group = Cgroup(version, [folder], memory_bytes)
    try:
        if version == 2:
            _write(folder / "memory.max", str(memory_bytes))
            _write(folder / "memory.swap.max", "0", optional=True)
            _write(folder / "memory.oom.group", "1", optional=True)  # the whole tree at once
            _write(folder / "pids.max", str(pids_max), optional=True)
        else:
            _write(folder / "memory.limit_in_bytes", str(memory_bytes))
            _write(folder / "memory.memsw.limit_in_bytes", str(memory_bytes), optional=True)
            _write(folder / "memory.swappiness", "0", optional=True)
            if int((folder / "memory.limit_in_bytes").read_text()) > memory_bytes:
                raise OSError("memory.limit_in_bytes was not applied")
            pids = _own_cgroup_folder(1, "pids")
            if pids is not None:
                _remove_stale(pids)
                try:
                    (pids / name).mkdir()
                    group.folders.append(pids / name)
                    _write(pids / name / "pids.max", str(pids_max))
                except OSError as exc:
                    log.debug("no pids cgroup under %s: %s", pids, exc)
                    if group.folders[-1] != folder:
                        group.folders.pop().rmdir()
    except (OSError, ValueError) as exc:
        log.debug("cgroup %s unusable: %s", folder, exc)
        group.remove(0.5)
        return None
    return group


def _write(path: Path, text: str, optional: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        if not optional:
            raise


def _key_value(path: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                values[key] = int(value)
    except OSError:
        pass
    return values


def _remove_stale(parent: Path) -> None:
    """Remove cgroups a faithbench process that is gone left here (killed before
    its workers were closed), with whatever still runs in them."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        owner = entry.name[len(CGROUP_PREFIX):].split("-")[0]
        if entry.name.startswith(CGROUP_PREFIX) and owner.isdigit() and entry.is_dir() \
                and int(owner) != os.getpid() and not Path("/proc", owner).exists():
            Cgroup(1, [entry], 0).remove(1.0)


def _own_cgroup_folder(version: int, controller: str) -> Path | None:
    """The folder of this process's own cgroup where ``controller`` is usable for a
    child: v2, where it is enabled in ``cgroup.subtree_control`` (a child gets it);
    v1, the hierarchy it is mounted on. None where there is none or it is not writable."""
    try:
        lines = (_PROC / "cgroup").read_text().splitlines()
        mounts = (_PROC / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    own = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (version == 2 and controllers == "") or \
                (version == 1 and controller in controllers.split(",")):
            own = path
    if own is None:
        return None
    for line in mounts:
        fields = line.split()
        try:
            dash = fields.index("-")
        except ValueError:
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        fstype, options = fields[dash + 1], fields[dash + 3].split(",")
        if version == 2 and fstype != "cgroup2" or \
                version == 1 and (fstype != "cgroup" or controller not in options):
            continue
        rel = os.path.relpath(own, root) if root != "/" else own.lstrip("/")
        if rel.startswith(".."):
            continue
        folder = Path(point) / rel
        if not (folder / "cgroup.procs").exists() or not os.access(folder, os.W_OK):
            continue
        if version == 2:
            try:
                if controller not in (folder / "cgroup.subtree_control").read_text().split():
                    continue
            except OSError:
                continue
        return folder
    return None


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code in ("040", "011", "012", "134"):
        text = text.replace("\\" + code, chr(int(code, 8)))
    return text


# ------------------------------------------------------------------ one process, no forks

_ARCH = {"x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435}, 317),
         "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435}, 277)}
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
FORK_REFUSED = ("this host has no cgroup faithbench can use, so a plugin is held to one "
                "process: starting a process (fork, subprocess, multiprocessing) is refused")


def seccomp_arch() -> str | None:
    """The machine name where ``refuse_forks`` works (x86_64, aarch64), else None."""
    machine = os.uname().machine if hasattr(os, "uname") else ""
    return machine if sys.platform.startswith("linux") and machine in _ARCH else None


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _fork_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """Classic BPF for seccomp: threads (clone with CLONE_THREAD) allowed; fork, vfork
    and clone of a process fail with EPERM; clone3 fails with ENOSYS, so the C library
    falls back to clone, which is checked; another ABI (x32, i386 via int 0x80) kills."""
    import errno

    arch, nr, _ = _ARCH[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    prog: list = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, _RET_KILL_PROCESS),
                  (ld, 0, 0, 0)]
    if machine == "x86_64":
        prog.append((jge, "eperm", 0, _X32_BIT))
    prog.append((jeq, "enosys", 0, nr["clone3"]))
    for name in ("fork", "vfork"):
        if name in nr:
            prog.append((jeq, "eperm", 0, nr[name]))
    prog += [(jeq, 0, "allow", nr["clone"]), (ld, 0, 0, 16),  # args[0], low word: flags
             (jset, "allow", "eperm", _CLONE_THREAD)]
    labels = {"allow": (ret, 0, 0, _RET_ALLOW),
              "eperm": (ret, 0, 0, _RET_ERRNO | errno.EPERM),
              "enosys": (ret, 0, 0, _RET_ERRNO | errno.ENOSYS)}
    at = {name: len(prog) + i for i, name in enumerate(labels)}
    prog += labels.values()
    return [(code, at[jt] - i - 1 if isinstance(jt, str) else jt,
             at[jf] - i - 1 if isinstance(jf, str) else jf, k)
            for i, (code, jt, jf, k) in enumerate(prog)]


def refuse_forks() -> None:
    """From now on no thread of this process can start another process (threads
    still can): a seccomp filter on every thread (TSYNC). Raises OSError where it
    cannot be installed; the caller must then not run the plugin."""
    machine = seccomp_arch()
    if machine is None:
        raise OSError(f"no seccomp filter for this machine ({os.uname().machine})")
    program = _fork_filter(machine)
    filters = (_SockFilter * len(program))(*(_SockFilter(*ins) for ins in program))
    prog = _SockFprog(len(program), filters)
    if not _prctl(_PR_SET_NO_NEW_PRIVS, 1):
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    done = _libc().syscall(ctypes.c_long(_ARCH[machine][2]), ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                           ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog))
    if done != 0:
        error = ctypes.get_errno() if done < 0 else 0
        raise OSError(error, f"seccomp(SET_MODE_FILTER) failed ({done}: "
                      f"{os.strerror(error) if error else 'a thread could not be synchronised'})")


def containment_kind(memory_gib: float | None) -> str:
    """What holds a plugin worker's whole process tree to ``--plugin-memory`` on this
    host, in words (the CLI prints it): a cgroup where one can be made (tried here and
    removed), else one process (seccomp) with that address space, else the address space
    of each process only."""
    if memory_gib is None:
        return describe(None, None)
    memory = int(memory_gib * 2 ** 30)
    group = new_cgroup(memory)
    try:
        return describe(memory, group, where=False)
    finally:
        if group is not None:
            group.remove()


def describe(memory_bytes: int | None, group: Cgroup | None, where: bool = True) -> str:
    """The containment of a worker with this limit and cgroup (None: none made)."""
    if memory_bytes is None:
        return "no memory limit (--plugin-memory not set)"
    if group is not None:
        return group.describe(where)
    if seccomp_arch() is not None:
        return (f"no cgroup on this host: no extra processes (seccomp) + address space "
                f"{_gib(memory_bytes)}")
    return (f"no cgroup on this host and no seccomp filter for {os.uname().machine}: "
            f"address space {_gib(memory_bytes)} per process only (a plugin that forks gets "
            f"it per process)")
