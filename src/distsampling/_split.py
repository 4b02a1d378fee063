r"""The split arithmetic of torch's DistributedSampler: the epoch's order, its padded (or cut)
length, and the positions each rank reads (References: torch/utils/data/distributed.py)."""

from __future__ import annotations

import torch

from ._checks import _index_dtype, check_bool, check_int, check_int64, check_seed, resolve_world


def split_sizes(n: int, num_replicas: int, drop_last: bool) -> tuple[int, int]:
    r"""``(num_samples, total_size)``: indices per rank, and the padded (or cut) epoch's length.

    Examples:
        >>> split_sizes(10, 3, drop_last=False), split_sizes(10, 3, drop_last=True)  # pad, cut
        ((4, 12), (3, 9))
    """
    n, num_replicas = check_int("n", n, low=0), check_int("num_replicas", num_replicas, low=1)
    # torch's ceil((n - W) / W) with drop_last is floor(n / W); without it, ceil(n / W)
    num_samples = n // num_replicas if check_bool("drop_last", drop_last) else -(-n // num_replicas)
    return num_samples, num_samples * num_replicas


def epoch_permutation(n: int, shuffle: bool, seed: int, epoch: int) -> torch.Tensor:
    r"""The epoch's order ``(n,)``: torch's ``randperm(n)`` seeded by ``seed + epoch``, or ``0..n-1``
    (int32 below ``2**31`` samples: ``randperm`` draws the same permutation whatever the dtype).

    Examples:
        >>> epoch_permutation(5, shuffle=True, seed=0, epoch=0).tolist()
        [4, 0, 1, 3, 2]
    """
    n, epoch = check_int64("n", n, low=0), check_int("epoch", epoch)
    seed = check_seed(seed, epoch if check_bool("shuffle", shuffle) else 0)
    if not shuffle:
        return torch.arange(n, dtype=_index_dtype(n))
    g = torch.Generator().manual_seed(seed + epoch)  # the same generator, seed and call as torch
    return torch.randperm(n, generator=g, dtype=_index_dtype(n))


def rank_positions(n: int, num_replicas: int, rank: int, drop_last: bool = False) -> torch.Tensor:
    r"""The positions of an epoch order of length ``n`` that ``rank`` reads: ``(num_samples,)``.
    torch's split: padded with the head (``p >= n`` reads ``p % n``) or cut, every W-th from rank.

    Examples:
        >>> rank_positions(5, 2, 1).tolist()  # padded to 6: positions 1, 3 and 5 -> 5 % 5 = 0
        [1, 3, 0]
    """
    n, (num_replicas, rank) = check_int("n", n, low=0), resolve_world(num_replicas, rank)
    num_samples, total_size = split_sizes(n, num_replicas, drop_last)
    if total_size > 2**63 - 1:  # positions are int64 (torch would build a list this long)
        raise ValueError(
            f"num_replicas should leave a padded epoch below 2**63 positions, but got "
            f"num_replicas={num_replicas} for n={n}: total_size={total_size}"
        )
    positions = rank + num_replicas * torch.arange(num_samples)  # (num_samples,)
    return positions % max(n, 1)  # past n: the head of the order again
