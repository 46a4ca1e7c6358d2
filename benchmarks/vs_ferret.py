"""faithbench against ferret (Attanasio et al. 2023) on the same model, the same
explanations and the same metric definitions: do the numbers agree, and which tool
is faster?

    python benchmarks/vs_ferret.py --data-dir ../shared/data --out runs/vs_ferret

1. The fine-tuned MiniLM SST-2 model of ``--model transformer`` (trained, or loaded
   from the cache) is exported as a Hugging Face checkpoint directory.
2. ``benchmarks/ferret_side.py`` runs in its own virtualenv (ferret-xai 0.4.2 pins
   transformers<5, datasets<3, numpy<2, captum<0.8, older than faithbench's, so it
   cannot be an extra of this package; the venv is built on first use from
   ``benchmarks/peers-requirements.txt``): ferret's Gradient, Gradient x Input, LIME
   and Partition SHAP explain the first N validation sentences, and ferret's AOPC
   comprehensiveness, sufficiency and tau-LOO evaluators score them, timed.
3. ferret's evaluators run again on its explanations, timed, and right after them one
   ``faithbench score --model-path`` process on the exported directory (timed end to
   end: start-up, model and data loading included) scores the four explanation files
   with ``comprehensiveness[preset=ferret]``, ``sufficiency[preset=ferret]`` and
   ``taucorr_loo[preset=ferret]``: both tools' metrics in the same conditions. Equal
   scores are ordered as ferret's numpy orders them on tied probes (``tie_order``): the
   preset's ``ties=introsort``, or ``ties=numpy`` where ferret's numpy sorts with AVX-512.
4. Per example the two tools must agree to 1e-4 (the script exits 1 otherwise); the
   table gives the largest difference and both tools' times. One exception, counted in
   its own column: a τ-LOO value may differ where it is ferret's formula on ferret's
   inputs as float32 rounds them (``rounding_tie``): two of ferret's leave-one-out
   drops within ``NEAR_TIE`` (2e-7: probabilities near 1 are a few float32 steps
   apart, and the tools' forwards differ by padding and kernels) tied or ordered the
   other way, or two scores apart in float64 (ferret) but equal in float32
   (faithbench). ``ferret-loo.jsonl`` holds ferret's drops.
5. The perturbation explainers, per example: ferret's LIME (its default
   min(P², 5000) samples over P pieces, [MASK] substitution) and Partition SHAP
   (shap's default budget of 500 model evaluations), timed in step 2, against
   faithbench's ``lime`` with ferret's mean sample count and ``kernel_shap`` with 500
   samples on the same model and sentences, each with the ``mask`` eraser (ferret's
   substitution: rows keep their length) and with ``delete`` (faithbench's default:
   removed words shorten the row), timed in this process (model and data loaded
   first). Sample counts match; the definitions do not (ferret's LIME and SHAP
   perturb pieces and re-tokenize decoded text, faithbench's perturb words in place,
   and Partition SHAP's hierarchy is not KernelSHAP's kernel), so this compares cost,
   not scores.

The tests never need ferret; this is a benchmark. ``--reuse`` keeps a finished ferret
side (LIME and SHAP take about 11 s per sentence on one core).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

from faithbench.benchmark.core.ids import short_name

HERE = Path(__file__).resolve().parent
VENV = Path.home() / ".cache" / "faithbench" / "peers-venv"
NAMES = ("gradient", "gradient_x_input", "lime", "partition_shap")
METRICS = {"aopc_compr": "comprehensiveness[preset=ferret]",
           "aopc_suff": "sufficiency[preset=ferret]",
           "taucorr_loo": "taucorr_loo[preset=ferret]"}
TOLERANCE = 1e-4
NEAR_TIE = 2e-7  # two probabilities near 1 this close are a few float32 steps (6e-8) apart


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--out", default="runs/vs_ferret")
    p.add_argument("--n", type=int, default=200, help="validation sentences (default 200)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of both tools")
    p.add_argument("--reuse", action="store_true", help="keep a finished ferret side in --out")
    p.add_argument("--skip-explainers", action="store_true",
                   help="leave out step 5 (the perturbation explainers' cost per example)")
    p.add_argument("--train-limit", type=int, default=None,
                   help="fine-tune MiniLM on the first N training rows only (any weights "
                   "time the same; the published comparison uses the full model)")
    return p.parse_args()


def export_model(data_dir: str, target: Path, threads: int, train_limit: int | None) -> str:
    """The fine-tuned SST-2 MiniLM as a Hugging Face directory; returns its weights hash."""
    import torch

    from faithbench import tasks
    from faithbench.benchmark.core.api import TaskOptions
    torch.set_num_threads(threads)
    ready = tasks.get_task("sentiment").prepare(
        TaskOptions(data_dir=data_dir, model="transformer", epochs=1, train_limit=train_limit),
        progress=False)
    hf = ready.model.hf
    hf.config.id2label = dict(enumerate(ready.spec.labels))
    hf.config.label2id = {name: i for i, name in enumerate(ready.spec.labels)}
    hf.save_pretrained(target)
    ready.model.tokenizer.save_pretrained(target)
    # the exported directory, read back as --model-path, must be the same model (its
    # accuracy is measured here once and cached, outside the timed runs)
    exported = tasks.get_task("sentiment").prepare(
        TaskOptions(data_dir=data_dir, model_path=str(target)), progress=False)
    if exported.accuracy != ready.accuracy:
        raise SystemExit(f"exported model: accuracy {exported.accuracy} != {ready.accuracy}")
    print(f"model {ready.checkpoint}: accuracy {ready.accuracy}")
    return ready.checkpoint


def venv_python() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)
        subprocess.run([*pip, "-r", str(HERE / "peers-requirements.txt")], check=True)
    return python


def ferret_side(model_dir: Path, args, out: Path, checkpoint: str) -> None:
    """ferret's explanations and first scores in ``out`` (kept with --reuse when they
    are of this model and n); their timings stay in ``out/timing.json``."""
    marker = out / "checkpoint.txt"
    if args.reuse and (out / "timing.json").exists() and marker.exists() \
            and marker.read_text() == f"{checkpoint} {args.n}":
        print(f"reusing the ferret side in {out}")
    else:
        subprocess.run([str(venv_python()), str(HERE / "ferret_side.py"), "--model-dir",
                        str(model_dir), "--data-dir", args.data_dir, "--n", str(args.n),
                        "--out", str(out), "--threads", str(args.threads)], check=True)
        marker.write_text(f"{checkpoint} {args.n}")


def tie_order(probes: list[list[float]], answers: list[list[int]]) -> str:
    """The ``ties`` option whose order is ferret's numpy argsort on these tied probes:
    ``introsort`` (numpy's own sort: the preset's, the same on every machine) where its
    numpy has no SIMD argsort, else ``numpy`` if this process's argsort agrees (AVX-512
    with numpy 1.26 on both sides, up to 64 units); no option matches otherwise."""
    import numpy as np

    from faithbench.metrics.variants import introsort_argsort
    if all(introsort_argsort(p) == a for p, a in zip(probes, answers)):
        return "introsort"
    if all(np.argsort(np.array(p)).tolist() == a for p, a in zip(probes, answers)):
        return "numpy"
    raise SystemExit("ferret's numpy orders equal scores unlike any faithbench ties option "
                     "on this machine (see faithbench.metrics.variants.TIES)")


def faithbench_side(ferret_out: Path, args, out: Path) -> tuple[float, list, dict]:
    """One `faithbench score` process for all four explanation files (as ferret scores
    them in one process): (its wall seconds, summary rows, {(file stem, metric, id): value})."""
    per_example, summary = out / "per_example.jsonl", out / "summary.jsonl"
    files = [str(ferret_out / f"explanations-{name}.jsonl") for name in NAMES]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    start = time.perf_counter()
    subprocess.run(["faithbench", "--threads", str(args.threads), "score", "--task", "sentiment",
                    "--model-path", str(out.parent / "model"), "--data-dir", args.data_dir,
                    "--explanations", *files,
                    "--metrics", *METRICS.values(), "--per-example", str(per_example),
                    "--summary", str(summary), "--no-progress"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in summary.read_text().splitlines()]
    values = {}
    for line in per_example.read_text().splitlines():
        row = json.loads(line)
        stem = Path(row["explanations"]).stem.removeprefix("explanations-")
        values[(stem, short_name(row["metric"]), row["id"])] = row["value"]
    return wall, rows, values


def rounding_tie(ours: float, drops: list[float], scores: list[float]) -> bool:
    """Whether faithbench's τ-b (``ours``) is ferret's formula on ferret's inputs as
    float32 can round them: each pair of leave-one-out drops within ``NEAR_TIE`` tied,
    or ordered either way (probabilities near 1 are a few float32 steps apart, and the
    tools' forwards differ by padding and kernels), and the scores as float64 (ferret's)
    or float32 (faithbench's: Partition SHAP's equal cluster values come out a float64
    step apart after L1 normalisation). At most 8 such pairs are tried (3^8 roundings).

    >>> rounding_tie(1.0, [0.3, 0.3 + 1e-8, 0.5], [1.0, 2.0, 3.0])  # the near pair ordered
    True
    >>> rounding_tie(0.8164965809277261, [0.3, 0.3 + 1e-8, 0.5], [1.0, 2.0, 3.0])  # tied
    True
    >>> rounding_tie(0.5, [0.3, 0.3 + 1e-8, 0.5], [1.0, 2.0, 3.0])
    False
    """
    from scipy.stats import kendalltau

    d = np.asarray(drops, dtype=float)
    order = np.argsort(d, kind="stable")
    near = [(a, b) for a, b in itertools.pairwise(order) if d[b] - d[a] <= NEAR_TIE][:8]
    for s in (np.asarray(scores, dtype=float), np.asarray(scores, dtype=np.float32)):
        for ways in itertools.product((-1, 0, 1), repeat=len(near)):
            x = d.copy()
            for (a, b), way in zip(near, ways):
                x[b] = x[a] + way * NEAR_TIE  # below, tied with or above its neighbour
            if abs(kendalltau(x, s.astype(float))[0] - ours) <= 1e-9:
                return True
    return False


def differences(name: str, ferret_rows: list[dict], ours: dict,
                loo: dict[str, list[float]], scores: dict[str, list[float]]
                ) -> tuple[dict[str, float], int]:
    """Largest |ferret − faithbench| per metric (NaN in both counts as agreement), and
    how many τ-LOO values differ only where float32 decides a pair (``rounding_tie``:
    left out of the largest difference, counted)."""
    worst, ties = {}, 0
    for key, metric in METRICS.items():
        metric_name = short_name(metric)
        gaps = []
        for row in ferret_rows:
            a, b = row[key], ours[(name, metric_name, row["id"])]
            if a is None or b is None:
                gaps.append(0.0 if a is None and b is None else float("inf"))
            elif key == "taucorr_loo" and abs(a - b) > TOLERANCE \
                    and rounding_tie(b, loo[row["id"]], scores[row["id"]]):
                ties += 1
            else:
                gaps.append(abs(a - b))
        worst[metric_name] = max(gaps)
    return worst, ties


def lime_samples(model_dir: Path, data_dir: str, n: int) -> list[int]:
    """ferret's LIME sample count of each of the first ``n`` validation sentences:
    min(P², 5000), P = its pieces with [CLS] and [SEP] (``LIMEExplainer``'s default)."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    with open(Path(data_dir) / "sst2" / "validation.jsonl") as f:
        texts = [json.loads(line)["sentence"] for _, line in zip(range(n), f)]
    return [min(len(tok(t)["input_ids"]) ** 2, 5000) for t in texts]


def explainer_side(model_dir: Path, args, ferret_timing: dict) -> list[list]:
    """Rows of the explainer table: ferret's LIME and Partition SHAP seconds per example
    (from its first run) against faithbench's lime and kernel_shap with the same sample
    budgets, explained here (model and data loaded before the clock starts)."""
    import torch

    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.runner import resolve_explainer
    from faithbench.benchmark.session import EvaluationSession, open_session
    torch.set_num_threads(args.threads)
    counts = lime_samples(model_dir, args.data_dir, args.n)
    mean = round(sum(counts) / len(counts))
    config = RunConfig(tasks=("sentiment",), data_dir=args.data_dir, split="validation",
                       limit=args.n, model_path=str(model_dir), progress=False,
                       time_budget_s=None, write_leaderboard=False)
    session = open_session("sentiment", config)
    targets = session.targets  # the predicted classes, as ferret explains them
    pairs = [(ferret_name, f"{name}[eraser={eraser};n_samples={n}]", samples)
             for ferret_name, name, n, samples in (
                 ("lime", "lime", mean, sum(counts)),
                 ("partition_shap", "kernel_shap", 500, 500 * args.n))
             for eraser in ("mask", "delete")]
    rows = []
    for ferret_name, ours, samples in pairs:
        # a fresh session each: its engine's memory empty, nothing shared between the two
        fresh = EvaluationSession(session.prepared, session.config, seed=session.seed)
        fresh._probs, fresh._targets = session.base_probs, targets
        start = time.perf_counter()
        fresh.explain(resolve_explainer(ours), cache=False)
        seconds = time.perf_counter() - start
        theirs = ferret_timing[ferret_name]["explain_s"]
        ours_samples = mean * args.n if ferret_name == "lime" else 500 * args.n
        rows.append([f"{ferret_name} / {ours}", args.n, f"{samples:,}",
                     f"{theirs / args.n:.2f}", f"{ours_samples:,}",
                     f"{fresh.perturber.rows_forwarded:,}", f"{seconds / args.n:.3f}",
                     f"{theirs / seconds:.1f}x"])
    return rows


def main() -> int:
    args = parse_args()
    out = Path(args.out)
    model_dir, ferret_out = out / "model", out / "ferret"
    for d in (model_dir, ferret_out, out / "faithbench"):
        d.mkdir(parents=True, exist_ok=True)
    checkpoint = export_model(args.data_dir, model_dir, args.threads, args.train_limit)
    ferret_side(model_dir, args, ferret_out, checkpoint)
    # both tools' metrics timed back to back, in the same conditions: ferret's evaluators
    # again on its own explanations (the explanations are not what is compared)
    subprocess.run([str(venv_python()), str(HERE / "ferret_side.py"), "--model-dir",
                    str(model_dir), "--data-dir", args.data_dir, "--n", str(args.n), "--out",
                    str(ferret_out), "--threads", str(args.threads), "--evaluate-only"],
                   check=True)
    timing = json.loads((ferret_out / "timing-evaluate.json").read_text())
    sys.path.insert(0, str(HERE))
    from ferret_side import argsort_probes
    ties = tie_order(argsort_probes(), timing.pop("argsort_probes"))
    for key in ("aopc_compr", "aopc_suff"):  # the preset's order, or this machine's numpy
        METRICS[key] = METRICS[key].replace("]", f";ties={ties}]")
    print(f"ferret's order among equal scores: ties={ties}")
    wall, rows, ours = faithbench_side(ferret_out, args, out / "faithbench")
    table, ok, ferret_s, ferret_rows_n = [], True, 0.0, 0
    loo = {r["id"]: r["drops"] for r in map(json.loads, (ferret_out / "ferret-loo.jsonl")
                                                .read_text().splitlines())}
    for name in NAMES:
        ferret_rows = [json.loads(line) for line in
                       (ferret_out / f"ferret-{name}.jsonl").read_text().splitlines()]
        scores = {r["id"]: r["scores"] for r in map(json.loads, (
            ferret_out / f"explanations-{name}.jsonl").read_text().splitlines())}
        worst, ties = differences(name, ferret_rows, ours, loo, scores)
        ok &= all(v <= TOLERANCE for v in worst.values())
        t = timing[name]
        mine = [r for r in rows if Path(r["explanations"]).stem.endswith(name)]
        ferret_s += t["evaluate_s"]
        ferret_rows_n += t["eval_rows_forwarded"]
        table.append([name, len(ferret_rows), *(f"{worst[m.split('[')[0]]:.1e}" for m in METRICS.values()),
                      ties,
                      f"{t['evaluate_s']:.1f}", f"{t['eval_rows_forwarded']:,}",
                      f"{sum(r['seconds'] for r in mine):.1f}",
                      f"{sum(r['rows_forwarded'] for r in mine):,}"])
    metric_s = sum(r["seconds"] for r in rows)
    forwarded = sum(r["rows_forwarded"] for r in rows)
    print(tabulate(table, headers=["explainer", "n", "max|Δ| comp", "max|Δ| suff", "max|Δ| τ",
                                   "τ float32 ties",
                                   "ferret s", "ferret rows", "faithbench s (metrics)",
                                   "faithbench rows"]))
    totals = {"ferret_s": ferret_s, "ferret_rows": ferret_rows_n, "faithbench_process_s": wall,
              "faithbench_metric_s": metric_s, "faithbench_rows": forwarded}
    print(f"\nall four explainers, three metrics: ferret {ferret_s:.1f} s ({ferret_rows_n:,} rows);"
          f" faithbench {wall:.1f} s as one process, start-up, model and data loading included"
          f" ({ferret_s / wall:.1f}x), {metric_s:.1f} s in its metrics ({ferret_s / metric_s:.1f}x,"
          f" {forwarded:,} rows); {args.threads} thread(s)")
    explainers = [] if args.skip_explainers else explainer_side(
        model_dir, args, json.loads((ferret_out / "timing.json").read_text()))
    print()
    print(tabulate(explainers, headers=["explainer (ferret / faithbench)", "n",
                                        "ferret samples", "ferret s/example",
                                        "faithbench samples", "faithbench rows forwarded",
                                        "faithbench s/example", "faster"]))
    (out / "report.json").write_text(json.dumps({"rows": table, "totals": totals,
                                                 "explainers": explainers,
                                                 "agree": ok, "tolerance": TOLERANCE}, indent=1))
    if not ok:
        print(f"DISAGREEMENT above {TOLERANCE}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
