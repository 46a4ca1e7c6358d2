"""The attention debate, re-run on faithbench's own models (``faithbench debate``).

Each experiment of the papers the "attention or saliency?" argument cites computes
per-example quantities on one trained model (``EXPERIMENTS``: a function of the model,
a batch, its output and labels). ``run`` computes every experiment on every model of
the run (tasks x seeds) and appends one row per (experiment, model) to
``<out>/debate/values.jsonl`` as soon as it is done, so a stopped run resumes at the
next row; the tables (``faithbench.benchmark.debate.tables``) are always made from
that file, with CIs over examples and model seeds.

The experiments and their cards (``docs/results/debate.md``):

- ``jw_correlation``, ``jw_permutation``, ``jw_adversarial``: Jain & Wallace 2019
  (``jain_wallace``).
- ``ss_single``, ``ss_multiple``: Serrano & Smith 2019 (``serrano_smith``).
- ``vashishth``: attention replaced at inference, Vashishth et al. 2019 (``vashishth``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.records import append_jsonl, read_jsonl

VALUES = "values.jsonl"


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One experiment: ``compute(model, batch, base_probs, labels, options)`` -> per
    example quantities {name: [value per row]}; ``paper`` cites it."""

    name: str
    paper: str
    compute: Callable[..., dict[str, list[float]]]


def _jw_correlation(model, batch, base, labels, options):
    from faithbench.benchmark.debate import jain_wallace
    return jain_wallace.correlations(model, batch, base)


def _jw_permutation(model, batch, base, labels, options):
    from faithbench.benchmark.debate import jain_wallace
    return jain_wallace.permutation(model, batch, base, options.permutations)


def _jw_adversarial(model, batch, base, labels, options):
    from faithbench.benchmark.debate import jain_wallace
    out = jain_wallace.adversarial(model, batch, base, steps=options.adversary_steps)
    return {"jsd": out.jsd, "tvd": out.tvd, "max_attention": out.max_attention}


def _ss_single(model, batch, base, labels, options):
    from faithbench.benchmark.debate import serrano_smith
    return serrano_smith.single(model, batch, base)


def _ss_multiple(model, batch, base, labels, options):
    from faithbench.benchmark.debate import serrano_smith
    return serrano_smith.multiple(model, batch, base)


def _vashishth(model, batch, base, labels, options):
    from faithbench.benchmark.debate import vashishth
    return vashishth.altered(model, batch, labels)


JW = "Jain & Wallace 2019, Attention is not Explanation (NAACL)"
SS = "Serrano & Smith 2019, Is Attention Interpretable? (ACL)"
VA = "Vashishth, Upadhyay, Tomar & Faruqui 2019, Attention Interpretability Across NLP Tasks"
EXPERIMENTS = {e.name: e for e in (
    Experiment("jw_correlation", JW, _jw_correlation),
    Experiment("jw_permutation", JW, _jw_permutation),
    Experiment("jw_adversarial", JW, _jw_adversarial),
    Experiment("ss_single", SS, _ss_single),
    Experiment("ss_multiple", SS, _ss_multiple),
    Experiment("vashishth", VA, _vashishth),
)}


@dataclasses.dataclass(frozen=True)
class Options:
    """The experiments' own settings (the papers' by default; fewer steps for tests)."""

    permutations: int = 100
    adversary_steps: int = 500


def check_experiments(names: list[str]) -> list[str]:
    """The experiments asked for, in registry order (all when none); an unknown name is
    an InputError naming the known ones."""
    from faithbench.benchmark.core.registry import unknown

    for name in names:
        if name not in EXPERIMENTS:
            raise unknown("experiment", name, list(EXPERIMENTS))
    return [n for n in EXPERIMENTS if not names or n in names]


def row_key(experiment: str, model: dict) -> tuple:
    return (experiment, model["task"], model["seed"], model["checkpoint"], model["selection"])


def done_keys(path: Path) -> set[tuple]:
    return {row_key(r["experiment"], r["model"]) for r in read_jsonl(path)} if path.exists() \
        else set()


def run(config, experiments: list[str], options: Options = Options()) -> Path:
    """Every experiment on every model of ``config`` (tasks x seeds), appended to
    ``<out>/debate/values.jsonl``; rows already there are not computed again."""
    from faithbench.benchmark.core.validation import model_eval
    from faithbench.benchmark.session import open_session
    from faithbench.leaderboard.suite import selection_label

    names = check_experiments(experiments)
    path = Path(config.out) / "debate" / VALUES
    path.parent.mkdir(parents=True, exist_ok=True)
    done = done_keys(path)
    for task in config.tasks:
        for seed in config.seeds:
            session = open_session(task, config, seed)
            model = {"task": session.spec.id, "seed": seed,
                     "checkpoint": session.prepared.checkpoint,
                     "selection": selection_label(config.as_dict()),
                     "accuracy": session.prepared.accuracy}
            todo = [n for n in names if row_key(n, model) not in done]
            if not todo:
                continue
            net = session.prepared.model
            if not hasattr(net, "attention_readout"):
                raise InputError(f"debate: {session.spec.id}'s model has no attention the "
                                 "experiments can replace (the BiLSTM models do; "
                                 "--model transformer does not)")
            base = session.base_probs
            batches = session.batches(session.examples)
            for name in todo:
                start = time.perf_counter()
                values: dict[str, list[float]] = {}
                ids: list[str] = []
                model_eval(net)
                at = 0
                for batch, labels, _ in batches:
                    part = base[at: at + len(batch)]
                    at += len(batch)
                    for key, vals in EXPERIMENTS[name].compute(net, batch, part, labels,
                                                               options).items():
                        values.setdefault(key, []).extend(vals)
                    ids.extend(batch.example_ids)
                append_jsonl(path, {"experiment": name, "model": model, "ids": ids,
                                    "values": values, "options": dataclasses.asdict(options),
                                    "seconds": round(time.perf_counter() - start, 3)})
    return path
