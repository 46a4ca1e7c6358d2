"""``--device`` and ``--precision``: an absent device is bad input (exit 2); the model
behind the device boundary (``OnDevice``, here forced onto the CPU, where it moves
nothing) trains to the same checkpoint and gives the same results, bit for bit, as the
plain model, with every reference explainer, in this process and in workers; bf16 is a
suite and keys of its own; where a run went is in its records."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from faithbench.benchmark.cli import main
from faithbench.benchmark.core import device
from faithbench.benchmark.core.api import TaskOptions
from faithbench.benchmark.core.cost import CountingModel, Counts
from faithbench.benchmark.core.device import OnDevice, Placement, place, resolve, unplaced
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.executor import make_executor
from faithbench.benchmark.core.records import read_jsonl

pytestmark = pytest.mark.usefixtures("one_thread")  # explanations compared bit for bit

METRICS = ["comprehensiveness", "sufficiency", "flip_rate", "taucorr_loo", "token_f1",
           "randomization_cascading"]
FAST = ["--limit", "16", "--batch-size", "8", "--no-progress"]


@pytest.mark.parametrize("spec, says", [
    ("cuda", "CUDA is not available"), ("cuda:3", "CUDA is not available"),
    ("mps", "no Apple GPU"), ("tpu", "choose auto, cpu, cuda, cuda:N or mps"),
    ("cpu:1", "choose auto")])
def test_an_absent_or_unknown_device_exits_2(spec, says, tmp_path, capsys):
    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("this machine has an accelerator")
    assert main(["run", "--device", spec, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert says in err and "--device" in err
    assert not (tmp_path / "results.jsonl").exists()


def test_auto_and_cpu_resolve_to_the_cpu_here():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert resolve(None) == resolve("auto") == resolve("CPU") == torch.device("cpu")
    assert Placement().default and Placement().key == ""
    assert Placement("cuda:1").key == "cuda" and Placement("cuda:0", "bf16").key == "cuda+bf16"
    assert Placement("cpu", "bf16").key == "bf16"
    with pytest.raises(InputError, match="--precision 'fp16'"):
        Placement("cpu", "fp16")


def test_the_pool_refuses_a_gpu_and_ray_asks_for_one():
    with pytest.raises(InputError, match="forked process cannot use CUDA"):
        make_executor("pool", device="cuda:0")
    assert make_executor("pool", device="cpu").name == "pool"
    assert make_executor("ray", device="cuda:0").gpus == 1
    assert make_executor("ray", device="cpu").gpus == 0
    with pytest.raises(InputError, match="Ray assigns each job its GPU"):
        make_executor("ray", device="cuda:1")


def test_bf16_is_refused_where_the_model_is_not_a_transformer(tmp_path, capsys):
    assert main(["run", "--precision", "bf16", "--out", str(tmp_path)]) == 2
    assert "applies to the transformer family" in capsys.readouterr().err
    assert main(["run", "--tasks", "alignment", "--precision", "bf16",
                 "--out", str(tmp_path)]) == 2


def test_the_proxy_is_the_model_and_pickles_as_its_placement(synthetic_ready):
    model = copy.deepcopy(unplaced(synthetic_ready.model))
    placed = place(model, Placement(), force=True)
    assert isinstance(placed, OnDevice) and isinstance(placed, type(model))
    assert place(placed, Placement(), force=True) is placed and unplaced(placed) is model
    assert place(model, Placement()) is model  # the CPU at fp32: nothing wrapped
    # as an explainer sees it (counted): still the model's type, still on its device
    counted = CountingModel(placed, Counts())
    assert isinstance(counted, type(model)) and isinstance(counted, torch.nn.Module)
    assert unplaced(counted) is model and counted.placement == placed.placement
    assert place(counted, Placement(), force=True) is counted
    assert placed.eval() is placed and not model.training and placed.train() is placed
    again = pickle.loads(pickle.dumps(placed))
    twin = copy.deepcopy(placed)
    for other in (again, twin):
        assert isinstance(other, OnDevice) and other.placement == placed.placement
        assert unplaced(other) is not model
        assert all(torch.equal(a, b) for a, b in zip(other.state_dict().values(),
                                                      model.state_dict().values()))


def _run(out, cache, monkeypatch, *extra):
    monkeypatch.setenv("FAITHBENCH_CACHE", str(cache))
    assert main(["run", "--out", str(out), "--metrics", *METRICS, *FAST, *extra]) == 0


def test_behind_the_boundary_training_and_every_result_are_the_same(tmp_path, monkeypatch):
    """Both runs train their model (each in its own cache), one through the proxy; every
    reference explainer the model serves."""
    _run(tmp_path / "plain", tmp_path / "c1", monkeypatch)
    crossed = []
    back = device._back
    monkeypatch.setattr(device, "_back", lambda v: crossed.append(1) or back(v))
    monkeypatch.setattr(Placement, "default", property(lambda self: False))
    _run(tmp_path / "placed", tmp_path / "c2", monkeypatch)
    assert len(crossed) > 300  # training, explaining and scoring went through OnDevice
    assert list((tmp_path / "c2").rglob("*.pt"))  # the model was trained behind it
    plain = read_jsonl(tmp_path / "plain" / "results.jsonl")
    placed = read_jsonl(tmp_path / "placed" / "results.jsonl")
    assert len(plain) == len(placed) >= 15 * len(METRICS)
    for a, b in zip(plain, placed):
        assert a["key"] == b["key"] and a["estimate"] == b["estimate"], a["key"]
        assert a["provenance"]["checkpoint"] == b["provenance"]["checkpoint"]
        for count in ("rows_forwarded", "rows_requested", "explain_forward_rows",
                      "explain_backward_rows"):  # the engine is shared through the proxy
            assert a["timing"].get(count) == b["timing"].get(count), (a["key"], count)
        assert read_jsonl(tmp_path / "plain" / a["per_example_file"]) == read_jsonl(
            tmp_path / "placed" / b["per_example_file"])
        assert b["provenance"]["device"] == "cpu"
    # in workers (a fresh process loads the pickled proxy, placed again there): the
    # explanations are the ones computed here. Occlusion's deletions come from the
    # session's shared engine here (forwarded earlier for a metric, in other chunks) and
    # are forwarded afresh in a worker: equal up to float32 rounding (6e-8 seen)
    _run(tmp_path / "workers", tmp_path / "c2", monkeypatch, "--isolation", "process")
    for name in ("gradient", "lrp", "occlusion"):
        [here] = (tmp_path / "placed" / "explanations").glob(f"synthetic-{name}-*.jsonl")
        there = tmp_path / "workers" / "explanations" / here.name
        ours, theirs = read_jsonl(here), read_jsonl(there)
        assert [(r["id"], r["target"]) for r in ours] == [(r["id"], r["target"]) for r in theirs]
        for a, b in zip(ours, theirs):
            assert a["scores"] == pytest.approx(b["scores"], rel=0, abs=1e-6), name


def test_bf16_is_its_own_suite_and_its_records_say_so(tmp_path, monkeypatch):
    """A one-layer MiniLM on the synthetic task: fp32 and bf16 (autocast on the CPU)
    train different models, under different task ids and keys; the values differ."""
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    common = ["--model", "transformer", "--layers", "1", "--train-limit", "64", "--epochs", "1",
              "--explainers", "gradient", "--metrics", "taucorr_loo", "--device", "cpu",
              "--allow-weak-model", *FAST]  # a model of 64 rows and one epoch: at chance
    for precision in ("fp32", "bf16"):
        assert main(["run", "--out", str(tmp_path / precision), "--precision", precision,
                     *common]) == 0
    [fp32] = read_jsonl(tmp_path / "fp32" / "results.jsonl")
    [bf16] = read_jsonl(tmp_path / "bf16" / "results.jsonl")
    assert fp32["task"] == "synthetic[model=transformer;seed=0]@1"
    assert bf16["task"] == "synthetic[model=transformer;precision=bf16;seed=0]@1"
    assert fp32["key"] != bf16["key"]
    assert fp32["provenance"]["checkpoint"] != bf16["provenance"]["checkpoint"]
    assert "precision" not in fp32["provenance"]["config"]["run"]
    assert bf16["provenance"]["config"]["run"]["precision"] == "bf16"
    assert bf16["provenance"]["config"]["task"]["trained_on"] == "bf16"
    assert "trained_on" not in fp32["provenance"]["config"]["task"]
    assert fp32["estimate"]["mean"] != bf16["estimate"]["mean"]


def test_a_model_trained_elsewhere_has_its_own_cache_key(monkeypatch):
    from faithbench import tasks
    task = tasks.get_task("synthetic")
    here = task.model_file(TaskOptions())
    assert task.model_file(TaskOptions(device="cpu")) == here
    assert task.model_file(TaskOptions(device="cuda:0")) != here  # never built: no CUDA needed


def test_bucketed_explain_batches_give_the_same_results_in_the_same_order(tmp_path, monkeypatch):
    """On an accelerator the examples are explained in length order (here forced on the
    CPU): each explain batch pads little, and every file and value comes out as
    without bucketing, in example order (values within float32 rounding)."""
    from faithbench.benchmark import session
    from faithbench.benchmark.core import isolation

    run = ["--explainers", "gradient", "integrated_gradients", "occlusion", "lime",
           "--metrics", "comprehensiveness", "taucorr_loo", "randomization_cascading",
           "--limit", "40", "--batch-size", "8", "--no-progress"]
    assert main(["run", "--out", str(tmp_path / "plain"), *run]) == 0
    padded, real = [], []
    explain = isolation.InProcess.explain

    def spy(self, batch, target, **kw):
        padded.append(batch.mask.numel())
        real.append(int(batch.mask.sum()))
        return explain(self, batch, target, **kw)

    monkeypatch.setattr(isolation.InProcess, "explain", spy)
    monkeypatch.setattr(session, "bucketed", lambda config: True)
    assert main(["run", "--out", str(tmp_path / "bucketed"), *run]) == 0
    bucketed_share = 1 - sum(real) / sum(padded)
    monkeypatch.setattr(session, "bucketed", lambda config: False)
    padded.clear(), real.clear()
    assert main(["run", "--out", str(tmp_path / "again"), *run]) == 0
    plain_share = 1 - sum(real) / sum(padded)
    assert bucketed_share < plain_share / 2, (bucketed_share, plain_share)
    plain = read_jsonl(tmp_path / "plain" / "results.jsonl")
    other = read_jsonl(tmp_path / "bucketed" / "results.jsonl")
    assert [r["key"] for r in plain] == [r["key"] for r in other]
    for a, b in zip(plain, other):
        assert abs(a["estimate"]["mean"] - b["estimate"]["mean"]) < 1e-5, a["key"]
        rows_a = read_jsonl(tmp_path / "plain" / a["per_example_file"])
        rows_b = read_jsonl(tmp_path / "bucketed" / b["per_example_file"])
        assert [r["id"] for r in rows_a] == [r["id"] for r in rows_b]
    for here in (tmp_path / "plain" / "explanations").glob("*.jsonl"):
        mine = read_jsonl(here)
        theirs = read_jsonl(tmp_path / "bucketed" / "explanations" / here.name)
        assert [r["id"] for r in mine] == [r["id"] for r in theirs]
        assert [r["target"] for r in mine] == [r["target"] for r in theirs]
        for x, y in zip(mine, theirs):
            assert max(abs(p - q) for p, q in zip(x["scores"], y["scores"])) < 1e-5


def test_the_sandbox_keeps_to_the_cpu():
    from faithbench.benchmark.plan import RunConfig
    with pytest.raises(InputError, match="--sandbox with --device cuda:0"):
        RunConfig(sandbox=True, device="cuda:0")
    assert RunConfig(sandbox=True).device == "cpu"
