"""``submit --published``: a plugin scored on a release's own models and examples, and
ranked among the release's reference entries, with paired tests against its
neighbours, without training anything or running a reference again.

For each suite of the release that ships its models (``lifecycle.pack``, listed in the
manifest) and whose task was asked for: the run's options are the suite's (data variant,
split, examples, model seeds, training options: the model's content key hashes them, so
the release's model file is the one the task finds, ``lifecycle.from_release``), the
metrics are the suite's, and the plugin runs through ``runner.run`` like any explainer,
its entry written into ``--out``. With ``--sample N`` it scores N examples of the
suite's drawn at random (seeded), and the reference entries are cut to the same
examples (``reference.on_examples``); a metric whose per-example value depends on the
other examples scored (``MetricSpec.depends_on_examples``) is then left out of the
ranking, since a sample scores it otherwise than the whole split did.

``pack_models`` is the other half: the models a release is written with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from faithbench import metrics as metric_registry
from faithbench.benchmark.core.cache import model_path
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.ids import short_name
from faithbench.benchmark.core.models.lifecycle import pack
from faithbench.benchmark.core.validation import CheckResult
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import RunSummary, run
from faithbench.benchmark.verbs import validate_plugin
from faithbench.leaderboard.compare import compare
from faithbench.leaderboard.entry import Entry, save_entry
from faithbench.leaderboard.rank import rank
from faithbench.leaderboard.reference import on_examples, read_reference
from faithbench.leaderboard.release import Release, read_release
from faithbench.leaderboard.rows import Compared, Ranked
from faithbench.leaderboard.suite import MODEL_FREE, suite_differences

# the run options a suite's models and examples come from (what its records carry)
SUITE_OPTIONS = ("variant", "split", "limit", "sample", "sample_seed", "train_limit", "epochs",
                 "masked_training", "model", "model_layers", "bilstm", "deceive", "precision",
                 "half_weights",
                 "gold_out_of_range")


@dataclass
class Placed:
    """The plugin on one published suite: its run, the entries it was ranked among
    (the references, cut to its examples where it scored a sample), the rankings, the
    paired comparisons with its neighbours, and the metrics left out of the ranking."""

    task: str
    suite: dict
    summary: RunSummary
    mine: Entry | None
    references: list[Entry] = field(default_factory=list)
    rows: list[Ranked] = field(default_factory=list)
    neighbours: list[Compared] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    seconds: float = 0.0


def published_suites(release: Release, tasks: tuple[str, ...] | None) -> list[dict]:
    """The release's suites that ship their models, of ``tasks`` (task names; None:
    all of them); an error naming what the release has where none matches."""
    shipped = [s for s in release.manifest["suites"] if s.get("models")]
    if not shipped:
        raise InputError(f"release {release.version} ships no models (it was written "
                         "without --models): rank yourself among its references with "
                         "`faithbench leaderboard --published` and the rerun commands there")
    names = sorted({short_name(s["task"]) for s in shipped})
    if tasks is None:
        return shipped
    unknown = [t for t in tasks if t not in names]
    if unknown:
        raise InputError(f"release {release.version} ships models for {', '.join(names)}; "
                         f"not for {', '.join(unknown)}")
    return [s for s in shipped if short_name(s["task"]) in tasks]


def suite_config(config: RunConfig, release: Release, suite: dict,
                 references: list[Entry], ref: str) -> RunConfig:
    """The run of plugin ``ref`` on ``suite``: the suite's options, seeds and metrics,
    the release's models; the user's data folder, output, budget, sample, device."""
    records = [r for e in references for r in e.results if r.task == suite["task"]]
    model = next((r for r in records if r.provenance.checkpoint != MODEL_FREE), None)
    if model is None:
        raise InputError(f"release {release.version}: suite {suite['task']} has no entry "
                         "that a model produced")
    run_options = model.provenance.run_options() or {}
    options = {k: run_options[k] for k in SUITE_OPTIONS if k in run_options}
    if config.sample is not None:  # drawn from the suite's own examples
        if run_options.get("sample") is not None:
            raise InputError(f"suite {suite['task']} scored a sample already; --sample "
                             "draws from a split or its first N examples only")
        options.update(sample=config.sample, sample_seed=config.sample_seed)
    metrics = tuple(sorted({r.metric for r in records}))
    seeds = tuple(sorted({m["seed"] for m in suite["models"]}))
    return replace(config, tasks=(short_name(suite["task"]),), explainers=(ref,),
                   metrics=metrics, seeds=seeds, published=str(release.path), **options)


def submit_published(ref: str, config: RunConfig, *, release: str | None = None,
                     tasks: tuple[str, ...] | None = None
                     ) -> tuple[list[CheckResult], list[Placed]]:
    """Validate plugin ``ref`` on the first suite's model, then score it on every
    published suite of ``tasks`` (module docstring), write its entries and the references
    it is ranked among into ``config.out``'s leaderboard, and place it: rankings and paired
    tests against its neighbours. Nothing runs after failed checks."""
    found = read_release(release)
    suites = published_suites(found, tasks)
    references = read_reference(found.path, found.manifest.get("reference", {}),
                                only={i for s in suites for i in s["entries"]})
    configs = [suite_config(config, found, s, _of(references, s), ref) for s in suites]
    checks = validate_plugin(ref, configs[0], task=configs[0].tasks[0])
    if not all(c.passed for c in checks):
        return checks, []
    placed = []
    for suite, cfg in zip(suites, configs):
        start = time.perf_counter()
        summary = run(cfg)
        mine = next((e for e in summary.entries if suite["task"] in e.suite), None)
        result = Placed(suite["task"], suite, summary, mine)
        if mine is not None:
            place(result, _of(references, suite), cfg, found)
        result.seconds = time.perf_counter() - start
        placed.append(result)
    return checks, placed


def _of(references: list[Entry], suite: dict) -> list[Entry]:
    return [e for e in references if e.entry_id in suite["entries"]]


def place(result: Placed, references: list[Entry], config: RunConfig, release: Release
          ) -> None:
    """Rank ``result.mine`` among ``references`` on its task (cut to its examples when it
    scored a sample, the references then written beside it) and compare it with the
    entries just above and below it in each metric's ranking."""
    assert result.mine is not None
    task, mine = result.task, result.mine
    if config.sample is not None:
        ids = {str(r["id"]) for r in mine.per_example if r["task"] == task}
        references = [on_examples(e, task, ids, config.as_dict()) for e in references]
        result.left_out = sorted({r.metric for r in mine.results if r.task == task and
                                  metric_registry.resolve(r.metric).spec.depends_on_examples})
    for e in references:
        diffs = suite_differences(mine, e, task)
        if diffs:
            raise InputError(f"{task}: your run's suite is not the release's ({'; '.join(diffs)}):"
                             " the data or options differ from those the release scored; use "
                             "the data files the release names")
    out = Path(config.out) / "leaderboard"
    for e in references:  # beside the plugin's: `leaderboard`, `compare`, `site` see them
        save_entry(out, explainer_spec=e.header["explainer_spec"], results=e.results,
                   per_example=e.per_example,
                   notes=f"published reference of release {release.version}")
    result.references = references
    result.rows = [r for r in rank([*references, mine], task=task)
                   if r.metric not in result.left_out]
    result.neighbours = neighbours(mine, result.rows, references, task, result.left_out)


def neighbours(mine: Entry, rows: list[Ranked], references: list[Entry], task: str,
               left_out: list[str]) -> list[Compared]:
    """``compare``'s rows of the plugin against the entry ranked just above it and the one
    just below, metric by metric (Holm's correction within each pair, as ``compare``)."""
    by_id = {e.entry_id: e for e in references}
    wanted: dict[str, set[str]] = {}
    for metric in dict.fromkeys(r.metric for r in rows):
        order = [r.entry_id for r in rows if r.metric == metric]
        at = order.index(mine.entry_id)
        for other in (order[at - 1] if at > 0 else None,
                      order[at + 1] if at + 1 < len(order) else None):
            if other is not None:
                wanted.setdefault(other, set()).add(metric)
    out = []
    for other, metrics in wanted.items():
        rows_of_pair = [c for c in compare(mine, by_id[other], task=task)
                        if c.metric not in left_out]
        out += [c for c in rows_of_pair if c.metric in metrics]
    return out


def pack_models(entries: list[Entry], out: Path) -> dict[str, dict]:
    """Every model the entries' records name (by task and content key) packed from this
    machine's cache into release folder ``out`` (``lifecycle.pack``): checkpoint -> its
    file, size, sha256. A model not in the cache is an error naming the run to repeat."""
    packed: dict[str, dict] = {}
    for record in (r for e in entries for r in e.results):
        p = record.provenance
        if p.checkpoint == MODEL_FREE or p.checkpoint in packed:
            continue
        if p.cache_key is None:
            raise InputError(f"{record.task} seed {record.model_seed}: its record names no "
                             "model file (written before records kept the cache key)")
        path = model_path(short_name(record.task), p.cache_key)
        if not path.is_file():
            raise InputError(f"{path}: the model of {record.task} seed {record.model_seed} is "
                             "not in this machine's cache; run the command that made the "
                             "entries here (it loads or trains it), then release again")
        packed[p.checkpoint] = pack(path, out)
    return packed
