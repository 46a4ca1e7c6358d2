"""``faithbench site`` from a small real run, opened in headless Chromium: every page
renders with no console message, every explainer row and every figure is in the DOM
after the page's own JavaScript ran, and a screenshot of each page is written.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it); without it the browser
test is skipped with the reason, except under CI=true, where it fails."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from faithbench.benchmark.cli import main
from faithbench.leaderboard.entry import read_entries
from faithbench.leaderboard.rank import rank

EXPLAINERS = ["attention", "gradient", "random"]
METRICS = ["comprehensiveness", "sufficiency", "token_f1"]


@pytest.fixture(scope="module")
def site(tmp_path_factory, isolated_cache):
    """A run with two suites (all test examples, and the first 12) and its site."""
    root = tmp_path_factory.mktemp("site")
    out = root / "res"
    for extra in ([], ["--limit", "12"]):
        assert main(["run", "--out", str(out), "--explainers", *EXPLAINERS, "--metrics",
                     *METRICS, "--batch-size", "32", "--no-progress", *extra]) in (0,)
    assert main(["site", "--entries", str(out / "leaderboard"), "--out",
                 str(root / "site")]) == 0
    return root / "site", read_entries(out / "leaderboard")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed: apt-get install chromium")
    return found


def render(page: Path, shot: Path) -> tuple[str, list[str]]:
    """(the DOM after the page's scripts ran, the console messages) of one page."""
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
            "--v=0", "--virtual-time-budget=3000", "--window-size=1100,1400"]
    done = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                          timeout=120, check=True)
    subprocess.run([*base, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120, check=True)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


def test_the_console_check_catches_a_broken_page(tmp_path):
    """The detector itself: a page with a script error must be caught."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    _, console = render(page, tmp_path / "bad.png")
    assert any("undefinedFunction is not defined" in line for line in console)


def test_every_page_renders_with_every_row_and_figure(site, tmp_path):
    folder, entries = site
    pages = sorted(folder.glob("*.html"))
    rows = rank(entries)
    suites = {(r.task, r.suite) for r in rows}
    assert len(pages) == 1 + len(suites) == 3  # the index and one page per suite
    weight = sum(p.stat().st_size for p in folder.iterdir())
    print(f"\nsite: {len(pages)} pages, {weight / 1024:.0f} KiB in all; screenshots in {tmp_path}")
    assert weight < 2 * 1024 * 1024
    index, console = render(folder / "index.html", tmp_path / "index.png")
    assert console == []
    links = re.findall(r'href="(suite-[0-9a-f]{12}\.html)"', index)
    assert sorted(links) == sorted(p.name for p in pages if p.name != "index.html")
    for name in links:
        dom, console = render(folder / name, tmp_path / name.replace(".html", ".png"))
        assert console == [], (name, console)
        mine = [r for r in rows if f"<p>{r.suite}</p>" in dom]
        assert {r.suite for r in mine} and len({r.suite for r in mine}) == 1
        for r in mine:  # every explainer's row in every metric's table, by short name
            cell = f'<td title="{r.explainer}">{r.explainer_name}</td><td><code>'
            assert dom.count(cell) == len(METRICS)
        # forests, the two erasure metrics' curves, cost, plausibility
        assert dom.count("<figure><svg") == len(METRICS) + 2 + 2
        assert dom.count("the drop at each step it averages") == 2
        assert 'class="tab active"' in dom
        assert len(re.findall(r'<section class="tab( active)?"', dom)) == len(METRICS)
        assert (tmp_path / name.replace(".html", ".png")).stat().st_size > 10_000
        # each row but the last of every ranking says how it compares with the next
        verdicts = re.findall(r"<td>(ahead|not told apart|behind) \(p (?:&lt;|=) [0-9.]+\)</td>", dom)
        assert len(verdicts) == (len(EXPLAINERS) - 1) * len(METRICS)
        # the explorer: up to 20 examples, one shown at a time (the menu chooses), each
        # with every explainer's tokens as a heatmap and the planted rationale
        shown = dom.count("<table class=\"explorer\">")
        assert shown == min(20, max(r.n for r in mine))
        assert dom.count("<option value=") == shown and dom.count('class="example active"') == 1
        assert dom.count('<tr class="rationale"><th>human rationale</th>') == shown
        assert dom.count('<span class="tok"') > shown * len(EXPLAINERS) * 3


def test_site_refuses_a_missing_folder(tmp_path, capsys):
    assert main(["site", "--entries", str(tmp_path / "nope"), "--out", str(tmp_path / "s")]) == 2
    assert "no such folder" in capsys.readouterr().err


def _roar_rows():
    """A ROAR sweep of two seeds: random masking and one explainer's, at 50 %, with the
    clean (0 %) and all-masked (100 %) models (a hand-made rows.jsonl)."""
    from faithbench.benchmark.core.records import RoarRow

    def row(mask, ratio, seed, correct):
        return RoarRow(kind="roar", task="synthetic@1", mask=mask, ratio=ratio, seed=seed,
                       correct=correct, accuracy=sum(correct) / len(correct), majority=0.5,
                       n=len(correct), key=f"{mask}-{ratio}-{seed}", transform=None,
                       checkpoint="c", original_checkpoint="o", split="test",
                       validation_accuracy=None, train_s=None, epochs=1)
    out = []
    for seed in (0, 1):
        out += [row("none", 0.0, seed, [1] * 9 + [0]), row("all", 1.0, seed, [1] * 5 + [0] * 5),
                row("random", 0.5, seed, [1] * 8 + [0] * 2),
                row("attention@1", 0.5, seed, [1] * (6 + seed) + [0] * (4 - seed))]
    return out


def test_roar_page_draws_the_curves_and_the_report(tmp_path):
    rows = tmp_path / "sweep" / "roar" / "rows.jsonl"
    rows.parent.mkdir(parents=True)
    rows.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in _roar_rows()))
    assert main(["site", "--roar", str(tmp_path / "nowhere"), "--out", str(tmp_path / "s")]) == 2
    assert main(["site", "--roar", str(tmp_path / "sweep"), "--out", str(tmp_path / "s")]) == 0
    index = (tmp_path / "s" / "index.html").read_text()
    assert 'href="roar.html"' in index
    dom, console = render(tmp_path / "s" / "roar.html", tmp_path / "roar.png")
    assert console == []
    assert dom.count("<figure><svg") == 1  # one task, ROAR curves only (no recursive)
    assert "attention@1" in dom and "random" in dom and "RACU" in dom
    # the 50 % cells by hand: random 0.8 on both seeds (no seed spread), so the CI is the
    # example part alone: 0.8 ± t(9) · sqrt(0.8 · 0.2 · 10/9 / 10) = 0.8 ± 2.262 · 0.1333;
    # attention: seeds 0.6 and 0.7, mean 0.65
    assert "0.800 [0.498, 1.102]" in dom and "0.650 [" in dom


def test_agreement_page_draws_both_heatmaps_and_every_pair(site, tmp_path):
    """``faithbench agreement`` on the site's run, drawn: a τ-b and a top-k heatmap per
    record, every pair in the table with the record's own numbers."""
    from faithbench.benchmark.core.records import read_agreements

    _, entries = site
    run = entries[0].path.parent.parent
    assert main(["agreement", "--task", "synthetic", "--out", str(run), "--explainers",
                 *EXPLAINERS, "--no-progress"]) == 0
    assert main(["site", "--agreement", str(tmp_path / "nowhere"), "--entries",
                 str(run / "leaderboard"), "--out", str(tmp_path / "s")]) == 2
    assert main(["site", "--agreement", str(run), "--entries", str(run / "leaderboard"),
                 "--out", str(tmp_path / "s")]) == 0
    assert 'href="agreement.html"' in (tmp_path / "s" / "index.html").read_text()
    dom, console = render(tmp_path / "s" / "agreement.html", tmp_path / "agreement.png")
    assert console == []
    assert dom.count("<figure><svg") == 2
    record = read_agreements(run / "agreement.jsonl")[-1]
    assert len(record.rows) == 3  # three explainers, three pairs
    for row in record.rows:
        cell = f"{row['tau_mean']:.3f} [{row['tau_ci_low']:.3f}, {row['tau_ci_high']:.3f}]"
        assert f"<td>{row['a']}</td><td>{row['b']}</td>" in dom and cell in dom


def test_alignment_suites_get_precision_against_recall_per_linking_rule(site):
    """Each explainer at (its recall, its precision), one figure per linking rule that
    both metrics were scored with (rows made from the run's, renamed)."""
    from dataclasses import replace

    from faithbench.benchmark.site import alignment_scatter

    _, entries = site
    base = [r for r in rank(entries) if r.metric.startswith("comprehensiveness")][:3]
    rows = []
    for links in ("@1", "[links=threshold;fraction=0.5]@1"):
        for name, shift in (("alignment_precision", 0.1), ("alignment_recall", 0.2)):
            rows += [replace(r, metric=name + links, metric_name=name, mean=shift + i / 10)
                     for i, r in enumerate(base)]
    figures = alignment_scatter(rows)
    assert len(figures) == 2
    assert "(argmax links)" in figures[0] and "(links=threshold;fraction=0.5)" in figures[1]
    for r in base:  # every explainer is labelled in both
        assert all(r.explainer_name in f for f in figures)
    assert alignment_scatter([r for r in rows if r.metric_name == "alignment_precision"]) == []


def test_the_shipped_releases_site_renders_every_page(tmp_path, monkeypatch):
    """``faithbench site --published``: the reference results shipped with the package,
    every page opened in Chromium with no console message, every ranked row present."""
    from faithbench.leaderboard.release import read_release

    # not the checkout: after the README's first command it holds faithbench-results/,
    # whose entries `site --published` would show beside the release's
    monkeypatch.chdir(tmp_path)
    release = read_release()
    out = tmp_path / "published"
    assert main(["site", "--published", "--out", str(out)]) == 0
    pages = sorted(out.glob("*.html"))
    weight = sum(p.stat().st_size for p in out.iterdir())
    print(f"\npublished {release.version} site: {len(pages)} pages, {weight / 1024:.0f} KiB "
          f"in all; screenshots in {tmp_path}")
    assert len(pages) == 1 + len({(r.task, r.suite) for r in release.rows}) + (
        1 if release.agreement else 0) + (1 if release.roar else 0)
    for page in pages:
        dom, console = render(page, tmp_path / f"{page.stem}.png")
        assert console == [], page.name
        assert (f"Published release {release.version}" in dom
                or page.name in ("agreement.html", "roar.html"))
    names = {r.explainer_name for r in release.rows}
    doms = "".join(p.read_text() for p in pages)
    assert all(name in doms for name in names)


def test_a_release_ships_the_roar_sweep_without_per_example_rows(tmp_path):
    """``release --roar``: the curves' points and the report, no per-example
    correctness; ``site --published`` draws the same page as ``site --roar`` did."""
    from faithbench.leaderboard.release import read_release

    rows = tmp_path / "sweep" / "roar" / "rows.jsonl"
    rows.parent.mkdir(parents=True)
    rows.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in _roar_rows()))
    board = tmp_path / "res"
    assert main(["run", "--out", str(board), "--explainers", "random", "--metrics",
                 "comprehensiveness", "--limit", "12", "--no-progress"]) == 0
    assert main(["release", "--entries", str(board / "leaderboard"), "--roar",
                 str(tmp_path / "sweep"), "--version", "v9", "--out", str(tmp_path / "v9")]) == 0
    shipped = (tmp_path / "v9" / "roar.json").read_text()
    assert '"correct"' not in shipped and read_release(tmp_path / "v9").roar["report"]
    assert main(["site", "--published", str(tmp_path / "v9"), "--out", str(tmp_path / "a")]) == 0
    assert main(["site", "--roar", str(tmp_path / "sweep"), "--out", str(tmp_path / "b")]) == 0
    published = (tmp_path / "a" / "roar.html").read_text()
    assert 'href="roar.html"' in (tmp_path / "a" / "index.html").read_text()
    assert "0.800 [0.498, 1.102]" in published  # the hand-worked cell of the test above
    assert published == (tmp_path / "b" / "roar.html").read_text()  # figures are reproducible


def test_the_example_menu_shows_the_chosen_example(site, tmp_path):
    """The explorer's menu, driven in Chromium: choosing the third example hides the
    first and shows the third (site.js, as the suite pages load it)."""
    folder, _ = site
    suite = next(p for p in folder.glob("suite-*.html"))
    text = suite.read_text()
    ids = re.findall(r'<option value="([^"]+)">', text)
    drive = ("<script>var c = document.querySelector('select.chooser'); c.value = '"
             + ids[2] + "'; c.dispatchEvent(new Event('change'));</script></body>")
    shutil.copy(folder / "site.js", tmp_path / "site.js")
    page = tmp_path / "driven.html"  # beside a copy of site.js, not in the shared site
    page.write_text(text.replace("</body>", drive))
    dom, console = render(page, tmp_path / "driven.png")
    assert console == []
    assert re.findall(r'class="example active" data-example="([^"]+)"', dom) == [ids[2]]
