"""The verbs that work on one task and a file (explain, score, predict), on one task
and several explainers (agreement), and on one plugin (validate, submit). Each CLI
verb calls one function here or in runner."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from pathlib import Path

import torch

import metrics as metric_registry
import submissions
import tasks as task_registry
from benchmark.core import stats
from benchmark.core.api import PAIR_CLASSIFICATION
from benchmark.core.cache import content_hash
from benchmark.core.errors import DataFileError, PluginError
from benchmark.core.isolation import plugin_caller
from benchmark.core.perturb import Perturber
from benchmark.core.records import (
    AgreementRecord,
    FailureRecord,
    append_jsonl,
    read_jsonl,
    write_jsonl_atomic,
)
from benchmark.core.stats import bootstrap
from benchmark.core.validation import CheckResult, run_checks
from benchmark.plan import RunConfig
from benchmark.runner import (
    RunSummary,
    explanations_for,
    model_provenance,
    record_failure,
    resolve_explainer,
    run,
    task_options,
)
from benchmark.scoring import base_probs, explain, score
from metrics.agreement import agreement_matrix, check_k_frac
from tasks.classification import Example

log = logging.getLogger(__name__)


def prepare_task(name: str, config: RunConfig):
    return task_registry.get_task(name).prepare(task_options(config, config.seeds[0]),
                                                progress=config.progress)


def explain_to_file(task: str, explainer: str, out_file: str, config: RunConfig) -> int:
    """Write one object per example: id, tokens (as the model sees them), scores, target."""
    ready = prepare_task(task, config)
    examples = ready.examples(config.split, config.limit)
    plugin = resolve_explainer(explainer)
    perturber = Perturber(ready.model, chunk_size=config.chunk_size)
    targets = base_probs(ready, examples, perturber, config.batch_size).argmax(-1)
    result = explain(plugin, ready, examples, targets, batch_size=config.batch_size,
                     seed=config.seeds[0], time_budget_s=config.time_budget_s,
                     isolation=config.isolation,
                     progress=config.progress)
    write_jsonl_atomic(Path(out_file), [
        {"id": e.id, "tokens": list(e.tokens), "scores": s, "target": t,
         **({"segments": list(e.segments)} if e.segments is not None else {})}
        for e, s, t in zip(examples, result.scores, result.targets)
    ])
    return len(examples)


def _segments(path, line: int, row: dict, pairs: bool) -> tuple[int, ...] | None:
    """A pair task needs ``segments`` (0 premise, 1 hypothesis) beside the tokens."""
    if not pairs:
        return None
    seg = row.get("segments")
    if not isinstance(seg, list) or len(seg) != len(row["tokens"]) or not all(
            s in (0, 1) for s in seg):
        raise DataFileError(path, line, "segments", "a pair task needs one 0/1 segment id "
                            "per token (0 = premise, 1 = hypothesis)")
    return tuple(seg)


def _examples(path, rows: list[dict], pairs: bool) -> list[Example]:
    return [Example(str(r["id"]), tuple(r["tokens"]), -1, segments=_segments(path, i, r, pairs))
            for i, r in enumerate(rows, start=1)]


def read_explanations(path: str, n_labels: int) -> list[dict]:
    """Rows of an explanations file, checked: id, tokens, scores (same length), target."""
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


def score_file(task: str, explanations: str, config: RunConfig, per_example_out: str | None = None
               ) -> list[dict]:
    """Score explanations computed anywhere with the task's model.

    The target of each row is its ``target`` field if given, else the model's
    predicted class (the ERASER convention). Returns one summary row per metric.
    """
    ready = prepare_task(task, config)
    rows = read_explanations(explanations, len(ready.spec.labels))
    examples = _examples(explanations, rows, ready.spec.kind == PAIR_CLASSIFICATION)
    perturber = Perturber(ready.model, chunk_size=config.chunk_size)
    probs = base_probs(ready, examples, perturber, config.batch_size)
    targets = torch.tensor([r["target"] if r.get("target") is not None else int(p.argmax())
                            for r, p in zip(rows, probs)])
    names = config.metrics or [m.spec.name for m in metric_registry.default_metrics(
        ready.spec.kind, has_reference=False)]
    summary, per_example = [], []
    for name in names:
        metric = metric_registry.resolve(name)
        scored = score(metric, ready, examples, [r["scores"] for r in rows], targets, probs,
                       perturber, batch_size=config.batch_size, progress=config.progress)
        est = bootstrap(scored.values)
        summary.append({"metric": metric.spec.id, "direction": metric.spec.direction,
                        **est.as_dict(), **{k: int(v.sum()) for k, v in scored.flags.items()}})
        per_example += [{"id": i, "metric": metric.spec.id, "value": float(v)}
                        for i, v in zip(scored.ids, scored.values)]
    if per_example_out:
        write_jsonl_atomic(Path(per_example_out), per_example)
    return summary


def predict(task: str, input_file: str, config: RunConfig) -> list[dict]:
    """``{"id", "probs", "label"}`` for each ``{"id", "tokens"}`` line of ``input_file``."""
    ready = prepare_task(task, config)
    rows = read_jsonl(Path(input_file))
    for line, row in enumerate(rows, start=1):
        for name in ("id", "tokens"):
            if name not in row:
                raise DataFileError(input_file, line, name, "missing field")
        if not isinstance(row["tokens"], list) or not all(isinstance(t, str) for t in row["tokens"]):
            raise DataFileError(input_file, line, "tokens", "expected a list of strings")
    examples = _examples(input_file, rows, ready.spec.kind == PAIR_CLASSIFICATION)
    perturber = Perturber(ready.model, chunk_size=config.chunk_size)
    probs = base_probs(ready, examples, perturber, config.batch_size)
    return [{"id": r["id"], "probs": [round(float(x), 6) for x in p],
             "label": ready.spec.labels[int(p.argmax())]} for r, p in zip(rows, probs)]


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
    seed = config.seeds[0]
    ready = prepare_task(task, config)
    split = config.split or ready.spec.eval_split  # as the runner keys its explanations
    examples = ready.examples(split, config.limit)
    perturber = Perturber(ready.model, chunk_size=config.chunk_size)
    targets = base_probs(ready, examples, perturber, config.batch_size).argmax(dim=-1)
    failures, loaded = [], []
    for ref in dict.fromkeys(config.explainers or submissions.REFERENCE):  # unique, in order
        try:
            explainer = resolve_explainer(ref)
            explained = explanations_for(config, ready, seed, explainer, examples, targets, split)
        except PluginError as exc:
            failures.append(record_failure(out, exc, ready.spec.id, ref, seed))
            continue
        if all(explainer.spec.id != e.spec.id for e, _ in loaded):
            loaded.append((explainer, explained["scores"]))
    names = [e.spec.name for e, _ in loaded]
    # readable names in the matrix; the canonical id only where two share a name
    labels = [e.spec.name if names.count(e.spec.name) == 1 else e.spec.id for e, _ in loaded]
    rows = agreement_matrix({label: scores for label, (_, scores) in zip(labels, loaded)},
                            k_frac=k_frac)
    ids = [e.spec.id for e, _ in loaded]
    record = AgreementRecord(
        key=content_hash({"checkpoint": ready.checkpoint, "explainers": ids, "split": split,
                          "limit": config.limit, "k_frac": k_frac, "kind": "agreement"}),
        task=ready.spec.id,
        model_seed=seed,
        split=split,
        explainers=ids,
        rows=rows,
        provenance={
            **model_provenance(ready),
            "config": {"run": {k: v for k, v in config.as_dict().items() if k != "progress"},
                       "task": ready.config, "k_frac": k_frac},
            "labels": dict(zip(labels, ids)),
            "failed": [f.explainer for f in failures],
            "seeds": {"model": seed, "explainer": seed, "bootstrap": stats.SEED},
            "n_examples": len(examples),
            "seconds": time.perf_counter() - start,
        },
    )
    path = out / "agreement.jsonl"
    append_jsonl(path, record.as_dict())
    return rows, path, failures


def validate_plugin(ref: str, config: RunConfig, n_examples: int = 8) -> list[CheckResult]:
    """Load a plugin and run every check on the synthetic task's model."""
    try:
        plugin = resolve_explainer(ref)
    except PluginError as exc:
        return [CheckResult("load", False, str(exc))]
    ready = prepare_task("synthetic", replace(config, data_dir=None, variant=None))
    batch, _, _ = ready.collate(ready.examples(limit=n_examples))
    with torch.no_grad():
        target = ready.model.logits(batch).argmax(-1)
    with plugin_caller(plugin, ready.model, time_budget_s=config.time_budget_s,
                       isolation=config.isolation) as caller:
        checks = run_checks(plugin, caller, batch, target, time_budget_s=config.time_budget_s)
    return [CheckResult("load", True, plugin.spec.id)] + checks


def submit(ref: str, config: RunConfig) -> tuple[list[CheckResult], RunSummary | None]:
    """Validate, then run the plugin on the tasks and add its leaderboard entry."""
    checks = validate_plugin(ref, config)
    if not all(c.passed for c in checks):
        return checks, None
    return checks, run(replace(config, explainers=(ref,)))
