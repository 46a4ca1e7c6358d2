"""benchmarks/readme_tables.py puts under each one-line leaderboard command the table
that command prints, and leaves tables whose entries are absent alone."""

import importlib.util
import sys
from pathlib import Path

from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "readme_tables.py"
spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
readme_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_tables)


def test_tables_under_commands_are_replaced_by_what_the_commands_print(tmp_path,
                                                                     synthetic_ready):
    run(RunConfig(out=str(tmp_path / "runs" / "a"), explainers=("attention", "random"),
                  metrics=("comprehensiveness",), limit=24, batch_size=8, progress=False))
    cmd = ("`faithbench leaderboard --entries runs/a/leaderboard --wide --format markdown "
           "--metrics comprehensiveness`")
    absent = "`faithbench leaderboard --entries runs/b/leaderboard --format markdown`"
    lines = ["# title", cmd, "", "| old | table |", "|---|---|", "| 1 | 2 |", "",
             "prose after", absent, "", "| kept | as is |", "`faithbench run` not a table"]
    new, done, skipped = readme_tables.regenerate(lines, tmp_path)
    printed = readme_tables.table_of(readme_tables.command_of(cmd), tmp_path)
    assert new == ["# title", cmd, "", *printed, "", "prose after", absent, "",
                   "| kept | as is |", "`faithbench run` not a table"]
    assert len(done) == 1 and skipped == [readme_tables.shlex.join(
        readme_tables.command_of(absent))]
    # the printed table: header, rule and one row per explainer, n = 24
    assert len(printed) == 4 and printed[0].startswith("| explainer")
    assert all(row.split("|")[2].strip() == "24" for row in printed[2:])
    # explainers by name, the default of every table (--full-ids for the ids)
    assert {row.split("|")[1].strip() for row in printed[2:]} == {"attention", "random"}


def test_a_compare_command_gets_its_table_too(tmp_path, synthetic_ready):
    run(RunConfig(out=str(tmp_path / "runs" / "a"), explainers=("attention", "random"),
                  metrics=("comprehensiveness",), limit=24, batch_size=8, progress=False))
    cmd = ("`faithbench compare attention random --entries runs/a/leaderboard "
           "--format markdown`")
    new, done, _ = readme_tables.regenerate([cmd, "", "| old |", "|---|"], tmp_path)
    assert len(done) == 1 and new[:2] == [cmd, ""]
    assert new[2].startswith("| task") and "attention@1" not in new[2]
    assert len(new) == 5 and "comprehensiveness" in new[4]  # header, rule, one metric


def test_a_new_command_without_a_table_gets_one_and_the_text_after_it_stays(
        tmp_path, synthetic_ready):
    """Before: the lines after a command were skipped up to the next table, which was
    then replaced: a new command line ate the prose and the table of the next section."""
    run(RunConfig(out=str(tmp_path / "runs" / "a"), explainers=("attention",),
                  metrics=("comprehensiveness",), limit=8, progress=False))
    cmd = "`faithbench leaderboard --entries runs/a/leaderboard --format markdown`"
    lines = [cmd, "", "prose of the next section", "", "| its | table |", "|---|---|"]
    new, _, _ = readme_tables.regenerate(lines, tmp_path)
    printed = readme_tables.table_of(readme_tables.command_of(cmd), tmp_path)
    assert new == [cmd, "", *printed, "", "prose of the next section", "", "| its | table |",
                   "|---|---|"]
    assert readme_tables.regenerate(new, tmp_path)[0] == new  # and again: unchanged


def test_the_script_covers_the_readme_and_every_results_page():
    """Every page that holds a leaderboard or compare command line is one the script
    regenerates: the README and each results page (docs/results/*.md, one per table
    group), so no table there is kept by hand."""
    root = SCRIPT.parent.parent
    pages = set(readme_tables.PAGES)
    results = sorted((root / "docs" / "results").glob("*.md"))
    assert len(results) >= 8 and root / "README.md" in pages
    assert set(results) <= pages
    for page in (root / "docs").rglob("*.md"):
        commands = [line for line in page.read_text(encoding="utf-8").splitlines()
                    if readme_tables.command_of(line) is not None]
        assert not commands or page in pages, (page, commands[:1])
    assert sum(readme_tables.command_of(line) is not None for page in pages
               for line in page.read_text(encoding="utf-8").splitlines()) >= 13


def test_the_workers_budget_is_the_executors_schedule_of_the_recorded_seconds(
        tmp_path, synthetic_ready):
    """Groups of 5, 3, 3, 2 s (one batch each: never chunked), longest first: 1 worker
    13 s; 2 workers 5 | 3, then the third to the one free at 3 (6), the fourth to the
    one free at 5 (7): 7 s; 4 workers: the longest, 5 s. A big group of 16 batches (8 s
    of explaining, 1 s of metrics) beside a small one (1 + 1 s): on 2 workers its two
    chunks of 4 s run side by side, then the small job (4 to 6) beside its metrics
    (4 to 5): 6 s; on 1 worker everything in turn, 11 s. The groups of a real run are
    its (model, explainer) pairs with explain_s once and every metric_s."""
    spec = importlib.util.spec_from_file_location(
        "workers_budget", SCRIPT.parent / "workers_budget.py")
    budget = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("workers_budget", budget)
    spec.loader.exec_module(budget)
    small = [budget.Group(s, 0.0, 32) for s in (5.0, 3.0, 3.0, 2.0)]
    assert [budget.makespan(small, w) for w in (1, 2, 4)] == [13, 7, 5]
    mixed = [budget.Group(8.0, 1.0, 512), budget.Group(1.0, 1.0, 32)]
    assert [budget.makespan(mixed, w) for w in (1, 2)] == [11, 6]
    run(RunConfig(out=str(tmp_path / "runs" / "a"), explainers=("attention", "random"),
                  metrics=("comprehensiveness", "sufficiency"), limit=24, batch_size=8,
                  progress=False))
    from faithbench.benchmark.core.records import read_results
    records = read_results(tmp_path / "runs" / "a" / "results.jsonl")
    want = {}
    for r in records:
        want.setdefault(r.explainer, [r.timing.explain_s, 0.0])
        want[r.explainer][1] += r.timing.metric_s
    assert sorted([g.explain, g.metrics] for g in budget.groups(tmp_path / "runs" / "a")) \
        == sorted(want.values())
    cmd = "`python benchmarks/workers_budget.py runs/a`"
    new, done, _ = readme_tables.regenerate([cmd, "", "| old |"], tmp_path)
    assert done == ["python benchmarks/workers_budget.py runs/a"]
    assert new[2].startswith("| results") and new[4].startswith("| runs/a ")


def test_meta_eval_commands_get_their_tables(tmp_path):
    """`faithbench meta-eval --tables-only --out DIR --table T` and `--metric-agreement
    RUN`: the tables come from the values file and the run's results, one per command."""
    from faithbench.benchmark import meta_eval
    from faithbench.benchmark.core.records import append_jsonl

    values = tmp_path / "runs" / "meta" / "meta_eval" / "values.jsonl"
    values.parent.mkdir(parents=True)
    truth = {"ground_truth": 1.0, "a": 0.5, "inverted_ground_truth": 0.0}
    metric = {"ground_truth": 0.3, "a": 0.2, "inverted_ground_truth": 0.1}
    for seed in (0, 1):
        model = meta_eval.Model("t@1", seed, "c", "all")
        for name, table in (("r_precision@2", truth), ("m@1", metric)):
            for e, v in table.items():
                meta_eval.write_values(values, model, e, name, "higher", ["x", "y"], [v, v])
    for s in (0, 1):
        for m, vs in {"a@1": [1, 2, 3], "b@1": [3, 2, 1]}.items():
            for i, v in enumerate(vs):
                append_jsonl(tmp_path / "runs" / "r" / "results.jsonl", {
                    "task": "t@1", "model_seed": s, "metric": m, "explainer": f"e{i}",
                    "direction": "higher", "family": "faithfulness", "estimate": {"mean": v}})
    cmd = "`faithbench meta-eval --tables-only --out runs/meta --table metrics`"
    agree = "`faithbench meta-eval --metric-agreement runs/r`"
    new, done, skipped = readme_tables.regenerate([cmd, "", "| old |", "", agree], tmp_path)
    assert len(done) == 2 and not skipped
    assert new[2].startswith("| metric") and "yes (+0.100)" in new[4]
    assert new[new.index(agree) + 1].startswith("| metrics") and "-1.00" in new[-1]
