"""Tasks: one module per task; the registry is filled by explicit ``add`` calls."""

from faithbench.benchmark.core.registry import Registry
from faithbench.tasks import alignment, nli, sentiment, shortcut, synthetic

REGISTRY = Registry("task")
REGISTRY.add(synthetic.SPEC.name, synthetic.TASK)
REGISTRY.add(sentiment.SPEC.name, sentiment.TASK)
REGISTRY.add(nli.SPEC.name, nli.TASK)
REGISTRY.add(alignment.SPEC.name, alignment.TASK)
REGISTRY.add(alignment.REVERSE_SPEC.name, alignment.REVERSE_TASK)
REGISTRY.add(shortcut.SINGLE.spec.name, shortcut.SINGLE)
REGISTRY.add(shortcut.PAIR.spec.name, shortcut.PAIR)


def get_task(name: str):
    return REGISTRY.get(name)
