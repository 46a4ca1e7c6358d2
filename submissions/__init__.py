"""Explainers. The reference explainers are ordinary submissions, written only
against ``benchmark.core.api`` — the same surface an outside submitter uses
(see ``TEMPLATE.py``). Each module exposes one ``EXPLAINER`` object."""

REFERENCE = (
    "attention", "gradient", "gradient_x_input", "integrated_gradients", "occlusion", "random",
)


def reference_module(name: str) -> str:
    """The module that holds reference explainer ``name``.

    >>> reference_module("occlusion")
    'submissions.occlusion'
    """
    if name not in REFERENCE:
        choices = ", ".join(REFERENCE)
        raise KeyError(f"{name!r} is not a reference explainer; choose one of {choices}")
    return f"submissions.{name}"
