r"""DistributedSampler: which rank reads which sample, index for index the same as torch's.

Every rank draws the same epoch order (seeded by ``seed + epoch``), pads it with its head (or
cuts the tail with ``drop_last``) and keeps every ``num_replicas``-th position from ``rank`` on.

References: torch/utils/data/distributed.py (DistributedSampler)
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from itertools import chain

import torch

from ._checks import check_bool, check_int, check_len, check_seed, resolve_world
from ._split import epoch_permutation, rank_positions, split_sizes

__all__ = ["DistributedSampler"]


class DistributedSampler(torch.utils.data.DistributedSampler[int]):
    r"""Restrict data loading to one rank's share of the dataset, exactly as torch does.

    Each rank reads ``ceil(N / num_replicas)`` indices (``floor`` with ``drop_last=True``).
    Call :meth:`set_epoch` at the start of every epoch, or every epoch reads the same order.

    Args:
        dataset: anything with ``__len__``; only its length is used.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: permute the indices, seeded by ``seed + epoch``.
        seed: base seed; must be the same on every rank.
        drop_last: drop the tail to make the split even instead of padding.

    Examples:
        >>> [list(DistributedSampler(range(10), 2, rank, shuffle=False)) for rank in (0, 1)]
        [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
        >>> s = DistributedSampler(range(10), num_replicas=2, rank=0, seed=0)
        >>> s.set_epoch(1); list(s)
        [5, 1, 0, 9, 7]
    """

    # ours: a subclass of torch's, whose __init__ is not called: these checks name the value
    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.dataset, self.dataset_len = dataset, check_len("dataset", dataset)
        self.shuffle, self.seed = check_bool("shuffle", shuffle), check_seed(seed)
        self.drop_last, self.epoch = check_bool("drop_last", drop_last), 0
        self.num_samples, self.total_size = split_sizes(  # ceil(N / W), floor with drop_last
            self.dataset_len, self.num_replicas, self.drop_last
        )

    def __iter__(self) -> Iterator[int]:
        # torch's steps run on tensors in indices(): ints a chunk at a time, not one long list
        return chain.from_iterable(self._chunks())

    def indices(self) -> torch.Tensor:
        r"""This rank's share of the epoch, ``(num_samples,)``: what ``iter()`` yields, as a tensor."""
        # deterministically shuffle based on epoch and seed (torch's randperm), or 0..N-1
        indices = self.epoch_order()  # (N,)
        if self.total_size <= len(indices):  # remove tail of data to make it evenly divisible
            return indices[self.rank : self.total_size : self.num_replicas]  # subsample
        # add extra samples (the head again) to make it evenly divisible, and subsample
        return indices[rank_positions(len(indices), self.num_replicas, self.rank)]

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch (the same on every rank): with ``shuffle=True``, each its own order."""
        self.epoch = check_int("epoch", epoch)  # seed + epoch: checked at iter(), as torch does

    def epoch_order(self) -> torch.Tensor:
        r"""The whole epoch's order, ``(N,)``: the permutation every rank takes its share of."""
        return epoch_permutation(self._length(), self.shuffle, self.seed, self.epoch)

    def _length(self) -> int:
        n = len(self.dataset)
        if n != self.dataset_len:  # ours: torch compares total_size, and 10 -> 9 on 4 ranks passes
            raise RuntimeError(
                f"len(dataset) changed since this sampler was built from {self.dataset_len}, but "
                f"got len(dataset)={n}: build a new sampler, or one that reads the length every "
                "epoch: DistributedSamplerWrapper(SequentialSampler(dataset), ...)"
            )
        return n

    def _chunks(self) -> Iterator[list[int]]:  # the order is drawn now (at iter(), as torch's)
        return (chunk.tolist() for chunk in self.indices().split(1 << 16))
