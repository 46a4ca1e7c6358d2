"""Published releases: the reference results as summary files shipped with the package
(``faithbench/leaderboard/releases/<version>/``), so a researcher sees where an
explainer ranks without rerunning the references.

A release holds, per suite, the ranked rows (mean, CI, n, seeds: ``Ranked``, with the
explainer's cost per example), the erasure metrics' curves with their CIs, the
agreement records and the ROAR sweep (curves with CIs, the report) it was given, what
each entry is (explainer spec, weights hashes,
package versions, machine, run options) and the command that reproduces it — no
per-example values, and no file over 1 MiB. ``faithbench release`` writes one from
entry folders; ``faithbench leaderboard --published`` and ``faithbench site
--published`` read it. The rows were computed on the machine that made the release:
a user's own runs train their own checkpoints (weights differ across machines and
thread counts), so their entries are another suite, shown beside the published rows
and never ranked against them; ``rerun_command`` is the one command that reruns the
references on the user's models, for a paired ``compare``.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.records import AgreementRecord, read_agreements
from faithbench.leaderboard.cost import COLUMNS as COST_COLUMNS
from faithbench.leaderboard.cost import RUN_COLUMNS, ExplainCost, RunCost, explain_costs, run_costs
from faithbench.leaderboard.curves import Curve, curves
from faithbench.leaderboard.entry import Entry, read_entries
from faithbench.leaderboard.rank import rank
from faithbench.leaderboard.reference import write_reference
from faithbench.leaderboard.render import json_safe
from faithbench.leaderboard.rows import Ranked
from faithbench.leaderboard.suite import MODEL_FREE

RELEASES = Path(__file__).resolve().parent / "releases"
MAX_BYTES = 1024 * 1024  # no file of a release over 1 MiB
RANKED, ENTRIES, MANIFEST = "ranked.jsonl", "entries.jsonl", "manifest.json"
CURVES = "curves.jsonl"  # erasure curves (from release 2 on; an older release has none)
AGREEMENT = "agreement.jsonl"  # agreement records, where the release was given some
ROAR = "roar.json"  # a ROAR sweep's curves and report (``site.roar_summary``), where given
COSTS = "costs.jsonl"  # per explainer and suite: ``cost.run_costs`` (from release 4 on)


@dataclass(frozen=True)
class Release:
    """A release as read back: its manifest, ranked rows, and entries' descriptions."""

    path: Path
    manifest: dict
    rows: list[Ranked]
    costs: dict[tuple[str, str], ExplainCost]  # (entry id, task) -> cost per example
    entries: dict[str, dict]  # entry id -> ``describe``'s dict
    curves: list[Curve]  # the erasure metrics' curves (``faithbench.leaderboard.curves``)
    agreement: list[AgreementRecord]  # ``faithbench agreement``'s records
    roar: dict | None  # a ROAR sweep's summary: curves with CIs and the report, or None
    run_costs: list[RunCost]  # per explainer and suite (``leaderboard --cost``)

    @property
    def version(self) -> str:
        return self.manifest["version"]


def describe(e: Entry) -> dict:
    """What a release keeps of an entry: no per-example values."""
    per_task = {}
    for task in sorted({r.task for r in e.results}):
        recs = [r for r in e.results if r.task == task]
        p = recs[0].provenance
        per_task[task] = {
            "checkpoints": sorted({r.provenance.checkpoint for r in recs}),
            "data_fingerprint": p.data_fingerprint, "torch": p.torch,
            "torch_threads": p.torch_threads, "device": p.device or "cpu",
            "python": p.python, "platform": p.platform,
            "seeds": p.seeds, "run": p.run_options(),
            "model_accuracy": sorted({json.dumps(r.provenance.model_accuracy, sort_keys=True)
                                      for r in recs})}
    keep = ("entry_id", "explainer", "explainer_name", "explainer_spec", "suite", "notes",
            "submitter", "faithbench_versions", "git_commits", "models")
    return {**{k: e.header.get(k) for k in keep}, "tasks": per_task}


def rerun_command(task: str, entries: list[dict]) -> str:
    """The ``faithbench run`` that reruns these entries' explainers on ``task`` with the
    published run's options (seeds, examples, data variant, model family and training),
    on the user's own models: then ``compare`` pairs theirs with a reference on one suite."""
    run = next((e["tasks"][task]["run"] for e in entries if e["tasks"][task]["run"]), None) or {}
    seeds = sorted({s for e in entries for s in e["suite"][task]["model_seeds"]})
    name = task.split("[")[0].split("@")[0]
    parts = ["faithbench --threads 1 run", f"--tasks {name}"]
    if run.get("data_dir") is not None or not run:  # the synthetic task reads no files
        parts.append("--data-dir ../shared/data")
    # the options that shape the model (so theirs is trained like ours) and the examples
    for key, flag in (("variant", "--variant"), ("model", "--model"),
                      ("model_path", "--model-path"), ("model_layers", "--layers"),
                      ("epochs", "--epochs"), ("train_limit", "--train-limit"),
                      ("split", "--split"), ("limit", "--limit"), ("sample", "--sample")):
        if run.get(key) is not None:
            parts.append(f"{flag} {shlex.quote(str(run[key]))}")
    if run.get("masked_training"):
        parts.append("--masked-training")
    if run.get("half_weights"):
        parts.append("--half-weights")
    if any(((e.get("models") or {}).get(task) or {}).get("weak") for e in entries):
        parts.append("--allow-weak-model")  # the gate refused the model; the run allowed it
    if run.get("precision", "fp32") != "fp32":
        parts.append(f"--precision {run['precision']}")
    # the device type it trained on (the default, auto, would take a GPU where there is
    # one, and a model trained there is another checkpoint)
    device = next((e["tasks"][task].get("device") for e in entries), None) or "cpu"
    parts.append(f"--device {device.split(':')[0].split(' ')[0]}")
    if run.get("sample") is not None:
        parts.append(f"--sample-seed {run.get('sample_seed', 0)}")
    parts.append("--seeds " + " ".join(map(str, seeds)))
    ids = sorted({e["explainer"] for e in entries  # full ids: the published parameters
                  if MODEL_FREE not in e["tasks"][task]["checkpoints"]})  # not eflomal & co
    parts.append("--explainers " + " ".join(shlex.quote(i) for i in ids))
    parts.append("--out runs/references")
    return " ".join(parts)


def write_release(entries: list[Entry], out: Path, version: str, *,
                  commands: list[str] | None = None,
                  agreement: list[AgreementRecord] | None = None,
                  roar: dict | None = None, models: dict[str, dict] | None = None,
                  carry: Release | None = None) -> list[Path]:
    """Write release ``version`` of ``entries`` (and of ``agreement``'s records, and a
    ROAR sweep's ``roar`` summary) into ``out``; the files written. ``models``: the
    models already packed into ``out`` (checkpoint -> ``lifecycle.pack``'s dict): each
    suite whose every checkpoint is among them lists them, and its entries are written
    in full (``reference.write_reference``) for ``submit --published``. ``carry``: an
    earlier release whose suites of tasks ``entries`` do not have are copied as they
    are (rows, entries, curves, costs, agreement, ROAR), each suite marked with the
    release it comes from."""
    if not entries:
        raise InputError("a release needs at least one entry")
    out.mkdir(parents=True, exist_ok=True)
    rows = rank(entries)
    costs = explain_costs(entries)
    ranked = [_ranked_row(r, costs) for r in rows]
    described = [describe(e) for e in entries]
    suites: list[dict[str, Any]] = []
    full: set[str] = set()
    for task, suite in dict.fromkeys((r.task, r.suite) for r in rows):
        ids = {r.entry_id for r in rows if (r.task, r.suite) == (task, suite)}
        mine = [d for d in described if d["entry_id"] in ids]
        suites.append({"task": task, "suite": suite, "entries": sorted(ids),
                       "rerun": rerun_command(task, mine)})
        shipped = _shipped(task, mine, models or {})
        if shipped:
            suites[-1]["models"] = shipped
            full |= ids
    spent = run_costs(entries, short=False)
    trails = curves(entries)
    if carry is not None:
        kept = _carried(carry, {r.task for r in rows})
        suites += kept
        tasks = {s["task"] for s in kept}
        ids = {e for s in kept for e in s["entries"]}
        ranked += [_ranked_row(r, carry.costs) for r in carry.rows if r.task in tasks]
        described += [d for i, d in carry.entries.items() if i in ids]
        trails += [c for c in carry.curves if c.task in tasks]
        spent += [c for c in carry.run_costs if c.task in tasks]
        agreement = [*(agreement or []), *(r for r in carry.agreement if r.task in tasks)]
        roar = roar or carry.roar
    manifest: dict[str, Any] = {
        "version": version, "created_at": time.time(), "suites": suites,
        "commands": commands or [],
        "faithbench_versions": sorted({v for d in described
                                       for v in d["faithbench_versions"] or []})}
    if carry is not None:
        manifest["carried"] = {"from": carry.version, "commands": carry.manifest["commands"],
                               # what that release carried in turn, with its commands
                               **({"carried": carry.manifest["carried"]}
                                  if "carried" in carry.manifest else {})}
    if full:
        manifest["reference"] = write_reference([e for e in entries if e.entry_id in full],
                                                out)
        manifest["models"] = {info["file"]: info["sha256"] for suite in suites
                              for info in suite.get("models", [])}
        big = [n for n in manifest["reference"] if (out / n).stat().st_size > MAX_BYTES]
        if big:
            raise InputError(f"release file {big[0]} is over the {MAX_BYTES:,} bytes a "
                             "release file may hold; release fewer metrics")
    files = {RANKED: "".join(json.dumps(json_safe(x), ensure_ascii=False) + "\n" for x in ranked),
             ENTRIES: "".join(json.dumps(json_safe(d), ensure_ascii=False, sort_keys=True) + "\n"
                              for d in described),
             CURVES: "".join(json.dumps(json_safe(c.as_dict()), ensure_ascii=False) + "\n"
                             for c in trails),
             COSTS: "".join(json.dumps(json_safe(dict(zip(RUN_COLUMNS, c.values()))),
                                       ensure_ascii=False) + "\n"
                            for c in spent),
             MANIFEST: json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"}
    if roar:
        files[ROAR] = json.dumps(json_safe(roar), indent=1, ensure_ascii=False) + "\n"
    if agreement:
        files[AGREEMENT] = "".join(json.dumps(json_safe(r.as_dict()), ensure_ascii=False) + "\n"
                                   for r in agreement)
    for name, text in files.items():
        if len(text.encode()) > MAX_BYTES:
            raise InputError(f"release file {name} would be {len(text.encode()):,} bytes, over "
                             f"the {MAX_BYTES:,} a release file may hold; release fewer entries")
    written = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written


def _ranked_row(row: Ranked, costs: dict[tuple[str, str], ExplainCost]) -> dict:
    """A ranked row as the release writes it: with its explainer's cost per example."""
    c = costs.get((row.entry_id, row.task))
    return {**row.as_dict(), **dict(zip(COST_COLUMNS, (c.seconds, c.forward_equivalents)
                                        if c else (None, None)))}


def _carried(carry: Release, tasks: set[str]) -> list[dict]:
    """The suites of release ``carry`` of tasks other than ``tasks``, marked with the
    release they come from (``carry``, or the one ``carry`` carried them from; without
    models: the models of that release are not here)."""
    return [{**{k: v for k, v in s.items() if k != "models"}, "from": s.get("from", carry.version)}
            for s in carry.manifest["suites"] if s["task"] not in tasks]


def _shipped(task: str, described: list[dict], models: dict[str, dict]) -> list[dict]:
    """The packed models of a suite, seed by seed, where every checkpoint of it is packed
    (an entry no model produced, e.g. an aligner scored from a file, needs none)."""
    seeds: dict[int, str] = {}
    for d in described:
        suite = d["suite"][task]
        seeds.update(zip(suite["model_seeds"], suite["checkpoints"]))
    wanted = {s: c for s, c in seeds.items() if c != MODEL_FREE}
    if not wanted or any(c not in models for c in wanted.values()):
        return []
    return [{"seed": s, **models[c]} for s, c in sorted(wanted.items())]


def read_release(path: Path | str | None = None) -> Release:
    """A release folder, or the name of one shipped with the package (``v3``; default:
    the newest), checked as it is read."""
    folder = latest() if path is None else Path(path)
    if path is not None and not folder.exists() and (RELEASES / str(path)).is_dir():
        folder = RELEASES / str(path)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        names = {f.name for f in fields(Ranked)}
        rows: list[Ranked] = []
        costs: dict[tuple[str, str], ExplainCost] = {}
        for line, text in enumerate((folder / RANKED).read_text(encoding="utf-8").splitlines(), 1):
            d = json.loads(text)
            missing = names - d.keys()
            if missing:
                raise InputError(f"{folder / RANKED}, line {line}: missing {sorted(missing)}")
            values: dict[str, Any] = {k: d[k] for k in names}
            for k in ("mean", "ci_low", "ci_high", "seed_sd", "seed_min", "seed_max"):
                values[k] = float("nan") if values[k] is None else float(values[k])
            rows.append(Ranked(**values))
            costs[(d["entry_id"], d["task"])] = ExplainCost(*(d.get(c) for c in COST_COLUMNS))
        entries = {d["entry_id"]: d for d in map(json.loads, (folder / ENTRIES).read_text(
            encoding="utf-8").splitlines())}
        curve_file = folder / CURVES
        found = ([Curve(**json.loads(line)) for line in
                  curve_file.read_text(encoding="utf-8").splitlines()]
                 if curve_file.exists() else [])
        agreement = read_agreements(folder / AGREEMENT) if (folder / AGREEMENT).exists() else []
        roar = (json.loads((folder / ROAR).read_text(encoding="utf-8"))
                if (folder / ROAR).exists() else None)
        spent = ([RunCost(**json.loads(line)) for line in
                  (folder / COSTS).read_text(encoding="utf-8").splitlines()]
                 if (folder / COSTS).exists() else explain_only(rows, costs))
    except FileNotFoundError as exc:
        raise InputError(f"not a faithbench release: {exc.filename} is missing") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"release {folder}: not JSON ({exc})") from exc
    return Release(folder, manifest, rows, costs, entries, found, agreement, roar, spent)


def explain_only(rows: list[Ranked], costs: dict[tuple[str, str], ExplainCost]
                 ) -> list[RunCost]:
    """A release written before it kept ``COSTS``: the explaining's cost per example
    that its ranked rows carry, one row per explainer and suite (no metric seconds, so
    no share)."""
    out = {}
    for r in rows:
        c = costs.get((r.entry_id, r.task))
        if c is not None and (r.task, r.suite, r.entry_id) not in out:
            out[(r.task, r.suite, r.entry_id)] = RunCost(
                r.task, r.suite, r.entry_id, r.explainer_name, 1, 1, c.seconds, None, None,
                None, None if c.forward_equivalents is None else round(c.forward_equivalents),
                None)
    return list(out.values())


def latest() -> Path:
    """The newest release shipped with the package (versions compare as numbers)."""
    found = sorted((p for p in RELEASES.glob("v*") if (p / MANIFEST).exists()),
                   key=lambda p: [int(x) for x in p.name[1:].split(".") if x.isdigit()])
    if not found:
        raise InputError(f"no published release under {RELEASES}")
    return found[-1]


def beside(release: Release, folders: list[str]
           ) -> tuple[list[Ranked], dict, dict, list[Curve]]:
    """The release's rows, their suites marked ``published vN:``, and the rows of the
    user's entries in ``folders`` (those that exist), marked ``yours:``, so the two are
    never one suite; with every entry's cost per example, ``describe`` dict and
    erasure curves."""
    rows = [replace(r, suite=f"published {release.version}: {r.suite}") for r in release.rows]
    costs, described = dict(release.costs), dict(release.entries)
    found = list(release.curves)
    mine = [e for folder in folders if Path(folder).is_dir() for e in read_entries(folder)]
    if mine:
        rows += [replace(r, suite=f"yours: {r.suite}") for r in rank(mine)]
        costs.update(explain_costs(mine))
        described.update({e.entry_id: describe(e) for e in mine})
        found += curves(mine)
    return rows, costs, described, found
