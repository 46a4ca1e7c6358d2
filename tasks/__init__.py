"""Tasks: one module per task; the registry is filled by explicit ``add`` calls."""

from faithbench.benchmark.core.registry import Registry
from faithbench.tasks import (
    alignment,
    classification,
    generation,
    nli,
    sentiment,
    shortcut,
    synthetic,
    text,
)

REGISTRY = Registry("task")
REGISTRY.add(synthetic.SPEC.name, synthetic.TASK)
REGISTRY.add(sentiment.SPEC.name, sentiment.TASK)
REGISTRY.add(nli.SPEC.name, nli.TASK)
REGISTRY.add(alignment.SPEC.name, alignment.TASK)
REGISTRY.add(alignment.REVERSE_SPEC.name, alignment.REVERSE_TASK)
REGISTRY.add(shortcut.SINGLE.spec.name, shortcut.SINGLE)
REGISTRY.add(shortcut.PAIR.spec.name, shortcut.PAIR)
REGISTRY.add(shortcut.NLI_SINGLE.spec.name, shortcut.NLI_SINGLE)
REGISTRY.add(shortcut.NLI_PAIR.spec.name, shortcut.NLI_PAIR)
REGISTRY.add(text.TEXT.spec.name, text.TEXT)
REGISTRY.add(text.TEXT_PAIR.spec.name, text.TEXT_PAIR)
REGISTRY.add(generation.SPEC.name, generation.TASK)
# the tasks that read --dataset
OWN_DATA = (text.TEXT.spec.name, text.TEXT_PAIR.spec.name, generation.SPEC.name)


def get_task(name: str):
    return REGISTRY.get(name)


def check_deceive(name: str, options) -> None:
    """Refuse ``--deceive`` on task ``name`` unless it has impermissible tokens to keep
    attention off (the shortcut tasks and synthetic); checks the task's own options."""
    check = getattr(get_task(name), "check_deceive", None)
    if check is None:  # not a classification task of its own: no impermissible tokens
        raise classification.no_impermissible(name)
    check(options)
