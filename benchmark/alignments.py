"""The alignment verbs: word alignments read off an explainer (one direction, or both
symmetrized) or made by a reference aligner, written one line per sentence pair; and
alignments produced anywhere scored against the gold — optionally submitted as a
leaderboard entry that needs no model (a reference row: diagonal, eflomal, fast_align).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from pathlib import Path

import torch

from faithbench import tasks as task_registry
from faithbench.benchmark.core import stats
from faithbench.benchmark.core.api import ALIGNMENT
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.links import chosen, link_counts, symmetrize, transpose
from faithbench.benchmark.core.provenance import environment
from faithbench.benchmark.core.records import (
    Provenance,
    ResultRecord,
    Timing,
    read_jsonl,
    write_jsonl_atomic,
)
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer
from faithbench.benchmark.session import confinement, open_session
from faithbench.leaderboard.suite import MODEL_FREE


def alignment_task(name: str):
    task = task_registry.get_task(name)
    if task.spec.kind != ALIGNMENT:
        raise InputError(f"this verb needs an alignment task; {name!r} is {task.spec.kind}")
    return task


def align_to_file(task: str, explainer: str | None, out_file: str, config: RunConfig, *,
                  links: str = "argmax", fraction: float | None = None,
                  aligner: str | None = None, combine: str | None = None,
                  from_run: str | None = None) -> int:
    """Word alignments read off an explainer — or made by a reference ``aligner``
    (``diagonal``, ``eflomal``), which needs no trained model — one object per sentence
    pair, ``id`` and ``links`` as 0-based [i, j] pairs (i source, j target), sorted.
    ``combine`` (intersect, grow-diag-final) also explains the task's other direction
    (its own model) and symmetrizes the two. ``from_run``: the ``--out`` folder of a
    ``faithbench run`` whose cached explanations to reuse (or fill). Returns the count."""
    chosen_task = alignment_task(task)
    if aligner is not None:
        if combine:
            raise InputError("--symmetrize combines two explainer directions; a reference "
                             "aligner has its own (eflomal: grow-diag-final)")
        options = config.evaluation.task_options(config.seeds[0], config.device)
        found = chosen_task.reference_alignments(aligner, options,
                                                 chosen_task.spec.split(config.split), config.limit)
        write_jsonl_atomic(Path(out_file), [{"id": k, "links": v} for k, v in found.items()])
        return len(found)
    if from_run:
        config = replace(config, out=from_run)
    assert explainer is not None  # argparse: --explainer or --aligner
    found, sizes = explainer_links(task, explainer, config, links, fraction, bool(from_run))
    if combine:
        back, _ = explainer_links(chosen_task.other_direction, explainer, config, links, fraction,
                                  bool(from_run))
        found = {k: symmetrize(v, transpose(back[k]), *sizes[k], combine)
                 for k, v in found.items()}
    write_jsonl_atomic(Path(out_file), [{"id": k, "links": sorted(map(list, v))}
                                        for k, v in found.items()])
    return len(found)


def explainer_links(task: str, explainer: str, config: RunConfig, links: str,
                    fraction: float | None, cache: bool = False
                    ) -> tuple[dict[str, set], dict[str, tuple[int, int]]]:
    """({sentence id: links}, {sentence id: (source, target) lengths}) of ``explainer``
    on ``task``'s model: one link set per target word, read off its scores by ``links``."""
    session = open_session(task, config)
    if not cache:  # as examples, not a split: nothing is cached or kept part-done under
        session = session.on(session.examples)  # ``config.out``, here the output file
    explained = session.explain(resolve_explainer(explainer, confinement(config)), cache=cache)
    return links_read(session, explained.scores, links, fraction)


def links_read(session, scores, links: str, fraction: float | None
               ) -> tuple[dict[str, set], dict[str, tuple[int, int]]]:
    """({sentence id: links}, {sentence id: (source, target) lengths}) read off each
    alignment row's ``scores`` of the session's examples by ``links``."""
    found: dict[str, set] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for e, s in zip(session.examples, scores):
        row = torch.tensor([s])
        pick = chosen(row, torch.ones_like(row, dtype=torch.bool), links, fraction)[0]
        sentence, j = session.prepared.group_of(e), (e.extras or {})["position"]
        found.setdefault(sentence, set()).update((i, j) for i in pick.nonzero().flatten().tolist())
        sizes[sentence] = (len(e.tokens), max(j + 1, sizes.get(sentence, (0, 0))[1]))
    return found, sizes


def score_alignments(task: str, alignments: str, config: RunConfig, *,
                     submit_as: str | None = None, entries: str | None = None) -> list[dict]:
    """AER, precision and recall of alignments produced anywhere (``{"id", "links"}`` per
    sentence pair, 0-based [i, j]) against the task's gold of ``config.split``; every
    gold pair must be present once. One summary row per metric, bootstrap over sentences.
    ``submit_as`` writes them as a leaderboard entry of that name under ``entries``: no
    model made the links, so its suite names the data and split but no checkpoint. Only
    the gold is read: no parallel corpus is needed."""
    from faithbench.metrics.alignment import AER_METRIC, PRECISION_METRIC, RECALL_METRIC

    chosen_task = alignment_task(task)  # the gold only: no model is prepared
    split = chosen_task.spec.split(config.split)
    options = config.evaluation.task_options(config.seeds[0], config.device)
    gold_pairs, _, training, held = chosen_task.read(options)
    if split not in gold_pairs:
        raise InputError(f"task {task!r} has no split {split!r} (has: {', '.join(gold_pairs)})")
    gold = {p.id: p for p in gold_pairs[split][: config.limit or None]}
    counts = _counts(alignments, gold, split)
    metrics = (AER_METRIC, PRECISION_METRIC, RECALL_METRIC)
    out, estimates = [], []
    for metric in metrics:
        est = stats.as_estimate(stats.corpus_bootstrap(list(counts.values()),
                                                       metric.spec.aggregation))
        estimates.append(est)
        out.append({"metric": metric.spec.name, "direction": metric.spec.direction,
                    **est.as_dict()})
    if submit_as:
        from faithbench.leaderboard.entry import write_entry

        if not entries:
            raise InputError("--submit-as needs --entries DIR (the leaderboard folder)")
        digest = hashlib.sha256(Path(alignments).read_bytes()).hexdigest()
        provenance = Provenance(**environment(), checkpoint=MODEL_FREE,
                                alignments=str(alignments), alignments_sha256=digest,
                                data_fingerprint=chosen_task.fingerprint(gold_pairs, training,
                                                                         held))
        results, rows = [], []
        task_id = chosen_task.spec_for(options).id  # the variant in the id, as a run's records
        for metric, est in zip(metrics, estimates):
            agg = metric.spec.aggregation
            results.append(ResultRecord.build(
                metric.spec, est,
                key=content_hash({"alignments": digest, "metric": metric.spec.id,
                                  "task": task_id, "split": split, "limit": config.limit}),
                task=task_id, model_seed=config.seeds[0], explainer=submit_as, split=split,
                per_example_file="", provenance=provenance, timing=Timing()))
            assert agg is not None  # AER, precision and recall are corpus-level
            for key, c in counts.items():
                value = float(agg(c))
                rows.append({"task": task_id, "model_seed": config.seeds[0],
                             "metric": metric.spec.id, "id": key, "stats": list(map(float, c)),
                             "value": value if math.isfinite(value) else None})
        spec = {"id": submit_as, "name": submit_as, "kind": "alignments",
                "source": str(alignments), "sha256": digest}
        write_entry(entries, explainer_spec=spec, results=results, per_example=rows,
                    notes=config.notes)
    return out


def _counts(alignments: str, gold: dict, split: str) -> dict[str, tuple[int, int, int, int]]:
    """{pair id: (|A∩S|, |A∩P|, |A|, |S|)} of a checked alignments file, in gold order."""
    if not Path(alignments).is_file():
        raise InputError(f"{alignments}: no such file (expected JSON Lines of id, links)")
    rows = read_jsonl(Path(alignments))  # not UTF-8: NotUtf8Error with line and offset
    counts = {}
    for line, row in enumerate(rows, start=1):
        for name in ("id", "links"):
            if name not in row:
                raise DataFileError(alignments, line, name, "missing field")
        key = str(row["id"])
        if key not in gold:
            raise DataFileError(alignments, line, "id", f"no gold sentence pair {key!r} in "
                                f"split {split!r}")
        if key in counts:
            raise DataFileError(alignments, line, "id", f"sentence pair {key!r} appears twice")
        pair, found = gold[key], set()
        for link in row["links"] if isinstance(row["links"], list) else [None]:
            if (not isinstance(link, list) or len(link) != 2
                    or not all(isinstance(x, int) and not isinstance(x, bool) for x in link)):
                raise DataFileError(alignments, line, "links", f"expected [i, j] pairs, got {link!r}")
            if not (0 <= link[0] < len(pair.src) and 0 <= link[1] < len(pair.tgt)):
                raise DataFileError(alignments, line, "links", f"link {link} is outside the "
                                    f"pair ({len(pair.src)} source, {len(pair.tgt)} target tokens)")
            found.add(tuple(link))
        counts[key] = link_counts(found, pair.sure, pair.possible)
    missing = [k for k in gold if k not in counts]
    if missing:
        raise DataFileError(alignments, None, "id", f"{len(missing)} gold pairs have no line "
                            f"(first: {', '.join(missing[:5])}); give every pair, links [] if none")
    return {k: counts[k] for k in gold}
