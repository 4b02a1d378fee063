r"""DistributedSamplerWrapper: split the epoch of *any* sampler across ranks, as DistributedSampler would.

Every rank's inner sampler must yield **the same epoch** for the same ``set_epoch`` (seeded
alike: torch's ``RandomSampler`` needs ``generator=`` on every rank). References:
catalyst/data/sampler.py (DatasetFromSampler, DistributedSamplerWrapper)
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sized
from itertools import chain

import numpy as np
import torch
from torch.utils.data import Dataset, DistributedSampler, RandomSampler

from ._checks import _index_dtype, check_bool, check_int, check_seed, resolve_world
from ._split import epoch_permutation, rank_positions, split_sizes

__all__ = ["DatasetFromSampler", "DistributedSamplerWrapper", "index_tensor", "yields_indices"]


def yields_indices(sampler: object) -> bool:  # does iter(sampler) yield sampler.indices()?
    owner = next((c for c in type(sampler).__mro__ if "__iter__" in vars(c)), None)
    return owner is not None and "indices" in vars(owner)


def index_tensor(sampler: Iterable[int]) -> torch.Tensor:
    r"""One ``iter()`` of ``sampler`` as a 1-D integer tensor (ours: ``indices()``; torch's
    ``RandomSampler``: its own ``randperm`` calls; any other: read into numpy storage)."""
    if yields_indices(sampler):
        return sampler.indices()  # type: ignore[attr-defined]
    if type(sampler) is RandomSampler and not sampler.replacement and len(sampler.data_source):
        n, k, g = len(sampler.data_source), sampler.num_samples, sampler.generator
        if g is None:  # as torch: a seed from the global RNG (it differs per rank!)
            g = torch.Generator().manual_seed(int(torch.empty((), dtype=torch.int64).random_()))
        parts = [torch.randperm(n, generator=g, dtype=_index_dtype(n)) for _ in range(k // n + 1)]
        return parts[0] if k == n else torch.cat(parts)[:k]  # torch's k // n + 1 calls, k kept
    try:  # operator.index refuses floats, strings and lists: np.fromiter would truncate 1.5 to 1
        return torch.from_numpy(np.fromiter(map(operator.index, sampler), dtype=np.int64))
    except (TypeError, ValueError, OverflowError) as err:
        bad = f"sampler should yield integer indices, but got sampler={sampler!r} ({err})"
        raise TypeError(bad) from err


class DatasetFromSampler(Dataset[int]):
    r"""The current epoch of a sampler, seen as a dataset: item ``i`` is its ``i``-th index, the
    epoch drawn on first access and kept (a tensor) until :meth:`set_epoch`."""

    def __init__(self, sampler: Iterable[int]) -> None:
        if not isinstance(sampler, Iterable) or not isinstance(sampler, Sized):
            raise TypeError(
                "sampler should be iterable and have __len__ (a sampler, or a list of indices), "
                f"but got sampler={sampler!r} of type {type(sampler).__name__}"
            )
        self.sampler, self.epoch, self._indices = sampler, 0, None

    def __getitem__(self, index: int) -> int:
        return int(self.indices[index])

    def __len__(self) -> int:  # the kept epoch's, or the sampler's: it may change per epoch
        return len(self._indices) if self._indices is not None else len(self.sampler)  # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        r"""Draw epoch ``epoch`` on next access (forwarded to the sampler, if it has ``set_epoch``)."""
        self.epoch, self._indices = operator.index(epoch), None
        if callable(getattr(self.sampler, "set_epoch", None)):
            self.sampler.set_epoch(self.epoch)  # type: ignore[attr-defined]

    @property
    def indices(self) -> torch.Tensor:
        r"""The sampler's current epoch, a 1-D integer tensor (drawn once per epoch)."""
        if self._indices is None:
            indices, n = index_tensor(self.sampler), len(self.sampler)  # type: ignore[arg-type]
            if len(indices) != n:
                raise RuntimeError(
                    f"sampler yielded {len(indices)} indices but has len(sampler)={n}: its "
                    f"__len__ and __iter__ disagree (sampler={self.sampler!r})"
                )
            self._indices = indices
        return self._indices


class DistributedSamplerWrapper(DistributedSampler[int]):
    r"""Give this rank its share of another sampler's epoch: rank ``r`` reads ``inner[p]`` at the
    positions ``p`` torch's ``DistributedSampler(range(len(inner)), ...)`` yields. Args: the inner
    ``sampler`` (integer indices, ``__len__``, maybe ``set_epoch``), then torch's sampler's.

    Examples:
        >>> inner = [10, 11, 12, 13, 14]  # any sized iterable of indices
        >>> [list(DistributedSamplerWrapper(inner, 2, r, shuffle=False)) for r in (0, 1)]
        [[10, 12, 14], [11, 13, 10]]
    """

    def __init__(  # ours: a subclass of torch's, whose __init__ is not called
        self,
        sampler: Iterable[int],
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.dataset, self.sampler = DatasetFromSampler(sampler), sampler
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        split = getattr(sampler, "num_replicas", 1)  # a rank's share already: split it again?
        if isinstance(split, int) and split > 1 and self.num_replicas > 1:
            raise ValueError(
                f"sampler should yield the same epoch on every rank, but got a share of one "
                f"rank of num_replicas={split}: {type(sampler).__name__} splits the epoch "
                "itself; splitting its share again leaves each rank a part of a part (most "
                "samples never read). Pass it to the DataLoader as it is"
            )
        self.shuffle, self.seed = check_bool("shuffle", shuffle), check_seed(seed)
        self.drop_last, self.epoch = check_bool("drop_last", drop_last), 0

    def __iter__(self) -> Iterator[int]:  # the inner epoch drawn at iter(), as catalyst's
        return chain.from_iterable(chunk.tolist() for chunk in self.indices().split(1 << 16))

    def indices(self) -> torch.Tensor:
        r"""This rank's inner indices, ``(num_samples,)``: what ``iter()`` yields, as a tensor."""
        order = self.epoch_order()  # (n,) then torch's positions of this rank: (num_samples,)
        return order[rank_positions(len(order), self.num_replicas, self.rank, self.drop_last)]

    def epoch_order(self) -> torch.Tensor:
        r"""The whole epoch's order, ``(n,)``: the inner epoch in the permuted order ranks split."""
        inner = self.dataset.indices  # (n,) drawn once per epoch and kept
        return inner[epoch_permutation(len(inner), self.shuffle, self.seed, self.epoch)]

    # ours: torch's sizes, over the inner epoch's current length (read at each access)
    num_samples = property(lambda s: split_sizes(len(s.dataset), s.num_replicas, s.drop_last)[0])
    total_size = property(lambda s: s.num_samples * s.num_replicas)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch here and in the inner sampler; call it with the same value on all ranks."""
        self.epoch = check_int("epoch", epoch)
        self.dataset.set_epoch(self.epoch)
