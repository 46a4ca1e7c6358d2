"""The generated parts of the reference pages, written at every docs build from the code
itself, so they cannot go stale: ``docs/hooks.py`` replaces each marker line
``<!-- faithbench-reference: NAME -->`` in a page by ``SECTIONS[NAME]()``.

- ``cli``: ``faithbench --help`` and the ``--help`` of every verb (the argparse parser of
  ``faithbench.benchmark.cli.build_parser``);
- ``tasks``: every registered task's ``TaskSpec`` and its module's docstring (its card);
- ``explainers``: every reference explainer's ``ExplainerSpec`` (id, requires, cost,
  citation, description, settable parameters) and its module's docstring;
- ``metrics``: every metric's ``MetricSpec`` and the docstring of the module that
  defines it (the metric card, with its hand-worked doctest);
- ``erasers``: the erasers and ``faithbench.benchmark.core.erasers``' docstring;
- ``schemas``: the fields of every JSON Schema in ``docs/schemas/`` (the files
  ``python -m faithbench.schemas docs/schemas`` writes; ``tests/test_golden.py`` keeps
  them equal to a fresh export).

``python docs/gen_reference.py NAME`` prints one section. Importing faithbench imports
torch (a few seconds); nothing is downloaded or trained.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parent
MARKER = re.compile(r"^<!-- faithbench-reference: ([a-z_]+) -->$", re.MULTILINE)
HELP_WIDTH = "88"  # argparse wraps at $COLUMNS: a fixed width, so the pages do not vary


# ---------------------------------------------------------------- docstrings as Markdown


def fence_doctests(text: str) -> str:
    """Fence each doctest block (a line starting ``>>>`` at the margin, up to the next
    blank line: the examples and their expected output) as ``pycon``, with a blank line
    before it; text and fenced blocks are left as they are. ``docs/hooks.py``'s Griffe
    extension applies it to every docstring mkdocstrings renders."""
    lines = text.split("\n")
    out: list[str] = []
    fenced = False
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            fenced = not fenced
        if fenced or not lines[i].startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        if out and out[-1].strip():
            out.append("")
        out.append("```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append("```")
    return "\n".join(out)


def docstring_markdown(doc: str | None) -> str:
    """A module docstring (reStructuredText-flavoured plain text) as Markdown: a title
    underlined with ``---`` or ``===`` becomes a bold line (not a heading, so the page's
    table of contents stays one entry per item), a paragraph ending ``::`` introduces an
    indented literal block (Markdown's indented code), doctests are fenced."""
    if not doc:
        return "*(no module docstring)*"
    lines = doc.strip("\n").split("\n")
    indent = min((len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()), default=0)
    lines = [lines[0].strip()] + [x[indent:] for x in lines[1:]]
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        underline = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and re.fullmatch(r"(-{3,}|={3,})", underline.strip()):
            out += [f"**{line.strip()}**", ""]
            i += 2
            continue
        if line.rstrip().endswith("::") and not line.strip().startswith(">>>"):
            line = line.rstrip()[:-1]  # "Then::" -> "Then:"
            if not line.strip(":").strip():  # a "::" alone introduces the block
                i += 1
                continue
        out.append(line)
        i += 1
    return fence_doctests("\n".join(out)).strip()


def module_of(obj: object) -> str:
    return type(obj).__module__


def code(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return "``" + text.replace("`", "'") + "``" if "`" in text else f"`{text}`"


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def spec_table(rows: list[tuple[str, str]]) -> str:
    out = ["| field | value |", "|---|---|"]
    out += [f"| {name} | {cell(value)} |" for name, value in rows if value not in ("", None)]
    return "\n".join(out)


# ---------------------------------------------------------------- the sections


def cli() -> str:
    from faithbench.benchmark.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        parser = build_parser()
        verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parts = ["## faithbench", "", "```text", parser.format_help().rstrip(), "```"]
        for name, sub in verbs.choices.items():
            parts += ["", f"## faithbench {name}", "", "```text", sub.format_help().rstrip(),
                      "```"]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(parts)


def task_module(task: object) -> str:
    read = getattr(task, "read", None)  # a ClassificationTask: its reader's module
    return read.__module__ if callable(read) else module_of(task)


def tasks() -> str:
    from faithbench import tasks as registry

    parts = ["## Every task: spec and card", "",
             ("Generated from `faithbench.tasks.REGISTRY` (each `TaskSpec`) and the "
              "docstring of each task's module.")]
    for name, task in registry.REGISTRY.items():
        spec = task.spec
        module = task_module(task)
        parts += ["", f"### `{name}`", "", spec_table([
            ("id", code(f"{spec.name}@{spec.version}")),
            ("kind", code(spec.kind)),
            ("dataset", spec.dataset),
            ("scored split", code(spec.eval_split)),
            ("labels", ", ".join(code(x) for x in spec.labels)),
            ("reference rationales", "yes" if spec.has_reference else "no"),
            ("parameters", ", ".join(f"{code(k)} = {code(v)}" for k, v in spec.params)),
            ("citation", spec.citation),
            ("module", code(module)),
        ]), "", docstring_markdown(importlib.import_module(module).__doc__)]
    return "\n".join(parts)


def explainers() -> str:
    from faithbench import submissions
    from faithbench.benchmark.core import params

    parts = ["## Every reference explainer: spec and card", "",
             ("Generated from `faithbench.submissions.REGISTRY` (each explainer's "
              "`ExplainerSpec`) and the docstring of its module. The ids are those "
              "`faithbench list` prints.")]
    for name in submissions.REFERENCE:
        explainer = submissions.get_explainer(name)
        spec = explainer.spec
        module = submissions.reference_module(name)
        settable = submissions.PARAMS.get(name, {})
        parts += ["", f"### `{name}`", "", spec_table([
            ("id", code(spec.id)),
            ("requires", ", ".join(code(x) for x in sorted(spec.requires)) or "nothing"),
            ("cost per example", spec.cost),
            ("deterministic", "yes" if spec.deterministic else "no"),
            ("settable parameters", params.listing(settable) if settable else ""),
            ("description", spec.description),
            ("citation", spec.citation),
            ("module", code(module)),
        ]), "", docstring_markdown(importlib.import_module(module).__doc__)]
    return "\n".join(parts)


def metric_module(metric: object) -> str:
    """The module that defines ``metric``: its function's (a ``SimpleMetric``), else its
    class's (a metric that retrains or explains other models)."""
    fn = getattr(metric, "fn", None)
    return fn.__module__ if fn is not None else module_of(metric)


def metrics() -> str:
    from faithbench import metrics as registry

    parts = ["## Every metric: spec and card", "",
             ("Generated from `faithbench.metrics.REGISTRY` (each `MetricSpec`) and the "
              "docstring of the module that defines it; a module with several metrics "
              "has one card, shown under the first.")]
    shown: dict[str, str] = {}  # module -> the metric its card is shown under
    for name, metric in registry.REGISTRY.items():
        spec = metric.spec
        module = metric_module(metric)
        parts += ["", f"### `{name}`", "", spec_table([
            ("id", code(spec.id)),
            ("family", code(spec.family)),
            ("better", spec.direction),
            ("task kinds", ", ".join(code(k) for k in sorted(spec.kinds))),
            ("corpus level", "yes: " + code(spec.aggregation) if spec.aggregation else ""),
            ("needs a reference rationale", "yes" if spec.needs_reference else ""),
            ("retrains a model", "yes" if spec.needs_training else ""),
            ("explains other models", "yes" if spec.needs_explainer else ""),
            ("settable parameters", registry.settable(metric) if spec.params else ""),
            ("citation", spec.citation),
            ("module", code(module)),
        ])]
        if module in shown:
            parts += ["", f"Card: `{module}`, under [`{shown[module]}`](#{shown[module]})."]
        else:
            shown[module] = name
            parts += ["", docstring_markdown(importlib.import_module(module).__doc__)]
    return "\n".join(parts)


def erasers() -> str:
    from faithbench.benchmark.core import erasers as module

    return "\n".join([
        "## The erasers", "",
        "Generated from `faithbench.benchmark.core.erasers`: "
        + ", ".join(code(e) for e in module.ERASERS) + ".", "",
        docstring_markdown(module.__doc__)])


def schema_type(prop: dict) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(schema_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array" and "items" in prop:
        items = prop["items"]
        return f"array of {schema_type(items) if isinstance(items, dict) else 'items'}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"object of {schema_type(prop['additionalProperties'])}"
    return str(kind)


def fields_table(definition: dict) -> str:
    required = set(definition.get("required", ()))
    out = ["| field | type | required | default |", "|---|---|---|---|"]
    for field, prop in definition.get("properties", {}).items():
        default = code(json.dumps(prop["default"])) if "default" in prop else ""
        out.append(f"| `{field}` | {cell(schema_type(prop))} | "
                   f"{'yes' if field in required else ''} | {cell(default)} |")
    return "\n".join(out)


def schemas() -> str:
    parts = ["## Every schema's fields", "",
             "Generated from the JSON Schemas in `docs/schemas/`."]
    for path in sorted((DOCS / "schemas").glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        title = schema.get("title", path.name)
        parts += ["", f"### {path.name.removesuffix('.schema.json')}", "",
                  f"[{path.name}](../schemas/{path.name}): `{title}`. "
                  + " ".join(schema.get("description", "").split()), "",
                  fields_table(schema)]
        for name, definition in schema.get("$defs", {}).items():
            if "properties" in definition:
                parts += ["", f"`{name}`:", "", fields_table(definition)]
    return "\n".join(parts)


SECTIONS: dict[str, Callable[[], str]] = {
    "cli": cli, "tasks": tasks, "explainers": explainers, "metrics": metrics,
    "erasers": erasers, "schemas": schemas}


def expand(markdown: str) -> str:
    """``markdown`` with each marker line replaced by its generated section."""
    def section(match: re.Match) -> str:
        if match.group(1) not in SECTIONS:
            raise KeyError(f"unknown generated section {match.group(1)!r} (known: "
                           f"{', '.join(SECTIONS)})")
        return SECTIONS[match.group(1)]()

    return MARKER.sub(section, markdown)


if __name__ == "__main__":
    print(SECTIONS[sys.argv[1]]())
