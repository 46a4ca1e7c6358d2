"""The verbs that work on one task and a file (explain, score, predict), on one task
and several explainers (agreement), and on one plugin (validate, submit). Each CLI
verb calls one function here or in runner; every one of them works through an
evaluation session (``faithbench.benchmark.session``), which does the setup.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from faithbench import submissions
from faithbench import tasks as task_registry
from faithbench.benchmark.core.api import CLASSIFICATION, GENERATION, PAIR_CLASSIFICATION
from faithbench.benchmark.core.errors import DataFileError, InputError, PluginError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.isolation import plugin_caller
from faithbench.benchmark.core.records import (
    AgreementRecord,
    FailureRecord,
    append_jsonl,
    read_jsonl,
    write_jsonl_atomic,
)
from faithbench.benchmark.core.validation import CheckResult, run_checks
from faithbench.benchmark.inseq import read_inseq
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.recording import provenance
from faithbench.benchmark.runner import (
    RunSummary,
    check_explainer,
    metrics_for,
    record_failure,
    resolve_explainer,
    run,
    serviceable,
)
from faithbench.benchmark.session import confinement, open_session, per_example_rows
from faithbench.metrics.agreement import agreement_matrix, check_k_frac


def explain_to_file(task: str, explainer: str, out_file: str, config: RunConfig) -> int:
    """Write one object per example: id, tokens (as the model sees them), scores, target,
    and what the example carries (segments of a pair; on a subword model the word of each
    piece, ``words``; an alignment row's sentence, position, prefix and target_word), so
    ``faithbench score`` reads back the examples ``run`` scores, words grouped alike."""
    check = getattr(task_registry.get_task(task), "check_data", None)
    if check is not None:  # a bad or missing dataset stops before the model is prepared
        check(config.evaluation.task_options(config.seeds[0], config.device))
    session = open_session(task, config)
    # as examples, not a split: nothing is cached or kept part-done under ``config.out``,
    # which for this verb names the output file
    explained = session.on(session.examples).explain(resolve_explainer(explainer, confinement(config)))
    write_jsonl_atomic(Path(out_file), [
        {"id": e.id, "tokens": list(e.tokens), "scores": s, "target": t,
         **({"segments": list(e.segments)} if e.segments is not None else {}),
         **({"words": _numbered(e.words)} if e.words is not None else {}),
         **{k: list(v) if isinstance(v, tuple) else v for k, v in (e.extras or {}).items()}}
        for e, s, t in zip(session.examples, explained.scores, explained.targets)
    ])
    return len(session.examples)


def _numbered(words: Sequence[int]) -> list[int]:
    """Word ids renumbered 0, 1, ... in order of appearance (a pair cut to the model's
    length may skip the ids of dropped words); the grouping is the same.

    >>> _numbered((0, 0, 1, 4, 4, 5))
    [0, 0, 1, 2, 2, 3]
    """
    first: dict[int, int] = {}
    return [first.setdefault(w, len(first)) for w in words]


def read_explanations(path: str, n_labels: int) -> list[dict]:
    """Rows of an explanations file, checked: id, tokens, scores (same length), target.
    An optional ``words`` field (subword models) is checked by the task, which knows
    whether its tokens are pieces (``examples_from_rows``)."""
    rows = read_jsonl(Path(path))
    if not rows:
        raise DataFileError(path, None, None, "no explanations in file")
    seen = set()
    for line, row in enumerate(rows, start=1):
        for name in ("id", "tokens", "scores"):
            if name not in row:
                raise DataFileError(path, line, name, "missing field")
        if str(row["id"]) in seen:
            raise DataFileError(path, line, "id", f"duplicate id {row['id']!r}")
        seen.add(str(row["id"]))
        if not isinstance(row["tokens"], list) or not all(isinstance(t, str) for t in row["tokens"]):
            raise DataFileError(path, line, "tokens", "expected a list of strings")
        if not row["tokens"]:
            raise DataFileError(path, line, "tokens", "empty token list")
        s = row["scores"]
        if not isinstance(s, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              and math.isfinite(v) for v in s):
            raise DataFileError(path, line, "scores", "expected a list of finite numbers")
        if len(s) != len(row["tokens"]):
            raise DataFileError(path, line, "scores",
                                f"has {len(s)} values for {len(row['tokens'])} tokens")
        t = row.get("target")
        if t is not None and (not isinstance(t, int) or not 0 <= t < n_labels):
            raise DataFileError(path, line, "target", f"expected a class index in [0, {n_labels})")
    return rows


def score_file(task: str, explanations: str | Sequence[str], config: RunConfig,
               per_example_out: str | None = None, *, inseq: bool = False) -> list[dict]:
    """Score explanations computed anywhere with the task's model.

    The target of each row is its ``target`` field if given, else the task's own
    target (a classifier's predicted class, the ERASER convention). Returns one summary
    row per (file, metric): the estimate over the examples that define the metric, and
    ``undefined``, how many do not (their per-example rows have a null value). Several files (e.g. one per explainer) share one model and
    one perturbation engine, so a variant two explainers both ask for (every
    leave-one-out input, the empty input) is forwarded once. ``inseq``: the files are
    Inseq's saved attributions of a generation task (``faithbench.benchmark.inseq``).
    """
    files = [explanations] if isinstance(explanations, str) else list(explanations)
    if inseq and task_registry.get_task(task).spec.kind != GENERATION:
        raise InputError(f"--inseq reads attributions of generated tokens: use --task "
                         f"generation (task {task!r} is not one)")
    base = open_session(task, config)
    summary, per_example = [], []
    for path in files:
        rows = read_inseq(path, cast(Any, base.prepared).tokenizer, base.prepared.n_outputs) \
            if inseq else read_explanations(path, base.prepared.n_outputs)
        session = base.on(base.prepared.examples_from_rows(path, rows))
        if any(r.get("target") is not None for r in rows):
            default = session.targets
            session.targets = [r["target"] if r.get("target") is not None else int(d)
                               for r, d in zip(rows, default)]
        metrics = [m for m in metrics_for(session.spec, config.metrics)
                   if config.metrics or not m.spec.needs_reference]
        for m in metrics:
            if m.spec.needs_reference and not session.has_references():
                raise InputError(f"metric {m.spec.name} compares with reference rationales, "
                                 f"which the rows of {path} do not carry; it runs in "
                                 "`faithbench run` on tasks that have them")
        check_words(path, session.examples, base.examples, metrics)
        where = {"explanations": str(path)} if len(files) > 1 else {}
        for metric in metrics:
            scored = session.score(metric, [r["scores"] for r in rows])
            est = session.estimate(metric, scored)
            summary.append({**where, "metric": metric.spec.id, "direction": metric.spec.direction,
                            **est.as_dict(), **{k: int(v.sum()) for k, v in scored.flags.items()},
                            "seconds": scored.seconds, "rows_forwarded": scored.rows_forwarded,
                            "rows_requested": scored.rows_requested})
            per_example += [{**where, "metric": metric.spec.id, **row}
                            for row in per_example_rows(scored, undefined=True)]
    if per_example_out:
        write_jsonl_atomic(Path(per_example_out), per_example)
    return summary


def check_words(path: str, rows: Sequence, task_examples: Sequence, metrics) -> None:
    """Refuse a row whose pieces are not grouped into words (no ``words`` field, and no
    example of the task with its id and pieces) where the model is a subword one (its
    own examples have words) and a metric counts words: scoring it piece by piece would
    silently give other numbers than ``run``."""
    if not any(e.words is not None for e in task_examples):
        return
    by_words = [m.spec.id for m in metrics
                if dict(m.spec.params).get("granularity", "subword") != "subword"]
    missing = next((line for line, e in enumerate(rows, start=1) if e.words is None), None)
    if by_words and missing is not None:
        raise DataFileError(path, missing, "words", (
            f"id {rows[missing - 1].id!r} is not an example of the task with these pieces, "
            "and the row gives no word of each piece; metrics count words on a subword "
            f"model ({by_words[0]}): add `words` (as `faithbench explain` writes them), or "
            "score pieces with granularity=subword (e.g. --metrics "
            "'comprehensiveness[granularity=subword]')"))


def predict(task: str, input_file: str, config: RunConfig) -> list[dict]:
    """``{"id", "probs", "label"}`` for each ``{"id", "tokens"}`` line of ``input_file``.
    The file is read before any model is prepared: a missing or empty file, bytes that
    are not UTF-8, or a row with no token (nothing to predict from) is an error naming
    the file and line."""
    path = Path(input_file)
    if not path.is_file():
        raise InputError(f"{input_file}: no such file (expected JSON Lines of id, tokens)")
    rows = read_jsonl(path)  # not UTF-8: NotUtf8Error with line and byte offset
    if not rows:
        raise DataFileError(input_file, None, None, "no rows: the file is empty")
    for line, row in enumerate(rows, start=1):
        if row.get("tokens") == []:
            raise DataFileError(input_file, line, "tokens", "empty token list: nothing to "
                                "predict from")
    if task_registry.get_task(task).spec.kind not in (CLASSIFICATION, PAIR_CLASSIFICATION):
        raise InputError(f"predict gives class probabilities; task {task!r} has no classes")
    session = open_session(task, config)
    session = session.on(session.prepared.examples_from_rows(input_file, rows))
    labels = session.spec.labels
    return [{"id": r["id"], "probs": [round(float(x), 6) for x in p],
             "label": labels[int(p.argmax())]} for r, p in zip(rows, session.base_probs)]


def agreement(task: str, config: RunConfig, *, k_frac: float = 0.2
              ) -> tuple[list[dict], Path, list[FailureRecord]]:
    """How alike the explainers rank tokens on one task: one row per pair (Kendall τ-b,
    top-k overlap), appended as one AgreementRecord to ``<out>/agreement.jsonl``.

    Explanations come from the same cache ``faithbench run`` writes under ``--out``,
    so an explainer already run there is not run again. An explainer that fails is
    recorded in ``failures.jsonl`` and left out; the others are still compared.
    Returns (pair rows, path of agreement.jsonl, failures).
    """
    check_k_frac(k_frac)
    start = time.perf_counter()
    out = Path(config.out)
    refs = list(dict.fromkeys(config.explainers or submissions.REFERENCE))  # unique, in order
    for ref in refs:  # a typo stops here, before the model is prepared
        check_explainer(ref)
    session = open_session(task, config)
    failures, chosen = [], []
    for ref in refs:
        try:
            chosen.append((ref, resolve_explainer(ref, confinement(config))))
        except PluginError as exc:
            failures.append(record_failure(out, exc, session.spec.id, ref, session.seed))
    if not config.explainers:  # the default set: only those this model can serve, as in run
        kept = serviceable([e for _, e in chosen], session.prepared.model, session.spec.id)
        chosen = [(ref, e) for ref, e in chosen if any(e is k for k in kept)]
    loaded: list = []
    for ref, explainer in chosen:
        try:
            explained = session.explain(explainer)
        except PluginError as exc:
            failures.append(record_failure(out, exc, session.spec.id, ref, session.seed))
            continue
        if all(explainer.spec.id != e.spec.id for e, _ in loaded):
            loaded.append((explainer, explained.scores))
    names = [e.spec.name for e, _ in loaded]
    # readable names in the matrix; the canonical id only where two share a name
    labels = [e.spec.name if names.count(e.spec.name) == 1 else e.spec.id for e, _ in loaded]
    rows = agreement_matrix({label: scores for label, (_, scores) in zip(labels, loaded)},
                            k_frac=k_frac)
    ids = [e.spec.id for e, _ in loaded]
    seed, split = session.seed, session.split
    assert split is not None  # agreement is computed on a split
    record = AgreementRecord(
        key=content_hash({"checkpoint": session.prepared.checkpoint, "explainers": ids,
                          "split": split, "limit": config.selection, "k_frac": k_frac,
                          "kind": "agreement"}),
        task=session.spec.id,
        model_seed=seed,
        split=split,
        explainers=ids,
        rows=rows,
        provenance={
            **provenance(session, seeds=session.seeds.as_dict(), k_frac=k_frac).as_dict(),
            "labels": dict(zip(labels, ids)),
            "failed": [f.explainer for f in failures],
            "n_examples": len(session.examples),
            "seconds": time.perf_counter() - start,
        },
    )
    path = out / "agreement.jsonl"
    append_jsonl(path, record.as_dict())
    return rows, path, failures


def validate_plugin(ref: str, config: RunConfig, n_examples: int = 12,
                    task: str = "synthetic") -> list[CheckResult]:
    """Load a plugin (in a worker) and run every check on ``task``'s model (for
    ``validate``, the synthetic task's; ``submit`` checks on the first task it runs, whose
    model it prepares anyway): ``n_examples`` of its scored split in one batch, again, in
    a fresh worker in other orders and batch sizes and each alone (``run_checks``)."""
    box = confinement(config)
    try:
        plugin = resolve_explainer(ref, box)
    except PluginError as exc:
        return [CheckResult("load", False, str(exc))]
    if task == "synthetic":  # generated: no data to read, whatever the run reads
        config = replace(config, data_dir=None, variant=None)
    session = open_session(task, replace(config, split=None, limit=n_examples, sample=None),
                           config.seeds[0])
    batch, _, _ = next(session.prepared.batches(session.examples, n_examples))
    target = session.targets

    def caller():
        return plugin_caller(plugin, session.prepared.model, time_budget_s=config.time_budget_s,
                             isolation=config.isolation, box=box)

    with caller() as first:
        checks = run_checks(plugin, first, batch, target, time_budget_s=config.time_budget_s,
                            fresh=caller)
    return [CheckResult("load", True, plugin.spec.id)] + checks


def submit(ref: str, config: RunConfig) -> tuple[list[CheckResult], RunSummary | None]:
    """Validate (on the first task's model: nothing is trained that the tasks do not
    need), then run the plugin on the tasks and add its leaderboard entry."""
    checks = validate_plugin(ref, config, task=config.tasks[0])
    if not all(c.passed for c in checks):
        return checks, None
    return checks, run(replace(config, explainers=(ref,)))
