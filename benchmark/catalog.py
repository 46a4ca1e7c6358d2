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
    task_rows = [(t.spec.name, t.spec.id, t.spec.kind, t.spec.dataset, t.spec.eval_split)
                 for _, t in task_registry.REGISTRY.items()]
    explainer_rows = []
    for name in submissions.REFERENCE:
        spec = resolve_explainer(name).spec
        explainer_rows.append((spec.name, spec.id, ", ".join(sorted(spec.requires)) or "-",
                               spec.cost or "-"))
    metric_rows = [(m.spec.name, m.spec.id, m.spec.family, m.spec.direction, level(m.spec))
                   for _, m in metric_registry.REGISTRY.items()]
    return [
        ("tasks", task_rows, ["name", "id", "kind", "dataset", "eval split"]),
        ("explainers", explainer_rows, ["name", "id", "requires", "cost per example"]),
        ("metrics", metric_rows, ["name", "id", "family", "better", "level"]),
    ]
