"""How far a run at bf16 lies from the same run at fp32 (``--precision``): per
explainer and metric, the two means, their difference beside the fp32 CI's
half-width, and the largest per-example difference; and how many explained targets
(the model's predictions) differ.

    python benchmarks/precision_effect.py runs/bf16/fp32 runs/bf16/bf16

The two folders must hold the same units but for the precision: same checkpoint,
explainers, metrics and examples (e.g. ``faithbench run --model-path DIR --sample 200
--precision fp32`` and ``--precision bf16``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from faithbench.benchmark.core.records import read_jsonl


def units(folder: Path) -> dict[tuple[str, str], dict]:
    return {(r["explainer"], r["metric"]): r for r in read_jsonl(folder / "results.jsonl")}


def targets(folder: Path) -> dict[str, dict[str, int]]:
    """explainer name -> example id -> the target it explained."""
    out = {}
    for path in sorted((folder / "explanations").glob("*.jsonl")):
        rows = read_jsonl(path)
        out[path.name.split("-")[1]] = {r["id"]: r["target"] for r in rows}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fp32", type=Path)
    p.add_argument("bf16", type=Path)
    args = p.parse_args(argv)
    a, b = units(args.fp32), units(args.bf16)
    if a.keys() != b.keys():
        raise SystemExit("the two runs hold different (explainer, metric) units")
    rows = []
    for key in a:
        x, y = a[key], b[key]
        if x["provenance"]["checkpoint"] != y["provenance"]["checkpoint"]:
            raise SystemExit(f"{key}: the runs used different checkpoints")
        ex = {r["id"]: r.get("value") for r in read_jsonl(args.fp32 / x["per_example_file"])}
        ey = {r["id"]: r.get("value") for r in read_jsonl(args.bf16 / y["per_example_file"])}
        gaps = [abs(ex[i] - ey[i]) for i in ex if ex[i] is not None and ey.get(i) is not None]
        mx, my = x["estimate"]["mean"], y["estimate"]["mean"]
        half = (x["estimate"]["ci_high"] - x["estimate"]["ci_low"]) / 2
        rows.append([key[0].split("[")[0].split("@")[0], key[1].split("[")[0].split("@")[0],
                     f"{mx:.4f}", f"{my:.4f}", f"{my - mx:+.4f}", f"{half:.4f}",
                     f"{max(gaps):.4f}" if gaps else ""])
    print(tabulate(rows, ["explainer", "metric", "fp32", "bf16", "bf16 − fp32",
                          "fp32 CI half-width", "max |Δ| per example"],
                   tablefmt="github", disable_numparse=True))
    ta, tb = targets(args.fp32), targets(args.bf16)
    name = next(iter(ta))
    flipped = sum(ta[name][i] != tb[name].get(i) for i in ta[name])
    print(f"\npredictions (explained targets) that differ: {flipped} of {len(ta[name])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
