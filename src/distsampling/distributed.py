r"""DistributedSampler: which rank reads which sample, index for index the same as torch's.

Every rank computes the same epoch order (a permutation seeded by ``seed + epoch``, or
``0..N-1``), pads it with its own head until its length divides by ``num_replicas`` (or cuts
the tail with ``drop_last``), and keeps every ``num_replicas``-th position from ``rank`` on:
a *strided* split, never contiguous halves. The ranks agree without exchanging anything.
torch builds the padded epoch as a Python list on every rank; here the same steps run on
tensors. Resuming mid-epoch is a layer of its own: :mod:`distsampling.resume.state`.

References:
    torch/utils/data/distributed.py (DistributedSampler)
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from itertools import chain

import torch

from ._checks import check_bool, check_int, check_len, check_seed, resolve_world
from ._split import epoch_permutation, rank_positions, split_sizes
from .guards import begin_dataset_pass, refuse_split_again

__all__ = ["DistributedSampler"]


class DistributedSampler(torch.utils.data.DistributedSampler[int]):
    r"""Restrict data loading to one rank's share of the dataset, exactly as torch does.

    Each rank reads ``num_samples = ceil(N / num_replicas)`` indices (``floor`` with
    ``drop_last=True``): the epoch is padded with its first indices, or its tail is cut. Call
    :meth:`set_epoch` at the start of every epoch, or every epoch reads the same order.
    A subclass of torch's, with torch's attributes, so code that leaves torch's sampler alone
    leaves this one alone (Lightning's default ``use_distributed_sampler=True`` does); every
    method is defined here, and torch's ``__init__`` is not called: the checks are these.

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

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        # every argument is checked here, once; iter() only checks that the length still holds
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.dataset = dataset
        self.dataset_len = check_len("dataset", dataset)
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed = check_seed(seed)
        self.drop_last = check_bool("drop_last", drop_last)
        self.epoch = 0
        # ceil(N / W) per rank and total_size = W * num_samples (floor with drop_last)
        self.num_samples, self.total_size = split_sizes(
            self.dataset_len, self.num_replicas, self.drop_last
        )

    def _length(self) -> int:
        n = len(self.dataset)
        if n != self.dataset_len:  # torch compares total_size: 10 -> 9 on 4 ranks would pass
            raise RuntimeError(
                f"len(dataset) changed since this sampler was built from {self.dataset_len}, but "
                f"got len(dataset)={n}: build a new sampler, or one that reads the length every "
                "epoch: DistributedSamplerWrapper(SequentialSampler(dataset), ...)"
            )
        return n

    def epoch_order(self) -> torch.Tensor:
        r"""The whole epoch's order, ``(N,)``: the permutation every rank takes its share of."""
        return epoch_permutation(self._length(), self.shuffle, self.seed, self.epoch)

    def indices(self) -> torch.Tensor:
        r"""This rank's share of the epoch, ``(num_samples,)``: what ``iter()`` yields, as a tensor.

        Examples:
            >>> DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False).indices()
            tensor([1, 3, 0], dtype=torch.int32)
        """
        order = self.epoch_order()  # (N,)
        if self.total_size <= len(order):  # nothing to pad: a strided view, nothing copied
            return order[self.rank : self.total_size : self.num_replicas]
        # pad with the head of the order, then every W-th position from rank
        return order[rank_positions(len(order), self.num_replicas, self.rank, self.drop_last)]

    def _chunks(self) -> Iterator[list[int]]:  # the order is drawn now; ints a chunk at a time
        return (chunk.tolist() for chunk in self.indices().split(1 << 16))

    def __iter__(self) -> Iterator[int]:
        # as torch's, the epoch is read at iter(): a set_epoch after it is the next pass's; only
        # this rank's indices become Python ints, a chunk at a time, handed out by chain at C speed
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        # a dataset with an epoch of its own: checked, and held while the pass is read
        return begin_dataset_pass(self, chain.from_iterable(self._chunks()))

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch; with ``shuffle=True`` each epoch gets its own order, the same on all ranks.
        A dataset with epochs of its own (``set_epoch`` and an ``int`` ``epoch``) is set too, so a
        loop that sets the sampler's only (Lightning's ``Trainer``) reads the dataset's epoch.

        Args:
            epoch: epoch number (an integer; call it with the same value on every rank).
        """
        self.epoch = check_int("epoch", epoch)  # seed + epoch: checked at iter(), as torch does
        own = getattr(self.dataset, "epoch", None)  # a dataset with epochs of its own follows
        if hasattr(self.dataset, "set_epoch") and isinstance(own, int):
            self.dataset.set_epoch(self.epoch)  # (SequentialWindowedDataset, DatasetFromSampler)
