"""``faithbench site``: the leaderboard as a static, self-contained site, built from
entry folders (no server, no CDN: every page opens from the file system).

Pages: ``index.html`` lists the suites (task x split x examples x model seeds, with n
and the entries' count); one page per suite has a tab per metric with its forest plot
(mean and CI of every explainer, rank 1 filled), its ranking table with each row's
paired test against the next, and for an erasure metric its curves with CI bands;
faithfulness against cost (seconds per example) and against plausibility where both
were measured, an example explorer, the explainers' and metrics' cards, and a
provenance block (the run options, package versions, weights hashes, seeds, machine).
``roar.html`` draws ROAR sweeps, ``agreement.html`` the agreement between explainers
as heatmaps. Everything is read from
the entries (``rank`` recomputes every interval from the per-example rows); the
figures are matplotlib SVG inline in the page; the tabs are a few lines of our own
JavaScript (``site.js``).
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

from faithbench.benchmark import plots
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.leaderboard.cost import explain_costs
from faithbench.leaderboard.curves import FRACTION_AXIS, Curve, curves
from faithbench.leaderboard.entry import Entry
from faithbench.leaderboard.models import WEAK
from faithbench.leaderboard.rank import rank
from faithbench.leaderboard.release import describe, rerun_command
from faithbench.leaderboard.render import short_names, visible
from faithbench.leaderboard.rows import Ranked

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 980px; padding: 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: .6em 0; } td, th { padding: .2em .6em; border-bottom: 1px solid #ddd; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } tr.best td { font-weight: 600; }
.tabs button { border: 1px solid #bbb; background: #f4f4f4; padding: .3em .7em; margin: 0 .2em .2em 0; cursor: pointer; }
.tabs button.active { background: #1f6fb2; color: white; border-color: #1f6fb2; }
.tab { display: none; } .tab.active { display: block; }
.example { display: none; } .example.active { display: block; } tr.rationale th { color: #8a5a00; }
.card { border: 1px solid #ddd; border-radius: 4px; padding: .5em .8em; margin: .5em 0; }
.note { color: #555; font-size: .9em; }
.weak { color: #a00; font-weight: bold; border-left: 4px solid #a00; padding-left: .5em; } code, pre { font-size: .85em; background: #f6f6f6; }
pre { padding: .5em; overflow-x: auto; } svg { max-width: 100%; height: auto; }
.tok { padding: 0 .15em; border-radius: 2px; } table.explorer th { white-space: nowrap; }
"""

JS = """
document.querySelectorAll('.tabs').forEach(function (bar) {
  var buttons = bar.querySelectorAll('button');
  buttons.forEach(function (button) {
    button.addEventListener('click', function () {
      buttons.forEach(function (b) { b.classList.remove('active'); });
      document.querySelectorAll('.tab[data-group="' + bar.dataset.group + '"]').forEach(
        function (t) { t.classList.toggle('active', t.id === button.dataset.tab); });
      button.classList.add('active');
    });
  });
});
document.querySelectorAll('select.chooser').forEach(function (chooser) {
  chooser.addEventListener('change', function () {
    document.querySelectorAll('.example').forEach(function (e) {
      e.classList.toggle('active', e.dataset.example === chooser.value);
    });
  });
});
"""

OVERLAP_NOTE = ("Bars are 95% confidence intervals (over seeds and examples where there are "
                "several seeds). Overlapping bars are not a test: "
                "<code>faithbench compare A B</code> is (paired, Holm-corrected).")


def esc(text) -> str:
    """Text from entries (names, citations, notes: anyone's) as HTML, with invisible and
    bidi control characters shown (``render.visible``)."""
    return html.escape(visible(text), quote=True)


def write_page(path: Path, text: str) -> None:
    """A page as written: every invisible or bidi control character left anywhere in it
    (an SVG legend, an attribute) shown as ``[U+XXXX]``; the site's own markup has none."""
    path.write_text(visible(text, keep="\n\t"), encoding="utf-8")


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><link rel=\"stylesheet\" href=\"style.css\"></head>"
            f"<body>\n{body}\n<script src=\"site.js\"></script></body></html>\n")


def suite_slug(task: str, suite: str) -> str:
    return "suite-" + content_hash([task, suite])[:12]


def build_site(entries: list[Entry], out: Path, *, sources: list[str] | None = None,
               command: str | None = None, examples: int = 20,
               roar: list | None = None, agreement: list | None = None,
               meta_eval=None, debate=None) -> list[Path]:
    """Write the site of ``entries`` into ``out``; the pages written (index first).
    ``examples``: how many test examples each suite page's explorer shows."""
    costs = explain_costs(entries)
    rows = rank(entries) if entries else []
    return build_site_of_rows(rows,
                              {e.entry_id: describe(e) for e in entries}, costs, out,
                              sources=sources, command=command, curves=curves(entries),
                              explained={e.entry_id: explanations(e) for e in entries},
                              examples=examples, roar=roar_summary(roar) if roar else None,
                              agreement=agreement, meta_eval=meta_eval, debate=debate,
                              verdicts=adjacent_verdicts(rows, {e.entry_id: e for e in entries}))


def adjacent_verdicts(rows: list[Ranked], by_id: dict[str, Entry]) -> dict[tuple, str]:
    """(task, suite, metric, entry id) -> how the row compares with the row below it:
    ``faithbench compare``'s paired test, Holm-corrected over the adjacent pairs of one
    ranking, so a reader sees which neighbours are told apart (CI overlap is no test)."""
    from faithbench.benchmark.core.stats import holm
    from faithbench.leaderboard.compare import NO_DIFFERENCE, compare

    out = {}
    groups: dict[tuple, list[Ranked]] = defaultdict(list)
    for r in rows:
        groups[(r.task, r.suite, r.metric)].append(r)
    for (task, suite, metric), ranked in groups.items():
        pairs = list(pairwise(ranked))
        found = [compare(by_id[a.entry_id], by_id[b.entry_id], task=task, metric=metric)[0]
                 for a, b in pairs]
        for (a, _), c, p in zip(pairs, found, holm([c.p_value for c in found])):
            verdict = "ahead" if c.better_entry == a.entry_id and p < 1 - c.confidence \
                else "not told apart" if c.better == NO_DIFFERENCE or p >= 1 - c.confidence \
                else "behind"
            shown = "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
            out[(task, suite, metric, a.entry_id)] = f"{verdict} ({shown})"
    return out


def explanations(e: Entry) -> dict[str, list[dict]]:
    """task -> the rows (id, tokens, scores, target) of the explanations the entry's
    first model seed scored, read from its run folder (the entry's ``leaderboard/``
    sits in it); a task whose file is gone or was not recorded has none."""
    out: dict[str, list[dict]] = {}
    for r in sorted(e.results, key=lambda r: r.model_seed):
        rel = (r.provenance.config or {}).get("explanations")
        if r.task in out or not rel:
            continue
        path = e.path.parent.parent / rel
        if path.is_file():
            out[r.task] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


def build_site_of_rows(rows: list[Ranked], described: dict[str, dict], costs: dict, out: Path,
                       *, sources: list[str] | None = None, command: str | None = None,
                       published: str | None = None,
                       explained: dict[str, dict[str, list[dict]]] | None = None,
                       examples: int = 0, roar: dict | None = None,
                       verdicts: dict[tuple, str] | None = None,
                       curves: list[Curve] | None = None,
                       agreement: list | None = None,
                       commands: list[str] | None = None, meta_eval=None,
                       debate=None) -> list[Path]:
    """The site of ranked rows (``rank``'s, or a release's), with each entry's
    ``release.describe`` and its cost per example ((entry, task) -> ``ExplainCost``),
    and the erasure metrics' curves; ``published``: the release's version, named on
    every page; ``commands``: those that computed the results (a release's), listed on
    the index."""
    by_key = {(c.entry_id, c.task, c.metric): c for c in curves or []}
    out.mkdir(parents=True, exist_ok=True)
    (out / "style.css").write_text(CSS, encoding="utf-8")
    (out / "site.js").write_text(JS, encoding="utf-8")
    suites: dict[tuple[str, str], list[Ranked]] = defaultdict(list)
    for r in rows:
        suites[(r.task, r.suite)].append(r)
    written = [out / "index.html"]
    for (task, suite), mine in suites.items():
        path = out / f"{suite_slug(task, suite)}.html"
        page_text = suite_page(task, suite, mine, described, costs, published,
                               explorer(task, mine, explained or {}, examples), verdicts or {},
                               by_key)
        write_page(path, page_text)
        written.append(path)
    if roar:
        write_page(out / "roar.html", roar_page(roar))
        written.append(out / "roar.html")
    if agreement:
        write_page(out / "agreement.html", agreement_page(agreement))
        written.append(out / "agreement.html")
    if meta_eval is not None:
        write_page(out / "meta-eval.html", meta_eval_page(meta_eval))
        written.append(out / "meta-eval.html")
    if debate is not None:
        write_page(out / "debate.html", debate_page(debate))
        written.append(out / "debate.html")
    write_page(written[0], index_page(suites, sources or [], command, published, bool(roar),
                                      bool(agreement), commands or [],
                                      meta_eval=meta_eval is not None,
                                      debate=debate is not None))
    return written


def meta_eval_page(values) -> str:
    """The meta-evaluation's tables (``faithbench meta-eval``'s values file):
    explainers against the ground truth, the models' reliance on it, which metric
    recovers the known ranking, and, for models trained to hide their evidence from
    attention, the explainers per λ and the metrics' verdicts on attention."""
    from tabulate import tabulate

    from faithbench.benchmark import meta_eval

    parts = [("<p><a href=\"index.html\">all suites</a></p>"
              "<h1>Meta-evaluation: explainers and metrics against ground truth</h1>"),
             ("<p>Models whose evidence is known: SST-2 with planted shortcut tokens "
              "(Bastings et al. 2022) and SNLI hypotheses with them, models trained to "
              "keep their attention off those tokens (Pruthi et al. 2020), and the "
              "synthetic task's planted rationales. "
              "<code>ground_truth</code> ranks the known tokens first, "
              "<code>inverted_ground_truth</code> last; a metric that can be trusted puts "
              "them first and last and orders the explainers as the truth does.</p>")]
    for name, rows, headers in meta_eval.table_rows(values):
        parts.append(f"<h2>{esc(meta_eval.CAPTIONS[name])}</h2>"
                     + tabulate(rows, headers, tablefmt="html", disable_numparse=True))
    return page("Meta-evaluation", "\n".join(parts))


def debate_page(rows) -> str:
    """The attention debate (``faithbench debate``'s values): one row per claim of the
    papers with their number and ours, then Jain & Wallace's bins and the costs."""
    from faithbench.benchmark.debate import tables

    parts = ["<p><a href=\"index.html\">all suites</a></p>"
             "<h1>The attention debate, re-run on these models</h1>",
             "<p>Each claim of the papers the \"attention or saliency?\" argument rests on, "
             "read as a number with a threshold; ours with its 95 % interval over examples "
             "and model seeds, and a verdict by that interval: holds where it lies wholly "
             "on the claim's side, does not hold where it lies wholly on the other.</p>",
             "<h2>Claims</h2>" + tables.render_claims(rows, tablefmt="html", wide=True),
             "<h2>Jain &amp; Wallace's figures as numbers, by the largest attention "
             "weight</h2>" + tables.render_bins(rows, tablefmt="html"),
             "<h2>Wiegreffe &amp; Pinter's frontier: attention moved against output "
             "changed</h2>" + tables.render_frontier(rows, tablefmt="html"),
             "<h2>What each experiment cost</h2>" + tables.render_costs(rows, tablefmt="html")]
    return page("The attention debate", "\n".join(parts))


def agreement_page(records: list) -> str:
    """Agreement between explainers (``faithbench agreement``'s records, the newest per
    task, model seed and split): Kendall τ-b and top-k overlap as heatmaps, then every
    pair with its CIs."""
    newest = {}
    for r in sorted(records, key=lambda r: r.created_at):
        newest[(r.task, r.model_seed, r.split)] = r
    parts = ["<p><a href=\"index.html\">all suites</a></p><h1>Agreement between explainers</h1>",
             ("<p>How alike two explainers rank the tokens of the same examples: the mean "
              "Kendall τ-b of their scores, and the share of their top-k tokens they have "
              "in common (top-k overlap, k the given fraction of each example's tokens), "
              "each averaged over the examples with a 95% percentile-bootstrap CI (the "
              "table). Agreement is not faithfulness: two "
              "explainers can agree and both be wrong.</p>")]
    for (task, seed, split), r in newest.items():
        names = list(dict.fromkeys(n for row in r.rows for n in (row["a"], row["b"])))
        at = {name: i for i, name in enumerate(names)}
        k_frac = r.rows[0].get("k_frac") if r.rows else None
        what = f"{task}, model seed {seed}, {split} split" + (
            f", top-k with k = {k_frac:g} of the tokens" if k_frac else "")
        parts.append(f"<h2>{esc(what)}</h2>")
        for key, label, low in (("tau_mean", "Kendall τ-b", -1.0),
                                ("topk_overlap_mean", "top-k overlap", 0.0)):
            grid: list[list[float | None]] = [[None] * len(names) for _ in names]
            for row in r.rows:
                grid[at[row["a"]]][at[row["b"]]] = grid[at[row["b"]]][at[row["a"]]] = row[key]
            parts.append("<figure>" + plots.heatmap(names, grid, f"{label}: {what}",
                                                    low=low, high=1.0) + "</figure>")
        parts.append("<table><tr><th>a</th><th>b</th><th>n</th><th>Kendall τ-b [95% CI]</th>"
                     "<th>top-k overlap [95% CI]</th></tr>" + "".join(
                         f"<tr><td>{esc(row['a'])}</td><td>{esc(row['b'])}</td>"
                         f"<td class=\"num\">{row['n']}</td>"
                         f"<td class=\"num\">{_ci(row, 'tau')}</td>"
                         f"<td class=\"num\">{_ci(row, 'topk_overlap')}</td></tr>"
                         for row in r.rows) + "</table>")
    return page("Agreement between explainers", "\n".join(parts))


def _ci(row: dict, stem: str) -> str:
    mean, low, high = (row.get(f"{stem}_{k}") for k in ("mean", "ci_low", "ci_high"))
    if mean is None:
        return "n/a"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


TITLES = {"roar": "ROAR", "recursive": "Recursive ROAR"}


def roar_summary(rows: list) -> dict:
    """What the ROAR page shows, from a sweep's rows (``RoarRow``): per task and curve
    kind the masking ratios and each mask's [mean, low, high] accuracy per ratio (the
    95 % CI over seeds and examples; null: not measured), and the report (RACU, the
    shift diagnostics, the leakage check) as ``faithbench roar`` prints it. JSON, with
    no per-example correctness: a release ships it."""
    from faithbench.benchmark.core.stats import seed_estimate
    from faithbench.benchmark.roar_report import curve_matrices, report

    curves = []
    for task in dict.fromkeys(r.task for r in rows):
        mine = [r for r in rows if r.task == task]
        for kind in TITLES:
            x, _, found = curve_matrices(mine, kind)
            if not found:
                continue
            lines = {}
            for mask, points in found.items():
                est = [None if m is None else seed_estimate(m) for m in points]
                lines[mask] = [None if e is None else [e.mean, e.ci_low, e.ci_high] for e in est]
            curves.append({"task": task, "kind": kind, "x": [float(v) for v in x],
                           "lines": lines})
    return {"curves": curves, "report": report(rows, fmt="simple")}


def roar_page(summary: dict) -> str:
    """The ROAR sweep (``roar_summary``): per task and curve kind, accuracy of the
    retrained models against the masking ratio with 95 % CI bands, then the report."""
    parts = ["<p><a href=\"index.html\">all suites</a></p><h1>ROAR: remove and retrain</h1>",
             ("<p>Each curve: the accuracy of models retrained and tested with the "
             "explainer's top tokens masked, mean and 95% CI over seeds and examples; the "
             "dashed line is random masking. Lower is more faithful: the explainer found "
             "tokens the task needs. The report below has RACU, whether the masking "
             "shifts the inputs out of distribution, and whether the mask pattern alone "
             "leaks the label.</p>")]
    for c in summary["curves"]:
        title, task = TITLES[c["kind"]], c["task"]
        lines = {mask: [None if p is None else tuple(p) for p in points]
                 for mask, points in c["lines"].items()}
        parts.append(f"<h2>{esc(title)} on {esc(task)}</h2><figure>"
                     + plots.curves(c["x"], lines, "accuracy of the retrained model",
                                    f"{title}, {task}") + "</figure>")
    parts.append(f"<h2>Report</h2><pre>{esc(summary['report'])}</pre>")
    return page("ROAR", "\n".join(parts))


def published_note(published: str | None) -> str:
    if published is None:
        return ""
    return (f"<p class=\"note\">Published release {esc(published)}: computed on the release "
            "machine's models. Your own runs train their own checkpoints (weights differ "
            "across machines and thread counts), so they form other suites; each suite "
            "page names the command that reruns its references on your models.</p>")


def index_page(suites: dict, sources: list[str], command: str | None,
               published: str | None = None, roar: bool = False,
               agreement: bool = False, commands: list[str] | None = None,
               meta_eval: bool = False, debate: bool = False) -> str:
    lines = ["<h1>faithbench leaderboard</h1>", published_note(published),
             ("<p>Does an explanation point at the tokens the model relied on? Each suite "
              "ranks explainers scored on the same model checkpoints and examples; entries "
              "of different suites are never ranked against each other.</p>")]
    if not suites:
        lines.append("<p>No entries.</p>")
    else:
        lines.append("<table><tr><th>task</th><th>suite</th><th>explainers</th>"
                     "<th>metrics</th><th>n</th></tr>")
        for (task, suite), rows in suites.items():
            explainers = {r.entry_id for r in rows}
            metrics = sorted({r.metric_name for r in rows})
            n = max(r.n for r in rows)
            lines.append(f"<tr><td><a href=\"{suite_slug(task, suite)}.html\">{esc(task)}</a>"
                         f"</td><td>{esc(suite)}</td><td class=\"num\">{len(explainers)}</td>"
                         f"<td>{esc(', '.join(metrics))}</td><td class=\"num\">{n}</td></tr>")
        lines.append("</table>")
    if roar:
        lines.append("<p><a href=\"roar.html\">ROAR: remove and retrain</a> (curves with "
                     "CI bands, RACU, shift and leakage diagnostics)</p>")
    if agreement:
        lines.append("<p><a href=\"agreement.html\">Agreement between explainers</a> "
                     "(Kendall τ-b and top-k overlap heatmaps)</p>")
    if meta_eval:
        lines.append("<p><a href=\"meta-eval.html\">Meta-evaluation</a> (explainers and "
                     "metrics against ground truth: which metric recovers the known "
                     "ranking)</p>")
    if debate:
        lines.append("<p><a href=\"debate.html\">The attention debate</a> (the claims of "
                     "Jain &amp; Wallace, Serrano &amp; Smith, Wiegreffe &amp; Pinter, "
                     "Vashishth et al. and Mohankumar et al., re-run: which hold)</p>")
    if commands:
        lines.append("<h2>How the results were computed</h2><pre>"
                     + esc("\n".join(commands)) + "</pre>")
    lines.append(provenance_of_build(sources, command))
    return page("faithbench leaderboard", "\n".join(lines))


def provenance_of_build(sources: list[str], command: str | None) -> str:
    parts = ["<h2>How this site was built</h2>"]
    if command:
        parts.append(f"<pre>{esc(command)}</pre>")
    if sources:
        parts.append("<p class=\"note\">From the entry folders: "
                     + ", ".join(f"<code>{esc(s)}</code>" for s in sources) + "</p>")
    return "\n".join(parts)


def suite_page(task: str, suite: str, rows: list[Ranked], described: dict, costs: dict,
               published: str | None = None, examples_html: str = "",
               verdicts: dict[tuple, str] | None = None,
               curves: dict[tuple, Curve] | None = None) -> str:
    metrics = list(dict.fromkeys(r.metric for r in rows))  # rank's order: family, then metric
    metrics.sort(key=lambda m: not m.startswith("comprehensiveness"))  # the headline first
    by_metric = {m: [r for r in rows if r.metric == m] for m in metrics}
    # a suite scored on a model the gate refused says so first, and loudly
    weak = ("<p class=\"weak\">Scored on a weak model (refused by the model gate, scored "
            "with --allow-weak-model): its faithfulness values may measure noise.</p>"
            if WEAK in suite else "")
    parts = [f"<p><a href=\"index.html\">all suites</a></p><h1>{esc(task)}</h1>", weak,
             f"<p>{esc(suite)}</p>", published_note(published), "<h2>Rankings</h2>"]
    group = "metrics"
    short = Counter(by_metric[m][0].metric_name for m in metrics)  # variants: full ids
    labels = {m: by_metric[m][0].metric_name if short[by_metric[m][0].metric_name] == 1
              else m.rsplit("@", 1)[0] for m in metrics}
    active_class = ' class="active"'
    parts.append(f"<div class=\"tabs\" data-group=\"{group}\">" + "".join(
        f"<button data-tab=\"tab-{i}\"{active_class if i == 0 else ''}>"
        f"{esc(labels[m])}</button>" for i, m in enumerate(metrics))
        + "</div>")
    for i, m in enumerate(metrics):
        ranked = by_metric[m]
        active = " active" if i == 0 else ""
        parts.append(f"<section class=\"tab{active}\" id=\"tab-{i}\" data-group=\"{group}\">"
                     f"<h3>{esc(m)}</h3>"
                     f"<figure>{plots.forest(ranked, ranked[0].metric_name)}</figure>"
                     f"{ranking_table(ranked, verdicts or {})}<p class=\"note\">"
                     f"{OVERLAP_NOTE}</p>{curve_figure(ranked, curves or {})}</section>")
    parts += scatters(rows, costs)
    parts.append(examples_html)
    entries = [described[e] for e in dict.fromkeys(r.entry_id for r in rows)]
    parts.append("<h2>Explainers</h2>" + "".join(explainer_card(e) for e in entries))
    parts.append("<h2>Metrics</h2>" + "".join(metric_card(m, by_metric[m][0]) for m in metrics))
    parts.append("<h2>Provenance</h2>" + "".join(provenance_card(e, task) for e in entries))
    if published is not None:
        parts.append("<h2>Your explainer beside these</h2><p>Rerun the references on your "
                     "models, then submit yours into the same folder and compare (one "
                     f"suite):</p><pre>{esc(rerun_command(task, entries))}</pre>")
    return page(f"{task}: {suite}", "\n".join(parts))


def curve_figure(ranked: list[Ranked], curves: dict[tuple, Curve]) -> str:
    """An erasure metric's curves, one line per explainer of the ranking (best first)
    with its CI band, and what the metric averages; empty for other metrics."""
    found = [(r, curves[(r.entry_id, r.task, r.metric)]) for r in ranked
             if (r.entry_id, r.task, r.metric) in curves]
    if not found:
        return ""
    axis = found[0][1].axis
    x = sorted({v for _, c in found for v in c.x})
    names, lines = short_names(ranked), {}  # two settings of one explainer stay apart
    for r, c in found:
        at = {v: (m, lo, hi) for v, m, lo, hi in zip(c.x, c.mean, c.ci_low, c.ci_high)}
        lines[names[r.entry_id]] = [at.get(v) for v in x]
    fraction = axis == FRACTION_AXIS
    svg = plots.curves(x, lines, "drop in p(predicted class)", f"{ranked[0].metric_name}: "
                       "the drop at each step it averages",
                       x_label="words in the rationale (%)" if fraction else axis,
                       percent=fraction)
    return (f"<figure>{svg}</figure><p class=\"note\">Mean drop in the predicted class's "
            "probability at each step the metric averages, with 95% CI bands (over seeds "
            "and examples with several seeds), over the examples that reach the step.</p>")


def explorer(task: str, rows: list[Ranked], explained: dict, count: int) -> str:
    """The first ``count`` examples every entry of the suite explained, one shown at a
    time (a menu chooses): the explained target (a classifier's prediction), each
    explainer's token scores as a heatmap (blue positive, red negative, each row scaled
    by its largest magnitude), best explainer first, and the human rationale where the
    example has one."""
    order = [r for r in rows if r.metric == rows[0].metric]  # the first tab's ranking
    found = {r.entry_id: {x["id"]: x for x in explained.get(r.entry_id, {}).get(task, [])}
             for r in order}
    if count <= 0 or not order or not all(found.values()):
        return ""
    first = next(iter(found.values()))
    ids = [i for i in first if all(i in f for f in found.values())][:count]
    parts = ["<h2>Examples</h2><p class=\"note\">Test examples every explainer here "
             "explained (model seed " + esc(min(order[0].model_seeds)) + "), each "
             "explainer's scores scaled by its largest magnitude: blue positive, red negative "
             "(for a signed explainer: raises or lowers the target class's score); the "
             "human rationale (where the data has one) in the last row.</p>"
             "<p><label>example <select class=\"chooser\">" + "".join(
                 f"<option value=\"{esc(i)}\">{esc(i)}</option>" for i in ids)
             + "</select></label></p>"]
    for n, i in enumerate(ids):
        target = first[i].get("target")
        active = " active" if n == 0 else ""
        parts.append(f"<div class=\"example{active}\" data-example=\"{esc(i)}\">"
                     f"<h3>{esc(i)} <span class=\"note\">explained: class {esc(target)} "
                     "(the model's prediction; on alignment, the reference word)</span>"
                     "</h3><table class=\"explorer\">")
        for r in order:
            x = found[r.entry_id][i]
            parts.append(f"<tr><th>{esc(r.explainer_name)}</th><td>"
                         + heat(x["tokens"], x["scores"]) + "</td></tr>")
        reference = first[i].get("reference")
        if reference and any(reference):
            parts.append("<tr class=\"rationale\"><th>human rationale</th><td>"
                         + heat(first[i]["tokens"], [float(v) for v in reference])
                         + "</td></tr>")
        parts.append("</table></div>")
    return "\n".join(parts)


def heat(tokens: list[str], scores: list[float]) -> str:
    """Tokens as spans whose background shows their score.

    >>> heat(["a", "<b>"], [1.0, -0.5])
    '<span class="tok" style="background:rgba(31,111,178,1.00)" title="1">a</span> \
<span class="tok" style="background:rgba(200,40,40,0.50)" title="-0.5">&lt;b&gt;</span>'
    """
    top = max((abs(s) for s in scores), default=0.0) or 1.0
    spans = []
    for t, s in zip(tokens, scores):
        rgb = "31,111,178" if s >= 0 else "200,40,40"
        spans.append(f'<span class="tok" style="background:rgba({rgb},{abs(s) / top:.2f})" '
                     f'title="{s:.4g}">{esc(t)}</span>')
    return " ".join(spans)


def ranking_table(rows: list[Ranked], verdicts: dict[tuple, str]) -> str:
    """One ranking: explainers by short name (their full id on hover, and where two
    settings share a name), tied rows marked, each row's verdict against the next."""
    seeds = any(r.n_seeds > 1 for r in rows)
    names = short_names(rows)
    told = any((r.task, r.suite, r.metric, r.entry_id) in verdicts for r in rows)
    head = ("<tr><th>rank</th><th>explainer</th><th>entry</th><th>mean</th><th>95% CI</th>"
            + ("<th>per-seed means</th>" if seeds else "") + "<th>n</th>"
            + ("<th>vs the next row (paired test, Holm)</th>" if told else "") + "</tr>")
    body = []
    for r in rows:
        tie = " ≈" if r.overlaps_above else ""
        spread = (f"<td class=\"num\">{r.seed_min:.3f}–{r.seed_max:.3f}</td>" if seeds else "")
        key = (r.task, r.suite, r.metric, r.entry_id)
        vs = f"<td>{esc(verdicts.get(key, ''))}</td>" if told else ""
        body.append(f"<tr class=\"{'best' if r.rank == 1 else ''}\"><td class=\"num\">{r.rank}"
                    f"{tie}</td><td title=\"{esc(r.explainer)}\">{esc(names[r.entry_id])}</td>"
                    f"<td><code>{esc(r.entry_id[:8])}"
                    f"</code></td><td class=\"num\">{r.mean:.3f}</td><td class=\"num\">"
                    f"[{r.ci_low:.3f}, {r.ci_high:.3f}]</td>{spread}<td class=\"num\">{r.n}"
                    f"</td>{vs}</tr>")
    return f"<table class=\"ranking\">{head}{''.join(body)}</table>"


def _primary(rows: list[Ranked], family: str) -> list[Ranked]:
    """The rows of the family's first metric (comprehensiveness where there is one)."""
    mine = [r for r in rows if r.family == family]
    if not mine:
        return []
    names = [r.metric for r in mine]
    key = next((m for m in names if m.startswith("comprehensiveness")), names[0])
    return [r for r in mine if r.metric == key]


def scatters(rows: list[Ranked], costs: dict) -> list[str]:
    faith = _primary(rows, "faithfulness")
    if not faith:
        return []
    out = []
    name = faith[0].metric_name
    timed = [(r.explainer_name, c.seconds, r.mean) for r in faith
             if (c := costs.get((r.entry_id, r.task))) is not None and c.seconds]
    if len(timed) > 1:
        out.append("<h2>Faithfulness against cost</h2><figure>"
                   + plots.scatter(timed, "seconds explaining per example (log scale)",
                                   name, log_x=True) + "</figure>")
    plaus = {r.entry_id: r for r in _primary(rows, "plausibility")}
    both = [(r.explainer_name, plaus[r.entry_id].mean, r.mean) for r in faith
            if r.entry_id in plaus]
    if len(both) > 1:
        out.append("<h2>Faithfulness against plausibility</h2><figure>"
                   + plots.scatter(both, next(iter(plaus.values())).metric_name, name)
                   + "</figure>")
    return out + alignment_scatter(rows)


def alignment_scatter(rows: list[Ranked]) -> list[str]:
    """Alignment suites: each explainer's link precision (against sure and possible gold
    links) against its recall (of the sure links), for the links of each linking rule
    (argmax, threshold, ...) that both were scored with: where AER's one number hides
    whether an explainer links too much or too little."""
    out = []
    precision = [r for r in rows if r.metric_name == "alignment_precision"]
    for links in dict.fromkeys(r.metric.replace("alignment_precision", "", 1) for r in precision):
        recall = {r.entry_id: r for r in rows if r.metric == "alignment_recall" + links}
        points = [(r.explainer_name, recall[r.entry_id].mean, r.mean) for r in precision
                  if r.metric == "alignment_precision" + links and r.entry_id in recall]
        if len(points) > 1:
            rule = links.split("@")[0].strip("[]") or "argmax links"
            out.append(f"<h2>Alignment: precision against recall ({esc(rule)})</h2><figure>"
                       + plots.scatter(points, "alignment_recall (sure links found)",
                                       "alignment_precision (links that are gold)")
                       + "</figure>")
    return out


def explainer_card(e: dict) -> str:
    spec = e.get("explainer_spec") or {}
    fields = [("id", e["explainer"]), ("requires", ", ".join(spec.get("requires") or []) or "-"),
              ("cost", spec.get("cost")), ("citation", spec.get("citation")),
              ("submitter", e.get("submitter")), ("notes", e.get("notes"))]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in fields if v)
    about = spec.get("description") or ""
    return (f"<div class=\"card\" id=\"explainer-{esc(e['entry_id'])}\">"
            f"<h3>{esc(e['explainer_name'])}</h3><p>{esc(about)}</p><table>{rows}</table></div>")


def metric_card(metric: str, row: Ranked) -> str:
    from faithbench import metrics as registry

    try:
        spec = registry.resolve(metric).spec
        citation = spec.citation
    except InputError:  # a plugin's or an older version's metric: the row says enough
        citation = ""
    fields = [("id", metric), ("family", row.family), ("better", row.direction),
              ("equal scores", registry.tie_rule(metric)), ("citation", citation)]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in fields if v)
    return f"<div class=\"card\"><h3>{esc(row.metric_name)}</h3><table>{rows}</table></div>"


def provenance_card(e: dict, task: str) -> str:
    p = e["tasks"][task]
    fields = [("faithbench", ", ".join(e.get("faithbench_versions") or [])),
              ("git commits", ", ".join(e.get("git_commits") or [])),
              ("weights (checkpoints)", ", ".join(p["checkpoints"])),
              ("data fingerprint", p["data_fingerprint"]), ("torch", p["torch"]),
              ("threads", p["torch_threads"]), ("python", p["python"]),
              ("platform", p["platform"]), ("seeds", json.dumps(p["seeds"]) if p["seeds"] else None)]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in fields if v)
    options = (f"<details><summary>run options</summary><pre>"
               f"{esc(json.dumps(p['run'], indent=1, sort_keys=True))}</pre></details>"
               if p["run"] else "")
    return (f"<div class=\"card\"><h3>{esc(e['explainer'])} <code>{esc(e['entry_id'][:8])}"
            f"</code></h3><table>{rows}</table>{options}</div>")
