"""How a token is taken out of an input, as tensor operations on ids and masks.

``delete`` removes the tokens and closes the gap, order kept (ERASER);
``mask`` substitutes the model's unknown-word id; ``pad`` substitutes the
padding id (zero embedding). The last two keep the length, so the input stays
closer to the training distribution in length but not in content. ``retokenize``
(subword models with a tokenizer only) deletes, then decodes the remaining pieces to
text and tokenizes that text again, as text-level tools such as ferret do: the
model sees what a user would get by typing the perturbed sentence, which is not
always the remaining pieces (a word's tail glued to its neighbour re-splits). The
perturbation engine applies it (``Perturber``), since it needs the model's tokenizer.

On a decoder (``--model decoder``, a causal ``--model-path``) there is seldom a
[MASK]: ``mask`` substitutes it where the tokenizer has one (MiniLM's vocabulary, which
the decoder trained here uses), else the unknown-word token (GPT-2's is its end-of-text
token), else a filler word ``_``; ``pad`` substitutes the padding token
(a decoder's pad is often its end-of-text token), which the model attends to like a word;
``delete`` closes the gap and shortens the left-padded prompt. The template's tokens are
never erased (``faithbench.benchmark.core.models.decoder``).
"""

import torch

from faithbench.benchmark.core.api import Batch
from faithbench.benchmark.core.errors import InputError

ERASERS = ("delete", "mask", "pad", "retokenize")


def check_eraser(how: str, where: str = "") -> None:
    """An unknown eraser name is an InputError listing the known ones; ``where``
    (e.g. "metric aopc_morf: ") says who asked."""
    if how not in ERASERS:
        raise InputError(f"{where}unknown eraser {how!r}; choose one of {', '.join(ERASERS)}")


def erase(batch: Batch, keep: torch.Tensor, how: str, *, pad_id: int, mask_id: int) -> Batch:
    """Apply ``keep`` (B, T) bool (True = keep) to ``batch`` with eraser ``how``."""
    keep = keep & batch.mask
    if how == "delete":
        return _delete(batch, keep, pad_id)
    if how == "mask":
        return batch.replace(ids=torch.where(keep | ~batch.mask, batch.ids, mask_id))
    if how == "pad":
        return batch.replace(ids=torch.where(keep | ~batch.mask, batch.ids, pad_id))
    if how == "retokenize":
        raise InputError("the retokenize eraser needs the model's tokenizer: it runs in the "
                         "perturbation engine (faithbench.benchmark.core.perturb.Perturber)")
    check_eraser(how)
    raise AssertionError(how)


def _delete(batch: Batch, keep: torch.Tensor, pad_id: int) -> Batch:
    # stable sort puts kept positions first, in their original order
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
    n = keep.sum(dim=1)
    width = max(int(n.max()) if n.numel() else 0, 1)
    order = order[:, :width]
    mask = torch.arange(width, device=keep.device).unsqueeze(0) < n.unsqueeze(1)
    ids = batch.ids.gather(1, order).masked_fill(~mask, pad_id)
    def follow(values):  # per-position fields move with their tokens
        return None if values is None else values.gather(1, order).masked_fill(~mask, 0)

    return batch.replace(ids=ids, mask=mask, segments=follow(batch.segments),
                         words=follow(batch.words))
