"""What is registered: tasks, reference explainers and metrics, with canonical ids."""

from faithbench import metrics as metric_registry
from faithbench import submissions
from faithbench import tasks as task_registry
from faithbench.benchmark.runner import resolve_explainer


def level(spec) -> str:
    """How a metric's value is formed: mean over examples, corpus aggregate, by
    retraining, or by explaining a randomized model."""
    if spec.needs_training:
        return "retraining"
    if spec.needs_explainer:
        return "re-explaining"
    return "corpus" if spec.aggregation is not None else "per example"


def catalog() -> list[tuple[str, list, list[str]]]:
    """(title, rows, headers) for each of tasks, explainers, metrics."""
    task_rows = [(t.spec.name, t.spec.kind, t.spec.dataset, t.spec.eval_split, t.spec.id)
                 for _, t in task_registry.REGISTRY.items()]
    explainer_rows = []
    for name in submissions.REFERENCE:
        spec = resolve_explainer(name).spec
        explainer_rows.append((spec.name, ", ".join(sorted(spec.requires)) or "-",
                               spec.cost or "-", spec.id))
    metric_rows = [(m.spec.name, m.spec.family, m.spec.direction, level(m.spec), m.spec.id)
                   for _, m in metric_registry.REGISTRY.items()]
    # the id last: the longest, copied whole, so the columns before it stay in view
    return [
        ("tasks", task_rows, ["name", "kind", "dataset", "eval split", "id"]),
        ("explainers", explainer_rows, ["name", "requires", "cost per example", "id"]),
        ("metrics", metric_rows, ["name", "family", "better", "level", "id"]),
    ]
