"""The batched perturbation engine: it owns every forward pass a metric makes.

A metric describes its perturbations as keep-masks over the original positions
of the examples in a batch; the engine erases them, forwards each distinct input
once, and returns probabilities in the order asked.

Sharing. An erased variant is named by what the model would see: its ids, mask,
segments and teacher-forced prefix, trimmed of padding. A variant seen before on
this engine — asked again by the same metric, by another metric (``aopc_morf``'s
k = 1 is ``flip_rate``'s variant; comprehensiveness' bins are AOPC steps), by another
explainer whose top tokens coincide, or by another example with the same tokens (the
empty input of every example under ``delete``) — is answered from memory, not
forwarded again. This is exact: in eval mode a row's output depends only on that row.
``rows_requested`` counts what metrics asked for, ``rows_forwarded`` what went
through the model. The memory is per engine (one model), bounded by ``max_cached``
rows and by ``max_cached_values`` stored probabilities (rows x outputs: a translation
model has 8,000 outputs per row where a classifier has 2 or 3); when full it is
emptied and filled again.

Misses are sorted by resulting length, so a chunk pads little, and forwarded in
chunks of ``chunk_size`` rows.
"""

import weakref

import torch

from faithbench.benchmark.core.api import Batch, ExplainableModel
from faithbench.benchmark.core.erasers import check_eraser, erase
from faithbench.benchmark.core.errors import InputError

MAX_CACHED = 4_000_000  # rows, ~250 bytes each with their key
MAX_CACHED_VALUES = 2**28  # stored probabilities: float32, 1 GiB


class Perturber:
    """Forwards (erased) variants of a batch in chunks of ``chunk_size`` rows,
    each distinct variant once (``share=False``: every requested row, as asked)."""

    def __init__(self, model: ExplainableModel, *, chunk_size: int = 512,
                 eraser: str = "delete", share: bool = True, max_cached: int = MAX_CACHED,
                 max_cached_values: int = MAX_CACHED_VALUES):
        if chunk_size < 1:
            raise InputError(f"chunk_size must be >= 1, got {chunk_size}")
        check_eraser(eraser)
        # a model may cap the rows of one pass (a Transformer is slower per row in big ones)
        chunk_size = min(chunk_size, getattr(model, "max_rows_per_pass", chunk_size))
        self.model, self.chunk_size, self.eraser = model, chunk_size, eraser
        self.share, self.max_cached, self.max_cached_values = share, max_cached, max_cached_values
        self.rows_requested = 0  # variants metrics asked for
        self.rows_forwarded = 0  # rows that went through the model
        self._slot: dict[bytes, int] = {}  # variant key -> row of self._store
        self._store: torch.Tensor | None = None

    @torch.no_grad()
    def probs(self, batch: Batch) -> torch.Tensor:
        """(B, C) softmax probabilities of the unperturbed batch."""
        keep = batch.mask.clone()
        rows = torch.arange(len(batch), device=batch.ids.device)
        return self.probs_of_variants(batch, rows, keep)

    @torch.no_grad()
    def probs_of_variants(
        self, batch: Batch, rows: torch.Tensor, keep: torch.Tensor, eraser: str | None = None
    ) -> torch.Tensor:
        """(N, C) probabilities of variant i = row ``rows[i]`` with ``keep[i]`` (N, T) kept."""
        how = eraser or self.eraser
        n = keep.shape[0]
        if n == 0:
            return torch.empty(0, 0)
        variants = self._erase(batch.select(rows), keep, how)
        self.rows_requested += n
        if not self.share:
            return self._forward(variants, torch.arange(n))
        keys = variant_keys(variants)
        if len(self._slot) + n > self._row_budget():
            self._slot, self._store = {}, None
        slots: list[int] = []
        new: list[int] = []
        pending: dict = {}
        for i, key in enumerate(keys):
            slot = self._slot.get(key)
            if slot is None:
                slot = pending.get(key)
                if slot is None:  # first time: forward it (once, even if asked twice here)
                    slot = pending[key] = len(self._slot) + len(pending)
                    new.append(i)
            slots.append(slot)
        if new:
            probs = self._forward(variants, torch.tensor(new, dtype=torch.long))
            self._keep(probs, len(self._slot))
            self._slot.update(pending)  # only after the forward pass succeeded
        assert self._store is not None  # every slot asked for is stored by now
        return self._store.index_select(0, torch.tensor(slots, dtype=torch.long))

    def _erase(self, batch: Batch, keep: torch.Tensor, how: str) -> Batch:
        if how != "retokenize":
            return erase(batch, keep, how, pad_id=self.model.pad_id, mask_id=self.model.mask_id)
        retokenize = getattr(self.model, "retokenize", None)
        if retokenize is None:
            raise InputError(f"eraser retokenize: model {type(self.model).__name__} has no "
                             "tokenizer to decode and re-encode text (subword models only)")
        return retokenize(erase(batch, keep, "delete", pad_id=self.model.pad_id,
                                mask_id=self.model.mask_id))

    def _forward(self, variants: Batch, which: torch.Tensor) -> torch.Tensor:
        """(len(which), C) probabilities of the already-erased rows ``which`` of
        ``variants``, forwarded in chunks sorted by length."""
        n = len(which)
        by_length = which[torch.sort(variants.mask.sum(dim=1)[which], stable=True).indices]
        position = torch.empty(len(variants), dtype=torch.long)
        position[which] = torch.arange(n)
        out: torch.Tensor | None = None
        for start in range(0, n, self.chunk_size):
            idx = by_length[start : start + self.chunk_size]
            p = torch.softmax(self.model.logits(_trim(variants.select(idx))).float(), dim=-1)
            if out is None:
                out = torch.empty(n, p.shape[1], device=p.device)
            out[position[idx]] = p
            self.rows_forwarded += len(idx)
        return torch.empty(0) if out is None else out

    def _row_budget(self, width: int | None = None) -> int:
        """Rows the memory may hold: ``max_cached``, fewer when rows are ``width`` wide
        (default: the stored rows' width, 1 before anything is stored)."""
        if width is None:
            width = 1 if self._store is None else self._store.shape[1]
        return max(1, min(self.max_cached, self.max_cached_values // max(width, 1)))

    def _keep(self, probs: torch.Tensor, first: int) -> None:
        """Store ``probs`` at rows first.. of the memory, growing it by doubling (never
        past the budget, unless one request alone needs more)."""
        probs = probs.cpu()
        need = first + len(probs)
        if self._store is None or self._store.shape[0] < need:
            size = max(need, 2 * (0 if self._store is None else len(self._store)), 1024)
            grown = torch.empty(max(need, min(size, self._row_budget(probs.shape[1]))),
                                probs.shape[1])
            if self._store is not None:
                grown[: first] = self._store[: first]
            self._store = grown
        self._store[first:need] = probs


_ENGINES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def share_engine(model: ExplainableModel, engine: Perturber) -> None:
    """Make ``engine`` the one explainers reach through ``engine_for(model)`` (an
    evaluation session shares its metrics' engine this way)."""
    _ENGINES[model] = engine


def registered_engine(model: ExplainableModel) -> Perturber | None:
    """The engine ``share_engine`` registered for ``model``, or None (also for a model
    that cannot be weakly referenced)."""
    try:
        return _ENGINES.get(model)
    except TypeError:
        return None


def forget_engine(model: ExplainableModel) -> None:
    """Drop ``model``'s engine (registered or made by ``engine_for``)."""
    try:
        _ENGINES.pop(model, None)
    except TypeError:
        pass


def engine_for(model: ExplainableModel) -> Perturber:
    """The engine shared by everything that perturbs ``model``: the session's, where
    one registered it (``share_engine``), else one made on first use and kept as long
    as the model (a plugin worker's copy of the model gets its own)."""
    engine = _ENGINES.get(model)
    if engine is None:
        engine = _ENGINES[model] = Perturber(model)
    return engine


def variant_probs(model: ExplainableModel, batch: Batch, rows: torch.Tensor,
                  keep: torch.Tensor, eraser: str = "delete") -> torch.Tensor:
    """(N, C) probabilities (on the CPU) of variant i = row ``rows[i]`` of ``batch`` with
    the positions ``keep[i]`` (N, T) kept and the others erased by ``eraser``, through
    the engine shared by everything that perturbs ``model`` (``engine_for``): each
    distinct variant is forwarded once, and one that a metric or another explainer
    forwarded before is answered from memory. What a perturbation plugin calls."""
    return engine_for(model).probs_of_variants(batch, rows, keep, eraser)


def variant_keys(batch: Batch) -> list[bytes]:
    """One key per row: what the model sees of it (ids and segments under the mask,
    -1 elsewhere, and the real prefix), cut after its last real position, so the
    same input gets the same key whatever batch width or example it came from."""
    parts = [_cut(batch.ids, batch.mask)]
    if batch.segments is not None:
        parts.append(_cut(batch.segments, batch.mask))
    if batch.prefix is not None:
        pm = batch.prefix_mask
        parts.append(_cut(batch.prefix, torch.ones_like(batch.prefix, dtype=torch.bool)
                          if pm is None else pm))
    return [b"|".join(cols) for cols in zip(*parts)]


def _cut(values: torch.Tensor, mask: torch.Tensor) -> list[bytes]:
    """Each row's values (-1 where ``mask`` is False) up to its last True, as bytes."""
    body = values.masked_fill(~mask, -1).to(torch.int32).numpy()
    cols = torch.arange(1, mask.shape[1] + 1).expand_as(mask)
    ends = torch.where(mask, cols, 0).max(dim=1).values.tolist() if mask.shape[1] else [0] * len(mask)
    return [row[:end].tobytes() for row, end in zip(body, ends)]


def _trim(batch: Batch) -> Batch:
    """Drop all-padding columns at the right so a chunk costs what its longest row costs."""
    width = max(int(batch.mask.sum(dim=1).max()), 1)
    if width == batch.ids.shape[1]:
        return batch
    cut = lambda t: None if t is None else t[:, :width]
    return batch.replace(ids=cut(batch.ids), mask=cut(batch.mask), segments=cut(batch.segments),
                         words=cut(batch.words))
