"""The benchmark on one device, stage by stage, beside the model's bare forward.

    python benchmarks/gpu.py --data-dir ../shared/data --out runs/gpu

1. Fine-tunes MiniLM on SST-2 for one epoch (``--model transformer --epochs 1``, the
   published MiniLM setting) on ``--device`` (default: auto), in a cache of its own
   under ``--out``, so it really trains; timed, rows/s = training rows / seconds.
2. The model's bare batched forward on the same device: the first ``--n`` (1,000) test
   sentences, in passes of the model's rows-per-pass cap, no gradient, the batch
   already on the device (the hardware's rate for these rows), and again through
   faithbench's device boundary (CPU batch in, CPU probabilities out: the rate an
   explainer or metric can get at most).
3. ``faithbench run`` on those sentences with every explainer that applies and every
   metric (or ``--explainers`` / ``--metrics``), in this process; each explainer's
   explain rows/s (examples, and rows forwarded through the model) and each metric's
   scoring rows/s, from the records' timings, with the peak memory the records measured
   (``explain_peak_mib``: on CUDA ``torch.cuda.max_memory_allocated`` above the batch's
   start) and the process's peak at the end.
4. The padding share of the explain batches in split order and bucketed by length
   (what ``--device`` other than the CPU does, ``session.bucketed``).

Prints one table per stage and writes them to ``<out>/gpu.json``. Sized for under ten
minutes on one modern GPU; on a CPU use a small model: the test runs
``--device cpu --tasks synthetic --layers 1 --train-limit 64 --n 16``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from tabulate import tabulate


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", help="local copies of the hub datasets (../shared/data)")
    p.add_argument("--out", default="runs/gpu")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N, mps")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    p.add_argument("--tasks", default="sentiment", help="one classification task")
    p.add_argument("--n", type=int, default=1000, help="test examples explained (1,000)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--train-limit", type=int, help="fine-tune on the first N rows only")
    p.add_argument("--layers", type=int, help="keep the first N encoder layers (tests)")
    p.add_argument("--explainers", nargs="*", default=[], help="default: all that apply")
    p.add_argument("--metrics", nargs="*", default=[], help="default: all that apply")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, help="torch CPU threads")
    return p.parse_args(argv)


def model_args(args) -> list[str]:
    """The options that decide the model, as ``faithbench run`` takes them."""
    out = ["--tasks", args.tasks, "--model", "transformer", "--epochs", str(args.epochs),
           "--device", args.device, "--precision", args.precision]
    for flag, value in (("--data-dir", args.data_dir), ("--train-limit", args.train_limit),
                        ("--layers", args.layers)):
        if value is not None:
            out += [flag, str(value)]
    return out


def peak_mib(device) -> float:
    """The process's peak memory: the device's allocator on CUDA, else the RSS high-water."""
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2 ** 20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fine_tune(args, config):
    """Stage 1: the model, trained here (its own cache), timed."""
    from faithbench.benchmark.session import open_session

    start = time.perf_counter()
    session = open_session(args.tasks, config, config.seeds[0])
    seconds = time.perf_counter() - start
    prepared = session.prepared
    rows = sum(1 for _ in prepared.splits.get("train", ())) * args.epochs
    return session, {"stage": f"read data + fine-tune ({args.epochs} epoch"
                     f"{'s' if args.epochs > 1 else ''})", "rows": rows,
                     "seconds": seconds, "from cache": prepared.loaded_from_cache,
                     "accuracy": prepared.accuracy}


def bare_forward(session, device) -> list[dict]:
    """Stage 2: rows/s of plain forward passes over the session's examples, on the
    device (batch moved first) and through the device boundary."""
    import torch

    from faithbench.benchmark.core.device import _to, unplaced
    from faithbench.benchmark.core.models.training import seed_everything

    seed_everything(0)
    model = session.prepared.model
    cap = getattr(model, "max_rows_per_pass", 256)
    batches = [b for b, *_ in session.prepared.batches(session.examples, cap)]
    inner = unplaced(model)
    on_device = [_to(b, device) for b in batches]
    placement = getattr(model, "placement", None)
    autocast = placement.autocast() if placement is not None else None
    out = []
    for name, call, data in (
            ("bare forward (on the device)", inner.logits, on_device),
            ("forward through the boundary", model.logits, batches)):
        with torch.no_grad():
            call(data[0])  # warm-up: kernels, allocator
            sync(device)
            start = time.perf_counter()
            for b in data:
                if autocast is not None and call is inner.logits:
                    with placement.autocast():
                        call(b)
                else:
                    call(b)
            sync(device)
        seconds = time.perf_counter() - start
        out.append({"stage": name, "rows": sum(len(b) for b in batches),
                    "seconds": seconds})
    return out


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def padding(session, size: int) -> dict:
    """Stage 4: the padded share of the explain batches, in split order and by length."""
    from faithbench.benchmark.session import padded_share

    lengths = [len(e.tokens) for e in session.examples]
    by_length = sorted(range(len(lengths)), key=lengths.__getitem__)
    return {"split order": padded_share(lengths, list(range(len(lengths))), size),
            "bucketed by length": padded_share(lengths, by_length, size)}


def stages_of_run(out: Path) -> list[dict]:
    """Stage 3: per explainer and per metric, from the run's records."""
    from faithbench.benchmark.core.records import read_jsonl

    records = read_jsonl(out / "results.jsonl")
    explainers: dict[str, dict] = {}
    metrics: dict[str, dict] = {}
    for r in records:
        t = r.get("timing") or {}
        n = t.get("n_examples") or r["estimate"]["n"]
        e = explainers.setdefault(r["explainer"], {
            "stage": f"explain {r['explainer']}", "rows": n, "seconds": t.get("explain_s"),
            "forward rows": t.get("explain_forward_rows"),
            "peak MiB": t.get("explain_peak_mib")})
        e["seconds"] = e["seconds"] or t.get("explain_s")
        m = metrics.setdefault(r["metric"], {"stage": f"score {r['metric']}", "rows": 0,
                                             "seconds": 0.0, "forward rows": 0})
        m["rows"] += n
        m["seconds"] += t.get("metric_s") or 0.0
        m["forward rows"] += t.get("rows_forwarded") or 0
    return [*explainers.values(), *metrics.values()]


def table(rows: list[dict], forward_rate: float) -> str:
    head = ["stage", "rows", "seconds", "rows/s", "forward rows", "forward rows/s",
            "× bare forward", "peak MiB"]
    body = []
    for r in rows:
        s = r.get("seconds") or 0.0
        fwd = r.get("forward rows")
        rate = fwd / s if fwd and s else None
        body.append([r["stage"], r["rows"], f"{s:.2f}", f"{r['rows'] / s:,.1f}" if s else "",
                     f"{fwd:,}" if fwd is not None else "", f"{rate:,.0f}" if rate else "",
                     f"{rate / forward_rate:.2f}" if rate else "",
                     f"{r['peak MiB']:.0f}" if r.get("peak MiB") is not None else ""])
    return tabulate(body, head, tablefmt="github", disable_numparse=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from faithbench.benchmark.cli import build_parser, options
    from faithbench.benchmark.cli import main as faithbench
    from faithbench.benchmark.core.device import resolve
    from faithbench.benchmark.core.errors import FaithbenchError

    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["FAITHBENCH_CACHE"] = str(out / "cache")  # trains here, never loads
    # it times the stages: a model cut short to time them (--train-limit) may be at
    # chance, which the model gate would refuse
    run_argv = ["run", *model_args(args), "--limit", str(args.n), "--out", str(out / "run"),
                "--batch-size", str(args.batch_size), "--no-progress", "--allow-weak-model"]
    if args.explainers:
        run_argv += ["--explainers", *args.explainers]
    if args.metrics:
        run_argv += ["--metrics", *args.metrics]
    try:
        device = resolve(args.device)
        config = options.checked(build_parser().parse_args(run_argv))
        session, tuned = fine_tune(args, config)
    except FaithbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    where = getattr(session.prepared.model, "placement", None)
    print(f"device: {where.describe() if where else 'cpu'}, precision {args.precision}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s)")
    print(f"model {session.prepared.checkpoint}: accuracy {tuned['accuracy']}"
          + (" (loaded from the cache)" if tuned["from cache"] else ""))
    forward = bare_forward(session, device)
    forward_rate = forward[0]["rows"] / forward[0]["seconds"]
    for r in forward:
        r["forward rows"] = r["rows"]
    start = time.perf_counter()
    status = faithbench(run_argv)
    run_s = time.perf_counter() - start
    if status not in (0, 1):
        return status
    stages = [tuned, *forward, *stages_of_run(out / "run"),
              {"stage": "the whole run (explain + score)", "rows": len(session.examples),
               "seconds": run_s, "peak MiB": peak_mib(device)}]
    pads = padding(session, args.batch_size)
    print(table(stages, forward_rate))
    print(f"\nexplain batches of {args.batch_size}: padding {pads['split order']:.1%} in "
          f"split order, {pads['bucketed by length']:.1%} bucketed by length")
    (out / "gpu.json").write_text(json.dumps({
        "device": where.describe() if where else "cpu", "precision": args.precision,
        "argv": run_argv, "stages": stages, "padding": pads,
        "bare_forward_rows_per_s": forward_rate}, indent=1, default=str))
    return status


if __name__ == "__main__":
    sys.exit(main())
