r"""DistributedSamplerWrapper: split the epoch of *any* sampler across ranks, as DistributedSampler would.

Each epoch the wrapper forwards ``set_epoch`` to the inner sampler, materialises the inner epoch
once (as an integer tensor, not a Python list), and gives this rank the positions that torch's
``DistributedSampler`` gives it over ``range(len(inner epoch))``: the same padding, ``drop_last``
and strided split (:func:`~distsampling.rank_positions`), then reads the inner indices there.

Randomness contract. The ranks never exchange indices: they agree only if every rank's inner
sampler yields **the same epoch** for the same ``set_epoch`` value. So the inner sampler must
draw from its own generator, seeded alike on every rank (from ``set_epoch``, or advanced
alike), never from a global RNG (``numpy.random``, ``random``, torch's default generator), and
have the same length on every rank. :class:`~distsampling.WeightedBalanceClassSampler` meets it
by seeding from ``(seed, epoch)``; torch's ``RandomSampler`` meets it only with
``generator=torch.Generator().manual_seed(s)`` on every rank (without one it seeds itself from
torch's global RNG, which differs per rank).

References:
    catalyst/data/sampler.py (DatasetFromSampler, DistributedSamplerWrapper);
    torch/utils/data/distributed.py (DistributedSampler)
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sized

import numpy as np
import torch
from torch.utils.data import Dataset, RandomSampler, Sampler, SequentialSampler

from ._validate import check_bool, check_int, resolve_world
from .distributed import _SEED_HIGH, _SEED_LOW, _as_ints, rank_positions, split_sizes

__all__ = ["DatasetFromSampler", "DistributedSamplerWrapper"]


def _random_sampler_epoch(sampler: RandomSampler) -> torch.Tensor:
    # torch's RandomSampler.__iter__ without replacement, drawn as tensors: the same randperm
    # calls on the same generator (one more whose head is cut), so the same indices and the
    # same generator state after the epoch (tests/test_wrapper.py checks both)
    n, k = len(sampler.data_source), sampler.num_samples
    generator = sampler.generator
    if generator is None:  # as torch: a seed from the global RNG (differs per rank!)
        generator = torch.Generator()
        generator.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
    parts = [torch.randperm(n, generator=generator) for _ in range(k // n)]
    parts.append(torch.randperm(n, generator=generator)[: k % n])  # (k % n,)
    return parts[0] if k == n else torch.cat(parts)  # (k,)


def _materialise(sampler: Iterable[int], n: int) -> torch.Tensor:
    """The sampler's epoch as a 1-D integer tensor (8 bytes an index), never a Python list."""
    if callable(getattr(sampler, "epoch_indices", None)):  # e.g. WeightedBalanceClassSampler
        indices = sampler.epoch_indices()  # type: ignore[attr-defined]
    elif type(sampler) is RandomSampler and not sampler.replacement and len(sampler.data_source):
        indices = _random_sampler_epoch(sampler)
    elif type(sampler) is SequentialSampler:
        indices = torch.arange(len(sampler.data_source))
    else:  # any other sampler: read its ints straight into numpy storage
        try:
            # every index goes through operator.index, which takes ints (numpy's and integer
            # tensors too) and refuses floats, strings and lists (a batch sampler): np.fromiter
            # alone would truncate 1.5 to 1 and parse "1"
            ints = map(operator.index, sampler)
            indices = torch.from_numpy(np.fromiter(ints, dtype=np.int64))
        except (TypeError, ValueError, OverflowError) as err:
            raise TypeError(
                f"sampler should yield integer indices, but got sampler={sampler!r} ({err})"
            ) from err
    if len(indices) != n:
        raise RuntimeError(
            f"sampler yielded {len(indices)} indices but has len(sampler)={n}: its __len__ "
            f"and __iter__ disagree (sampler={sampler!r})"
        )
    return indices  # (n,)


class DatasetFromSampler(Dataset[int]):
    r"""The current epoch of a sampler, seen as a dataset: item ``i`` is its ``i``-th index.

    The epoch is drawn on first access and kept (as a tensor) until :meth:`set_epoch`, which
    forwards the epoch to the sampler (when it has ``set_epoch``) and drops the kept epoch.

    Args:
        sampler: an iterable of integer indices with ``__len__`` (a sampler, a list, ...).

    Examples:
        >>> d = DatasetFromSampler([7, 3, 5])
        >>> len(d), d[1], d.indices.tolist()
        (3, 3, [7, 3, 5])
    """

    def __init__(self, sampler: Iterable[int]) -> None:
        if not isinstance(sampler, Iterable) or not isinstance(sampler, Sized):
            raise TypeError(
                "sampler should be iterable and have __len__ (a sampler, or a list of indices), "
                f"but got sampler={sampler!r} of type {type(sampler).__name__}"
            )
        self.sampler = sampler
        self._indices: torch.Tensor | None = None

    @property
    def indices(self) -> torch.Tensor:
        r"""The current epoch of the sampler, a 1-D integer tensor (drawn once per epoch)."""
        if self._indices is None:
            self._indices = _materialise(self.sampler, len(self.sampler))  # type: ignore[arg-type]
        return self._indices

    def set_epoch(self, epoch: int) -> None:
        r"""Forward ``epoch`` to the sampler (if it has ``set_epoch``) and draw anew on next access.

        Args:
            epoch: epoch number.
        """
        if callable(getattr(self.sampler, "set_epoch", None)):
            self.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        self._indices = None

    def __getitem__(self, index: int) -> int:
        return int(self.indices[index])

    def __len__(self) -> int:
        # the kept epoch's length, or the sampler's when none is kept: it may change per epoch
        return len(self._indices) if self._indices is not None else len(self.sampler)  # type: ignore[arg-type]


class DistributedSamplerWrapper(Sampler[int]):
    r"""Give this rank its share of another sampler's epoch, split exactly as DistributedSampler.

    Rank ``r`` reads ``inner_epoch[p]`` for the positions ``p`` that torch's
    ``DistributedSampler(range(len(inner_epoch)), num_replicas, r, shuffle, seed, drop_last)``
    yields after ``set_epoch(epoch)``. ``len`` follows the inner sampler's length, epoch by epoch.
    Ranks agree only if the inner sampler keeps the randomness contract of this module: the same
    epoch on every rank for the same :meth:`set_epoch` value, from no global RNG.

    The inner epoch is read into an integer tensor; a sampler with an ``epoch_indices()``
    method (like :class:`~distsampling.WeightedBalanceClassSampler`) is asked for its epoch as
    a tensor instead, and so are torch's ``SequentialSampler`` and ``RandomSampler`` (without
    replacement: the same ``randperm`` calls on the same generator).

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
        self.dataset = DatasetFromSampler(sampler)
        self.sampler = sampler
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
        self.drop_last = check_bool("drop_last", drop_last)
        self.epoch = 0

    def __iter__(self) -> Iterator[int]:
        epoch = self.dataset.indices  # (n,) the inner epoch, drawn once for this epoch
        positions = rank_positions(
            len(epoch),
            self.num_replicas,
            self.rank,
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=self.epoch,
            drop_last=self.drop_last,
        )  # (num_samples,) positions into the inner epoch, torch's for this rank
        return _as_ints(epoch[positions.long()])  # (num_samples,) inner indices, in chunks

    def __len__(self) -> int:
        return split_sizes(len(self.dataset), self.num_replicas, self.drop_last)[0]

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch here and in the inner sampler; call it with the same value on all ranks.

        Args:
            epoch: epoch number (an integer).
        """
        self.epoch = check_int("epoch", epoch)
        self.dataset.set_epoch(self.epoch)
