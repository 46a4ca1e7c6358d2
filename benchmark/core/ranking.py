"""Token orderings by importance. Ties are broken by position (earlier first),
everywhere, through this one module, so every metric sees the same order."""

import torch


def importance_order(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T) positions from most to least important; padded positions come last.

    >>> importance_order(torch.tensor([[0.1, 0.5, 0.5, 9.0]]), torch.tensor([[1, 1, 1, 0]]).bool())
    tensor([[1, 2, 0, 3]])
    """
    keyed = scores.masked_fill(~mask, float("-inf"))
    # stable sort on the negated key keeps equal scores in position order
    return torch.sort(-keyed, dim=1, stable=True).indices


def top_k_mask(scores: torch.Tensor, mask: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(B, T) bool, True at the k[b] most important real tokens of row b.

    >>> top_k_mask(torch.tensor([[3.0, 1.0, 2.0]]), torch.ones(1, 3, dtype=torch.bool), torch.tensor([2]))
    tensor([[ True, False,  True]])
    """
    order = importance_order(scores, mask)
    rank = torch.empty_like(order)
    arange = torch.arange(order.shape[1], device=order.device).expand_as(order)
    rank.scatter_(1, order, arange)  # rank[b, t] = place of token t in the order
    k = torch.as_tensor(k, device=scores.device).reshape(-1, 1)
    return (rank < k) & mask


def least_k_mask(scores: torch.Tensor, mask: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(B, T) bool, True at the k[b] least important real tokens (LeRF order)."""
    n = mask.sum(dim=1)
    k = torch.as_tensor(k, device=scores.device)
    return mask & ~top_k_mask(scores, mask, n - k)
