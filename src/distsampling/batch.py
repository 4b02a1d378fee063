r"""BatchSampler: group the indices of any sampler into lists of ``batch_size``.

Behaves exactly like torch's: the same batches, the same ``len``, the same errors. After a
:class:`~distsampling.DistributedSampler` it batches one rank's share, so every rank yields
``ceil(num_samples / batch_size)`` batches (``floor`` with ``drop_last=True``) — equal counts on
every rank, because every rank has the same ``num_samples``.

References:
    torch/utils/data/sampler.py (BatchSampler)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

from torch.utils.data import Sampler

__all__ = ["BatchSampler"]


class BatchSampler(Sampler[list[int]]):
    r"""Wrap a sampler (or any iterable of indices) to yield lists of ``batch_size`` indices.

    Args:
        sampler: a sampler, or any iterable of indices (``__len__`` only needed for ``len()``).
        batch_size: size of a batch, a positive ``int``.
        drop_last: drop the last batch if it is shorter than ``batch_size``.

    Examples:
        >>> list(BatchSampler(range(10), batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
        >>> list(BatchSampler(range(10), batch_size=3, drop_last=True))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    """

    def __init__(
        self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool
    ) -> None:
        # torch's checks and messages, word for word: ValueError for a bad type too
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        indices = iter(self.sampler)
        if self.drop_last:
            # zip pulls batch_size items from the *same* iterator per tuple, and stops at the
            # first tuple it cannot fill: exactly the short last batch that drop_last drops
            yield from map(list, zip(*[indices] * self.batch_size))
        else:
            # islice takes the next batch_size items; the last batch may be shorter, never empty
            while batch := list(islice(indices, self.batch_size)):
                yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size  # ceil(n / batch_size)
