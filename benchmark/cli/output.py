"""What the verbs print beyond one table: a run's summary (run, submit), plugin
check tables (validate, submit), explainers x metrics matrices (run, leaderboard)."""

from __future__ import annotations

import sys
import textwrap

from faithbench.benchmark.core.ids import distinct_labels, short_name
from faithbench.leaderboard.render import safe_table


def checks(results) -> bool:
    """Print plugin checks; True when every one passed."""
    print(safe_table([(c.check, "PASS" if c.passed else "FAIL", c.detail) for c in results],
                     headers=["check", "result", "detail"], width=120))
    return all(c.passed for c in results)


def matrix(entries, task: str, fmt: str, *, family=None, sort_by=None, metrics=None,
           prefer: str | None = None, cost=None, short: bool = False, rows=None) -> str:
    """Explainers x metrics, sorted by ``sort_by`` (a metric the user named: it must
    match one) or else by ``prefer`` where the task has it, else the first column."""
    from faithbench.leaderboard.render import render_matrix

    return render_matrix(entries, task, fmt, family=family, sort_by=sort_by, metrics=metrics,
                         prefer=prefer, cost=cost, short=short, rows=rows)


SANITY = "sanity"


def headline() -> str:
    """The column a wide table is sorted by when none is asked for: comprehensiveness at
    its default parameters (beside its mask or segment variants)."""
    from faithbench import metrics as metric_registry

    return metric_registry.resolve("comprehensiveness").spec.id


def matrices(entries, task: str, fmt: str, *, family=None, sort_by=None, metrics=None,
             prefer: str | None = None, cost=None, short: bool = False) -> str:
    """``matrix``; but where neither a family nor columns are asked for, the sanity
    checks (family "sanity": does the explanation change with the model?) get a table of
    their own after the task's other metrics, as they answer another question."""
    from faithbench.benchmark.core.names import FAMILIES
    from faithbench.leaderboard.rank import matches, rank

    rows = [] if family or metrics else rank(entries, task=task)
    families = {r.family for r in rows}
    if SANITY not in families or families == {SANITY}:
        return matrix(entries, task, fmt, family=family, sort_by=sort_by, metrics=metrics,
                      prefer=prefer, cost=cost, short=short, rows=rows or None)
    order = sorted({(FAMILIES.index(r.family), r.metric) for r in rows if r.family != SANITY})
    sanity_sort = sort_by is not None and any(matches(r.metric, sort_by) for r in rows
                                              if r.family == SANITY)
    # both tables from the rows ranked once (ranking bootstraps every cell)
    rest = matrix(entries, task, fmt, metrics=[m for _, m in order], prefer=prefer,
                  sort_by=None if sanity_sort else sort_by, cost=cost, short=short, rows=rows)
    return rest + "\n" + matrix(entries, task, fmt, family=SANITY, rows=rows,
                                sort_by=sort_by if sanity_sort else None, cost=cost, short=short)


def summary(result, *, short: bool = True) -> None:
    """A run's models, its entries per task, metric flags, sharing, and failures;
    ``short``: explainers by name (else by full id)."""
    for (task, seed), report in result.models.items():
        print(model_lines(task, seed, report, result.accuracy.get(f"{task}/seed={seed}", {})))
    entries = result.entries  # as the run wrote them: nothing is read back
    for task in sorted({r.task for r in result.results}):
        print(f"\n{task}")
        print(matrices(entries, task, "table", prefer=headline(), short=short))
    names = distinct_labels([r.explainer for r in result.results]) if short else {}
    flags = [(r.task, names.get(r.explainer, r.explainer), short_name(r.metric), name, count,
              r.estimate.n)
             for r in result.results for name, count in sorted(r.extra.items())]
    if flags:
        print("\n" + safe_table(flags, headers=["task", "explainer", "metric", "flag", "count",
                                                "n"], width=120))
    if result.rows_requested:
        share = result.rows_forwarded / result.rows_requested
        print("\n" + wrap(f"perturbed rows: {result.rows_requested:,} requested by the "
                          f"explainers and metrics, {result.rows_forwarded:,} forwarded "
                          f"({share:.0%}; identical variants are forwarded once and shared)"))
    print(f"\nexamples: {result.selection} of each task's split")
    print(f"{result.computed} units computed, {result.skipped} already done, "
          f"{len(result.failures)} failures; {result.seconds:.1f}s; results in {result.out}")
    failures(result.failures)


def placed(results, release: str, *, short: bool = True) -> None:
    """``submit --published``: per suite, the plugin ranked among the release's
    references (its row marked), and its paired comparisons with its neighbours."""
    from faithbench.leaderboard.render import num, p_value, render_matrix, short_names

    for p in results:
        print(f"\n{p.task}: your explainer among the references of release {release}, on "
              "its models")
        if p.mine is None:
            print("  no entry: the plugin failed on this suite (above)")
            continue
        print(render_matrix([], p.task, "table", rows=p.rows, prefer=headline(),
                            short=short, mark=p.mine.entry_id))
        names = short_names(p.rows) if short else {r.entry_id: r.explainer for r in p.rows}
        place = {(r.metric, r.entry_id): r.rank for r in p.rows}
        count = {m: sum(1 for r in p.rows if r.metric == m) for m in {r.metric for r in p.rows}}
        labels = distinct_labels([c.metric for c in p.neighbours])
        body = [(labels[c.metric],
                 f"{place[(c.metric, p.mine.entry_id)]} of {count[c.metric]}",
                 names.get(c.b_entry, c.b),
                 f"{num(c.diff)} [{num(c.ci_low)}, {num(c.ci_high)}]", p_value(c.p_holm),
                 "yours" if c.better_entry == p.mine.entry_id else
                 "no difference" if c.better_entry is None else "theirs")
                for c in sorted(p.neighbours, key=lambda c: (c.metric, c.b))]
        if body:
            print(wrap("Against the entries ranked just above and below yours, paired on the "
                       "same examples and seeds (`faithbench compare`; A = yours):"))
            print(safe_table(body, headers=["metric", "your rank", "vs", "A − B [95% CI]",
                                            "p (Holm)", "better"], disable_numparse=True))
        if p.left_out:
            print(wrap("Left out of this ranking, as a sample scores them otherwise than the "
                       "whole split (each example's cut depends on the rationale rate of all "
                       f"examples scored): {', '.join(map(short_name, p.left_out))}."))
        print(f"{p.summary.computed} units computed in {p.seconds:.0f} s; entries in "
              f"{p.summary.out / 'leaderboard'}")


def model_lines(task: str, seed: int, report, accuracy: dict) -> str:
    """A model as the run summary shows it: what made it, its gate check, and its
    accuracy on the other labelled splits.

    >>> from faithbench.benchmark.core.gate import Budget, ModelReport, accuracy_check
    >>> r = ModelReport(Budget("bilstm", None, 3000, None, 6, 4),
    ...                 accuracy_check([0] * 255 + [1] * 245, 500, "validation"))
    >>> print(model_lines("synthetic@1", 0, r, {"validation": 1.0, "test": 0.998}))
    model synthetic@1, seed 0: BiLSTM on 3,000 training rows, 4 of at most 6 epochs
      validation accuracy 1.000 [0.992, 1.000] (n 500), majority class 0.510: passes the
      model gate; test 0.998
    """
    head = f"model {task}, seed {seed}"
    if report is None:
        return head + ": accuracy " + ", ".join(f"{k} {v:.4f}" for k, v in accuracy.items())
    lines = [f"{head}: {report.budget.describe()}"]
    check = report.check
    others = [f"{k} {v:.3f}" if check is None or check.measure == "accuracy" else f"{k} {v:.4g}"
              for k, v in accuracy.items()
              if check is None or k not in (check.split, f"held_out_{check.measure}")]
    if check is not None:
        verdict = ("passes the model gate" if check.passed else
                   "WEAK MODEL: refused by the model gate, scored because of --allow-weak-model")
        others.insert(0, f"{check.describe()}: {verdict}")
    if others:
        lines.append(textwrap.fill("; ".join(others), 120, initial_indent="  ",
                                   subsequent_indent="  "))
    return "\n".join(lines)


def containment(config) -> None:
    """One line on stderr before plugins run: what holds a plugin worker's whole process
    tree to --plugin-memory on this host (a cgroup, else one process), and the sandbox."""
    from faithbench.benchmark.core import confine

    sandbox = ("inside bubblewrap (--sandbox)" if config.sandbox else
               "without --sandbox: a plugin can read your files")
    print(wrap(f"plugin workers: {confine.containment_kind(config.plugin_memory_gib)}; "
               f"{sandbox}"), file=sys.stderr)


def has_plugin(refs) -> bool:
    """Whether any of these explainer references is a plugin (not a reference name)."""
    from faithbench import submissions
    from faithbench.benchmark.core.ids import short_name

    return any(short_name(ref) not in submissions.REGISTRY for ref in refs)


def failures(found) -> None:
    for f in found:
        print(f"FAILED: {f.message}", file=sys.stderr)


def published_note(release, task: str | None) -> None:
    """Under a published table: where its models come from, and the two ways to set
    an explainer beside it on one suite: scored on the release's own models
    (``submit --published``, where the release ships them), or the references rerun on
    the user's models; commands cut into lines that fit a terminal."""
    from faithbench.leaderboard.rank import matches

    print(wrap(f"Published release {release.version}. Your own runs train your own models "
               "(weights differ across machines and thread counts), so their entries form "
               "other suites."))
    shipped = [s for s in release.manifest["suites"] if matches(s["task"], task)
               and s.get("models")]
    if shipped:
        names = sorted({s["task"].split("[")[0].split("@")[0] for s in shipped})
        print(wrap("To rank your explainer among these references on the release's own "
                   f"models (paired tests included): faithbench submit my_explainer.py "
                   f"--published --tasks {' '.join(names)} [--sample 200]"))
    for suite in release.manifest["suites"]:
        if matches(suite["task"], task) and not suite.get("models"):
            print(wrap(f"{suite['task']} ({suite['suite']}): the release ships no models; "
                       "rerun its references on yours, then `faithbench compare`:"))
            print(shell_lines(suite["rerun"]))


def wrap(text: str, width: int = 120) -> str:
    import textwrap

    return textwrap.fill(text, width, break_on_hyphens=False, break_long_words=False)


def shell_lines(command: str, width: int = 120, indent: str = "    ") -> str:
    """A long shell command as lines of at most ``width`` characters joined by
    backslash continuations (a word longer than a line stays whole).

    >>> print(shell_lines("faithbench run --tasks nli --seeds 0 1 2", width=24, indent=""))
    faithbench run --tasks \\
    nli --seeds 0 1 2
    """
    import textwrap

    lines = textwrap.wrap(command, width - len(indent) - 2, break_on_hyphens=False,
                          break_long_words=False)
    return " \\\n".join(indent + line for line in lines)
