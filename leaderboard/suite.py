"""What makes a set of results one entry, and when two entries can be compared.

Before an entry is written its records are checked (one explainer, each result backed
by exactly its n per-example values with the same mean) and its suite is derived from
them: per task the split, which examples of it (``examples``: all, the first N, or N
drawn at random with a seed), the model seeds with their checkpoints, the data
fingerprint and n. Two entries compare on a task only when split, examples, data and
checkpoints match; an entry no model produced (checkpoint ``MODEL_FREE``: alignments
scored from a file) needs only split, examples and data to match. An entry that does
not record its examples (written before they were recorded, or scored from a file)
is not checked on them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.ids import short_name
from faithbench.benchmark.core.names import DIRECTIONS
from faithbench.benchmark.core.records import ResultRecord
from faithbench.benchmark.core.stats import Aggregation
from faithbench.leaderboard.models import model_label

ROW_FIELDS = ("task", "model_seed", "metric", "id", "value")
# the checkpoint of results no model produced (alignments scored from a file): they
# compare with any entry on the same split and data, whatever its checkpoints
MODEL_FREE = "model-free"


def check_results(results: Sequence[ResultRecord | dict]) -> list[ResultRecord]:
    """Records (or their dicts, read as records: every required field present, the
    estimate's, and the provenance's checkpoint and data fingerprint, from which the
    entry's suite is derived) of one explainer, one per (task, model seed, metric)."""
    if not results:
        raise InputError("write_entry got no result records")
    records, seen = [], set()
    for i, d in enumerate(results):
        where = f"results[{i}]"
        rec = d if isinstance(d, ResultRecord) else ResultRecord.from_dict(d, where=where)
        if rec.direction not in DIRECTIONS:
            raise DataFileError(
                where, None, "direction",
                f"must be one of {', '.join(DIRECTIONS)}, got {rec.direction!r}",
            )
        key = (rec.task, rec.model_seed, rec.metric)
        if key in seen:
            raise InputError(
                f"{where}: a second result for task {rec.task!r}, model seed "
                f"{rec.model_seed}, metric {rec.metric!r}"
            )
        seen.add(key)
        records.append(rec)
    return records


def explainer_of(records: list[ResultRecord], spec: dict) -> str:
    ids = sorted({r.explainer for r in records})
    if len(ids) > 1:
        raise InputError(f"an entry holds one explainer; the results name {', '.join(ids)}")
    explainer = ids[0]
    if spec.get("id") not in (None, explainer):
        raise InputError(
            f"explainer_spec id {spec['id']!r} differs from the results' explainer {explainer!r}"
        )
    if spec.get("name") not in (None, short_name(explainer)):
        raise InputError(
            f"explainer_spec name {spec['name']!r} differs from the results' "
            f"explainer {explainer!r}"
        )
    return explainer


def check_rows(per_example: list[dict], records: list[ResultRecord]) -> list[dict]:
    """Every result must be backed by exactly its n per-example values, with its mean —
    or, for a corpus-level metric, by n rows of ``stats`` whose aggregated sums give its
    value (a row's own ``value`` may then be null: one example alone may not define it)."""
    wanted = {(r.task, r.model_seed, r.metric): r for r in records}
    got: dict = defaultdict(dict)
    rows = []
    for line, row in enumerate(per_example, start=1):
        where = "per_example rows"
        for f in ROW_FIELDS:
            if f not in row:
                raise DataFileError(where, line, f, "missing")
        seed, value = row["model_seed"], row["value"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise DataFileError(where, line, "model_seed", f"not an integer: {seed!r}")
        key = (row["task"], seed, row["metric"])
        if key not in wanted:
            raise DataFileError(
                where,
                line,
                "metric",
                f"no result record for task "
                f"{row['task']!r}, model seed {seed}, metric {row['metric']!r}",
            )
        agg = wanted[key].aggregation
        if not (value is None and agg is not None) and not _finite_number(value):
            raise DataFileError(where, line, "value", f"not a finite number: {value!r}")
        example = str(row["id"])
        if example in got[key]:
            raise DataFileError(
                where,
                line,
                "id",
                f"example {example!r} appears twice for {key[0]!r}, seed {seed}, {key[2]!r}",
            )
        out = {
            "task": key[0],
            "model_seed": seed,
            "metric": key[2],
            "id": example,
            "value": None if value is None else float(value),
        }
        if agg is not None:
            stats = row.get("stats")
            k = len(agg["stats"])
            if not isinstance(stats, list) or len(stats) != k or not all(map(_finite_number, stats)):
                raise DataFileError(
                    where, line, "stats",
                    f"metric {key[2]!r} is corpus-level: expected {k} finite numbers "
                    f"({', '.join(agg['stats'])}), got {stats!r}",
                )
            out["stats"] = [float(x) for x in stats]
        if "curve" in row:  # an erasure metric's per-step values (null: no such step)
            curve = row["curve"]
            if not isinstance(curve, list) or not all(x is None or _finite_number(x)
                                                      for x in curve):
                raise DataFileError(where, line, "curve",
                                    f"expected a list of finite numbers or nulls, got {curve!r}")
            out["curve"] = [None if x is None else float(x) for x in curve]
        got[key][example] = out
        rows.append(out)
    for key, rec in wanted.items():
        mine = list(got[key].values())
        what = f"result for task {key[0]!r}, model seed {key[1]}, metric {key[2]!r}"
        if len(mine) != rec.estimate.n:
            raise InputError(f"{what} has n={rec.estimate.n} but {len(mine)} per-example rows")
        if rec.aggregation is None:
            value, how = math.fsum(r["value"] for r in mine) / len(mine), "rows average"
        else:
            sums = [math.fsum(col) for col in zip(*(r["stats"] for r in mine))]
            value, how = float(Aggregation.from_dict(rec.aggregation)(sums)), "rows' stats aggregate to"
        if not math.isclose(value, rec.estimate.mean, rel_tol=1e-9, abs_tol=1e-12):
            raise InputError(
                f"{what} has mean {rec.estimate.mean!r} but its per-example {how} {value!r}"
            )
    return rows


def _finite_number(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value))


def suite_key(record: ResultRecord) -> tuple:
    """What puts a result in a suite: its task, model seed and checkpoint, split, and
    how its examples were chosen (``derive_suite`` describes the suite these make)."""
    return (record.task, record.model_seed, record.provenance.checkpoint, record.split,
            _examples(record))


def derive_suite(records: list[ResultRecord]) -> dict:
    """task id -> {split, examples, model_seeds, checkpoints, data_fingerprint, n} of these
    results (``examples`` only where the records say how the run chose them)."""
    by_task: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in records:
        by_task[r.task].append(r)
    suite = {}
    for task, recs in sorted(by_task.items()):
        checkpoints: dict[int, set] = defaultdict(set)
        for r in recs:
            checkpoints[r.model_seed].add(r.provenance.checkpoint)
        for seed, found in checkpoints.items():
            if len(found) > 1:
                raise InputError(
                    f"task {task!r}, model seed {seed}: results come from "
                    f"several checkpoints {sorted(map(str, found))}"
                )
        seeds = sorted(checkpoints)
        suite[task] = {
            "split": _only(task, "split", {r.split for r in recs}),
            "model_seeds": seeds,
            "checkpoints": [next(iter(checkpoints[s])) for s in seeds],
            "data_fingerprint": _only(
                task, "data_fingerprint", {r.provenance.data_fingerprint for r in recs}
            ),
            "n": max(r.estimate.n + r.estimate.undefined for r in recs),
        }
        chosen = {_examples(r) for r in recs}
        if chosen != {None}:
            suite[task]["examples"] = _only(task, "examples", chosen)
    return suite


def selection_label(run: dict) -> str:
    """How a run (``RunConfig.as_dict()``, as records carry it) chose the examples
    of its split: the ``examples`` of a suite.

    >>> selection_label({"limit": 300}), selection_label({"sample": 300, "sample_seed": 0})
    ('first 300', 'random 300 (seed 0)')
    >>> selection_label({"limit": None}), selection_label({"sample": 50, "limit": 300})
    ('all', 'random 50 of the first 300 (seed 0)')
    """
    if run.get("sample") is not None:
        among = f" of the first {run['limit']}" if run.get("limit") is not None else ""
        return f"random {run['sample']}{among} (seed {run.get('sample_seed', 0)})"
    return "all" if run.get("limit") is None else f"first {run['limit']}"


def _examples(record: ResultRecord) -> str | None:
    """How the record's run chose the examples of its split (``selection_label``);
    None where the record does not say (no run configuration: scored from a file)."""
    run = record.provenance.run_options()
    return None if run is None else selection_label(run)


def _only(task: str, field: str, values: set):
    if len(values) > 1:
        raise InputError(
            f"task {task!r}: results disagree on {field} "
            f"({', '.join(sorted(map(repr, values)))}); one entry has one suite"
        )
    return next(iter(values))


def suite_differences(a, b, task: str) -> list[str]:
    """What stops ``a`` and ``b`` being compared on ``task`` (empty list: nothing)."""
    sa, sb = a.suite.get(task), b.suite.get(task)
    if sa is None or sb is None:
        return [f"task {task!r} is missing from {(a if sa is None else b).label}"]
    diffs = [f"{f} {sa[f]!r} vs {sb[f]!r}" for f in ("split", "data_fingerprint") if sa[f] != sb[f]]
    ea, eb = sa.get("examples"), sb.get("examples")
    if ea is not None and eb is not None and ea != eb:  # None: an entry that does not say
        diffs.append(f"examples {ea!r} vs {eb!r}")
    ca, cb = (
        dict(zip(sa["model_seeds"], sa["checkpoints"])),
        dict(zip(sb["model_seeds"], sb["checkpoints"])),
    )
    if MODEL_FREE in ca.values() or MODEL_FREE in cb.values():
        return diffs
    for seed in sorted(ca.keys() | cb.keys()):
        if ca.get(seed) != cb.get(seed):
            diffs.append(f"checkpoint for model seed {seed} {ca.get(seed)!r} vs {cb.get(seed)!r}")
    return diffs


def require_same_suite(a, b, task: str) -> None:
    diffs = suite_differences(a, b, task)
    if diffs:
        raise InputError(
            f"entries {a.label} and {b.label} were not scored on the same suite "
            f"for task {task!r}: {'; '.join(diffs)}. Only entries with the same "
            "split, examples, data and checkpoints can be compared."
        )


def suite_label(suite: dict) -> str:
    """One task's suite (``derive_suite``'s dict) in words, for a table's caption. No
    count: n differs between metrics of one suite (sentences for AER, target words for
    erasure), and each row shows its own.

    >>> suite_label({"split": "test", "examples": "first 300", "model_seeds": [0, 1, 2],
    ...              "checkpoints": ["a", "b", "c"], "n": 300})
    'test split, first 300 examples, model seeds 0 1 2'
    >>> suite_label({"split": "test", "model_seeds": [0], "checkpoints": ["model-free"],
    ...              "n": 447})
    'test split, no model (scored from a file)'
    """
    examples = suite.get("examples")
    chosen = [] if examples is None else [f"{examples} examples"]
    if MODEL_FREE in suite["checkpoints"]:
        models = "no model (scored from a file)"
    else:
        models = "model seeds " + " ".join(map(str, suite["model_seeds"]))
    return ", ".join([f"{suite['split']} split", *chosen, models])


def by_suite(entries: list, task: str) -> list[list]:
    """``entries`` that have ``task``, in groups that compare on it (``suite_differences``
    empty within a group), in the order of their first member. An entry no model
    produced (alignments scored from a file) joins every group it compares with, and
    forms groups of its own only where it joins none."""
    having = [e for e in entries if task in e.suite]
    model_free = [e for e in having if MODEL_FREE in e.suite[task]["checkpoints"]]
    groups: list[list] = []
    for e in having:
        if e in model_free:
            continue
        home = next((g for g in groups if not suite_differences(g[0], e, task)), None)
        if home is None:
            groups.append([e])
        else:
            home.append(e)
    alone: list[list] = []
    for e in model_free:
        joined = [g for g in groups if not suite_differences(g[0], e, task)]
        for g in joined:
            g.append(e)
        if not joined:
            home = next((g for g in alone if not suite_differences(g[0], e, task)), None)
            if home is None:
                alone.append([e])
            else:
                home.append(e)
    return groups + alone


def suite_labels(groups: list[list], task: str) -> list[str]:
    """``suite_label`` of each group of ``by_suite``, made distinct where two groups
    differ only in their data or their checkpoints (those are named then), followed by
    what made the group's models and their gate check (``models.model_label``)."""
    suites = [g[0].suite[task] for g in groups]
    labels = [suite_label(x) for x in suites]
    for i, label in enumerate(labels):
        clash = [x for j, x in enumerate(suites) if j != i and suite_label(x) == label]
        if clash:
            mine = suites[i]
            extra = []
            if any(x["data_fingerprint"] != mine["data_fingerprint"] for x in clash):
                extra.append(f"data {str(mine['data_fingerprint'])[:8]}")
            if any(x["checkpoints"] != mine["checkpoints"] for x in clash):
                extra.append("checkpoints " + " ".join(str(c)[:8] for c in mine["checkpoints"]))
            labels[i] = ", ".join([label, *extra])
    models = [model_label(r for e in g for r in e.results if r.task == task) for g in groups]
    return [f"{label}; {m}" if m else label for label, m in zip(labels, models)]
