"""The site's figures as inline SVG (matplotlib, text kept as text): a forest plot of
one ranking, faithfulness against cost or plausibility, and curves with CI bands
(erasure curves, ROAR). Drawn from ``Ranked`` rows, never from
numbers typed in."""

from __future__ import annotations

import io

import numpy as np

from faithbench.leaderboard.rows import Ranked

WIDTH = 6.4  # inches: the page's content width at 100 dpi


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display: the site is built anywhere
    import matplotlib.pyplot as plt

    # svg.hashsalt: the same figure gets the same element ids, so a page is reproducible
    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "faithbench"})
    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prologue or doctype


def forest(rows: list[Ranked], title: str) -> str:
    """One ranking (rows of one suite and metric, best first) as a forest plot: each
    explainer's mean with its CI as a bar, tied ranks in one colour, rank 1 filled."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH, 0.28 * len(rows) + 0.9))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        colour = "#1f6fb2" if r.rank == 1 else "#555555"
        ax.plot([r.ci_low, r.ci_high], [y, y], color=colour, linewidth=2)
        ax.plot([r.mean], [y], marker="o", color=colour,
                markerfacecolor=colour if r.rank == 1 else "white")
    ax.set_yticks(ys, [r.explainer_name for r in rows])
    arrow = {"higher": "higher is better", "lower": "lower is better"}.get(rows[0].direction, "")
    ax.set_xlabel(f"{rows[0].metric_name} ({arrow})" if arrow else rows[0].metric_name)
    ax.set_title(title, fontsize=9, loc="left")
    ax.grid(axis="x", color="#dddddd")
    ax.set_axisbelow(True)
    return _svg(fig)


def scatter(points: list[tuple[str, float, float]], x_label: str, y_label: str,
            log_x: bool = False) -> str:
    """(label, x, y) points, each labelled: faithfulness against cost or plausibility."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH, 3.6))
    for label, x, y in points:
        ax.plot([x], [y], marker="o", color="#1f6fb2")
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=8)
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(color="#dddddd")
    ax.set_axisbelow(True)
    return _svg(fig)


def curves(x: list[float], lines: dict[str, list[tuple[float, float, float] | None]],
           y_label: str, title: str, *, x_label: str = "tokens masked in training and test (%)",
           percent: bool = True) -> str:
    """Curves over x (a ratio drawn in percent, or a count), each a line through its
    means with its CI as a band ((mean, low, high) per point; None: a point not
    measured)."""
    scale = 100 if percent else 1
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH, 3.8))
    for name, points in lines.items():
        xs = [k for k, p in zip(x, points) if p is not None]
        got = [p for p in points if p is not None]
        if not got:
            continue
        style = {"linestyle": "--", "color": "#777777"} if name == "random" else {}
        line, = ax.plot([scale * k for k in xs], [p[0] for p in got], marker="o",
                        markersize=3, label=name, **style)
        ax.fill_between([scale * k for k in xs], [p[1] for p in got], [p[2] for p in got],
                        color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=9, loc="left")
    ax.grid(color="#dddddd")
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, frameon=False)
    return _svg(fig)


def heatmap(names: list[str], values: list[list[float | None]], title: str, *,
            low: float, high: float) -> str:
    """A symmetric explainer x explainer matrix, each cell coloured on [low, high] and
    labelled with its value (blank: not measured); the diagonal is left empty."""
    plt = _pyplot()
    grid = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
    size = max(3.0, 0.42 * len(names) + 1.6)
    fig, ax = plt.subplots(figsize=(min(WIDTH + 1, size + 1), size))
    image = ax.imshow(grid, cmap="RdBu" if low < 0 else "Blues", vmin=low, vmax=high)
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right")
    ax.set_yticks(range(len(names)), names)
    for i in range(len(names)):
        for j in range(len(names)):
            if not np.isnan(grid[i, j]):
                # white text where the colour is dark: a diverging map's ends, else its top
                share = (grid[i, j] - low) / (high - low)
                dark = abs(share - 0.5) > 0.3 if low < 0 else share > 0.6
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
    ax.set_title(title, fontsize=9, loc="left")
    fig.colorbar(image, ax=ax, fraction=0.04)
    return _svg(fig)
