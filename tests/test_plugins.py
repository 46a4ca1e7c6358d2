"""Loading explainer plugins by file path, module name and entry point (always in a
worker process), and what broken plugins (tests/plugins/) turn into: a PluginError
naming the plugin, the stage and — for failures at explain time — the example ids;
``run_checks`` reports them as failed checks without raising. Plugins that exit,
hang, change the model or leave threads behind are in tests/test_isolation.py;
hostile ones in tests/test_sandbox.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from faithbench import submissions
from faithbench.benchmark.core.errors import PluginError
from faithbench.benchmark.core.isolation import plugin_caller
from faithbench.benchmark.core.plugins import ENTRY_POINT_GROUP, PluginExplainer, load_explainer
from faithbench.benchmark.core.validation import run_checks

pytestmark = pytest.mark.usefixtures("one_thread")

HERE = Path(__file__).resolve().parent
BROKEN = HERE / "plugins"
SUBMISSIONS = Path(submissions.__file__).resolve().parent
IDS = ("ex-a", "ex-b", "ex-c")






def broken(name: str) -> str:
    return str(BROKEN / f"{name}.py")


def in_worker(explainer, model, b, target, budget=None):
    with plugin_caller(explainer, model, time_budget_s=budget, isolation="process") as caller:
        return caller.explain(b, target, seed=0)


# ---------------------------------------------------------------- loading

@pytest.mark.parametrize("name", submissions.UNIVERSAL)
def test_load_by_file_path(name, model, batch):
    """A plugin is a spec (data) here; its scores come from a worker, the same by path,
    by module and as the reference object in this process."""
    explainer = load_explainer(str(SUBMISSIONS / f"{name}.py"))
    assert isinstance(explainer, PluginExplainer) and explainer.spec.name == name
    by_module = load_explainer(submissions.reference_module(name))
    assert by_module.spec == explainer.spec == submissions.get_explainer(name).spec
    b, target = batch
    here = submissions.get_explainer(name).explain(model, b, target,
                                                   rng=torch.Generator().manual_seed(0))
    torch.testing.assert_close(in_worker(explainer, model, b, target), here.masked_fill(~b.mask, 0))
    torch.testing.assert_close(in_worker(by_module, model, b, target), here.masked_fill(~b.mask, 0))


@pytest.mark.parametrize("name", submissions.REFERENCE)
def test_load_by_module_name(name):
    explainer = load_explainer(f"faithbench.submissions.{name}")
    assert explainer.spec == submissions.get_explainer(name).spec


def installed_entry_point(root: Path, monkeypatch, name: str, value: str) -> None:
    """An installed distribution (a dist-info folder on sys.path) whose entry point
    ``name`` in our group is ``value``, as ``pip install`` of a plugin package makes;
    the worker sees it through the sys.path it is given."""
    info = root / "fake_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {value}\n"
                                           f"[other.group]\n{name} = submissions.gradient\n")
    monkeypatch.syspath_prepend(str(root))


@pytest.mark.parametrize("value", ["faithbench.submissions.occlusion", "faithbench.submissions.occlusion:EXPLAINER"])
def test_load_by_entry_point(tmp_path, monkeypatch, value):
    installed_entry_point(tmp_path, monkeypatch, "my_occlusion", value)
    explainer = load_explainer("my_occlusion")
    assert explainer.spec.name == "occlusion"


def test_entry_point_that_fails_to_import(tmp_path, monkeypatch):
    installed_entry_point(tmp_path, monkeypatch, "ghost", "faithbench_no_such_package.explainer")
    with pytest.raises(PluginError) as info:
        load_explainer("ghost")
    assert info.value.plugin == "ghost" and info.value.stage == "load"
    assert "'ghost'" in str(info.value) and "ModuleNotFoundError" in str(info.value)


# ---------------------------------------------------------------- broken at load time

@pytest.mark.parametrize("name, says", [
    ("no_explainer", "defines no EXPLAINER"),
    ("import_raises", "RuntimeError: this plugin cannot be imported"),
    ("bad_spec", "no `spec` of type"),
])
def test_broken_at_load(name, says):
    with pytest.raises(PluginError) as info:
        load_explainer(broken(name))
    err = info.value
    assert err.stage == "load" and err.plugin == broken(name) and err.exit_code == 1
    assert says in str(err) and broken(name) in str(err) and "failed at load" in str(err)


def test_missing_file_and_unknown_module():
    with pytest.raises(PluginError, match="no such file"):
        load_explainer(broken("does_not_exist"))
    with pytest.raises(PluginError, match="not a .py file, entry point"):
        load_explainer("faithbench_no_such_module")


# ---------------------------------------------------------------- broken at explain time

EXPLAIN_FAILURES = [
    # plugin file, spec name, what the message says, example ids it names
    ("raises_in_explain", "broken_raises", "raised ValueError: boom", IDS),
    ("returns_nan", "broken_nan", "NaN or infinite", ("ex-b",)),
    ("wrong_shape", "broken_shape", "returned shape (3, 5), expected (B, T) = (3, 4)", IDS),
    ("returns_list", "broken_list", "returned list, expected a torch.Tensor", IDS),
]


@pytest.mark.parametrize("file, name, says, ids", EXPLAIN_FAILURES)
def test_broken_at_explain(file, name, says, ids, model, batch):
    explainer = load_explainer(broken(file))  # loads fine: the failure shows when it runs
    b, target = batch
    with pytest.raises(PluginError) as info:
        in_worker(explainer, model, b, target)
    err = info.value
    assert (err.plugin, err.stage, err.example_ids) == (name, "explain", ids)
    message = str(err)
    assert f"explainer {name!r} failed at explain" in message and says in message
    assert f"[examples {', '.join(ids)}]" in message
    if file == "returns_nan":
        assert "ex-a" not in message and "ex-c" not in message  # only the bad row is named


def test_slow_plugin_over_its_time_budget(model, batch):
    explainer = load_explainer(broken("slow"))
    b, target = batch
    in_worker(explainer, model, b, target, budget=10.0)  # within budget
    with pytest.raises(PluginError) as info:
        in_worker(explainer, model, b, target, budget=0.001)
    err = info.value
    assert (err.plugin, err.stage, err.example_ids) == ("broken_slow", "explain", IDS)
    assert "time budget of 0.001s per example" in str(err) and "[examples ex-a, ex-b, ex-c]" in str(err)


# ---------------------------------------------------------------- run_checks never raises

ALL_BUT_SPEC = {"shape_and_finite", "determinism", "alone_vs_batch", "time_per_example"}


@pytest.mark.parametrize("file, failing", [
    ("raises_in_explain", ALL_BUT_SPEC),
    ("returns_nan", ALL_BUT_SPEC),
    ("wrong_shape", ALL_BUT_SPEC),
    ("returns_list", ALL_BUT_SPEC),
    # right answers, too slowly: every call runs under the budget, as in a run
    ("slow", ALL_BUT_SPEC),
])
def test_run_checks_reports_broken_plugins(file, failing, model, batch):
    b, target = batch
    explainer = load_explainer(broken(file))
    with plugin_caller(explainer, model, time_budget_s=0.005) as caller:
        results = run_checks(explainer, caller, b, target, time_budget_s=0.005)
    assert [r.check for r in results] == ["spec", "shape_and_finite", "determinism",
                                          "alone_vs_batch", "time_per_example"]
    assert {r.check for r in results if not r.passed} == failing
    first = next(r for r in results if not r.passed)
    assert first.detail  # a reason, not an empty string


def test_run_checks_on_an_object_without_spec(model, batch):
    b, target = batch
    results = run_checks(object(), None, b, target)
    assert [(r.check, r.passed) for r in results] == [("spec", False)]
    assert "no `spec`" in results[0].detail


def test_a_plugin_importing_the_old_package_name_still_validates_with_a_warning():
    """``from benchmark.core.api import ...`` (before the faithbench namespace) resolves
    in the worker to faithbench's own module, and the worker says what to import."""
    done = subprocess.run([sys.executable, "-m", "faithbench.benchmark.cli", "--threads", "1",
                           "validate", str(BROKEN / "legacy_import.py")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LegacyImportWarning" in done.stderr and "faithbench.api" in done.stderr
