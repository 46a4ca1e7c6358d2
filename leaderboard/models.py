"""What made a suite's models, read off its records: the budget (family, training rows,
data variant, epochs) and the model gate's check (``faithbench.benchmark.core.gate``),
in words for the board, ``compare`` and the site. A suite whose model the gate refused
(scored with ``--allow-weak-model``) reads "WEAK MODEL" wherever it is shown.

Records written before the gate existed carry no report: their budget is read from the
run options and model config they do carry, and their validation accuracy is shown
without a majority rate.
"""

from __future__ import annotations

from collections.abc import Iterable

from faithbench.benchmark.core.gate import Budget, ModelReport

WEAK = "WEAK MODEL"


def report_of(record) -> ModelReport | None:
    """The model report a result record carries, or the budget its older fields give."""
    p = record.provenance
    if p.model is not None:
        return ModelReport.from_dict(p.model)
    task = (p.config or {}).get("task")
    run = p.run_options()
    if not isinstance(task, dict) or run is None:
        return None  # alignments scored from a file: no model
    model = task.get("model") or {}
    family = ("hf" if model.get("family") == "hf" else
              "transformer" if "base" in model else
              "seq2seq" if "tgt_vocab_size" in model else "bilstm")
    epochs = (task.get("train") or {}).get("epochs")
    return ModelReport(Budget(family, run.get("variant"), None, run.get("train_limit"), epochs,
                              source=model.get("path")))


def model_label(records: Iterable) -> str:
    """One suite's models in words, from the records of its entries on one task; the
    model seeds' figures as a range. Empty where no record says.

    >>> from types import SimpleNamespace as R
    >>> check = {"measure": "accuracy", "split": "validation", "n": 100, "value": 0.51,
    ...          "ci_low": 0.41, "ci_high": 0.61, "baseline": 0.51,
    ...          "baseline_name": "majority class", "threshold": 0.56, "passed": False,
    ...          "allowed": True}
    >>> rec = R(model_seed=0, provenance=R(model={"budget": {"family": "bilstm",
    ...     "train_rows": 3000, "train_limit": 3000, "epochs": 2, "epochs_trained": 2},
    ...     "check": check}))
    >>> model_label([rec])
    'WEAK MODEL (validation 0.51, majority 0.51; scored with --allow-weak-model); BiLSTM \
on 3,000 training rows (--train-limit 3000), 2 of at most 2 epochs'
    """
    by_seed: dict[int, ModelReport] = {}
    for r in records:
        if r.model_seed not in by_seed:
            report = report_of(r)
            if report is not None:
                by_seed[r.model_seed] = report
    if not by_seed:
        return ""
    reports = [by_seed[s] for s in sorted(by_seed)]
    parts = []
    weak = [r.check for r in reports if r.weak and r.check is not None]
    if weak:
        parts.append(f"{WEAK} ({weak[0].short()}; scored with --allow-weak-model)")
    parts.append(_budgets(reports))
    checks = [r.check for r in reports if r.check is not None]
    if checks and not weak:
        parts.append(_checks(checks))
    return "; ".join(p for p in parts if p)


def models_of(records: list) -> dict[str, dict]:
    """An entry header's ``models``: per task the ``model_label`` of its records and
    whether a model of it was weak (scored with ``--allow-weak-model``)."""
    tasks = sorted({r.task for r in records})
    out = {}
    for task in tasks:
        mine = [r for r in records if r.task == task]
        reports = [report_of(r) for r in mine]
        out[task] = {"label": model_label(mine),
                     "weak": any(rep is not None and rep.weak for rep in reports)}
    return out


def _budgets(reports: list[ModelReport]) -> str:
    """The seeds' budgets; epochs trained as a range where seeds stopped apart."""
    budgets = [r.budget for r in reports]
    trained = sorted({b.epochs_trained for b in budgets if b.epochs_trained is not None})
    first = budgets[0]
    if len(trained) > 1:
        text = Budget(first.family, first.variant, first.train_rows, first.train_limit,
                      first.epochs, 0, first.source).describe()
        return text.replace(", 0 of at most", f", {trained[0]}–{trained[-1]} of at most")
    return first.describe()


def _checks(checks) -> str:
    """>>> from faithbench.benchmark.core.gate import accuracy_check
    >>> _checks([accuracy_check([0] * 50 + [1] * 50, k, "validation") for k in (83, 85)])
    'validation 0.83–0.85, majority 0.50'
    """
    first = checks[0]
    digits = ".2f" if first.measure == "accuracy" else ".1f"
    low, high = min(c.value for c in checks), max(c.value for c in checks)
    value = f"{low:{digits}}" if f"{low:{digits}}" == f"{high:{digits}}" else \
        f"{low:{digits}}–{high:{digits}}"
    what = first.split if first.measure == "accuracy" else f"{first.split} perplexity"
    return f"{what} {value}, {first.baseline_name.split()[0]} {first.baseline:{digits}}"
