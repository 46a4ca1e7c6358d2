"""Hostile plugins (tests/plugins/hostile_*.py), at least one per root cause of the
sandbox issue: each did damage before plugins ran only in confined workers (noted
per test), and each must now be refused, fail alone, or do nothing outside its
worker. One run carries the reference gradient and every hostile plugin that gets
past loading; the gradient alone is the comparison."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from faithbench.benchmark.core import confine, isolation
from faithbench.benchmark.core.errors import PluginError
from faithbench.benchmark.core.isolation import Confinement, InProcess, is_reference, plugin_caller
from faithbench.benchmark.core.plugins import load_explainer
from faithbench.benchmark.core.records import read_jsonl, read_results
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import RunSummary, run
from faithbench.benchmark.session import open_session
from faithbench.benchmark.verbs import validate_plugin

pytestmark = pytest.mark.usefixtures("one_thread")
PLUGINS = Path(__file__).parent / "plugins"
FAST = {"limit": 24, "batch_size": 8, "progress": False}
METRICS = ("comprehensiveness", "flip_rate")
IN_RUN = ("patches_at_import", "claims_reference", "pickle_payload", "writes_pipe",
          "forges_entry", "forks_daemon", "behaves_in_validate", "named_gradient", "name_path",
          "name_markup", "peeks", "meta_tensor")
DAEMON = ["sleep", "613.25"]


def hostile(name: str) -> str:
    return str(PLUGINS / f"hostile_{name}.py")


def needs_landlock():
    if confine.landlock_abi() < 1 and os.environ.get("CI") != "true":
        pytest.skip("this kernel has no Landlock: a worker cannot be denied writes")


@dataclass
class Hostile:
    root: Path  # mixed/: gradient and the hostile plugins; alone/: the gradient alone
    mixed: RunSummary
    alone: RunSummary
    failures: dict  # explainer -> FailureRecord


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, synthetic_ready):
    root = tmp_path_factory.mktemp("hostile")
    saved = dict(os.environ)
    os.environ.update(FAITHBENCH_HOSTILE_OUT=str(root / "mixed"),
                      FAITHBENCH_HOSTILE_MARKER=str(root / "marker"))
    try:
        mixed = run(RunConfig(out=str(root / "mixed"), metrics=METRICS, time_budget_s=2.0,
                              explainers=("gradient", *map(hostile, IN_RUN)), **FAST))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    alone = run(RunConfig(out=str(root / "alone"), explainers=("gradient",), metrics=METRICS,
                          **FAST))
    return Hostile(root, mixed, alone, {f.explainer: f for f in mixed.failures})


def values(out: Path) -> dict:
    return {(r.explainer.split("@")[0].split("[")[0], r.metric.split("@")[0].split("[")[0]):
            [row["value"] for row in read_jsonl(out / r.per_example_file)]
            for r in read_results(out / "results.jsonl")}


def failure(failures, name: str):
    return next(f for k, f in failures.items() if name in k)


# ---------------------------------------------------------------- R1: import-time code

def test_import_time_patches_and_exit_hooks_stay_in_the_worker(hostile_run):
    """Before: patching SimpleMetric.compute and torch.Tensor.argmax at import put
    0.729 on the board for every explainer, and an atexit hook rewrote an entry."""
    h = hostile_run
    got, want = values(h.root / "mixed"), values(h.root / "alone")
    for metric in METRICS:
        assert got[("gradient", metric)] == want[("gradient", metric)]
    # the plugin's own values are those of uniform scores, computed here independently
    session = open_session("synthetic", RunConfig(metrics=METRICS, **FAST))
    from faithbench import metrics
    uniform = [[1.0] * len(e.tokens) for e in session.examples]
    for metric in METRICS:
        true = session.score(metrics.resolve(metric), uniform).values.tolist()
        assert got[("hostile_patches", metric)] == pytest.approx(true, abs=1e-6)
        assert 0.729 not in got[("hostile_patches", metric)]
    assert not (h.root / "mixed" / "leaderboard" / "forged_by_atexit").exists()


@pytest.mark.parametrize("name, says", [
    ("exit_at_import", "importing raised SystemExit: 0"),
    ("os_exit_at_import", "died (exit code 0) while loading"),
    ("interrupt_at_import", "importing raised KeyboardInterrupt"),
    ("loops_at_import", "did not finish loading within 6s"),
])
def test_exits_interrupts_and_hangs_at_import_are_load_failures(name, says, monkeypatch,
                                                                 synthetic_ready):
    """Before: sys.exit(0) at import made `validate` exit 0 with nothing printed, and
    an endless loop hung it for good."""
    monkeypatch.setattr(isolation, "LOAD_TIMEOUT_S", 6.0)
    start = time.perf_counter()
    checks = validate_plugin(hostile(name), RunConfig(**FAST))
    assert [(c.check, c.passed) for c in checks] == [("load", False)]
    assert says in checks[0].detail and "failed at load" in checks[0].detail
    assert time.perf_counter() - start < 30


def test_validate_of_a_plugin_that_exits_at_import_exits_1():
    done = subprocess.run([sys.executable, "-m", "faithbench.benchmark.cli", "validate",
                           hostile("exit_at_import")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False)
    assert done.returncode == 1, done.stderr
    # (the checks table wraps its detail column at 120 characters)
    assert "importing raised SystemExit: 0" in " ".join((done.stdout + done.stderr).split())


# ---------------------------------------------------------------- R2: who is a reference

def test_a_claimed_reference_module_is_a_plugin_and_changes_nothing_here(hostile_run, model,
                                                                        batch):
    """Before: a class claiming ``__module__ = "submissions.gradient"`` (now
    ``faithbench.submissions.gradient``) ran in-process
    and flipped the session's targets; its NaN passed the check on the mask it zeroed."""
    h = hostile_run
    assert not is_reference(load_explainer(hostile("claims_reference")))
    f = failure(h.failures, "hostile_impostor")
    assert f.stage == "explain" and "NaN or infinite" in f.message
    assert values(h.root / "mixed")[("gradient", "flip_rate")] == \
        values(h.root / "alone")[("gradient", "flip_rate")]


class _ChangesItsInput:
    """An object built in this process, run here: it changes what it is given."""

    def __init__(self):
        from faithbench.benchmark.core.api import ExplainerSpec

        self.spec = ExplainerSpec(name="local_mutator", version="1")

    def explain(self, model, batch, target, *, rng):
        target.fill_(1)
        batch.mask.fill_(False)
        return torch.ones(batch.ids.shape)


def test_an_in_process_call_gets_copies_of_the_targets_and_batch(model, batch):
    b, target = batch
    want_target, want_mask = target.clone(), b.mask.clone()
    scores = InProcess(_ChangesItsInput(), model, None).explain(b, target, seed=0)
    assert torch.equal(target, want_target) and torch.equal(b.mask, want_mask)
    assert torch.equal(scores, want_mask.float())  # padding zeroed by the caller's mask


# ---------------------------------------------------------------- R3: nothing unpickled

def test_nothing_a_worker_sends_is_unpickled(hostile_run):
    """Before: a tensor subclass's ``__reduce_ex__`` ran in faithbench when the worker's
    answer was unpickled; a reply written onto the pipe was unpickled too."""
    h = hostile_run
    assert not (h.root / "marker").exists()
    assert "expected a torch.Tensor (not a subclass)" in failure(h.failures, "hostile_payload").message
    assert "malformed reply" in failure(h.failures, "hostile_pipe").message


class _ReturnsSubclass:
    def __init__(self):
        from faithbench.benchmark.core.api import ExplainerSpec

        self.spec = ExplainerSpec(name="local_subclass", version="1")

    def explain(self, model, batch, target, *, rng):
        return batch.mask.float().as_subclass(_Sub)


class _Sub(torch.Tensor):
    pass


def test_tensor_subclasses_are_refused_in_process_too(model, batch):
    b, target = batch
    with pytest.raises(PluginError, match="not a subclass"):
        InProcess(_ReturnsSubclass(), model, None).explain(b, target, seed=0)


# ---------------------------------------------------------------- R4: no writes from a worker

def test_a_worker_cannot_forge_entries_or_poison_caches(hostile_run):
    """Before: a plugin wrote a complete entry ``certified_oracle`` (ranked first) and
    negated the reference gradient's cached explanations from its worker."""
    needs_landlock()
    h = hostile_run
    assert "hostile_forger" not in {f.split("@")[0] for f in h.failures}
    assert not (h.root / "mixed" / "leaderboard" / "certified_oracle").exists()
    assert all(r.get("key") != "forged" for r in read_jsonl(h.root / "mixed" / "results.jsonl"))
    def rows(path):  # all but what was measured: the time and memory it took
        return [{k: v for k, v in r.items() if k not in ("seconds", "peak_mib")}
                for r in read_jsonl(path)]

    mine = {p.name: rows(p) for p in (h.root / "alone" / "explanations").glob("*.jsonl")}
    theirs = {p.name: rows(p) for p in (h.root / "mixed" / "explanations").glob("*.jsonl")
              if p.name in mine}
    assert theirs == mine and mine  # the gradient's explanations, score for score
    names = {e.header["explainer_name"] for e in h.mixed.entries}
    daemon = {"hostile_daemon"} if forks_contained_by_a_cgroup() else set()
    assert names == {"gradient", "hostile_patches", "hostile_forger", "hostile_peeks"} | daemon


# ---------------------------------------------------------------- R5: the process tree

def forks_contained_by_a_cgroup() -> bool:
    """True where a worker's tree gets a cgroup; elsewhere a plugin is held to one
    process and a plugin that forks fails by name (tests/test_containment.py)."""
    cgroup = confine.new_cgroup(1 << 30)
    if cgroup is None:
        return False
    cgroup.remove()
    return True


def _running(argv: list[str]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:-1] == \
                    [a.encode() for a in argv]:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_a_daemon_the_plugin_forked_does_not_outlive_its_worker(hostile_run):
    """Before: a double-forked daemon in its own session kept running after the run."""
    h = hostile_run
    failed = "hostile_daemon" in {f.split("@")[0] for f in h.failures}
    assert failed != forks_contained_by_a_cgroup()  # without a cgroup: the fork is refused
    assert _running(DAEMON) == []


def test_closing_a_worker_spares_the_callers_own_processes(model, batch):
    """The daemon dies with its worker; a process the caller started in a session of its
    own (e.g. a notebook's server) before the worker ran is not the worker's to kill."""
    b, target = batch
    mine = subprocess.Popen(["sleep", "617.5"], start_new_session=True)
    try:
        with plugin_caller(load_explainer(hostile("forks_daemon")), model,
                           time_budget_s=30.0) as caller:
            if forks_contained_by_a_cgroup():
                caller.explain(b, target, seed=0)
            else:
                with pytest.raises(PluginError, match="it tried to start a process"):
                    caller.explain(b, target, seed=0)
        assert _running(DAEMON) == []
        assert mine.poll() is None
    finally:
        mine.kill()
        mine.wait()


class _Allocates:
    def __init__(self, gib: float):
        from faithbench.benchmark.core.api import ExplainerSpec

        self.spec, self.gib = ExplainerSpec(name="local_allocates", version="1"), gib

    def explain(self, model, batch, target, *, rng):
        hog = bytearray(int(self.gib * 2 ** 30))
        return batch.mask.float() + len(hog) * 0


def test_a_worker_is_held_to_its_memory_limit(model, batch):
    b, target = batch
    box = Confinement(memory_gib=3.0)
    with plugin_caller(_Allocates(0.1), model, time_budget_s=30.0, box=box) as caller:
        caller.explain(b, target, seed=0)
    with (plugin_caller(_Allocates(6.0), model, time_budget_s=30.0, box=box) as caller,
          pytest.raises(PluginError, match="MemoryError")):
        caller.explain(b, target, seed=0)


# ---------------------------------------------------------------- R6: checks on the parent's side

def test_a_reply_the_checks_cannot_read_is_named_as_such(hostile_run):
    """Before: the checker's own error killed the worker, reported as "plugin exited"."""
    h = hostile_run
    message = failure(h.failures, "hostile_meta").message
    assert "could not be checked" in message and "died" not in message


def test_values_beyond_float32_are_not_finite(model, batch):
    from faithbench.benchmark.core.validation import check_scores

    b, _ = batch
    huge = torch.full(b.ids.shape, 1e300, dtype=torch.float64)
    with pytest.raises(PluginError, match="beyond float32's range"):
        check_scores("huge", huge, b)


# ---------------------------------------------------------------- R8: validation not gamed

def test_a_plugin_that_behaves_only_in_validate_fails_the_runs_spot_check(hostile_run,
                                                                         synthetic_ready):
    """Before: it passed `validate` and its noise reached the board."""
    h = hostile_run
    checks = validate_plugin(hostile("behaves_in_validate"), RunConfig(**FAST))
    assert all(c.passed for c in checks), checks
    f = failure(h.failures, "hostile_gamer")
    assert f.stage == "spot_check" and "differ" in f.message
    assert not any(r.explainer.startswith("hostile_gamer")
                   for r in read_results(h.root / "mixed" / "results.jsonl"))


def test_position_dependence_fails_validate_whatever_the_spec_declares(synthetic_ready):
    """Before: ``deterministic=False`` skipped determinism and alone-vs-batch."""
    checks = {c.check: c for c in validate_plugin(hostile("position"), RunConfig(**FAST))}
    assert checks["load"].passed and checks["shape_and_finite"].passed
    assert not checks["alone_vs_batch"].passed
    assert "differ" in checks["alone_vs_batch"].detail


# ---------------------------------------------------------------- R9: names

def test_names_cannot_claim_a_reference_escape_or_carry_markup(hostile_run):
    """Before: ``gradient[norm=l2]@1`` made the real gradient skip its units; a name
    with ``/../`` wrote outside --out; ``|`` and a newline broke tables."""
    h = hostile_run
    assert "is reserved for the reference explainer" in failure(h.failures, "named_gradient").message
    for name in ("name_path", "name_markup"):
        f = failure(h.failures, name)
        assert f.stage == "load" and "must match" in f.message
    gradient_units = [r for r in read_results(h.root / "mixed" / "results.jsonl")
                      if r.explainer.startswith("gradient")]
    assert len(gradient_units) == len(METRICS)
    assert not list(h.root.parent.rglob("escaped*"))


# ---------------------------------------------------------------- R10: what a worker holds

def test_a_worker_holds_no_examples_labels_or_rationales(hostile_run):
    """Before: a forked worker held every example, label and rationale of the session."""
    h = hostile_run
    assert "hostile_peeks" not in {f.split("@")[0] for f in h.failures}


# ---------------------------------------------------------------- R12: the time budget

class _Sleeps:
    """Sleeps ``then`` seconds per call; on an example with id ``stuck``, first sleeps
    ``TRANSPORT_S + 1`` seconds deaf to the worker's alarm (the parent has to kill it)."""

    def __init__(self, then: float):
        from faithbench.benchmark.core.api import ExplainerSpec

        self.spec, self.then = ExplainerSpec(name="local_sleeps", version="1"), then

    def explain(self, model, batch, target, *, rng):
        import signal

        if "stuck" in batch.example_ids:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            time.sleep(isolation.TRANSPORT_S + 1)
        time.sleep(self.then)
        return batch.mask.float()


def test_the_budget_counts_the_plugin_call_only(model):
    """Before: a plugin using 80 % of a 0.05 s budget was refused at 58.6 ms (the pipe
    round trip and a fresh fork after an overrun were counted). At 0.07 s of a 0.1 s
    budget the margin absorbs a loaded CI machine's sleep overshoot (a 0.04 s sleep took
    over 0.05 s there once); a restart (seconds) would still overrun it."""
    from faithbench.benchmark.core.vocab import collate

    one, stuck = collate([[5] * 10], ["one"]), collate([[5] * 10], ["stuck"])
    with plugin_caller(_Sleeps(0.07), model, time_budget_s=0.1) as caller:
        for _ in range(5):  # 0.07 s each: within
            caller.explain(one, torch.tensor([0]), seed=0)
        with pytest.raises(PluginError, match="time budget"):
            caller.explain(stuck, torch.tensor([0]), seed=0)  # killed by the parent
        assert caller.process is None
        caller.explain(one, torch.tensor([0]), seed=0)  # a fresh worker, not counted
        assert caller.starts == 2


# ---------------------------------------------------------------- --sandbox

SNOOPER = '''
import os, socket
import torch
from faithbench.benchmark.core.api import ExplainerSpec

SECRET, PORT, OUT = {secret!r}, {port}, {out!r}


def _tries():
    got = []
    try:
        got.append("read " + open(SECRET).read())
    except OSError:
        pass
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        got.append("connected")
    except OSError:
        pass
    try:
        open(os.path.join(OUT, "planted.txt"), "w").write("x")
        got.append("wrote")
    except OSError:
        pass
    return got


class Snoops:
    spec = ExplainerSpec(name="snooper", version="1")

    def explain(self, model, batch, target, *, rng):
        got = _tries()
        if got:
            raise RuntimeError("; ".join(got))
        return batch.mask.float()


EXPLAINER = Snoops()
'''


@pytest.fixture
def snooper(tmp_path):
    """A plugin that reads a secret outside its folder, connects to a local port and
    writes into a results folder; it fails naming whatever it managed."""
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("s3cret")
    out = tmp_path / "results"
    out.mkdir()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    plugin = tmp_path / "plugin" / "snooper.py"
    plugin.parent.mkdir()
    plugin.write_text(textwrap.dedent(SNOOPER.format(secret=str(secret), out=str(out),
                                                     port=server.getsockname()[1])))
    yield str(plugin), out
    server.close()


def test_default_confinement_denies_writes_and_tcp_but_not_reads(snooper, model, batch):
    needs_landlock()
    plugin, out = snooper
    b, target = batch
    with (plugin_caller(load_explainer(plugin), model, time_budget_s=30.0) as caller,
          pytest.raises(PluginError) as info):
        caller.explain(b, target, seed=0)
    assert "read s3cret" in str(info.value)  # the threat model says so
    assert "wrote" not in str(info.value) and not (out / "planted.txt").exists()
    if confine.landlock_abi() >= 4:
        assert "connected" not in str(info.value)


def test_sandbox_denies_reads_network_and_writes(snooper, model, batch):
    if confine.bwrap() is None and os.environ.get("CI") != "true":
        pytest.skip("bubblewrap (bwrap) is not installed")
    plugin, out = snooper
    b, target = batch
    box = Confinement(sandbox=True, hidden=(str(out),))
    with plugin_caller(load_explainer(plugin, box), model, time_budget_s=30.0, box=box) as caller:
        assert torch.equal(caller.explain(b, target, seed=0), b.mask.float())
    assert not (out / "planted.txt").exists()


def test_sandbox_without_bubblewrap_is_refused_clearly(monkeypatch, model):
    from faithbench.benchmark.core.errors import InputError

    monkeypatch.setattr(confine, "bwrap", lambda: None)
    with pytest.raises(InputError, match="--sandbox needs bubblewrap"):
        load_explainer(hostile("peeks"), Confinement(sandbox=True))


def test_the_sandbox_flag_reaches_the_workers_of_validate(tmp_path, snooper):
    """`faithbench validate --sandbox`: the snooper finds nothing to read, reach or write,
    so it passes; without the flag it fails on the secret it read."""
    if confine.bwrap() is None and os.environ.get("CI") != "true":
        pytest.skip("bubblewrap (bwrap) is not installed")
    plugin, _ = snooper

    def validate(*flags):
        return subprocess.run([sys.executable, "-m", "faithbench.benchmark.cli", "validate", plugin, *flags],
                              capture_output=True, text=True, timeout=300, check=False,
                              cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})

    boxed = validate("--sandbox")
    assert boxed.returncode == 0, boxed.stdout + boxed.stderr
    loose = validate()
    assert loose.returncode == 1 and "read s3cret" in loose.stdout
