"""LaTeX tables (``--format latex``) for a paper: booktabs rules, the best entry of each
metric and those tied with it in bold, and the suite and the notes in the caption.

"Tied with the best" means an equal mean (entries that share rank 1). CI overlap is no
test, so it earns no bold; ``faithbench compare`` says which differences are real.
The table needs ``\\usepackage{booktabs}``.
"""

from __future__ import annotations

SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
           "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
           "^": r"\textasciicircum{}", "↑": r"$\uparrow$", "↓": r"$\downarrow$",
           "≈": r"$\approx$", "·": r"$\cdot$", "–": "--", "—": "---", "−": r"$-$",
           "×": r"$\times$", "`": "", "<": r"$<$", ">": r"$>$"}


def escape(text) -> str:
    r"""One cell as LaTeX text: TeX's special characters escaped, the arrows, dashes
    and signs the tables use as math or TeX dashes, control characters as spaces.

    >>> escape("gradient[norm=l2]_x 50% ↑")
    'gradient[norm=l2]\\_x 50\\% $\\uparrow$'
    >>> escape("0.1–0.2 a−b")
    '0.1--0.2 a$-$b'
    """
    return "".join(SPECIAL.get(c, c if c.isprintable() else " ") for c in str(text))


def table(headers: list[str], body: list[list[str]], align: str, caption: str,
          bold: list[list[bool]] | None = None) -> str:
    r"""A ``table`` float with a booktabs ``tabular``; ``bold[i][j]`` sets cell (i, j)
    in bold.

    >>> print(table(["a", "b"], [["x", "1"], ["y", "2"]], "lr", "T", [[False, True], [False, False]]))
    \begin{table}
    \centering
    \caption{T}
    \begin{tabular}{lr}
    \toprule
    a & b \\
    \midrule
    x & \textbf{1} \\
    y & 2 \\
    \bottomrule
    \end{tabular}
    \end{table}
    <BLANKLINE>
    """
    def row(cells, marks):
        return " & ".join(rf"\textbf{{{escape(c)}}}" if m else escape(c)
                          for c, m in zip(cells, marks)) + r" \\"

    marks = bold or [[False] * len(headers) for _ in body]
    lines = [r"\begin{table}", r"\centering", rf"\caption{{{escape(caption)}}}",
             rf"\begin{{tabular}}{{{align}}}", r"\toprule", row(headers, [False] * len(headers)),
             r"\midrule", *(row(cells, m) for cells, m in zip(body, marks)),
             r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
