r"""Evaluation without duplicates: every index exactly once, and metrics gathered exactly.

``DistributedSampler`` pads the epoch so every rank reads the same number of samples; for
training that is harmless, for evaluation it counts the padded samples twice
(https://github.com/pytorch/pytorch/issues/25162). :class:`UnpaddedDistributedSampler` keeps torch's order and split but drops the
padding, so ranks read ``ceil((N - rank) / W)`` samples — lengths differ by at most one.
:func:`gather_by_index` then collects per-sample results from every rank into dataset order,
each index once, whichever sampler was used.

Uneven lengths mean uneven loops: a rank with one batch fewer must not be expected in a
collective the others call per step (DDP's backward, an ``all_reduce`` per batch). Evaluate
under ``torch.no_grad()`` without per-step collectives, gather once at the end, or wrap the loop
in DDP's ``join()`` context manager.

References:
    torch/utils/data/distributed.py (DistributedSampler: the order and split kept here)
"""

from __future__ import annotations

import operator
from collections.abc import Sequence, Sized
from typing import Any

import torch
import torch.distributed as dist

from .._checks import check_int64
from ..distributed import DistributedSampler
from ..guards import ShareGuards

__all__ = ["UnpaddedDistributedSampler", "gather_by_index", "merge_by_index"]


class UnpaddedDistributedSampler(ShareGuards, DistributedSampler):  # the exported's guards
    r"""torch's split without padding: each index read by exactly one rank, once.

    Same arguments as :class:`~distsampling.DistributedSampler` but ``drop_last`` (nothing is
    padded, nothing dropped). Rank ``r`` yields the prefix of torch's indices for rank ``r``
    that lies inside the dataset: ``ceil((N - r) / W)`` of them.

    torch's attributes hold what this split reads: ``num_samples`` is this rank's count,
    ``ceil((N - rank) / W)``, and ``total_size`` the epoch's length ``N``, the sum of the ranks'
    counts (torch's is the padded length, ``num_samples * W``); ``drop_last`` is ``False``.

    Examples:
        >>> [list(UnpaddedDistributedSampler(range(5), 2, r, shuffle=False)) for r in (0, 1)]
        [[0, 2, 4], [1, 3]]
    """

    uneven_ranks = True  #: ranks read unequal counts by design (checks leave len out)

    pad = (
        False  # resumed on another world (distsampling.resume.state), the rest is not padded either
    )

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(dataset, num_replicas, rank, shuffle, seed)  # drop_last: False
        # positions rank, rank + W, ... below N: ceil((N - rank) / W) of them, no padding
        self.total_size = self.dataset_len
        self.num_samples = len(range(self.rank, self.total_size, self.num_replicas))

    def indices(self) -> torch.Tensor:
        r"""This rank's share, ``(num_samples,)``: torch's, without the padding at its end."""
        return super().indices()[: self.num_samples]


def merge_by_index(per_rank: Sequence[tuple[Sequence[int], Sequence[Any]]], size: int) -> list[Any]:
    r"""Merge each rank's ``(indices, values)`` into one list in dataset order, each index once.

    A padded sampler repeats some indices; the first value seen for an index is kept. Raises
    if an index in ``range(size)`` has no value (a rank's results are missing).

    Examples:
        >>> merge_by_index([([0, 2, 0], ["a", "c", "a"]), ([1], ["b"])], size=3)
        ['a', 'b', 'c']
    """
    size = check_int64("size", size, low=0)
    if not isinstance(per_rank, Sequence):
        raise TypeError(
            "per_rank should be a sequence of (indices, values) pairs, one per rank, "
            f"but got per_rank={per_rank!r}"
        )
    out: list[Any] = [None] * size
    seen = bytearray(size)
    for rank, pair in enumerate(per_rank):
        if not (isinstance(pair, Sequence) and len(pair) == 2):
            raise TypeError(
                f"per_rank[{rank}] should be an (indices, values) pair, "
                f"but got per_rank[{rank}]={pair!r}"
            )
        indices, values = pair
        if len(indices) != len(values):
            raise ValueError(
                f"rank {rank} sent {len(indices)} indices but {len(values)} values: they must pair up"
            )
        for i, v in zip(indices, values):
            try:
                i = operator.index(i)  # ints, numpy ints, integer tensor elements
            except TypeError:
                raise TypeError(
                    f"index should be an integer, but got index={i!r} from rank {rank}"
                ) from None
            if not 0 <= i < size:
                raise ValueError(
                    f"index should be in [0, {size}), but got index={i} from rank {rank}"
                )
            if not seen[i]:
                out[i], seen[i] = v, 1
    missing = size - sum(seen)
    if missing:
        first = [i for i in range(size) if not seen[i]][:5]
        raise ValueError(
            f"{missing} of size={size} indices have no result (first: {first}); did every rank evaluate its whole share?"
        )
    return out


def gather_by_index(
    indices: Sequence[int], values: Sequence[Any], size: int, group: dist.ProcessGroup | None = None
) -> list[Any]:
    r"""Collective: gather every rank's per-sample ``values`` into dataset order, padding dropped.

    Args:
        indices: the dataset indices this rank evaluated (what its sampler yielded).
        values: one result per index (a loss, a prediction, a correct/incorrect flag).
        size: the dataset length.
        group: the process group; the default group when ``None``.

    Returns:
        ``size`` values, value ``i`` for dataset index ``i``, on every rank.

    Examples:
        >>> import torch.distributed as dist
        >>> from distsampling import DistributedSampler
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> indices = list(DistributedSampler(range(4), seed=3))  # this rank's share
        >>> squares = [i * i for i in indices]  # one result per evaluated sample
        >>> gather_by_index(indices, squares, size=4)  # every rank's, in dataset order
        [0, 1, 4, 9]
        >>> dist.destroy_process_group()
    """
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, (list(indices), list(values)), group=group)
    return merge_by_index(gathered, size)
