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
- ``vashishth``, ``vashishth_mt``: attention replaced at inference, Vashishth et al.
  2019 (``vashishth``); on a translation model, at every decoding step, scored by BLEU.
- ``wp_uniform``, ``wp_seeds``, ``wp_diagnostic``: Wiegreffe & Pinter 2019's baselines
  (``wiegreffe_pinter``) and their diagnostic MLP (``diagnostic``); ``wp_adversary``
  their adversarially trained model (``adversary``).
- ``mohankumar``: conicity, accuracy and the comprehensiveness of attention and saliency
  on the model of the run, vanilla or ``--bilstm orthogonal`` / ``diversity``
  (``mohankumar``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.records import append_jsonl, read_jsonl

VALUES = "values.jsonl"


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One experiment: ``compute(model, batch, base_probs, labels, options)`` -> per
    example quantities {name: [value per row]}, batch by batch; or, for one that needs
    other models, ``on_session(context)`` -> the same for the session's examples.
    ``paper`` cites it; ``skip(context)`` says why it does not apply (None: it does)."""

    name: str
    paper: str
    compute: Callable[..., dict[str, list[float]]] | None = None
    on_session: Callable[[Context], Any] | None = None
    skip: Callable[[Context], str | None] = lambda context: None


@dataclasses.dataclass
class Context:
    """One model of the run: its session, the config, and the run's first seed."""

    task: str
    session: Any
    config: Any
    seed: int
    first_seed: int

    def open_variant(self, variant: str | None, seed: int | None = None):
        """The session of another model (``--bilstm`` variant, seed) on the same examples."""
        from dataclasses import replace

        from faithbench.benchmark.session import open_session

        other = open_session(self.task, replace(self.config, bilstm=variant),
                             self.seed if seed is None else seed)
        same = [e.id for e in other.examples] == [e.id for e in self.session.examples]
        return other if same else other.on(list(self.session.examples))


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


def _vashishth_mt(context: Context):
    """BLEU under each alteration and of the uniform-trained model (trained beside the
    task's own, ``--bilstm uniform``), and the AER of the attention's links."""
    from faithbench.benchmark.debate import vashishth
    prepared = context.session.prepared
    wanted = {e.extras["sentence"] for e in context.session.examples}
    pairs = [p for p in prepared.gold[context.session.split] if p.id in wanted]
    ids = [p.id for p in pairs]
    values = vashishth.translation(prepared, pairs)
    if context.config.bilstm is None:
        uniform = context.open_variant("uniform").prepared
        values["bleu_uniform_trained"] = vashishth.translation(uniform, pairs,
                                                               ("learned",))["bleu_learned"]
    return {**values, **vashishth.alignment_error(context.session, ids)}, ids


def _needs_translation(context: Context) -> str | None:
    if not hasattr(context.session.prepared, "translate"):
        return "BLEU needs a translation model (the alignment tasks)"
    return None


def _wp_uniform(context: Context):
    from faithbench.benchmark.debate import wiegreffe_pinter
    return wiegreffe_pinter.uniform(context.session, context.open_variant)


def _wp_seeds(context: Context):
    from faithbench.benchmark.debate import wiegreffe_pinter
    base = context.open_variant(context.config.bilstm, context.first_seed)
    return wiegreffe_pinter.seeds(context.session, base)


def _wp_diagnostic(context: Context):
    from faithbench.benchmark.debate import diagnostic
    prepared = context.session.prepared
    return {f"correct_{source}": diagnostic.correct(
        diagnostic.fit(prepared, source, context.seed), context.session)
        for source in diagnostic.SOURCES}


def _wp_adversary(context: Context):
    from faithbench.benchmark.debate import adversary
    train_config = context.session.prepared.config.get("train", {})
    from faithbench.benchmark.core.models.training import TrainConfig
    known = {k: v for k, v in train_config.items() if k in TrainConfig.__dataclass_fields__}
    return adversary.frontier(context.session, TrainConfig(**known), context.seed)


def _first_seed_only(context: Context) -> str | None:
    if context.seed != context.first_seed:
        return "one adversary per trade-off, on the first seed's model (each trains a model)"
    return _classifiers_only(context)


def _mohankumar(context: Context):
    from faithbench.benchmark.debate import mohankumar
    return mohankumar.faithfulness(context.session)


def _classifiers_only(context: Context) -> str | None:
    if hasattr(context.session.prepared, "translate"):
        return "it trains or measures a classifier's BiLSTM"
    return None


def _needs_the_plain_bilstm(context: Context) -> str | None:
    if context.config.bilstm is not None:
        return "the uniform baseline is trained beside the task's own BiLSTM"
    return _classifiers_only(context)


def _needs_another_seed(context: Context) -> str | None:
    if context.seed == context.first_seed:
        return "the first seed is the base the others are compared with"
    return None


JW = "Jain & Wallace 2019, Attention is not Explanation (NAACL)"
WP = "Wiegreffe & Pinter 2019, Attention is not not Explanation (EMNLP)"
MH = "Mohankumar et al. 2020, Towards Transparent and Explainable Attention Models (ACL)"
SS = "Serrano & Smith 2019, Is Attention Interpretable? (ACL)"
VA = "Vashishth, Upadhyay, Tomar & Faruqui 2019, Attention Interpretability Across NLP Tasks"
EXPERIMENTS = {e.name: e for e in (
    Experiment("jw_correlation", JW, _jw_correlation),
    Experiment("jw_permutation", JW, _jw_permutation),
    Experiment("jw_adversarial", JW, _jw_adversarial),
    Experiment("ss_single", SS, _ss_single),
    Experiment("ss_multiple", SS, _ss_multiple),
    Experiment("vashishth", VA, _vashishth),
    Experiment("vashishth_mt", VA, on_session=_vashishth_mt, skip=_needs_translation),
    Experiment("wp_uniform", WP, on_session=_wp_uniform, skip=_needs_the_plain_bilstm),
    Experiment("wp_seeds", WP, on_session=_wp_seeds, skip=_needs_another_seed),
    Experiment("wp_diagnostic", WP, on_session=_wp_diagnostic, skip=_classifiers_only),
    Experiment("wp_adversary", WP, on_session=_wp_adversary, skip=_first_seed_only),
    Experiment("mohankumar", MH, on_session=_mohankumar, skip=_classifiers_only),
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


def strict_json(values: dict[str, list[float]]) -> dict[str, list[float | None]]:
    """Undefined values (NaN) as ``null``: the file stays standard JSON, which strict
    parsers (orjson, browsers, jq) read; ``tables.Rows`` turns them back into NaN."""
    return {k: [None if math.isnan(v) else v for v in vals] for k, vals in values.items()}


def done_keys(path: Path) -> set[tuple]:
    return {row_key(r["experiment"], r["model"]) for r in read_jsonl(path)} if path.exists() \
        else set()


def _batchwise(experiment: Experiment, session, options: Options
               ) -> tuple[dict[str, list[float]], list[str]]:
    """``experiment.compute`` over the session's batches, concatenated."""
    assert experiment.compute is not None
    base = session.base_probs
    values: dict[str, list[float]] = {}
    ids: list[str] = []
    at = 0
    for batch, labels, _ in session.batches(session.examples):
        part = base[at: at + len(batch)]
        at += len(batch)
        for key, vals in experiment.compute(session.prepared.model, batch, part, labels,
                                            options).items():
            values.setdefault(key, []).extend(vals)
        ids.extend(batch.example_ids)
    return values, ids


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
            context = Context(task, session, config, seed, config.seeds[0])
            for name in todo:
                experiment = EXPERIMENTS[name]
                if experiment.skip(context):
                    continue
                start = time.perf_counter()
                model_eval(net)
                if experiment.on_session is not None:
                    found = experiment.on_session(context)  # values, or (values, ids)
                    values, ids = (found if isinstance(found, tuple)
                                   else (found, [e.id for e in session.examples]))
                else:
                    values, ids = _batchwise(experiment, session, options)
                append_jsonl(path, {"experiment": name, "model": model, "ids": ids,
                                    "values": strict_json(values),
                                    "options": dataclasses.asdict(options),
                                    "seconds": round(time.perf_counter() - start, 3)})
    return path
