"""Where an explainer's ``explain`` runs: in this process (the reference explainers,
whose code is this project's), or in a worker process (every plugin, always).

A worker (``Worker``) is a fresh Python process (``faithbench.benchmark.core.plugin_host``),
never a fork of this one: it holds no examples, labels, rationales or other
explainers' scores. It gets the model through a file written here, the batches it
explains and their targets, and sends back plain arrays (``faithbench.benchmark.core.wire``:
no pickle, dtypes and shapes checked here). It runs in its own session with the
limits of ``faithbench.benchmark.core.confine`` (memory of its whole process tree: a
cgroup of its own, or one process where none can be made; parent-death signal, no
writes outside its scratch folder; ``--sandbox``: inside bubblewrap). The whole
session and cgroup are killed when the explainer is done, daemons included.

Time: the worker measures the plugin call itself (wall and CPU seconds), so the
budget excludes start-up and transport; this process waits at most twice the
budget plus ``TRANSPORT_S`` before it kills a worker that does not answer. The
budget guards against a plugin that hangs; it is not a speed contest, so the
reference explainers have none, and it scales with length: ``time_budget_s`` per
example of up to ``BUDGET_TOKENS`` tokens, and as much again per
``BUDGET_TOKENS`` tokens of a longer one (``batch_limit``).

Cost: both callers keep the last call's ``cost`` (``faithbench.benchmark.core.cost``:
rows forward and backward through the model, peak memory), measured where the
explainer runs; a worker sends it in its answer's header beside the seconds.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from faithbench.benchmark.core import confine, wire
from faithbench.benchmark.core.api import (
    CAPABILITY_TEXT,
    Batch,
    ExplainableModel,
    Explainer,
    capabilities,
)
from faithbench.benchmark.core.cost import Cost
from faithbench.benchmark.core.errors import InputError, PluginError
from faithbench.benchmark.core.plugins import PluginExplainer, spec_from_data
from faithbench.benchmark.core.validation import call_plugin, check_scores, deadline

log = logging.getLogger(__name__)

ISOLATION = ("auto", "process")  # auto: plugins in a worker, reference explainers here
# "none" (Python API only): objects the caller built in this process run here; a
# loaded plugin (``PluginExplainer``) is refused, it runs only in a worker.
API_ISOLATION = ISOLATION + ("none",)
BUDGET_TOKENS = 32  # the time budget covers an example of up to this many tokens
TRANSPORT_S = 5.0  # slack for sending a batch and its scores, beyond twice the budget
LOAD_TIMEOUT_S = 120.0  # starting Python, torch and the plugin's own imports
MEMORY_GIB = 8.0  # a worker's address-space limit (``--plugin-memory``)
_CLOSE_WAIT_S = 2.0
_LIVE: set[int] = set()  # pids of the workers running now (kept by ``kill_orphans``)
_REFERENCE_DIR = Path(__file__).resolve().parents[2] / "submissions"


@dataclass(frozen=True)
class Confinement:
    """How a worker is confined: ``sandbox`` (bubblewrap: no network, no file system
    beyond a read-only environment), the memory limit, torch threads, and paths the
    sandbox must hide even when they lie inside a readable folder."""

    sandbox: bool = False
    memory_gib: float | None = MEMORY_GIB
    threads: int = 1
    hidden: tuple[str, ...] = ()

    def check(self) -> None:
        if self.sandbox and confine.bwrap() is None:
            raise InputError("--sandbox needs bubblewrap (`bwrap`), which is not installed "
                             "(Debian/Ubuntu: apt-get install bubblewrap); without --sandbox "
                             "plugins run confined but can read your files")
        if self.memory_gib is not None and not self.memory_gib > 0:
            raise InputError(f"--plugin-memory must be > 0 GiB, got {self.memory_gib}")


def is_reference(explainer: Explainer) -> bool:
    """True for the project's own explainers: an object of a class defined in a module
    of this checkout's ``submissions`` folder. A plugin never has an object in this
    process (``PluginExplainer`` holds data), so no plugin can claim to be one."""
    if isinstance(explainer, PluginExplainer):
        return False
    cls = type(explainer)
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    return (cls.__module__.startswith("faithbench.submissions.") and file is not None
            and Path(file).resolve().parent == _REFERENCE_DIR
            and getattr(module, cls.__name__, None) is cls)


def batch_limit(time_budget_s: float | None, batch: Batch) -> float | None:
    """Seconds a batch may take: ``time_budget_s`` per example, counted once per
    ``BUDGET_TOKENS`` tokens for a longer example (a 320-token review gets ten budgets),
    since an explainer's cost grows with length.

    >>> from faithbench.benchmark.core.vocab import collate
    >>> batch_limit(2.0, collate([[5] * 10, [5] * 64, [5] * 80], ["a", "b", "c"]))
    11.0
    """
    if time_budget_s is None:
        return None
    units = torch.clamp(batch.lengths.double() / BUDGET_TOKENS, min=1.0).sum()
    return time_budget_s * float(units)


def over_budget(name: str, time_budget_s: float | None, batch: Batch,
                took: float | None = None) -> PluginError:
    limit = batch_limit(time_budget_s, batch)
    used = f"took {took:.3g}s, " if took is not None else ""
    return PluginError(name, "explain", f"exceeded its time budget of {time_budget_s}s per "
                       f"example ({used}{limit:.3g}s for a batch of {len(batch)} examples with "
                       f"{int(batch.lengths.sum())} tokens; an example of more than "
                       f"{BUDGET_TOKENS} tokens gets it once per {BUDGET_TOKENS})",
                       batch.example_ids)


class InProcess:
    """Calls an explainer here (the reference explainers, or an object the caller built
    in this process and asked to run here), stopped by SIGALRM after its budget.
    ``cost`` is the last call's (``core.cost``: rows forward and backward, peak memory)."""

    def __init__(self, explainer: Explainer, model: ExplainableModel,
                 time_budget_s: float | None):
        if isinstance(explainer, PluginExplainer):
            raise InputError(f"plugin {explainer.ref!r} runs only in a worker process")
        self.explainer, self.model, self.time_budget_s = explainer, model, time_budget_s
        self.cost = Cost()

    def explain(self, batch: Batch, target: torch.Tensor, *, seed: int) -> torch.Tensor:
        limit = batch_limit(self.time_budget_s, batch)
        error = None if limit is None else over_budget(self.explainer.spec.name,
                                                       self.time_budget_s, batch)
        timing: dict = {}
        self.cost = Cost()
        with deadline(limit, error):
            scores = call_plugin(self.explainer, self.model, batch, target, seed=seed,
                                 timing=timing)
        self.cost = Cost.from_dict(timing)
        if limit is not None and timing["wall_s"] > limit:
            raise over_budget(self.explainer.spec.name, self.time_budget_s, batch,
                              timing["wall_s"])
        return check_scores(self.explainer.spec.name, scores, batch)

    def close(self) -> None:
        pass


class Worker:
    """Calls the explainer in a fresh worker process, started at the first call (and
    again after a call it had to kill). ``cost`` is the last call's, as the worker
    measured it and sent it with the scores (``core.cost``; a value that is not a
    count or a peak is left unknown)."""

    def __init__(self, explainer: Explainer | None, model: ExplainableModel | None,
                 time_budget_s: float | None, box: Confinement = Confinement(), *,
                 ref: str | None = None):
        plugin = isinstance(explainer, PluginExplainer)
        # imported by the worker, or (obj) sent to it, built here by the caller
        self.ref = explainer.ref if isinstance(explainer, PluginExplainer) else ref
        self.obj = None if plugin else explainer
        self.spec = None if explainer is None else explainer.spec
        self.name: str = str(ref) if explainer is None else explainer.spec.name
        self.model, self.time_budget_s, self.box = model, time_budget_s, box
        self.process: subprocess.Popen | None = None
        self.scratch: Path | None = None
        self.keep: set[int] = set()
        self.fd_in = self.fd_out = -1  # ours: we write to fd_out, read from fd_in
        self.starts = 0  # workers started (a kill after an overrun starts another)
        self.cost = Cost()
        self.cgroup: confine.Cgroup | None = None  # holds the worker's whole process tree
        self.containment = ""  # what holds the tree to the memory limit, in words
        self.cgroup_peak_bytes: int | None = None  # the last closed cgroup's peak
        self._oom_kills = self._oom_reported = 0  # the cgroup's OOM kills: seen, reported

    # -- start and load --------------------------------------------------------------

    def start(self) -> dict:
        """Start the worker and wait until it has loaded the explainer; its spec (data)."""
        scratch = self.scratch = Path(tempfile.mkdtemp(prefix="faithbench-worker-"))
        init_file = scratch / "init.pt"
        torch.save({"model": self.model, "explainer": self.obj}, init_file)
        child_in, self.fd_out = os.pipe()
        self.fd_in, child_out = os.pipe()
        cmd = [sys.executable, "-m", "faithbench.benchmark.core.plugin_host", str(child_in), str(child_out)]
        readable = _readable(self.ref)
        if self.box.sandbox:
            cmd = confine.sandbox_command(readable, [Path(p) for p in self.box.hidden],
                                          scratch) + cmd
        else:
            confine.become_subreaper()
            self.keep = confine.outside_children()  # not ours to kill at close
            _warn_without_landlock()
        env = {**os.environ, "OMP_NUM_THREADS": str(self.box.threads), "HOME": str(scratch),
               "PYTHONDONTWRITEBYTECODE": "1"}
        if self.box.sandbox:
            cmd[cmd.index("--clearenv") + 1:cmd.index("--clearenv") + 1] = [
                x for k in ("PATH", "OMP_NUM_THREADS", "HOME", "PYTHONDONTWRITEBYTECODE", "LANG")
                if k in env for x in ("--setenv", k, env[k])]
        memory = None if self.box.memory_gib is None else int(self.box.memory_gib * 2 ** 30)
        no_fork = self._contain(memory)
        if self.cgroup is not None:  # entered before bubblewrap, so all of it is inside
            cmd = self.cgroup.enter_command() + cmd
        try:
            process = self.process = subprocess.Popen(
                cmd, pass_fds=(child_in, child_out), env=env, start_new_session=True,
                stdin=subprocess.DEVNULL)
            _LIVE.add(process.pid)
        finally:
            os.close(child_in)
            os.close(child_out)
        self._send({
            "ref": self.ref, "init_file": str(init_file),
            "sys_path": [os.path.abspath(p or ".") for p in sys.path if os.path.isdir(p or ".")],
            "scratch": str(scratch), "memory_bytes": memory, "threads": self.box.threads,
            "parent_pid": None if self.box.sandbox else os.getpid(), "no_fork": no_fork})
        header, _ = self._answer(LOAD_TIMEOUT_S, "load", (), during="loading")
        self.starts += 1
        return header.get("spec")

    def _send(self, header: dict, arrays: dict | None = None) -> None:
        """A request to the worker. A worker that died before reading it (it could not
        enter its cgroup, a memory kill, a crash) is said so by the answer that follows:
        ``_answer`` reads its closed end, reaps it and names the cause."""
        try:
            wire.send(self.fd_out, header, arrays)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _contain(self, memory: int | None) -> bool:
        """Hold the coming worker's whole process tree to ``memory`` bytes: a fresh
        cgroup where this host allows one, else one process (seccomp, True: the worker
        installs it) under its address-space limit. Logged at every start."""
        self._oom_kills = self._oom_reported = 0
        self.cgroup_peak_bytes = None
        self.cgroup = None if memory is None else confine.new_cgroup(
            memory, confine.PIDS_MAX + self.box.threads)
        no_fork = memory is not None and self.cgroup is None and confine.seccomp_arch() is not None
        self.containment = confine.describe(memory, self.cgroup)
        log.info("plugin %s: worker held by %s", self.name, self.containment)
        return no_fork

    def _answer(self, timeout: float | None, stage: str, ids, *, during: str):
        """The worker's next message, or a PluginError: it died, hung, sent garbage, or
        its processes together went over the memory limit (the cgroup killed some)."""
        try:
            header, arrays = self._receive(timeout, stage, ids, during=during)
        except PluginError:
            over = self._over_memory(stage, ids)
            if over is None:
                raise
            raise over from None
        over = self._over_memory(stage, ids)
        if over is not None:
            raise over
        return header, arrays

    def _over_memory(self, stage: str, ids) -> PluginError | None:
        """A PluginError if the cgroup killed any of the worker's processes since the
        last check (the worker is closed: what is left of its tree is suspect)."""
        if self.cgroup is not None:
            self._oom_kills = self.cgroup.oom_kills()
        killed = self._oom_kills - self._oom_reported
        if killed <= 0:
            return None
        self._oom_reported = self._oom_kills
        self.close()
        return PluginError(self.name, stage, f"its processes together exceeded --plugin-memory "
                           f"{self.box.memory_gib:g} GiB (killed by the cgroup: {killed} "
                           f"process(es) of its worker's tree)", ids)

    def _receive(self, timeout: float | None, stage: str, ids, *, during: str):
        ready, _, _ = select.select([self.fd_in], [], [], timeout)
        if not ready:
            self.close()
            if stage == "load":
                raise PluginError(self.name, "load", f"did not finish loading within "
                                  f"{LOAD_TIMEOUT_S:.0f}s (a hang at import?)")
            return None, None
        try:
            header, arrays = wire.decode(wire.receive(self.fd_in))
        except EOFError:
            code = self._reap()
            if code == confine.ENTER_FAILED and self.cgroup_peak_bytes == 0:  # never entered
                raise PluginError(self.name, stage, "faithbench could not put its worker into "
                                  "the cgroup made for it; set FAITHBENCH_NO_CGROUP=1 to keep "
                                  "plugins to one process instead") from None
            raise PluginError(self.name, stage, f"its worker process died (exit code {code}) "
                              f"while {during}: the plugin exited (sys.exit, os._exit) or "
                              f"crashed{_signal_name(code)}", ids) from None
        except wire.WireError as exc:
            self.close()
            raise PluginError(self.name, stage, f"its worker sent a malformed reply ({exc})",
                              ids) from None
        if header.get("op") == "error":
            self.close() if stage == "load" else None
            raise PluginError(self.name, _text(header.get("stage"), stage),
                              _text(header.get("problem"), "failed"), _ids(header.get("ids"), ids))
        return header, arrays

    # -- explain ---------------------------------------------------------------------

    def explain(self, batch: Batch, target: torch.Tensor, *, seed: int) -> torch.Tensor:
        if self.process is None or self.process.poll() is not None:
            spec = self.start()
            if spec_from_data(spec, self.name) != self.spec:
                self.close()
                raise PluginError(self.name, "load", "the worker loaded an explainer whose "
                                  "spec differs from the one loaded before (changed file?)")
        self.cost = Cost()
        limit = batch_limit(self.time_budget_s, batch)
        arrays = {"ids": batch.ids, "mask": batch.mask, "target": target,
                  **{k: getattr(batch, k) for k in ("segments", "prefix", "prefix_mask", "words")
                     if getattr(batch, k) is not None}}
        self._send({"op": "explain", "seed": int(seed), "limit_s": limit,
                    "example_ids": list(batch.example_ids)},
                   {k: v.detach().cpu().numpy() for k, v in arrays.items()})
        wait = None if limit is None else 2 * limit + TRANSPORT_S
        header, arrays = self._answer(wait, "explain", batch.example_ids,
                                      during="explaining")
        if header is None:
            raise over_budget(self.name, self.time_budget_s, batch)
        took = _seconds(header.get("wall_s"))
        if header.get("op") == "over_budget":  # stopped by the worker's alarm
            raise over_budget(self.name, self.time_budget_s, batch)
        if limit is not None and took > limit:  # finished, too late
            raise over_budget(self.name, self.time_budget_s, batch, took)
        if header.get("op") != "ok" or set(arrays) != {"scores"}:
            self.close()
            raise PluginError(self.name, "explain", "its worker sent a reply that is not "
                              "scores", batch.example_ids)
        self.cost = Cost.from_dict(header)  # forward_rows, backward_rows, peak_mib, peak_method
        return check_scores(self.name, torch.from_numpy(np.asarray(arrays["scores"])), batch)

    # -- stop ------------------------------------------------------------------------

    def _reap(self) -> int | None:
        if self.process is None:
            return None
        try:
            self.process.wait(_CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        code = self.process.returncode
        self.close()
        return code

    def close(self) -> None:
        """Stop the worker, every process in its session and its cgroup, and any daemon
        it left; remove its cgroup."""
        if self.process is None:
            self._drop_cgroup()
            return
        try:
            if self.process.poll() is None:
                try:
                    wire.send(self.fd_out, {"op": "close"})
                    self.process.wait(_CLOSE_WAIT_S)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # its session's group
            except OSError:
                pass
            self.process.wait()
            _LIVE.discard(self.process.pid)
            if self.cgroup is not None:
                self.cgroup.kill()
            confine.kill_orphans(keep=_LIVE | self.keep)
        finally:
            self._drop_cgroup()
            for fd in (self.fd_in, self.fd_out):
                try:
                    os.close(fd)
                except OSError:
                    pass
            _remove(self.scratch)
            self.process, self.scratch, self.fd_in, self.fd_out = None, None, -1, -1

    def _drop_cgroup(self) -> None:
        """Kill what is left in the worker's cgroup and remove it, keeping its OOM
        kills (reported by ``_over_memory``) and peak."""
        group, self.cgroup = self.cgroup, None
        if group is None:
            return
        self._oom_kills = group.oom_kills()
        self.cgroup_peak_bytes = group.peak_bytes()
        group.remove()


@functools.cache
def _warn_without_landlock() -> None:
    if confine.landlock_abi() < 1:
        log.warning("this kernel has no Landlock (Linux >= 5.13): plugin workers can write "
                    "your files, results included; use --sandbox for plugins you do not trust")


def _readable(ref: str | None) -> list[Path]:
    """What a sandboxed worker must read: installed packages (sys.path, less the working
    folder, which ``python -m`` puts there and may be the user's home), this checkout's
    packages, and the plugin's own folder (a file's, or a module's package)."""
    cwd = Path.cwd().resolve()
    paths = [Path(p) for p in sys.path if p and os.path.isdir(p) and Path(p).resolve() != cwd]
    paths += [Path(__file__).resolve().parents[2] / name for name in
              ("faithbench", "benchmark", "tasks", "metrics", "submissions", "leaderboard")]
    if ref and ref.endswith(".py"):
        paths.append(Path(ref).resolve().parent)
    elif ref:
        try:
            found = importlib.util.find_spec(ref.split(".")[0])
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin:
            origin = Path(found.origin).resolve()
            paths.append(origin.parent if found.submodule_search_locations else origin)
    return paths


def _remove(folder: Path | None) -> None:
    if folder is None:
        return
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        try:
            path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
        except OSError:
            pass
    try:
        folder.rmdir()
    except OSError:
        pass


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f" (signal {-code})"
    return {"SIGXCPU": " (SIGXCPU: over its CPU-time limit)",
            "SIGKILL": " (SIGKILL: killed, e.g. over its memory limit)"}.get(name, f" ({name})")


def _text(value, default: str) -> str:
    """A worker's message text, bounded and printable."""
    if not isinstance(value, str):
        return default
    return "".join(c if c.isprintable() else " " for c in value[:2000])


def _ids(value, allowed) -> tuple[str, ...]:
    """The example ids a worker names, kept only if they are the batch's."""
    allowed = tuple(allowed)
    if not isinstance(value, list):
        return allowed
    named = tuple(v for v in value if isinstance(v, str) and v in allowed)
    return named or allowed


def _seconds(value) -> float:
    return float(value) if isinstance(value, (int, float)) and value >= 0 else 0.0


def load_spec(ref: str, box: Confinement) -> dict:
    """Import plugin ``ref`` in a worker (time-limited) and return its spec as data."""
    box.check()
    worker = Worker(None, None, None, box, ref=ref)
    try:
        return worker.start()
    finally:
        worker.close()


def check_isolation(isolation: str) -> None:
    if isolation not in API_ISOLATION:
        raise InputError(f"unknown isolation {isolation!r}; choose one of {', '.join(ISOLATION)}")


@contextmanager
def plugin_caller(explainer: Explainer, model: ExplainableModel, *,
                  time_budget_s: float | None, isolation: str = "auto",
                  box: Confinement = Confinement()):
    """The object whose ``explain(batch, target, seed=)`` every caller uses; closed after.
    A reference explainer runs here (``auto``) and without a time budget."""
    check_isolation(isolation)
    missing = explainer.spec.requires - capabilities(model)
    if missing:
        what = "; ".join(f"{c}: {CAPABILITY_TEXT.get(c, c)}" for c in sorted(missing))
        raise PluginError(explainer.spec.name, "capabilities",
                          f"needs {', '.join(sorted(missing))}, which model "
                          f"{type(model).__name__} does not offer (it has: "
                          f"{', '.join(sorted(capabilities(model)))}); {what}")
    reference = is_reference(explainer)
    budget = None if reference else time_budget_s
    if isolation == "none" and isinstance(explainer, PluginExplainer):
        raise InputError(f"plugin {explainer.ref!r}: a plugin runs only in a worker process; "
                         "isolation 'none' is for objects built in this process")
    if (reference and isolation == "auto") or isolation == "none":
        caller: InProcess | Worker = InProcess(explainer, model, budget)
    else:
        box.check()
        caller = Worker(explainer, model, budget, box)
    try:
        yield caller
    finally:
        caller.close()
