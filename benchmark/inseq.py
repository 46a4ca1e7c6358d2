"""Attributions saved by Inseq (``FeatureAttributionOutput.save``), read as the rows of a
generation task's explanations file, so an Inseq user's attributions are scored without
running anything again (``faithbench score --task generation --inseq out.json``).

What Inseq writes (its ``inseq/data/attribution.py``): a JSON object whose
``sequence_attributions`` list holds, per attributed sequence, the ``target`` tokens
(``{"token", "id"}`` each; for a decoder-only model the prompt and the generated
tokens), ``attr_pos_start`` (the first generated position) and ``attr_pos_end``, and
``target_attributions``: a (len(target), steps[, ...]) tensor whose column j scores the
tokens before position ``attr_pos_start + j`` for generating it. Tensors are base64
safetensors (key ``attribution``, stored as float32, float16 or float8); with
``use_primitives=False`` (the default) each object is wrapped as ``{"__instance_type__",
"attributes"}``; ``compress=True`` gzips the file; ``split_sequences=True`` writes one
file per sequence. All of these are read here; plain nested lists are accepted for a
tensor too.

A granular attribution (one score per hidden unit, a third dimension) is reduced by the
L2 norm over that dimension, as Inseq's default ``vnorm`` aggregator does; a
multi-dimensional one (attention: layers and heads, ``_num_dimensions`` > 0) by the mean
over its extra dimensions, as Inseq's default does. Leading special tokens (BOS, [CLS])
are constants of the model here, never features: their scores are dropped.
Encoder–decoder outputs (``source_attributions``) are refused: the generation task
scores decoder-only checkpoints.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from pathlib import Path
from typing import Any

import torch

from faithbench.benchmark.core.errors import DataFileError


def read_inseq(path: str | Path, tokenizer, n_outputs: int) -> list[dict]:
    """The explanation rows (``id``, ``sequence``, ``step``, ``tokens``, ``scores``,
    ``target``, ``target_token``, ``prompt_length``) of every generated token of every
    sequence in Inseq's file ``path``; errors name the file, the sequence and the field."""
    data = _unwrap(_load(Path(path)))
    if not isinstance(data, dict) or not isinstance(data.get("sequence_attributions"), list):
        raise DataFileError(str(path), None, "sequence_attributions", "not an Inseq attribution "
                            "file (FeatureAttributionOutput.save writes a list of them)")
    special = set(tokenizer.all_special_ids)
    stem = Path(path).name.removesuffix(".gz").removesuffix(".json")
    rows = []
    sequences = data["sequence_attributions"]
    for k, seq in enumerate(sequences):
        seq = _unwrap(seq)
        name = f"{stem}-{k}" if len(sequences) > 1 else stem
        rows += _rows(str(path), name, seq, special, tokenizer, n_outputs)
    if not rows:
        raise DataFileError(str(path), None, "sequence_attributions", "no generated token "
                            "to score")
    return rows


def _rows(path: str, name: str, seq: dict, special: set, tokenizer, n_outputs: int
          ) -> list[dict]:
    where = f"sequence {name}"
    if seq.get("source_attributions") is not None:
        raise DataFileError(path, None, f"{where}: source_attributions", "an encoder-decoder's "
                            "attributions; the generation task scores decoder-only models")
    if seq.get("target_attributions") is None:
        raise DataFileError(path, None, f"{where}: target_attributions", "missing (save the "
                            "attributions of the generated tokens)")
    ids = [int(_unwrap(t)["id"]) for t in seq["target"]]
    bad = next((i for i in ids if not 0 <= i < n_outputs), None)
    if bad is not None:
        raise DataFileError(path, None, f"{where}: target", f"token id {bad} is outside the "
                            f"model's vocabulary of {n_outputs}: attributions of another model")
    scores = _reduced(_tensor(seq["target_attributions"], path, where),
                      int(seq.get("_num_dimensions") or 0))
    start = int(seq.get("attr_pos_start", 0))
    steps = min(scores.shape[1], len(ids) - start)
    lead = 0
    while lead < start and ids[lead] in special:
        lead += 1
    pieces = tokenizer.convert_ids_to_tokens(ids)
    rows = []
    for j in range(steps):
        at = start + j
        column = scores[lead:at, j].tolist()
        if not column:
            raise DataFileError(path, None, f"{where}: target", f"step {j} has no token before "
                                "it but special ones: nothing to attribute")
        if not all(math.isfinite(v) for v in column):
            raise DataFileError(path, None, f"{where}: target_attributions",
                                f"step {j} has a NaN or infinite score for a token before it")
        rows.append({"id": f"{name}-{j}", "sequence": name, "step": j,
                     "tokens": pieces[lead:at], "scores": column, "target": ids[at],
                     "target_token": pieces[at], "prompt_length": start - lead})
    return rows


def _load(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataFileError(str(path), None, None, f"cannot read it ({exc.strerror})") from None
    if raw[:2] == b"\x1f\x8b":  # gzip (compress=True)
        raw = gzip.decompress(raw)
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFileError(str(path), getattr(exc, "lineno", None), None,
                            f"not JSON ({exc})") from None


def _unwrap(obj: Any) -> Any:
    """An object as saved with ``use_primitives=False`` is ``{"__instance_type__": ...,
    "attributes": {...}}``; with ``use_primitives=True`` it is the attributes alone."""
    if isinstance(obj, dict) and "__instance_type__" in obj:
        return obj.get("attributes", {})
    return obj


def _tensor(value: Any, path: str, where: str) -> torch.Tensor:
    """A saved tensor: a base64 safetensors blob (key ``attribution``), or nested lists."""
    if isinstance(value, str):
        from safetensors.torch import load
        try:
            return load(base64.b64decode(value))["attribution"].to(torch.float64)
        except Exception as exc:  # noqa: BLE001 — any decoding failure: name the field
            raise DataFileError(path, None, f"{where}: target_attributions",
                                f"not a base64 safetensors tensor ({exc})") from None
    if isinstance(value, dict) and "__ndarray__" in value:
        value = value["__ndarray__"]
    try:
        t = torch.tensor(value, dtype=torch.float64)
    except (TypeError, ValueError) as exc:
        raise DataFileError(path, None, f"{where}: target_attributions",
                            f"not a tensor ({exc})") from None
    if t.dim() < 2:
        raise DataFileError(path, None, f"{where}: target_attributions",
                            f"expected (tokens, steps[, ...]), got shape {tuple(t.shape)}")
    return t


def _reduced(scores: torch.Tensor, extra_dims: int) -> torch.Tensor:
    """(tokens, steps): a granular tensor's L2 norm over its last dimension (Inseq's
    ``vnorm``), a multi-dimensional one's mean over its extra dimensions."""
    if scores.dim() == 2:
        return scores
    if extra_dims > 0:
        return scores.flatten(2).mean(dim=2)
    return scores.flatten(2).norm(dim=2)
