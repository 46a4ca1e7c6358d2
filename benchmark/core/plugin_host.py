"""The plugin worker: ``python -m faithbench.benchmark.core.plugin_host IN_FD OUT_FD``.

Started fresh for each plugin (never a fork of a loaded session, so it holds no
examples, labels or rationales), it confines itself (``confine.confine_self``; where
no cgroup holds its process tree, ``confine.refuse_forks`` keeps it one process),
loads the model from the file faithbench wrote, and only then imports the plugin.
It answers ``explain`` requests with plain arrays (``wire``): the scores, and in the
header the call's wall and CPU seconds and its cost (``core.cost``: ``forward_rows``,
``backward_rows``, ``peak_mib``, ``peak_method``), until told to close or
until its input closes, and ends with ``os._exit``: no ``atexit`` hook a plugin
registered ever runs.

Nothing here is trusted by the parent: after the import, the plugin could have
changed any of this code. The checks made here (weights unchanged, no thread
left, the time used) give an honest plugin a clear message; the parent checks
again what matters for the results (shape, dtype, finite values, its own mask).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import traceback
from pathlib import Path

CLOSE = "close"


def main(fd_in: int, fd_out: int) -> None:
    os.dup2(2, 1)  # whatever a plugin prints goes to stderr, never into a message
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the user's Ctrl-C is for faithbench
    from faithbench.benchmark.core import wire

    header, _ = wire.decode(wire.receive(fd_in))
    sys.path[:0] = [p for p in header["sys_path"] if p not in sys.path]
    from faithbench.benchmark.core.confine import confine_self
    from faithbench.benchmark.core.cost import open_clear_refs

    open_clear_refs()  # peak memory by the kernel's VmHWM: the write is refused once confined
    confine_self(Path(header["scratch"]), header["memory_bytes"], header["parent_pid"])
    os.environ["TMPDIR"] = header["scratch"]
    import torch

    torch.set_num_threads(header["threads"])
    if header.get("no_fork"):  # no cgroup holds the tree: the worker stays one process
        # (before the init file, which may hold an object to unpickle; threads still work)
        from faithbench.benchmark.core.confine import refuse_forks

        try:
            refuse_forks()
        except OSError as exc:
            wire.send(fd_out, {"op": "error", "stage": "load", "ids": [], "problem":
                               f"faithbench could not keep its worker to one process ({exc}); "
                               "the plugin was not imported"})
            os._exit(0)
    loaded = torch.load(header["init_file"], map_location="cpu", weights_only=False)
    model = loaded["model"]
    try:
        explainer = _load(header, loaded.get("explainer"))
    except BaseException as exc:  # noqa: BLE001 — a plugin's import may raise anything
        wire.send(fd_out, {"op": "error", "stage": "load", "ids": [],
                           "problem": _describe(exc) + _fork_note(header, exc)})
        os._exit(0)
    wire.send(fd_out, {"op": "loaded", "spec": spec_data(explainer)})
    if model is None:  # loaded only to read the spec
        os._exit(0)
    _serve(fd_in, fd_out, explainer, model, header)
    os._exit(0)


def _load(header: dict, explainer):
    if explainer is not None:
        return explainer
    from faithbench.benchmark.core.plugins import check_loaded, resolve_in_worker

    return check_loaded(resolve_in_worker(header["ref"]), header["ref"])


def _describe(exc: BaseException) -> str:
    from faithbench.benchmark.core.errors import PluginError

    if isinstance(exc, PluginError):
        return exc.problem
    where = traceback.extract_tb(exc.__traceback__)
    last = f" (at {Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    detail = f": {exc}" if str(exc) else ""
    return f"importing raised {type(exc).__name__}{detail}{last}"


def _fork_note(header: dict, exc: BaseException | None) -> str:
    """Where the worker is kept to one process and ``exc`` came from a refused fork
    (PermissionError EPERM, no file name): why, in words."""
    if not header.get("no_fork"):
        return ""
    from faithbench.benchmark.core.confine import FORK_REFUSED

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, PermissionError) and exc.errno == errno.EPERM and exc.filename is None:
            return f"; it tried to start a process, and {FORK_REFUSED}"
        exc = exc.__cause__ or exc.__context__
    return ""


def spec_data(explainer) -> dict:
    """The spec as plain JSON data: the only thing the parent learns from a load."""
    spec = explainer.spec
    return {"name": spec.name, "version": spec.version, "requires": sorted(spec.requires),
            "params": [[k, list(v) if isinstance(v, tuple) else v] for k, v in spec.params],
            "deterministic": spec.deterministic, "citation": spec.citation,
            "description": spec.description, "cost": spec.cost}


def _serve(fd_in: int, fd_out: int, explainer, model, first: dict) -> None:
    import numpy as np
    import torch

    from faithbench.benchmark.core import wire
    from faithbench.benchmark.core.api import Batch
    from faithbench.benchmark.core.confine import limit_cpu
    from faithbench.benchmark.core.errors import PluginError
    from faithbench.benchmark.core.validation import call_plugin, deadline

    while True:
        try:
            header, arrays = wire.decode(wire.receive(fd_in))
        except EOFError:
            return
        if header.get("op") == CLOSE:
            return
        t = {k: torch.from_numpy(v) for k, v in arrays.items()}
        batch = Batch(ids=t["ids"], mask=t["mask"], example_ids=tuple(header["example_ids"]),
                      segments=t.get("segments"), prefix=t.get("prefix"),
                      prefix_mask=t.get("prefix_mask"), words=t.get("words"))
        limit = header["limit_s"]
        limit_cpu(None if limit is None else 4 * limit * max(torch.get_num_threads(), 1) + 10)
        timing: dict = {}
        reply: tuple[dict, dict | None]
        error = PluginError(explainer.spec.name, "explain", "over budget", batch.example_ids)
        try:
            with deadline(limit, error):
                scores = call_plugin(explainer, model, batch, t["target"], seed=header["seed"],
                                     catch=BaseException, timing=timing)
            reply = ({"op": "ok", **timing}, {"scores": scores.numpy().astype(np.float32)})
        except PluginError as exc:
            reply = ({"op": "over_budget" if exc is error else "error", "stage": exc.stage,
                      "problem": exc.problem + _fork_note(first, exc), "ids": list(exc.example_ids),
                      **timing}, None)
        except Exception as exc:  # noqa: BLE001 — the checks failed on what the plugin returned
            reply = ({"op": "error", "stage": "explain", "ids": list(batch.example_ids),
                      "problem": f"returned scores that could not be checked "
                                 f"({type(exc).__name__}: {exc})", **timing}, None)
        wire.send(fd_out, *reply)


if __name__ == "__main__":
    try:
        main(int(sys.argv[1]), int(sys.argv[2]))
    except BaseException:  # noqa: BLE001 — the worker's own failure, before any plugin
        traceback.print_exc()
        os._exit(3)
    os._exit(0)
