"""Golden files for what users and old result folders depend on: every verb's options
and defaults, the shapes of a small run's files (results, per-example values, failures,
explanations, leaderboard entries and CSV headers, ROAR rows), and the unit and model
cache keys of synthetic seed 0, byte for byte, so that folders written before a
refactor still resume.

A deliberate change rewrites the golden files with ``FAITHBENCH_WRITE_GOLDEN=1 pytest
tests/test_golden.py``; the diff of ``tests/golden/`` is then the change users see.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
PLUGIN = Path(__file__).parent / "plugins" / "raises_in_explain.py"
pytestmark = pytest.mark.usefixtures("one_thread")


def check(name: str, value) -> None:
    """Compare ``value`` with ``golden/<name>.json`` (or write it when asked)."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(value, indent=1, sort_keys=True) + "\n"
    if os.environ.get("FAITHBENCH_WRITE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} missing: run with FAITHBENCH_WRITE_GOLDEN=1 once"
    assert json.loads(text) == json.loads(path.read_text()), (
        f"{name} differs from {path}; if the change is deliberate, rewrite the golden "
        "files (FAITHBENCH_WRITE_GOLDEN=1) and say so in the commit")


def shape(value):
    """A JSON value's structure: dict keys with their shapes, a list as the shapes of
    its items (deduplicated), scalars by type name.

    >>> shape({"a": [1, 2.5, 3], "b": None, "c": {"d": "x"}})
    {'a': ['float', 'int'], 'b': 'null', 'c': {'d': 'str'}}
    """
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        items = {json.dumps(shape(v), sort_keys=True) for v in value}
        return [json.loads(s) for s in sorted(items)]
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str"}[type(value)]


def merged_shape(rows: list[dict]) -> dict:
    """The union of the rows' key sets, each key with the set of shapes it takes."""
    out: dict[str, list] = {}
    for row in rows:
        for k, v in row.items():
            s = json.dumps(shape(v), sort_keys=True)
            out.setdefault(k, [])
            if s not in out[k]:
                out[k].append(s)
    return {k: [json.loads(s) for s in sorted(v)] if len(v) > 1 else json.loads(v[0])
            for k, v in sorted(out.items())}


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def describe(action: argparse.Action) -> dict:
    return {"default": action.default if not callable(action.default) else repr(action.default),
            "choices": list(action.choices) if action.choices else None,
            "nargs": action.nargs, "required": action.required,
            "type": getattr(action.type, "__name__", None),
            "kind": type(action).__name__.lstrip("_")}


def verbs() -> dict:
    from faithbench.benchmark.cli import build_parser

    parser = build_parser()
    out = {"(global)": {}}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = {"/".join(a.option_strings) or a.dest: describe(a)
                             for a in sub._actions if not isinstance(a, argparse._HelpAction)}
        elif not isinstance(action, argparse._HelpAction):
            out["(global)"]["/".join(action.option_strings)] = describe(action)
    return out


def test_every_verbs_options_and_defaults():
    check("cli_options", verbs())


def cli(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    tail = ("--no-progress",) if args[0] in ("run", "roar") else ()
    return subprocess.run([sys.executable, "-m", "faithbench.benchmark.cli", "--threads", "1", *args, *tail],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A synthetic run (two reference explainers, a failing plugin, three metrics) and
    a ROAR sweep of one explainer at one ratio."""
    root = tmp_path_factory.mktemp("golden")
    env = {**os.environ, "FAITHBENCH_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1"}
    run = cli("run", "--limit", "20", "--explainers", "gradient", "random", str(PLUGIN),
              "--metrics", "comprehensiveness", "aopc_morf", "r_precision",
              "--out", str(root / "out"), cwd=root, env=env)
    assert run.returncode == 1, run.stderr[-3000:]  # 1: the plugin failed, the rest ran
    roar = cli("roar", "--limit", "40", "--explainers", "attention", "--ratios", "0.5",
               "--leakage-seeds", "1", "--train-limit", "300", "--epochs", "1",
               "--allow-weak-model", "--out", str(root / "out"), cwd=root, env=env)
    assert roar.returncode == 0, roar.stderr[-3000:]
    return root / "out", env


def test_the_shapes_of_a_runs_files(small_run):
    out, _ = small_run
    results = jsonl(out / "results.jsonl")
    per_example = [row for r in results for row in jsonl(out / r["per_example_file"])]
    explanations = [row for p in sorted((out / "explanations").glob("*.jsonl")) for row in jsonl(p)]
    entries = sorted(p for p in (out / "leaderboard").iterdir() if p.is_dir())
    check("run_files", {
        "results.jsonl": merged_shape(results),
        "per_example/<key>.jsonl": merged_shape(per_example),
        "per_example file names": sorted({Path(r["per_example_file"]).parent.name for r in results}),
        "failures.jsonl": merged_shape(jsonl(out / "failures.jsonl")),
        "explanations/<task>-<explainer>-<key>.jsonl": merged_shape(explanations),
        "explanations files": sorted({p.suffix for p in (out / "explanations").iterdir()}),
        "leaderboard/<entry>/": sorted({p.name for e in entries for p in e.iterdir()}),
        "leaderboard/<entry>/header.json": merged_shape(
            [json.loads((e / "header.json").read_text()) for e in entries]),
        "leaderboard/<entry>/results.jsonl": merged_shape(
            [row for e in entries for row in jsonl(e / "results.jsonl")]),
        "leaderboard/<entry>/per_example.jsonl": merged_shape(
            [row for e in entries for row in jsonl(e / "per_example.jsonl")]),
        "roar/rows.jsonl": merged_shape(jsonl(out / "roar" / "rows.jsonl")),
        "roar/ kinds": sorted({r["kind"] for r in jsonl(out / "roar" / "rows.jsonl")}),
    })


def test_leaderboard_csv_headers(small_run):
    out, env = small_run
    headers = {}
    for name, extra in (("leaderboard", ()), ("leaderboard --wide", ("--wide",))):
        done = cli("leaderboard", "--entries", str(out / "leaderboard"), "--format", "csv",
                   *extra, cwd=out, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        headers[name] = next(csv.reader(io.StringIO(done.stdout)))
    entries = sorted(p.name for p in (out / "leaderboard").iterdir() if p.is_dir())
    done = cli("compare", entries[0], entries[1], "--entries", str(out / "leaderboard"),
               "--format", "csv", cwd=out, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    headers["compare"] = next(csv.reader(io.StringIO(done.stdout)))
    check("leaderboard_csv", headers)


def test_unit_and_model_keys_of_synthetic_seed_0(synthetic_ready):
    """Keys hash inputs, not trained weights, so these are fixed by the code alone; the
    checkpoint below is a literal (a weights hash differs across CPUs)."""
    from faithbench.benchmark.plan import unit_key

    comp = "comprehensiveness[bins=0.01,0.05,0.1,0.2,0.5;eraser=delete;rounding=ceil]@1"
    args = {"seed": 0, "data": synthetic_ready.data_fingerprint}
    check("keys", {
        "model cache_key (synthetic, TaskOptions())": synthetic_ready.cache_key,
        "data_fingerprint": synthetic_ready.data_fingerprint,
        "unit_key first 20": unit_key("e45ab4a4af31c849", "gradient[norm=l2]@1", comp,
                                      "test", 20, **args),
        "unit_key all": unit_key("e45ab4a4af31c849", "random[distribution=uniform]@1",
                                 "aopc_morf[eraser=delete;k_max=10]@1", "test", None, **args),
        "unit_key sample": unit_key("e45ab4a4af31c849", "attention@1", "flip_rate[eraser=delete]@2",
                                    "test", {"sample": 50, "seed": 3}, **args),
        "explanations key": unit_key("e45ab4a4af31c849", "gradient[norm=l2]@1", "explanations",
                                     "test", 20, **args),
    })


# -- JSON Schemas, exported from the types that write the files --------------------------

SCHEMAS = Path(__file__).parents[1] / "docs" / "schemas"


def validator(name: str):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev extra")
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def test_the_committed_schemas_are_the_types_export():
    pytest.importorskip("pydantic", reason="pydantic is in the dev extra")
    from faithbench.schemas import TYPES, schema

    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(
        f"{name}.schema.json" for name in TYPES)
    for name in TYPES:
        committed = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        assert committed == schema(name), (
            f"docs/schemas/{name}.schema.json is stale: python -m faithbench.schemas docs/schemas")


def test_a_runs_files_and_rows_validate_against_the_schemas(small_run):
    from faithbench.leaderboard import compare, rank, read_entries

    out, _ = small_run
    files = {"result": jsonl(out / "results.jsonl"), "failure": jsonl(out / "failures.jsonl"),
             "roar_row": jsonl(out / "roar" / "rows.jsonl")}
    entries = read_entries(out / "leaderboard")
    files["result"] += [row for e in entries for row in jsonl(e.path / "results.jsonl")]
    files["ranked"] = [r.as_dict() for r in rank(entries)]
    files["compared"] = [r.as_dict() for r in compare(*entries[:2])]
    for name, rows in files.items():
        assert rows, name
        check = validator(name)
        for row in rows:
            check.validate(row)
    # the schemas are not vacuous: what a reader refuses, they refuse
    record = files["result"][0]
    for broken in ({**record, "estimate": {**record["estimate"], "n": "24"}},
                   {k: v for k, v in record.items() if k != "provenance"},
                   {**record, "provenance": {k: v for k, v in record["provenance"].items()
                                             if k != "checkpoint"}}):
        assert not validator("result").is_valid(broken)
    roar = files["roar_row"][0]
    assert not validator("roar_row").is_valid({**roar, "correct": [0.5]})


def test_typed_records_write_todays_json(small_run):
    """Read into the types and written back, every line of a run is byte-for-byte the
    line on disk (sorted keys, as the files are written)."""
    from faithbench.benchmark.core.records import FailureRecord, ResultRecord, RoarRow

    out, _ = small_run

    def same(path, read):
        for line in path.read_text().splitlines():
            d = json.loads(line)
            assert json.dumps(read(d).as_dict(), sort_keys=True) == json.dumps(d, sort_keys=True)

    same(out / "results.jsonl", ResultRecord.from_dict)
    same(out / "failures.jsonl", lambda d: FailureRecord(**d))
    same(out / "roar" / "rows.jsonl", RoarRow.from_dict)
