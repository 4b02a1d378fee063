r"""DistributedSamplerWrapper: split the epoch of *any* sampler across ranks, as DistributedSampler would.

Each epoch the wrapper forwards ``set_epoch`` to the inner sampler, reads its epoch once (into a
tensor) and gives this rank the indices at torch's positions over ``range(len(inner epoch))``.

Randomness contract: ranks never exchange indices, so every rank's inner sampler must yield
**the same epoch** for the same ``set_epoch``: seeded alike on every rank, never from a global
RNG. :class:`~distsampling.WeightedBalanceClassSampler` seeds from ``(seed, epoch)``; torch's
``RandomSampler`` needs ``generator=torch.Generator().manual_seed(s)`` on every rank.

References:
    catalyst/data/sampler.py (DatasetFromSampler, DistributedSamplerWrapper)
"""

from __future__ import annotations

import copy
import operator
import weakref
from collections.abc import Iterable, Iterator, Sized
from itertools import chain

import numpy as np
import torch
from torch.utils.data import Dataset, DistributedSampler, RandomSampler, get_worker_info

from ._checks import _index_dtype, check_bool, check_int, check_seed, resolve_world
from ._split import epoch_permutation, rank_positions, split_sizes
from .guards import refuse_split_again

__all__ = ["DatasetFromSampler", "DistributedSamplerWrapper", "index_tensor", "yields_indices"]


def _random_sampler_epoch(sampler: RandomSampler) -> torch.Tensor:
    n, k, g = len(sampler.data_source), sampler.num_samples, sampler.generator
    if g is None:  # as torch: a seed from the global RNG (it differs per rank!)
        g = torch.Generator().manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
    parts = [torch.randperm(n, generator=g, dtype=_index_dtype(n)) for _ in range(k // n + 1)]
    return parts[0] if k == n else torch.cat(parts)[:k]  # torch's k // n + 1 calls, k kept


def yields_indices(sampler: object) -> bool:
    """Whether ``iter(sampler)`` yields ``sampler.indices()``: its ``__iter__``'s class has both."""
    owner = next((c for c in type(sampler).__mro__ if "__iter__" in vars(c)), None)
    return owner is not None and "indices" in vars(owner)


def index_tensor(sampler: Iterable[int]) -> torch.Tensor:
    r"""One ``iter()`` of ``sampler`` as a 1-D integer tensor, never a list of Python ints: this
    package's samplers hand over ``indices()``, torch's ``RandomSampler`` is drawn with the same
    ``randperm`` calls, and any other sampler's ints are read into numpy storage.

    Examples:
        >>> index_tensor([3, 1, 2])
        tensor([3, 1, 2])
    """
    if yields_indices(sampler):
        return sampler.indices()  # type: ignore[attr-defined]
    if type(sampler) is RandomSampler and not sampler.replacement and len(sampler.data_source):
        return _random_sampler_epoch(sampler)
    try:
        # operator.index refuses floats, strings and lists: np.fromiter would truncate 1.5 to 1
        return torch.from_numpy(np.fromiter(map(operator.index, sampler), dtype=np.int64))
    except (TypeError, ValueError, OverflowError) as err:
        raise TypeError(
            f"sampler should yield integer indices, but got sampler={sampler!r} ({err})"
        ) from err


class DatasetFromSampler(Dataset[int]):
    r"""The current epoch of a sampler, seen as a dataset: item ``i`` is its ``i``-th index.

    The epoch is drawn on first access and kept (a tensor) until :meth:`set_epoch`. Split by
    our :class:`~distsampling.DistributedSampler`, a pass reads the epoch set when it began
    (it holds the epoch), in DataLoader workers too, persistent ones included.

    Args:
        sampler: an iterable of integer indices with ``__len__`` (a sampler, a list, ...).

    Examples:
        >>> d = DatasetFromSampler([7, 3, 5])
        >>> len(d), d[1], d.indices.tolist()
        (3, 3, [7, 3, 5])
    """

    def __init__(self, sampler: Iterable[int], *, _workers: bool = True) -> None:
        if not isinstance(sampler, Iterable) or not isinstance(sampler, Sized):
            raise TypeError(
                "sampler should be iterable and have __len__ (a sampler, or a list of indices), "
                f"but got sampler={sampler!r} of type {type(sampler).__name__}"
            )
        self.sampler = sampler
        self._indices: torch.Tensor | None = None
        self.epoch = 0  # the latest set_epoch's: a sampler over this dataset warns if not its own
        # the epochs drawn now and last (None: the sampler's own), and one set while held
        self._read: int | None = None
        self._drawn: int | None = None
        self._pending = False
        # [0: the sampler's own epoch, or 1: the epoch here; that epoch]: what DataLoader workers
        # draw, in shared memory (a file descriptor each: a wrapper's own dataset never reaches a
        # worker, and has none)
        self._shared = torch.zeros(2, dtype=torch.int64).share_memory_() if _workers else None
        self.__setstate__({})

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)  # the shared tensor pickles as shared memory: view it again
        self._view = None if self._shared is None else self._shared.numpy()
        self._passes = 0  # passes of ours being read (a copy reads none)

    @property
    def indices(self) -> torch.Tensor:
        r"""The sampler's current epoch, a 1-D integer tensor (drawn once per epoch)."""
        read, worker = self._read, self._view is not None and get_worker_info() is not None
        if worker:  # a DataLoader worker draws the epoch the main process draws
            known, epoch = self._view.tolist()  # type: ignore[union-attr]
            read = epoch if known else None
        if self._indices is None or self._drawn != read:
            if worker and read is not None and callable(getattr(self.sampler, "set_epoch", None)):
                self.sampler.set_epoch(read)  # type: ignore[attr-defined]  # the worker's copy
            indices, n = index_tensor(self.sampler), len(self.sampler)  # type: ignore[arg-type]
            if len(indices) != n:
                raise RuntimeError(
                    f"sampler yielded {len(indices)} indices but has len(sampler)={n}: its "
                    f"__len__ and __iter__ disagree (sampler={self.sampler!r})"
                )
            self._indices, self._drawn = indices, read
        return self._indices

    def set_epoch(self, epoch: int) -> None:
        r"""Draw epoch ``epoch`` on next access (forwarded to the sampler, if it has ``set_epoch``).
        While a pass of our sampler is read (it holds the epoch), it keeps its draw, and this
        epoch waits for the pass to end or the next to begin."""
        epoch = operator.index(epoch)
        if self._view is not None and not -(2**63) <= epoch < 2**63:
            raise ValueError(  # as the workers read it
                f"epoch should be in [-2**63, 2**63) (shared with DataLoader workers as int64), "
                f"but got epoch={epoch}"
            )
        self.epoch, self._pending = epoch, True
        if not self._passes:  # no pass of ours is being read: draw anew now
            self._draw_latest()

    def _draw_latest(self) -> None:
        self._read, self._indices, self._pending = self.epoch, None, False
        if callable(getattr(self.sampler, "set_epoch", None)):
            self.sampler.set_epoch(self.epoch)  # type: ignore[attr-defined]
        if self._view is not None:  # what the workers draw: the same epoch
            self._view[:] = (1, self.epoch)

    def _hold_epoch(self, owner: object) -> None:
        r"""Draw the epoch set last, and keep it until ``owner`` (what reads the pass: a
        DataLoader iterator) is gone, whatever ``set_epoch`` says meanwhile:
        :class:`~distsampling.DistributedSampler` calls it as each pass begins."""
        if self._pending:
            self._draw_latest()
        self._passes += 1
        weakref.finalize(owner, self._pass_ended)

    def _pass_ended(self) -> None:
        self._passes -= 1
        if not self._passes and self._pending:  # a set_epoch made during the passes applies now
            self._draw_latest()

    def __getitem__(self, index: int) -> int:
        return int(self.indices[index])

    def __len__(self) -> int:  # the kept epoch's, or the sampler's: it may change per epoch
        return len(self._indices) if self._indices is not None else len(self.sampler)  # type: ignore[arg-type]


class DistributedSamplerWrapper(DistributedSampler[int]):
    r"""Give this rank its share of another sampler's epoch, split exactly as DistributedSampler.

    Rank ``r`` reads ``inner_epoch[p]`` for the positions ``p`` that torch's
    ``DistributedSampler(range(len(inner_epoch)), num_replicas, r, shuffle, seed, drop_last)``
    yields after ``set_epoch(epoch)``; ``len`` follows the inner length (the module's contract).
    A subclass of torch's ``DistributedSampler``, as catalyst's and Lightning's wrappers are,
    without its ``__init__``: ``dataset`` is the inner epoch (:class:`DatasetFromSampler`), and
    ``num_samples`` and ``total_size`` are torch's over its current length, read at each access.

    Args:
        sampler: the inner sampler: integer indices, ``__len__``, optionally ``set_epoch``.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: permute the inner epoch's positions too, seeded by ``seed + epoch``.
        seed: base seed of that permutation; must be the same on every rank.
        drop_last: cut the tail to make the split even instead of padding with the head.

    Examples:
        >>> inner = [10, 11, 12, 13, 14]  # any sized iterable of indices
        >>> [list(DistributedSamplerWrapper(inner, 2, r, shuffle=False)) for r in (0, 1)]
        [[10, 12, 14], [11, 13, 10]]
    """

    def __init__(
        self,
        sampler: Iterable[int],
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.dataset = DatasetFromSampler(sampler, _workers=False)
        self.sampler = sampler
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

    def epoch_order(self) -> torch.Tensor:
        r"""The whole epoch's order, ``(n,)``: the inner epoch in the permuted order ranks split."""
        inner = self.dataset.indices  # (n,) drawn once per epoch and kept
        return inner[epoch_permutation(len(inner), self.shuffle, self.seed, self.epoch)]

    def indices(self) -> torch.Tensor:
        r"""This rank's inner indices, ``(num_samples,)``: what ``iter()`` yields, as a tensor."""
        inner = self.dataset.indices  # (n,)
        at = rank_positions(len(inner), self.num_replicas, self.rank, self.drop_last)  # torch's
        return inner[epoch_permutation(len(inner), self.shuffle, self.seed, self.epoch)[at]]

    def __iter__(self) -> Iterator[int]:  # drawn at iter(), as catalyst's wrapper draws
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        return chain.from_iterable(chunk.tolist() for chunk in self.indices().split(1 << 16))

    @property
    def num_samples(self) -> int:  # type: ignore[override]
        r"""This rank's count: ``ceil(n / W)`` of an inner epoch of ``n`` (floor with drop_last)."""
        return split_sizes(len(self.dataset), self.num_replicas, self.drop_last)[0]

    @property
    def total_size(self) -> int:  # type: ignore[override]
        r"""The padded (or cut) inner epoch the ranks split: ``num_samples * num_replicas``."""
        return split_sizes(len(self.dataset), self.num_replicas, self.drop_last)[1]

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch here and in the inner sampler; call it with the same value on all ranks."""
        self.epoch = check_int("epoch", epoch)
        self.dataset.set_epoch(self.epoch)

    def __copy__(self) -> DistributedSamplerWrapper:
        r"""A copy with its own dataset and inner sampler: its ``set_epoch`` moves neither of ours."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(vars(self))
        if callable(getattr(self.sampler, "set_epoch", None)):
            twin.sampler = copy.copy(self.sampler)
        twin.dataset = DatasetFromSampler(twin.sampler, _workers=False)
        return twin
