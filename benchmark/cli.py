"""``faithbench``: a thin argparse layer; each verb calls one public function.

Exit status: 0 ok; 1 an explainer plugin failed (the rest of the run completed);
2 bad input (data file, explanations file, unknown name, bad option).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from faithbench.benchmark.core.errors import FaithbenchError, InputError
from faithbench.benchmark.core.executor import EXECUTORS
from faithbench.benchmark.core.ids import short_name
from faithbench.benchmark.core.isolation import ISOLATION
from faithbench.benchmark.core.names import FAMILIES
from faithbench.benchmark.plan import DEFAULT_OUT, RunConfig
from faithbench.leaderboard.render import safe_table
from faithbench.leaderboard.suite import selection_label

EPILOGS = {
    "run": """examples:
  faithbench run                                   # offline default: synthetic task, all explainers
  faithbench run --tasks sentiment --data-dir ../shared/data
  faithbench run --explainers gradient my_plugin.py --metrics comprehensiveness sufficiency
  faithbench run --tasks sentiment --data-dir ../shared/data --sample 300   # 300 at random, seeded
  faithbench run --fresh                           # start over instead of resuming""",
    "explain": """examples:
  faithbench explain --task synthetic --explainer gradient --limit 5 --out grads.jsonl
  faithbench explain --task sentiment --data-dir ../shared/data --explainer attention --out att.jsonl""",
    "score": """examples:
  faithbench score --task synthetic --explanations grads.jsonl
  faithbench score --task alignment --data-dir ../shared/data --alignments A.jsonl   # AER, P, R
  faithbench score --task alignment --data-dir ../shared/data --alignments E.jsonl \
      --submit-as eflomal --entries runs/alignment/leaderboard     # a reference row, no model
  faithbench score --task sentiment --data-dir ../shared/data --explanations mine.jsonl \\
      --metrics comprehensiveness --per-example per_example.jsonl""",
    "align": """examples:
  faithbench align --task alignment --data-dir ../shared/data --explainer attention --out A.jsonl
  faithbench align --task alignment --data-dir ../shared/data --explainer gradient \\
      --links threshold --fraction 0.5 --out A.jsonl
  faithbench align --task alignment --data-dir ../shared/data --explainer attention \
      --symmetrize grow-diag-final --out A.jsonl    # also explains alignment_reverse's model
  faithbench align --task alignment --data-dir ../shared/data --aligner eflomal --out E.jsonl
  # A.jsonl -> Pharaoh "i-j" lines (i source, j target, 0-based), and back (line k = id k+1):
  python -c "import json,sys; [print(' '.join(f'{i}-{j}' for i, j in json.loads(l)['links'])) for l in sys.stdin]" < A.jsonl > A.txt
  python -c "import json,sys; [print(json.dumps({'id': str(k + 1), 'links': [list(map(int, x.split('-'))) for x in l.split()]})) for k, l in enumerate(sys.stdin)]" < A.txt > A.jsonl""",
    "predict": """examples:
  echo '{"id": "x", "tokens": ["a", "great", "film"]}' > in.jsonl
  faithbench predict --task synthetic --input in.jsonl""",
    "validate": """examples:
  faithbench validate submissions/TEMPLATE.py
  faithbench validate my_package.my_explainer      # module with an EXPLAINER object
  faithbench validate my_entry_point               # entry point in group faithbench.explainers""",
    "submit": """examples:
  faithbench submit my_explainer.py
  faithbench submit my_explainer.py --tasks synthetic sentiment --data-dir ../shared/data""",
    "leaderboard": """examples:
  faithbench leaderboard
  faithbench leaderboard --task sentiment --metric comprehensiveness --format markdown
  faithbench leaderboard --wide --format markdown  # explainers x metrics, per task
  faithbench leaderboard --wide --metrics comprehensiveness sufficiency \
      "comprehensiveness[eraser=mask]" "sufficiency[eraser=mask]" """,
    "compare": """examples:
  faithbench compare gradient attention
  faithbench compare 3f2a9c integrated_gradients --task sentiment""",
    "agreement": """examples:
  faithbench agreement --task synthetic --limit 100
  faithbench agreement --task sentiment --data-dir ../shared/data
  faithbench agreement --task sentiment --data-dir ../shared/data \\
      --explainers attention gradient occlusion --k-frac 0.1
  (reuses the explanations a `faithbench run` with the same --out already wrote)""",
    "list": """examples:
  faithbench list""",
    "roar": """examples:
  faithbench roar --limit 200                       # offline default: synthetic task, 1 seed
  faithbench --threads 1 roar --tasks sentiment --data-dir ../shared/data --variant sentences \
      --seeds 0 1 2 --executor pool --workers 2 --out runs/roar
  faithbench roar --tasks sentiment --data-dir ../shared/data --variant sentences \
      --explainers attention gradient --recursive --executor ray --address HOST:6379
  (resumes: a rerun trains only the jobs missing from <out>/roar/rows.jsonl and prints the tables)""",
}


def _common(p: argparse.ArgumentParser, *, out: bool = True) -> None:
    p.add_argument("--data-dir", help="local JSON Lines copies of the hub datasets "
                   "(also $FAITHBENCH_DATA); default: the hub")
    p.add_argument("--variant", help="task data variant, e.g. sentiment training split: "
                   "phrases (default) or sentences")
    p.add_argument("--gold-out-of-range", choices=("error", "drop"), default="error",
                   help="alignment gold links outside their sentence: stop with the file, "
                   "line and field (default), or drop and count them")
    p.add_argument("--seed", type=int, help="model seed (default 0); on run and roar the "
                   "same as --seeds with one seed")
    p.add_argument("--split", help="split to explain/score (default: the task's eval split)")
    p.add_argument("--limit", type=int, help="only the first N examples of the split (on a "
                   "file sorted by label, a biased sample: see --sample)")
    p.add_argument("--sample", type=int, help="N examples of the split drawn at random "
                   "(seeded by --sample-seed), in split order; alignment draws sentence pairs")
    p.add_argument("--sample-seed", type=int, default=0, help="seed of --sample (default 0)")
    p.add_argument("--batch-size", type=int, default=32, help="examples per explain/metric call")
    p.add_argument("--chunk-size", type=int, default=512, help="rows per forward pass")
    p.add_argument("--time-budget", type=float, default=5.0, help="a plugin explainer's seconds per example of up to 32 "
                   "tokens, scaled with length (reference explainers have none)")
    p.add_argument("--isolation", choices=ISOLATION, default="auto",
                   help="where explainers run: auto (default) = every plugin in a worker "
                   "process, the reference explainers in this one; process = all in workers "
                   "(a plugin never runs in faithbench's own process)")
    p.add_argument("--sandbox", action="store_true",
                   help="run plugin workers inside bubblewrap: no network, no file system "
                   "beyond the plugin and a read-only Python environment (for strangers' "
                   "submissions; needs `bwrap`)")
    p.add_argument("--plugin-memory", type=float, default=8.0, metavar="GIB",
                   help="a plugin worker's address-space limit in GiB (default 8)")
    p.add_argument("--train-limit", type=int, help="train on the first N training rows only")
    p.add_argument("--epochs", type=int, help="override the task's maximum epochs")
    p.add_argument("--masked-training", action="store_true",
                   help="train the task models with random masking (half of each batch "
                   "masked at a U(0,1) ratio), so erasure is in distribution for them")
    p.add_argument("--model", choices=("bilstm", "transformer"),
                   help="model family of the classification tasks: bilstm (default, the "
                   "task's own) or transformer (all-MiniLM-L6-v2 fine-tuned here); part of "
                   "the task id, so families never share a leaderboard suite")
    p.add_argument("--model-path", help="evaluate a Hugging Face sequence classifier "
                   "directory (AutoModelForSequenceClassification + tokenizer) on the task's "
                   "data instead of training one; its labels must be the task's")
    p.add_argument("--layers", type=int, help="transformer family: keep only the first N "
                   "encoder layers (small configurations for tests)")
    p.add_argument("--executor", choices=EXECUTORS, default="in-process",
                   help="where retraining jobs run (ROAR): in-process (default), pool "
                   "(worker processes on this machine) or ray (a cluster)")
    p.add_argument("--workers", type=int, help="pool size, or a new local Ray cluster's "
                   "CPUs (default: all cores)")
    p.add_argument("--address", help="address of a running Ray cluster (ray start --head "
                   "prints it); default: start a local one")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    if out:
        p.add_argument("--out", default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="faithbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's); on a "
                        "machine shared with other jobs, 1 avoids thread oversubscription")
    sub = parser.add_subparsers(dest="verb", required=True)

    def verb(name, help_):
        return sub.add_parser(name, help=help_, epilog=EPILOGS[name],
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = verb("run", "train/load models, explain, score, write results and leaderboard entries")
    p.add_argument("--tasks", nargs="+", default=["synthetic"], help="names, by spaces or commas")
    p.add_argument("--explainers", nargs="+", default=[],
                   help="default: the six reference explainers (spaces or commas)")
    p.add_argument("--metrics", nargs="+", default=[],
                   help="default: every metric for the task (spaces or commas)")
    p.add_argument("--seeds", nargs="+",
                   help="model seeds (spaces or commas; default 0); published tables use 0 1 2")
    p.add_argument("--fresh", action="store_true", help="delete earlier results and start over")
    _common(p)

    p = verb("explain", "write one explanation per example to a JSON Lines file")
    p.add_argument("--task", required=True)
    p.add_argument("--explainer", required=True)
    _common(p, out=False)
    p.add_argument("--out", required=True, help="output .jsonl")

    p = verb("score", "score explanations computed anywhere with the task's model")
    p.add_argument("--task", required=True)
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--explanations", nargs="+", help=".jsonl of explanations (faithbench "
                       "explain's schema); several files share one model and engine, and "
                       "their rows say which file they score")
    given.add_argument("--alignments", help='alignment task: .jsonl of {"id", "links": [[i, j], ...]} '
                       "per gold sentence pair, scored against the gold (AER, precision, recall)")
    p.add_argument("--metrics", nargs="+", default=[])
    p.add_argument("--per-example", help="write one object per (id, metric) with its value")
    p.add_argument("--summary", help="write the summary rows (estimate, n, seconds, rows "
                   "forwarded) as JSON Lines")
    p.add_argument("--submit-as", help="with --alignments: add them to the leaderboard under "
                   "this name (a row no model produced: a reference aligner, fast_align, ...)")
    p.add_argument("--entries", help="with --submit-as: the leaderboard folder")
    _common(p, out=False)

    p = verb("align", "word alignments read off an explainer, one line per sentence pair")
    p.add_argument("--task", required=True)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--explainer")
    source.add_argument("--aligner", choices=["diagonal", "eflomal"],
                        help="a reference aligner instead: the diagonal baseline, or eflomal "
                        "on the task's parallel corpus (grow-diag-final of both directions)")
    p.add_argument("--links", choices=["argmax", "threshold"], default="argmax",
                   help="argmax: one link per target word; threshold: every source word "
                   "scoring at least FRACTION of the row's maximum")
    p.add_argument("--fraction", type=float, default=None, help="with --links threshold")
    p.add_argument("--symmetrize", choices=["intersect", "grow-diag-final"],
                   help="also explain the other direction's model (alignment <-> "
                   "alignment_reverse) and combine the two link sets")
    p.add_argument("--from-run", help="reuse the explanations a `faithbench run --out DIR` "
                   "cached (both directions, with --symmetrize)")
    _common(p, out=False)
    p.add_argument("--out", required=True, help="output .jsonl")

    p = verb("predict", "class probabilities of the task's trained model for given tokens")
    p.add_argument("--task", required=True)
    p.add_argument("--input", required=True, help='.jsonl of {"id", "tokens"}')
    _common(p, out=False)

    p = verb("validate", "run the plugin checks on the synthetic task")
    p.add_argument("submission", help="file path, module name or entry point")
    _common(p, out=False)

    p = verb("submit", "validate a plugin, run it on the tasks, add a leaderboard entry")
    p.add_argument("submission")
    p.add_argument("--tasks", nargs="+", default=["synthetic"])
    p.add_argument("--notes", default="")
    _common(p)

    p = verb("leaderboard", "rank entries per task and metric, with CIs")
    p.add_argument("--entries", default=f"{DEFAULT_OUT}/leaderboard")
    p.add_argument("--task")
    p.add_argument("--metric")
    p.add_argument("--format", choices=["table", "markdown", "csv"], default="table")
    p.add_argument("--family", choices=FAMILIES,
                   help="only metrics of this family (never mixed in one ranking)")
    p.add_argument("--wide", action="store_true",
                   help="one table per task: explainers x metrics, each cell mean [CI]")
    p.add_argument("--metrics", nargs="+", default=[],
                   help="with --wide: these metric columns, in this order (names or ids, "
                   "e.g. 'comprehensiveness[eraser=mask]')")

    p = verb("compare", "paired difference of two entries on the same examples")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--entries", default=f"{DEFAULT_OUT}/leaderboard")
    p.add_argument("--task")
    p.add_argument("--metric")
    p.add_argument("--format", choices=["table", "markdown", "csv"], default="table")

    p = verb("roar", "retrain on masked data (ROAR curves, RACU), shift and leakage diagnostics")
    p.add_argument("--tasks", nargs="+", default=["synthetic"], help="classification tasks")
    p.add_argument("--explainers", nargs="+", default=[],
                   help="default: the six reference explainers (spaces or commas)")
    p.add_argument("--seeds", nargs="+", help="model seeds: one curve point per seed "
                   "(default 0; published tables use 0 1 2)")
    p.add_argument("--ratios", nargs="+", type=float, default=[0.1, 0.3, 0.5, 0.7, 0.9],
                   help="masked share of each example's tokens (default 0.1 0.3 0.5 0.7 0.9)")
    p.add_argument("--recursive", action="store_true", help="also recursive ROAR: each "
                   "ratio's explanation by the model retrained at the previous ratio")
    p.add_argument("--no-leakage", action="store_true",
                   help="skip the mask-pattern models of the leakage check")
    p.add_argument("--leakage-seeds", type=int, default=3,
                   help="leakage models for the first N seeds (default 3; the paired "
                   "test averages them per example)")
    p.add_argument("--leakage-ratios", nargs="+", type=float,
                   help="leakage models at these ratios only (default: every ratio)")
    p.add_argument("--format", choices=["table", "markdown"], default="table")
    _common(p)

    p = verb("agreement", "how alike explainers rank tokens: Kendall tau-b and top-k overlap")
    p.add_argument("--task", required=True)
    p.add_argument("--explainers", nargs="+", default=[], help="default: the six reference explainers")
    p.add_argument("--k-frac", type=float, default=0.2,
                   help="top-k overlap with k = ceil(K_FRAC * n) tokens (default 0.2)")
    _common(p)

    verb("list", "tasks, explainers and metrics with their canonical ids")
    return parser


def split_list(values) -> tuple[str, ...]:
    """Names given with spaces, commas or both; commas inside ``[...]`` (metric
    parameters such as ``bins=0.1,0.5``) do not split.

    >>> split_list(["random,gradient", "comprehensiveness[bins=0.1,0.5],sufficiency"])
    ('random', 'gradient', 'comprehensiveness[bins=0.1,0.5]', 'sufficiency')
    """
    out = []
    for value in values or ():
        depth, item = 0, ""
        for ch in value:
            depth += {"[": 1, "]": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                out.append(item)
                item = ""
            else:
                item += ch
        out.append(item)
    return tuple(v.strip() for v in out if v.strip())


def _seeds(values, seed: int | None) -> tuple[int, ...]:
    """``--seeds`` (run, roar) or ``--seed``; both given must agree, so a seed asked
    for is never silently replaced by the default 0."""
    try:
        seeds = tuple(int(v) for v in split_list(values))
    except ValueError:
        raise InputError(f"--seeds: expected integers, got {' '.join(values)!r}") from None
    if seeds and seed is not None and seeds != (seed,):
        raise InputError(f"--seed {seed} and --seeds {' '.join(map(str, seeds))} disagree; "
                         "give one of them")
    return seeds or (0 if seed is None else seed,)


def _config(args) -> RunConfig:
    g = lambda name, default=None: getattr(args, name, default)
    return RunConfig(
        tasks=split_list(g("tasks")) or ("synthetic",),
        explainers=split_list(g("explainers")),
        metrics=split_list(g("metrics")),
        data_dir=g("data_dir"),
        out=g("out") or DEFAULT_OUT,
        fresh=bool(g("fresh")),
        seeds=_seeds(g("seeds"), g("seed")),
        split=g("split"),
        limit=g("limit"),
        sample=g("sample"),
        sample_seed=g("sample_seed") or 0,
        variant=g("variant"),
        gold_out_of_range=g("gold_out_of_range", "error"),
        train_limit=g("train_limit"),
        epochs=g("epochs"),
        masked_training=bool(g("masked_training")),
        model=g("model"),
        model_path=g("model_path"),
        model_layers=g("layers"),
        executor=g("executor", "in-process"),
        workers=g("workers"),
        address=g("address"),
        batch_size=g("batch_size", 32),
        chunk_size=g("chunk_size", 512),
        time_budget_s=g("time_budget", 5.0),
        isolation=g("isolation", "auto"),
        sandbox=bool(g("sandbox")),
        plugin_memory_gib=g("plugin_memory", 8.0),
        progress=not g("no_progress", False),
        notes=g("notes", "") or "",
    )


def _print_checks(checks) -> bool:
    print(safe_table([(c.check, "PASS" if c.passed else "FAIL", c.detail) for c in checks],
                   headers=["check", "result", "detail"]))
    return all(c.passed for c in checks)


def _matrix(entries, task, fmt, *, family=None, sort_by=None, metrics=None) -> str:
    """Explainers x metrics; sorted by ``sort_by`` where it names one metric, else the first."""
    from faithbench.leaderboard.render import render_matrix

    try:
        return render_matrix(entries, task, fmt, family=family, sort_by=sort_by, metrics=metrics)
    except InputError:
        if sort_by is None:
            raise
        return render_matrix(entries, task, fmt, family=family, metrics=metrics)


def _metric_ids(names) -> list[str]:
    """Canonical ids of registered metric names (``comprehensiveness`` is its default
    parameters, ``comprehensiveness[eraser=mask]`` the mask variant), so a column is
    one metric; a name the registry does not know is kept and matched as given."""
    from faithbench import metrics as metric_registry

    out = []
    for name in names:
        try:
            out.append(metric_registry.resolve(name).spec.id)
        except InputError:
            out.append(name)
    return out


def _print_summary(summary) -> None:
    from faithbench.leaderboard.entry import read_entries

    for task, acc in summary.accuracy.items():
        print(f"model {task}: accuracy " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()))
    entries = [e for e in read_entries(summary.out / "leaderboard")
               if e.header["entry_id"] in {p.name for p in summary.entries}]
    for task in sorted({r.task for r in summary.results}):
        print(f"\n{task}")
        print(_matrix(entries, task, "table", sort_by="comprehensiveness"))
    flags = [(r.task, r.explainer, short_name(r.metric), name, count,
              r.estimate["n"]) for r in summary.results for name, count in sorted(r.extra.items())]
    if flags:
        print("\n" + safe_table(flags, headers=["task", "explainer", "metric", "flag", "count", "n"]))
    if summary.rows_requested:
        share = summary.rows_forwarded / summary.rows_requested
        print(f"\nperturbed rows: {summary.rows_requested:,} requested by the metrics, "
              f"{summary.rows_forwarded:,} forwarded ({share:.0%}; identical variants are "
              "forwarded once and shared)")
    print(f"\nexamples: {summary.selection} of each task's split")
    print(f"{summary.computed} units computed, {summary.skipped} already done, "
          f"{len(summary.failures)} failures; {summary.seconds:.1f}s; results in {summary.out}")
    for f in summary.failures:
        print(f"FAILED: {f.message}", file=sys.stderr)


def _print_agreement(rows: list[dict]) -> None:
    """(a) explainer x explainer mean tau-b; (b) one line per pair with CIs."""
    if not rows:
        print("fewer than two explainers to compare: no pairs")
        return

    def num(v, fmt=".3f"):
        return "n/a" if v is None else format(v, fmt)

    def ci(r, mean, stem):
        return f"{num(r[mean])} [{num(r[stem + '_ci_low'])}, {num(r[stem + '_ci_high'])}]"

    names = list(dict.fromkeys([n for r in rows for n in (r["a"], r["b"])]))
    tau = {frozenset((r["a"], r["b"])): r["tau_mean"] for r in rows}
    print("mean Kendall tau-b (undefined examples left out)")
    print(safe_table([[a] + ["1" if a == b else num(tau[frozenset((a, b))]) for b in names]
                    for a in names], headers=[""] + names, disable_numparse=True))
    k = rows[0]["k_frac"]
    print()
    print(safe_table([(f"{r['a']} / {r['b']}", r["n"], ci(r, "tau_mean", "tau"), num(r["tau_sd"]),
                     ci(r, "share_p_le_0_05", "share_p_le_0_05"),
                     ci(r, "topk_overlap_mean", "topk_overlap"), r["n_undefined"])
                    for r in rows],
                   headers=["pair", "n", "tau-b mean [95% CI]", "sd", "share p<=.05 [CI]",
                            f"top-{k:.0%} overlap [CI]", "undefined"], disable_numparse=True))


def _check_names(args, config: RunConfig) -> None:
    """Every task, metric and explainer name the verb was given, looked up before it
    prepares a model: a typo is bad input (exit 2), whichever kind of name it is."""
    from dataclasses import replace

    from faithbench.benchmark.runner import check_names

    task = getattr(args, "task", None)
    refs = [r for r in (getattr(args, "explainer", None), getattr(args, "submission", None)) if r]
    check_names(replace(config, tasks=(task,) if task else config.tasks,
                        explainers=config.explainers + tuple(refs)))


def dispatch(args) -> int:
    config = _config(args)
    if args.verb not in ("leaderboard", "compare", "list"):
        _check_names(args, config)
    if config.sample is not None and (args.verb == "align" or getattr(args, "alignments", None)):
        raise InputError("--sample is not supported by align and score --alignments, which "
                         "read gold pairs in file order; use --limit N (the first N pairs)")
    if args.verb == "run":
        from faithbench.benchmark.runner import run

        summary = run(config)
        _print_summary(summary)
        return summary.exit_code
    if args.verb == "explain":
        from faithbench.benchmark.verbs import explain_to_file

        n = explain_to_file(args.task, args.explainer, args.out, config)
        print(f"wrote {n} explanations ({selection_label(config.as_dict())} of the split) "
              f"to {args.out}")
        return 0
    if args.verb == "score":
        from faithbench.benchmark.verbs import score_file

        if args.alignments:
            from faithbench.benchmark.alignments import score_alignments

            rows = score_alignments(args.task, args.alignments, config,
                                    submit_as=args.submit_as, entries=args.entries)
        else:
            rows = score_file(args.task, args.explanations, config, args.per_example)
        if getattr(args, "summary", None):
            from faithbench.benchmark.core.records import write_jsonl_atomic
            write_jsonl_atomic(Path(args.summary), rows)
        files = [(r["explanations"],) if "explanations" in r else () for r in rows]
        print(safe_table([(*f, r["metric"], r["direction"], f"{r['mean']:.4f}",
                         f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]", _n_defined(r))
                        for f, r in zip(files, rows)],
                       headers=[*(["explanations"] if any(files) else []), "metric", "better",
                                "mean", "95% CI", "n"]))
        return 0
    if args.verb == "align":
        from faithbench.benchmark.alignments import align_to_file

        n = align_to_file(args.task, args.explainer, args.out, config, links=args.links,
                          fraction=args.fraction, aligner=args.aligner, combine=args.symmetrize,
                          from_run=args.from_run)
        print(f"wrote alignments of {n} sentence pairs to {args.out}")
        return 0
    if args.verb == "predict":
        from faithbench.benchmark.verbs import predict

        for row in predict(args.task, args.input, config):
            print(json.dumps(row))
        return 0
    if args.verb == "validate":
        from faithbench.benchmark.verbs import validate_plugin

        return 0 if _print_checks(validate_plugin(args.submission, config)) else 1
    if args.verb == "submit":
        from faithbench.benchmark.verbs import submit

        checks, summary = submit(args.submission, config)
        if not _print_checks(checks) or summary is None:
            print("validation failed: not submitted", file=sys.stderr)
            return 1
        _print_summary(summary)
        return summary.exit_code
    if args.verb == "leaderboard":
        from faithbench.leaderboard.entry import read_entries
        from faithbench.leaderboard.rank import rank
        from faithbench.leaderboard.render import render_leaderboard

        entries = read_entries(args.entries)
        if not entries:
            raise InputError(f"no leaderboard entries under {args.entries}; "
                             "`faithbench run` or `faithbench submit` writes them")
        if args.wide:
            names = [args.task] if args.task else sorted({t for e in entries for t in e.suite})
            for task in names:
                default = "comprehensiveness" if args.family in (None, "faithfulness") else None
                print(_matrix(entries, task, args.format, family=args.family,
                              sort_by=args.metric or default,
                              metrics=_metric_ids(config.metrics)) + "\n")
        else:
            print(render_leaderboard(rank(entries, task=args.task, metric=args.metric,
                                          family=args.family), args.format))
        return 0
    if args.verb == "compare":
        from faithbench.leaderboard.compare import compare
        from faithbench.leaderboard.entry import find_entry
        from faithbench.leaderboard.render import render_comparison

        a, b = find_entry(args.entries, args.a), find_entry(args.entries, args.b)
        print(render_comparison(compare(a, b, task=args.task, metric=args.metric), args.format))
        return 0
    if args.verb == "agreement":
        from faithbench.benchmark.verbs import agreement

        rows, path, failures = agreement(args.task, config, k_frac=args.k_frac)
        _print_agreement(rows)
        print(f"\nexamples: {selection_label(config.as_dict())} of the split; "
              f"agreement record appended to {path}")
        for f in failures:
            print(f"FAILED: {f.message}", file=sys.stderr)
        return 1 if failures else 0
    if args.verb == "roar":
        from faithbench.benchmark.roar import SweepConfig, report, sweep

        rows = sweep(config, SweepConfig(ratios=tuple(args.ratios), recursive=args.recursive,
                                         leakage=not args.no_leakage,
                                         leakage_seeds=args.leakage_seeds,
                                         leakage_ratios=tuple(args.leakage_ratios or ()) or None))
        print(report(rows, fmt="github" if args.format == "markdown" else "simple"))
        print(f"rows: {config.out}/roar/rows.jsonl")
        return 0
    if args.verb == "list":
        from faithbench.benchmark.catalog import catalog

        for title, rows, headers in catalog():
            print(f"{title}\n{safe_table(rows, headers=headers)}\n")
        return 0
    raise AssertionError(args.verb)


def _n_defined(row: dict) -> str:
    """n, and how many more examples the metric leaves undefined (e.g. ``60 (+2 undefined)``)."""
    k = row.get("undefined", 0)
    return f"{row['n']} (+{k} undefined)" if k else str(row["n"])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        return dispatch(args)
    except FaithbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
