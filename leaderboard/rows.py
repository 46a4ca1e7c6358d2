"""The rows ``rank`` and ``compare`` return: typed, with ``as_dict`` giving the JSON
objects (and CSV columns) the leaderboard has always written. Their JSON Schemas are
exported with the records' (``faithbench.schemas``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Ranked:
    """One entry's score on one (task, metric), and its place among the entries.

    ``mean``, ``ci_low`` and ``ci_high`` are recomputed from the per-example rows; with
    several model seeds the CI also covers retraining (``ci_method`` names it). ``n``
    counts the examples defined under every seed, ``undefined`` those left out.
    ``overlaps_above``: the CI overlaps that of the row listed just above (a reading
    aid, not a test). One seed: ``n_seeds`` 1, ``seed_sd`` 0.0, ``seed_min`` = ``seed_max``
    = ``mean``. ``suite``: the suite the ranking is within, in words (split, examples,
    model seeds; the task id names the data variant and model family): entries of one
    task scored on different examples or checkpoints are ranked apart."""

    task: str
    suite: str
    family: str
    metric: str
    metric_name: str
    direction: str
    rank: int
    overlaps_above: bool
    entry_id: str
    explainer: str
    explainer_name: str
    mean: float
    ci_low: float
    ci_high: float
    ci_method: str
    n: int
    undefined: int
    confidence: float
    model_seeds: list[int]
    n_seeds: int
    seed_sd: float
    seed_min: float
    seed_max: float

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Compared:
    """Entry ``a`` against entry ``b`` on one (task, metric), paired on the examples
    (and model seeds) both scored: ``diff`` = mean_a - mean_b with its CI, the test's
    p-value and its Holm adjustment over the rows of one ``compare`` call, and the
    verdict: ``better`` names the winning explainer (``better_entry`` its entry) where
    p_holm < alpha, the CI excludes 0 and the metric has a side, else
    "no significant difference" (and ``better_entry`` None). ``suite``: the suite both
    were scored on, in words, with what made its models (a weak model says so)."""

    task: str
    suite: str
    family: str
    metric: str
    metric_name: str
    direction: str
    a: str
    b: str
    a_entry: str
    b_entry: str
    n: int
    undefined: int
    model_seeds: list[int]
    n_seeds: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    ci_method: str
    p_value: float
    p_holm: float
    test: str
    confidence: float
    better: str
    better_entry: str | None

    def as_dict(self) -> dict:
        return asdict(self)
