r"""DistributedSampler: which rank reads which sample, index for index the same as torch's.

Every rank builds the same epoch order (a permutation seeded by ``seed + epoch``, or ``0..N-1``),
pads it by repeating its head until its length divides by ``num_replicas`` (or cuts the tail
with ``drop_last``), and keeps every ``num_replicas``-th position starting at ``rank``. So the
split is *strided*, never contiguous halves: with 2 ranks, rank 0 reads positions 0, 2, 4, ...

Torch builds the whole padded epoch as a Python list on every rank and then slices it. Here the
same arithmetic runs on tensors, and only this rank's ``N / num_replicas`` indices ever become
Python ints. :func:`rank_positions` is the whole algorithm; the sampler class is its
bookkeeping, and :mod:`distsampling.wrapper` reuses it over any sampler's epoch.

References:
    torch/utils/data/distributed.py (DistributedSampler)
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from itertools import chain

import torch
from torch.utils.data import Sampler

from ._validate import check_bool, check_int, check_len, check_rank, resolve_world

__all__ = ["DistributedSampler", "rank_positions", "split_sizes"]

# torch.Generator.manual_seed takes any integer in [-2**63, 2**64 - 1]
_SEED_LOW, _SEED_HIGH = -(2**63), 2**64 - 1


def split_sizes(n: int, num_replicas: int, drop_last: bool) -> tuple[int, int]:
    r"""Return ``(num_samples, total_size)``: items per rank, and the padded (or cut) epoch length.

    Args:
        n: length of the epoch (the dataset).
        num_replicas: number of ranks.
        drop_last: cut the tail instead of padding.

    Examples:
        >>> split_sizes(10, 3, drop_last=False)  # pad 10 -> 12: two indices repeat
        (4, 12)
        >>> split_sizes(10, 3, drop_last=True)  # cut 10 -> 9: the last index of the order is dropped
        (3, 9)
    """
    n = check_int("n", n, low=0)
    num_replicas = check_int("num_replicas", num_replicas, low=1)
    if check_bool("drop_last", drop_last) and n % num_replicas != 0:
        # torch writes ceil((n - W) / W); for n % W != 0 that is floor(n / W), 0 when n < W
        num_samples = n // num_replicas
    else:
        num_samples = -(-n // num_replicas)  # ceil(n / W) in exact integer arithmetic
    return num_samples, num_samples * num_replicas


def _index_dtype(size: int) -> torch.dtype:
    # int32 halves the memory of the order (benchmarks/bench_distributed.py measures the peak);
    # torch.randperm draws the same permutation whatever the dtype (tests/test_distributed.py
    # checks it), so parity holds. int64 only once an index can reach 2**31 - 1 + 1.
    return torch.int32 if size < 2**31 else torch.int64


def rank_positions(
    n: int,
    num_replicas: int,
    rank: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    drop_last: bool = False,
) -> torch.Tensor:
    r"""Return the indices into ``range(n)`` that ``rank`` reads this epoch, as a 1-D tensor.

    The tensor is int32 (int64 once the padded epoch has ``2**31`` positions or more).

    Equal to ``list(torch.utils.data.DistributedSampler(range(n), ...))`` with the same
    arguments, without building the other ranks' indices as Python objects.

    Args:
        n: length of the epoch.
        num_replicas: number of ranks ``W``.
        rank: this rank, in ``[0, W)``.
        shuffle: permute the epoch with a generator seeded by ``seed + epoch``.
        seed: base seed, the same on every rank.
        epoch: the epoch number, the same on every rank.
        drop_last: cut the tail instead of padding with the head.

    Raises:
        ValueError: with ``shuffle``, if ``seed + epoch`` is outside torch.Generator's range.

    Examples:
        >>> rank_positions(5, 2, 1, shuffle=False).tolist()  # padded: 0 1 2 3 4 | 0
        [1, 3, 0]
    """
    # the sampler's checks, in its words: this is its algorithm, called with any arguments
    n, num_replicas = check_int("n", n, low=0), check_int("num_replicas", num_replicas, low=1)
    rank = check_rank(rank, num_replicas)
    shuffle = check_bool("shuffle", shuffle)
    seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
    epoch = check_int("epoch", epoch)
    if shuffle and not _SEED_LOW <= seed + epoch <= _SEED_HIGH:
        raise ValueError(
            f"seed + epoch should be in [{_SEED_LOW}, {_SEED_HIGH}] (torch.Generator's "
            f"range), but got seed={seed}, epoch={epoch}"
        )
    _num_samples, total_size = split_sizes(n, num_replicas, drop_last)
    if total_size > 2**63 - 1:  # positions are int64 (torch would build a list this long)
        raise ValueError(
            f"num_replicas should leave a padded epoch below 2**63 positions, but got "
            f"num_replicas={num_replicas} for n={n}: total_size={total_size}"
        )
    dtype = _index_dtype(max(n, total_size))
    if shuffle:
        # the same generator, seed and call as torch: this is what makes the order identical
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(n, generator=g, dtype=dtype)  # (n,)
    else:
        order = torch.arange(n, dtype=dtype)  # (n,)
    if total_size <= n:
        # no padding (or the tail cut by drop_last): a strided view, nothing copied
        return order[rank:total_size:num_replicas]  # (num_samples,)
    # pad: position p >= n repeats the head of the order, wrapping as often as needed (n < W
    # repeats it several times), so the padded epoch at position p is order[p % n]
    positions = torch.arange(rank, total_size, num_replicas)  # (num_samples,) int64
    return order[positions % n]  # (num_samples,)


def _as_ints(indices: torch.Tensor, chunk: int = 1 << 16) -> Iterator[int]:
    # Python ints cost ~36 bytes each: convert a chunk at a time, never the whole rank at once;
    # chain.from_iterable walks the chunks in C (a generator's `yield from` costs ~40% more)
    return chain.from_iterable(map(torch.Tensor.tolist, indices.split(chunk)))


class DistributedSampler(Sampler[int]):
    r"""Restrict data loading to one rank's share of the dataset, exactly as torch does.

    Each rank reads ``num_samples = ceil(N / num_replicas)`` indices (``floor`` with
    ``drop_last=True``). Without ``drop_last`` the epoch is padded by repeating its first
    indices so that every rank reads the same number; with it the tail is cut and nothing
    repeats. Call :meth:`set_epoch` at the start of every epoch, or every epoch reads the same
    order.

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
        >>> s.set_epoch(1)
        >>> list(s)
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
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        n = check_len("dataset", dataset)
        self.dataset = dataset
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
        self.drop_last = check_bool("drop_last", drop_last)
        self.epoch = 0
        self.num_samples, self.total_size = split_sizes(n, self.num_replicas, self.drop_last)

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if split_sizes(n, self.num_replicas, self.drop_last)[1] != self.total_size:
            raise RuntimeError(
                f"len(dataset) changed since this sampler was built: total_size={self.total_size} "
                f"was computed for another length, but got len(dataset)={n}. Build a new sampler "
                "(or use DistributedSamplerWrapper, which follows a changing length)."
            )
        positions = rank_positions(
            n,
            self.num_replicas,
            self.rank,
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=self.epoch,
            drop_last=self.drop_last,
        )
        # computed now, like torch (the epoch is read at iter() time); only this rank's slice
        # becomes Python ints, and lazily: num_samples of them in chunks, never all N
        return _as_ints(positions)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch; with ``shuffle=True`` each epoch gets its own order, the same on all ranks.

        Args:
            epoch: epoch number (an integer; call it with the same value on every rank).
        """
        self.epoch = check_int("epoch", epoch)
