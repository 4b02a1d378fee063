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

import copy
import operator
from collections.abc import Iterable, Iterator, Sized
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, RandomSampler, Sampler, SequentialSampler

from ._validate import check_bool, check_int, check_state, resolve_world
from .distributed import (
    _POSITION_FIELDS,
    _SEED_HIGH,
    _SEED_LOW,
    _epoch_order_of,
    _Reader,
    _resume_point,
    _share_at,
    _where,
    split_sizes,
)

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
    if k % n:
        parts.append(torch.randperm(n, generator=generator)[: k % n])  # (k % n,)
    else:  # torch draws one more randperm(n) and keeps none of it: only advance the generator
        _advance_as_randperm(n, generator)
    return parts[0] if k == n else torch.cat(parts)  # (k,)


# randperm(n) on the CPU (aten/src/ATen/native/TensorFactories.cpp, randperm_cpu) swaps with one
# 32-bit draw per step, n - 1 of them, below this n, and with one 64-bit draw (two 32-bit ones)
# per step, n of them, from here on
_RANDPERM_64BIT_FROM = (2**32 - 1) // 20


def _randperm_draws(n: int) -> int:
    """How many 32-bit draws ``torch.randperm(n)`` takes from a CPU generator (``n >= 1``)."""
    return n - 1 if n < _RANDPERM_64BIT_FROM else 2 * n


def _advance_as_randperm(n: int, generator: torch.Generator) -> None:
    """Leave ``generator`` exactly as ``torch.randperm(n, generator=generator)`` would, cheaply.

    ``random_()`` on a uint8 tensor takes one 32-bit draw per element, like each step of the
    shuffle, but writes them in order instead of swapping at random places (about 10x faster at
    n = 1e7). Drawn in chunks of 4 MiB, so it never allocates n bytes.
    """
    draws = _randperm_draws(n)
    chunk = torch.empty(min(draws, 1 << 22), dtype=torch.uint8)
    while draws > 0:
        chunk[: min(draws, len(chunk))].random_(generator=generator)
        draws -= len(chunk)


def _materialise(sampler: Iterable[int], n: int) -> torch.Tensor:
    """The sampler's epoch as a 1-D integer tensor (8 bytes an index), never a Python list."""
    order = _epoch_order_of(sampler)  # e.g. WeightedBalanceClassSampler: a tensor already
    if order is not None:
        indices = order
    elif type(sampler) is RandomSampler and not sampler.replacement and len(sampler.data_source):
        indices = _random_sampler_epoch(sampler)
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

    The inner epoch is read into an integer tensor; a sampler with an ``epoch_order()``
    method (like :class:`~distsampling.WeightedBalanceClassSampler`) is asked for its epoch as
    a tensor instead, and so is torch's ``RandomSampler`` (without replacement: the same
    ``randperm`` calls on the same generator).

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
        self._pending: tuple[int, int] | None = None  # (start, position) from load_state_dict
        self._reading: tuple[int, int, _Reader] | None = None  # (start, skip, reader) of iter()

    def _check(self) -> None:
        if self.shuffle and not _SEED_LOW <= self.seed + self.epoch <= _SEED_HIGH:
            raise ValueError(
                f"seed + epoch should be in [{_SEED_LOW}, {_SEED_HIGH}] (torch.Generator's "
                f"range), but got seed={self.seed}, epoch={self.epoch}"
            )

    def _share(self, epoch: int, start: int, skip: int) -> torch.Tensor:
        inner = self.dataset.indices  # (n,) the inner epoch, drawn once for this epoch
        order = {"shuffle": self.shuffle, "seed": self.seed, "epoch": epoch}
        # positions into the inner epoch: torch's for this rank, or the elastic rest of them
        at = _share_at(
            len(inner), self.num_replicas, self.rank, start, self.drop_last, True, **order
        )
        return inner[at[skip:].long()]  # (num_samples - skip,) inner indices

    def epoch_order(self) -> torch.Tensor:
        r"""The inner indices the next ``iter()`` yields, as a 1-D tensor; nothing is consumed.

        The inner epoch is drawn at most once per :meth:`set_epoch` and kept: this call and
        ``iter()`` read the same draw, so calling it never changes what training reads.
        """
        self._check()
        start, skip = self._pending or (0, 0)
        return self._share(self.epoch, start, skip)

    def __iter__(self) -> Iterator[int]:
        start, skip = self._pending or (0, 0)
        self._pending = None  # a loaded position resumes one iter()
        _ = self.dataset.indices  # draw (or check) the inner epoch now: torch reads at iter()
        self._check()
        reader = _Reader(partial(self._share, self.epoch, start, skip))
        self._reading = (start, skip, reader)
        return reader.ints

    def __len__(self) -> int:
        return split_sizes(len(self.dataset), self.num_replicas, self.drop_last)[0]

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch here and in the inner sampler; call it with the same value on all ranks.

        A position loaded by :meth:`load_state_dict` survives ``set_epoch`` of its own epoch.

        Args:
            epoch: epoch number (an integer).
        """
        epoch = check_int("epoch", epoch)
        if epoch != self.epoch:
            self._pending = self._reading = None
        self.epoch = epoch
        self.dataset.set_epoch(self.epoch)

    def __copy__(self) -> DistributedSamplerWrapper:
        r"""A copy whose ``set_epoch`` leaves this wrapper's epoch, and its inner one, as they are.

        ``set_epoch`` reaches the inner sampler through the dataset that keeps its epoch: a plain
        shallow copy would share both, so setting the copy's epoch would move this one's inner
        epoch too. The copy gets its own shallow copy of an inner sampler that has an epoch
        (``copy.copy``, so this rule holds for a wrapper inside a wrapper) and its own dataset,
        which draws nothing until asked. The labels and indices they hold are shared, unchanged.

        Examples:
            >>> import copy
            >>> from distsampling import WeightedBalanceClassSampler
            >>> w = DistributedSamplerWrapper(
            ...     WeightedBalanceClassSampler([0, 0, 1], [1, 1], length=3, seed=2), 1, 0)
            >>> twin = copy.copy(w)
            >>> twin.set_epoch(5)
            >>> w.epoch, w.sampler.epoch, twin.sampler.epoch
            (0, 0, 5)
        """
        twin = type(self).__new__(type(self))
        twin.__dict__.update(vars(self))
        if callable(getattr(self.sampler, "set_epoch", None)):
            twin.sampler = copy.copy(self.sampler)
        twin.dataset = DatasetFromSampler(twin.sampler)
        return twin

    def state_dict(self) -> dict[str, Any]:
        r"""This rank's place in the epoch, with the inner sampler's state: JSON-serialisable.

        The fields are :class:`~distsampling.DistributedSampler`'s (``position``: inner indices
        the current ``iter()`` handed out), ``sampler_len`` for the dataset length, and
        ``sampler``: the inner sampler's ``state_dict()``, or ``None`` for an inner epoch that
        never changes (torch's ``SequentialSampler``, a list). Any other inner sampler cannot be
        drawn again exactly, and raises.
        """
        if callable(getattr(self.sampler, "state_dict", None)):
            inner = self.sampler.state_dict()  # type: ignore[attr-defined]
        elif isinstance(self.sampler, (SequentialSampler, list, tuple, range)):
            inner = None  # the same epoch every time: nothing to save
        else:
            raise TypeError(
                "DistributedSamplerWrapper can save its position only if its epoch can be drawn "
                "again: the inner sampler needs state_dict()/load_state_dict() (this project's "
                "samplers have them) or a fixed order (SequentialSampler, a list), but got "
                f"sampler={self.sampler!r} of type {type(self.sampler).__name__}"
            )
        start, position = _where(self._pending, self._reading)
        return {
            "kind": type(self).__name__,
            "version": 1,
            "sampler_len": len(self.dataset),
            "shuffle": self.shuffle,
            "seed": self.seed,
            "drop_last": self.drop_last,
            "epoch": self.epoch,
            "num_replicas": self.num_replicas,
            "start": start,
            "position": position,
            "sampler": inner,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume where ``state`` was taken, on any number of ranks (as DistributedSampler does).

        Args:
            state: a :meth:`state_dict` of a wrapper with the same inner sampler, seed and flags.
        """
        must_match = {"shuffle": self.shuffle, "seed": self.seed, "drop_last": self.drop_last}
        required = ("sampler_len", "sampler", *_POSITION_FIELDS)
        state = check_state(state, type(self).__name__, 1, must_match, required=required)
        self.set_epoch(state["epoch"])  # checks that the epoch is an integer
        if state["sampler"] is not None:  # the inner epoch is drawn again from its state
            if not callable(getattr(self.sampler, "load_state_dict", None)):
                raise TypeError(
                    f"state holds an inner sampler state, but sampler={self.sampler!r} has no "
                    "load_state_dict(): build the wrapper around the same kind of sampler"
                )
            self.sampler.load_state_dict(state["sampler"])  # type: ignore[attr-defined]
            self.dataset.set_epoch(self.epoch)  # drop any kept draw: it is drawn anew
        n = len(self.dataset)
        if state["sampler_len"] != n:
            raise ValueError(
                f"state does not match this sampler: sampler_len was {state['sampler_len']!r} "
                f"when saved, but is {n} now"
            )
        # the loaded point: state_dict() and the next iter() read it before any earlier reading
        self._pending = _resume_point(state, n, self.num_replicas, self.drop_last)
