"""Option groups, each attached only to the verbs where it means something, and the
one translation of parsed arguments into a ``RunConfig``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from faithbench.benchmark.core.api import DatasetOptions, PromptOptions
from faithbench.benchmark.core.device import PRECISIONS, resolve
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.executor import EXECUTORS
from faithbench.benchmark.core.isolation import ISOLATION
from faithbench.benchmark.plan import DEFAULT_OUT, RunConfig


def data(p: argparse.ArgumentParser, *, own: bool = True) -> None:
    """Where the task's data comes from (``own``: the text tasks' own-dataset options)."""
    g = p.add_argument_group("data")
    g.add_argument("--data-dir", help="local JSON Lines copies of the hub datasets "
                   "(also $FAITHBENCH_DATA); default: the hub")
    g.add_argument("--variant", help="task data variant, e.g. sentiment training split: "
                   "phrases (default) or sentences")
    g.add_argument("--gold-out-of-range", choices=("error", "drop"), default="error",
                   help="alignment gold links outside their sentence: stop with the file, "
                   "line and field (default), or drop and count them")
    if not own:
        return
    g = p.add_argument_group("your own dataset (tasks text, text_pair and generation)")
    g.add_argument("--dataset", metavar="PATH_OR_ID",
                     help="a JSON Lines, JSON, CSV, TSV or Parquet file, a folder of them "
                     "(train/validation/test by file name), or a hub id; missing splits are "
                     "drawn from it at random (seed 0); required by the text tasks, default: "
                     "none")
    g.add_argument("--text-column", metavar="C", help="the column of the text (a string, or "
                     "a list of tokens); required with --dataset")
    g.add_argument("--pair-column", metavar="C2", help="text_pair: the column of the "
                     "second text (required there; default: none)")
    g.add_argument("--label-column", metavar="L", help="the column of the label (a string "
                     "or an integer); required with --dataset")
    g.add_argument("--labels", metavar="A,B,C", help="the labels in output order (default: "
                     "a ClassLabel's names, else the sorted values)")
    g.add_argument("--rationale-column", metavar="R", help="token indices or a 0/1 mask per "
                     "token: references for the plausibility metrics (default: none)")
    g.add_argument("--rationale-kind", choices=("human", "planted"), default="human",
                     help="human (default): what people find plausible; planted: tokens the "
                     "label was made to depend on, a ground truth meta-eval accepts")
    g.add_argument("--continuation-column", metavar="C", help="task generation: the column "
                     "of each prompt's continuation (the text column holds the prompt); "
                     "default: the model's greedy continuation")
    g.add_argument("--max-new-tokens", type=int, metavar="N", default=None,
                     help="task generation without --continuation-column: tokens generated "
                     "per prompt (default 16)")


def model(p: argparse.ArgumentParser, *, seeds: bool = False) -> None:
    """Which model is evaluated: trained here (cached by what its training reads) or
    read from a checkpoint. ``seeds``: several model seeds (run, submit, roar); else one."""
    g = p.add_argument_group("model")
    if seeds:
        g.add_argument("--seeds", nargs="+", help="model seeds (spaces or commas; default 0); "
                       "published tables use 0 1 2")
        g.add_argument("--seed", type=int, help="one model seed: the same as --seeds N "
                       "(default 0)")
    else:
        g.add_argument("--seed", type=int, default=0, help="model seed (default 0)")
    g.add_argument("--train-limit", type=int, help="train on the first N training rows only "
                   "(default: all)")
    g.add_argument("--epochs", type=int, help="override the task's maximum epochs (default: "
                   "the task's own)")
    g.add_argument("--half-weights", action="store_true",
                   help="round the trained weights to float16 (the model still computes in "
                   "float32): half the size on disk, another model than the default; the "
                   "published release's models are trained so")
    g.add_argument("--allow-weak-model", action="store_true",
                   help="score a model the model gate refuses (validation accuracy whose "
                   "95%% CI does not clear the majority-class rate by 0.05) and mark its "
                   "entries as weak wherever they are shown; default: refuse it")
    g.add_argument("--masked-training", action="store_true",
                   help="train the task models with random masking (half of each batch "
                   "masked at a U(0,1) ratio), so erasure is in distribution for them")
    g.add_argument("--model", choices=("bilstm", "transformer", "decoder"),
                   help="model family: bilstm (default, the task's own), transformer "
                   "(all-MiniLM-L6-v2 fine-tuned here; on alignment a Transformer "
                   "encoder-decoder trained here) or decoder (a small Llama-layout decoder "
                   "trained here); part of the task id, so families never share a "
                   "leaderboard suite")
    g.add_argument("--bilstm", choices=("uniform", "orthogonal", "diversity"),
                   help="a BiLSTM of the attention debate: uniform (attention frozen at "
                   "1/n, Wiegreffe & Pinter 2019; on alignment, the encoder-decoder's), "
                   "orthogonal or diversity (Mohankumar et al. 2020); part of the task id; "
                   "default: the task's own BiLSTM")
    g.add_argument("--deceive", type=float, metavar="LAMBDA",
                   help="shortcut tasks: train the model to keep its attention off the "
                   "shortcut tokens (Pruthi et al. 2020's penalty, weight LAMBDA, e.g. 0.1 "
                   "or 1); part of the task id; default 0: the task's own model")
    g.add_argument("--model-path", help="evaluate a Hugging Face checkpoint directory (with "
                   "its tokenizer) on the task's data instead of training one: a sequence "
                   "classifier, whose labels must be the task's, or a causal LM (GPT-2, "
                   "Llama, Qwen2, Mistral layouts) read through --template (default: train "
                   "one)")
    g.add_argument("--template", help="decoders: the prompt around the input, with {text} "
                   "(a pair: {a} and {b}) and text after it, where the class is read, e.g. "
                   "'Review: {text}\\nSentiment:'; its tokens are never scored; part of the "
                   "task id (default: '{text}\\nAnswer:', a pair '{a}\\nQuestion: "
                   "{b}\\nAnswer:')")
    g.add_argument("--label-words", help="decoders, --classify prompt: one word per label, "
                   "comma-separated, in the task's label order, whose next-token logits are "
                   "the class scores (default: the label names)")
    g.add_argument("--classify", choices=("prompt", "head"), default=None,
                   help="decoders: prompt (default: the label words' next-token logits) or "
                   "head (a linear layer on the last position: a ...ForSequenceClassification)")
    g.add_argument("--layers", type=int, help="transformer family: keep only the first N "
                   "encoder layers (small configurations for tests; default: all)")
    g.add_argument("--device", default="auto", help="where models train and run: auto "
                   "(default: the first CUDA GPU where there is one, else the CPU), cpu, "
                   "cuda, cuda:N or mps; a model trained on a GPU is another checkpoint, "
                   "and records name the device")
    g.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="transformer family: bf16 runs the model's passes under autocast "
                   "(a suite of its own: it changes every value); default fp32")


def examples(p: argparse.ArgumentParser, *, sample: bool = True) -> None:
    """Which examples of which split are scored (``sample``: the seeded random draw;
    align and score --alignments read gold pairs in file order and take none)."""
    g = p.add_argument_group("examples")
    g.add_argument("--split", help="split to explain/score (default: the task's eval split)")
    g.add_argument("--limit", type=int, help="only the first N examples of the split (on a "
                   "file sorted by label, a biased sample: see --sample); default: all")
    if sample:
        g.add_argument("--sample", type=int, help="N examples of the split drawn at random "
                       "(seeded by --sample-seed), in split order; with --limit L, drawn from "
                       "the first L; alignment draws sentence pairs; default: all")
        g.add_argument("--sample-seed", type=int, default=0, help="seed of --sample (default 0)")


def explainers(p: argparse.ArgumentParser) -> None:
    """How explainers run: their seed, budget and confinement."""
    g = p.add_argument_group("explainers")
    g.add_argument("--explainer-seed", type=int, help="seed of stochastic explainers' "
                   "generators (default: the model seed; another value is part of the "
                   "result's key)")
    plugins(g)


def plugins(g) -> None:
    g.add_argument("--time-budget", type=float, default=5.0, help="a plugin explainer's "
                   "seconds per example of up to 32 tokens, scaled with length (default 5; "
                   "reference explainers have none)")
    g.add_argument("--isolation", choices=ISOLATION, default="auto",
                   help="where explainers run: auto (default) = every plugin in a worker "
                   "process, the reference explainers in this one; process = all in workers "
                   "(a plugin never runs in faithbench's own process)")
    g.add_argument("--sandbox", action="store_true",
                   help="run plugin workers inside bubblewrap: no network, no file system "
                   "beyond the plugin and a read-only Python environment (for strangers' "
                   "submissions; needs `bwrap`)")
    g.add_argument("--plugin-memory", type=float, default=8.0, metavar="GIB",
                   help="a plugin worker's address-space limit in GiB (default 8)")


def engine(p: argparse.ArgumentParser) -> None:
    """Batching: changes speed and memory, never a value beyond float32 rounding."""
    g = p.add_argument_group("batching")
    g.add_argument("--batch-size", type=int, default=32, help="examples per explain/metric "
                   "call (default 32)")
    g.add_argument("--chunk-size", type=int, default=512, help="rows per forward pass "
                   "(default 512)")


def executor(p: argparse.ArgumentParser) -> None:
    """Where jobs run: a run's model trainings and (model, explainer) units, ROAR's
    retrainings."""
    g = p.add_argument_group("jobs")
    g.add_argument("--executor", choices=EXECUTORS, default="in-process",
                   help="in-process (default), pool (worker processes on this machine) or "
                   "ray (a cluster): `run` trains its models and computes each explainer's "
                   "units on a model as jobs, `roar` its retrainings; the results are the "
                   "same")
    g.add_argument("--workers", type=int, help="pool size, or a new local Ray cluster's "
                   "CPUs (default: all cores)")
    g.add_argument("--address", help="address of a running Ray cluster (ray start --head "
                   "prints it); default: start a local one")


def progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-progress", action="store_true",
                   help="hide progress bars. They are drawn only when stderr is a terminal "
                   "(or in a notebook); FAITHBENCH_PROGRESS=1 draws them anyway (e.g. into "
                   "a log), FAITHBENCH_PROGRESS=0 never")


def display(p: argparse.ArgumentParser) -> None:
    """How the printed tables name explainers."""
    p.add_argument("--full-ids", action="store_true",
                   help="printed tables name explainers by their full ids with every "
                   "parameter; default: by name, with the parameters that tell two settings "
                   "apart (result files always keep the ids)")


def results(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")


def names(p: argparse.ArgumentParser, what: str, default: list[str], help_: str) -> None:
    p.add_argument(f"--{what}", nargs="+", default=default, help=help_)


def split_list(values) -> tuple[str, ...]:
    """Names given with spaces, commas or both; commas inside ``[...]`` (metric
    parameters such as ``bins=0.1,0.5``) do not split.

    >>> split_list(["random,gradient", "comprehensiveness[bins=0.1,0.5],sufficiency"])
    ('random', 'gradient', 'comprehensiveness[bins=0.1,0.5]', 'sufficiency')
    """
    out = []
    for value in values or ():
        depth, item = 0, ""
        for ch in value:
            depth += {"[": 1, "]": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                out.append(item)
                item = ""
            else:
                item += ch
        out.append(item)
    return tuple(v.strip() for v in out if v.strip())


OWN_DATA_FLAGS = ("text_column", "pair_column", "label_column", "labels", "rationale_column",
                  "continuation_column", "max_new_tokens")


def dataset(args) -> DatasetOptions | None:
    """``--dataset`` and its columns, checked together (the text and text_pair tasks)."""
    source = getattr(args, "dataset", None)
    given = [f for f in OWN_DATA_FLAGS if getattr(args, f, None)]
    if source is None:
        if given:
            raise InputError(f"--{given[0].replace('_', '-')} names a column of your own "
                             "dataset: give --dataset PATH_OR_ID too (with --tasks text or "
                             "text_pair)")
        return None
    asked = getattr(args, "tasks", None) or [getattr(args, "task", None)]
    generation = all(t == "generation" for t in asked)
    needed = ("text_column",) if generation else ("text_column", "label_column")
    missing = [f"--{f.replace('_', '-')}" for f in needed if not getattr(args, f, None)]
    if missing:
        what = "the prompt" if generation else "the text and the label"
        raise InputError(f"--dataset {source}: give {' and '.join(missing)} (which columns "
                         f"hold {what})")
    steps = getattr(args, "max_new_tokens", None)
    if steps is not None and (steps < 1 or args.continuation_column):
        raise InputError(f"--max-new-tokens {steps}: give a number >= 1, and only where the "
                         "model generates (no --continuation-column)")
    labels = tuple(x.strip() for x in args.labels.split(",")) if args.labels else None
    if labels is not None and not all(labels):
        raise InputError(f"--labels {args.labels}: an empty label name")
    return DatasetOptions(source=source, text=args.text_column, label=args.label_column,
                          pair=args.pair_column, labels=labels, rationale=args.rationale_column,
                          rationale_kind=args.rationale_kind,
                          continuation=getattr(args, "continuation_column", None),
                          generate=steps or 16)


def prompt(args) -> PromptOptions | None:
    """``--template``, ``--label-words`` and ``--classify`` (decoders), None if none given."""
    template, words = getattr(args, "template", None), getattr(args, "label_words", None)
    classify = getattr(args, "classify", None)
    if template is None and words is None and classify is None:
        return None
    labels = tuple(w.strip() for w in words.split(",")) if words else None
    if labels is not None and not all(labels):
        raise InputError(f"--label-words {words}: an empty word")
    if template is not None:
        template = template.replace("\\n", "\n")  # a shell's literal \n is a new line
    return PromptOptions(template=template, label_words=labels, classify=classify or "prompt")


def seeds(args) -> tuple[int, ...]:
    """The model seeds: ``--seeds`` and/or ``--seed`` (which must agree, so a seed asked
    for is never silently replaced), default 0."""
    values: list[str] = getattr(args, "seeds", None) or []
    seed = getattr(args, "seed", None)
    try:
        several = tuple(int(v) for v in split_list(values))
    except ValueError:
        raise InputError(f"--seeds: expected integers, got {' '.join(values)!r}") from None
    if several and seed is not None and several != (seed,):
        raise InputError(f"--seed {seed} and --seeds {' '.join(map(str, several))} disagree; "
                         "give one of them")
    return several or (0 if seed is None else seed,)


def config(args) -> RunConfig:
    """The run configuration of parsed ``args``; an option a verb does not take keeps
    its default."""
    def g(name: str, default: Any = None) -> Any:
        return getattr(args, name, default)

    return RunConfig(
        tasks=split_list(g("tasks")) or ("synthetic",),
        explainers=split_list(g("explainers")),
        metrics=split_list(g("metrics")),
        data_dir=g("data_dir"),
        out=g("out") or DEFAULT_OUT,
        fresh=bool(g("fresh")),
        seeds=seeds(args),
        split=g("split"),
        limit=g("limit"),
        sample=g("sample"),
        sample_seed=g("sample_seed") or 0,
        variant=g("variant"),
        gold_out_of_range=g("gold_out_of_range", "error"),
        train_limit=g("train_limit"),
        epochs=g("epochs"),
        masked_training=bool(g("masked_training")),
        model=g("model"),
        model_path=g("model_path"),
        model_layers=g("layers"),
        bilstm=g("bilstm"),
        deceive=g("deceive") or None,
        executor=g("executor", "in-process"),
        workers=g("workers"),
        address=g("address"),
        batch_size=g("batch_size", 32),
        chunk_size=g("chunk_size", 512),
        time_budget_s=g("time_budget", 5.0),
        isolation=g("isolation", "auto"),
        sandbox=bool(g("sandbox")),
        plugin_memory_gib=g("plugin_memory", 8.0),
        progress=not g("no_progress", False),
        notes=g("notes", "") or "",
        explainer_seed=g("explainer_seed"),
        device=str(resolve(g("device"))) if hasattr(args, "device") else "cpu",
        precision=g("precision") or "fp32",
        half_weights=bool(g("half_weights")),
        allow_weak_model=bool(g("allow_weak_model")),
        dataset=dataset(args),
        prompt=prompt(args),
    )


def checked(args) -> RunConfig:
    """``config(args)`` once every name in it is known (``check_names``)."""
    cfg = config(args)
    check_names(args, cfg)
    return cfg


def check_names(args, cfg: RunConfig) -> None:
    """Every task, metric and explainer name the verb was given, looked up before it
    prepares a model: a typo is bad input (exit 2), whichever kind of name it is."""
    from dataclasses import replace

    from faithbench.benchmark.runner import check_names as check

    task = getattr(args, "task", None)
    refs = [r for r in (getattr(args, "explainer", None), getattr(args, "submission", None)) if r]
    check(replace(cfg, tasks=(task,) if task else cfg.tasks,
                  explainers=cfg.explainers + tuple(refs)))


def read_given(paths: list[str], flag: str, names: tuple[str, ...], read) -> list:
    """Everything ``read`` finds in each of ``paths``: the file itself, or the first of
    ``names`` inside the folder; a path holding none is an input error naming ``flag``."""
    found = []
    for given in map(Path, paths):
        path = next((p for p in (given, *(given / n for n in names)) if p.is_file()), None)
        if path is None:
            raise InputError(f"{flag} {given}: no {' or '.join(names)} there")
        found += read(path)
    return found
