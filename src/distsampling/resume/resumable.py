r"""The resumable forms of this package's samplers: each is the plain class with Resumable first.

A plain sampler (``distributed.py``, ``wrapper.py``, ...) has torch's features and nothing
else. Its resumable form adds ``state_dict()`` / ``load_state_dict()`` through the
:class:`~distsampling.resume.state.Resumable` mixin and names what a saved state must match (the
data, the seed, the flags). To copy one, take the plain file, ``resume.py`` and the few lines
of its class below.

References:
    torchdata/stateful_dataloader/sampler.py (StatefulDistributedSampler, BatchSampler)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import SequentialSampler

from .._checks import check_int
from ..detection.evaluation import UnpaddedDistributedSampler
from ..guarded import BatchSampler, DistributedSampler, DistributedSamplerWrapper
from ..scale.index_shuffle import IndexShuffleSampler
from ..weighted import WeightedBalanceClassSampler
from .state import Resumable, check_consumed, check_state, generator_state, generator_text

__all__ = [
    "ResumableBatchSampler",
    "ResumableDistributedSampler",
    "ResumableDistributedSamplerWrapper",
    "ResumableIndexShuffleSampler",
    "ResumableUnpaddedDistributedSampler",
    "ResumableWeightedBalanceClassSampler",
]


class ResumableDistributedSampler(Resumable, DistributedSampler):
    r""":class:`~distsampling.DistributedSampler` that resumes mid-epoch, on any number of ranks.

    Examples:
        >>> s = ResumableDistributedSampler(range(10), num_replicas=2, rank=0, shuffle=False)
        >>> it = iter(s); [next(it) for _ in range(3)]
        [0, 2, 4]
        >>> state = s.state_dict()
        >>> state["epoch"], state["start"], state["position"]
        (0, 0, 3)
        >>> on_3_ranks = ResumableDistributedSampler(range(10), 3, 0, shuffle=False)
        >>> on_3_ranks.load_state_dict(state)  # rank 1 read 3 too: positions 0..5 are done
        >>> list(on_3_ranks), list(on_3_ranks)  # every iter() of the epoch starts there
        ([6, 9], [6, 9])
    """

    def _identity(self) -> dict[str, Any]:
        return {"dataset_len": self.dataset_len, "shuffle": self.shuffle, "seed": self.seed,
                "drop_last": self.drop_last}  # fmt: skip


class ResumableIndexShuffleSampler(Resumable, IndexShuffleSampler):
    r""":class:`~distsampling.IndexShuffleSampler` that resumes mid-epoch, on any number of ranks.

    The state and the elastic arithmetic are ``ResumableDistributedSampler``'s; the rest of a
    share is the order at its positions, so a resume costs this rank's share, not ``N``.

    Examples:
        >>> s = ResumableIndexShuffleSampler(range(10), num_replicas=2, rank=0, seed=0)
        >>> it = iter(s); [next(it) for _ in range(2)]  # positions 0 and 2 of the order
        [8, 1]
        >>> on_3_ranks = ResumableIndexShuffleSampler(range(10), 3, 0, seed=0)
        >>> on_3_ranks.load_state_dict(s.state_dict())  # positions 0..3 are done
        >>> list(on_3_ranks)  # positions 4 and 7 of [8, 5, 1, 4, 7, 6, 2, 9, 3, 0]
        [7, 9]
    """

    _identity = ResumableDistributedSampler._identity


class ResumableUnpaddedDistributedSampler(Resumable, UnpaddedDistributedSampler):
    r""":class:`~distsampling.UnpaddedDistributedSampler` that resumes; on another world the
    rest of the epoch is split without padding too, so every index is still read once."""

    _identity = ResumableDistributedSampler._identity


class ResumableWeightedBalanceClassSampler(Resumable, WeightedBalanceClassSampler):
    r""":class:`~distsampling.WeightedBalanceClassSampler` that resumes mid-epoch.

    Its state names the class sizes and the draws per class by a hash (``classes``): a state
    saved over other labels or weights is refused.
    """

    num_replicas, rank, drop_last = 1, 0, False  # one stream, not split across ranks

    def _identity(self) -> dict[str, Any]:
        counts = np.asarray([self.class_sizes, self.samples_per_class], dtype=np.int64)
        classes = hashlib.sha1(counts.tobytes()).hexdigest()[:16]
        return {"length": self.length, "seed": self.seed, "num_labels": len(self._members),
                "classes": classes}  # fmt: skip

    def _stream_len(self) -> int:
        return self.length


def _own_generator(sampler: object) -> torch.Generator | None:
    """The generator ``sampler`` draws its epoch from, where that is what a state saves: the
    ``generator=`` of torch's random samplers (a sampler with ``state_dict()`` saves itself)."""
    if callable(getattr(sampler, "state_dict", None)):
        return None
    g = getattr(sampler, "generator", None)
    return g if isinstance(g, torch.Generator) else None


def _saved_generator(inner: object, kind: str, g: torch.Generator) -> torch.Tensor:
    """The generator state that ``inner`` (a ``kind`` sampler's state) saved, checked to fit ``g``."""
    inner = check_state(inner, kind, 1, {}, required=("generator",))
    return generator_state(inner["generator"], g.get_state().numel())


class ResumableDistributedSamplerWrapper(Resumable, DistributedSamplerWrapper):
    r""":class:`~distsampling.DistributedSamplerWrapper` that resumes, with its inner sampler.

    The state holds the inner sampler's (``sampler``): its ``state_dict()``; for torch's
    ``RandomSampler``, ``WeightedRandomSampler`` and ``SubsetRandomSampler`` (any sampler whose
    epoch is drawn from its ``generator`` alone), that generator's state where the epoch's draw
    starts, ``{"kind": ..., "version": 1, "generator": base64 text}``; ``None`` for an inner
    epoch that never changes (torch's ``SequentialSampler``, a list, a range). Any other inner
    sampler cannot be drawn again exactly: ``state_dict()`` refuses it, saying so, as it refuses
    a torch sampler with ``generator=None`` (it draws from torch's global RNG, which differs per
    rank).

    Over torch's samplers, every rank builds the sampler with
    ``generator=torch.Generator().manual_seed(seed)``, the same seed on every rank, a generator
    that serves nothing else. Each epoch set draws the next inner epoch from it; the loaded
    epoch is drawn from the saved state, so the epochs after it are the uninterrupted ones.

    Examples:
        >>> import torch
        >>> from torch.utils.data import RandomSampler
        >>> def build():  # on every rank and in every run: the same seed
        ...     inner = RandomSampler(range(8), generator=torch.Generator().manual_seed(0))
        ...     return ResumableDistributedSamplerWrapper(inner, num_replicas=2, rank=0)
        >>> s = build()
        >>> it = iter(s); [next(it) for _ in range(2)]
        [2, 6]
        >>> state = s.state_dict()
        >>> state["sampler"]["kind"], len(state["sampler"]["generator"])
        ('RandomSampler', 6744)
        >>> resumed = build()  # a new run
        >>> resumed.load_state_dict(state)
        >>> list(resumed), list(s)
        ([7, 0], [2, 6, 7, 0])
    """

    _drawn_from: torch.Tensor | None = None  # the generator's state where this epoch's draw starts
    _replaying = False  # a loaded epoch: set_epoch of it keeps its inner draw

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # DistributedSamplerWrapper's arguments
        super().__init__(*args, **kwargs)
        self._remember_generator()  # nothing drawn yet: the first epoch's draw starts here

    def _identity(self) -> dict[str, Any]:
        return {"sampler_len": len(self.dataset), "shuffle": self.shuffle, "seed": self.seed,
                "drop_last": self.drop_last}  # fmt: skip

    def _remember_generator(self) -> None:
        g = _own_generator(self.sampler)
        self._drawn_from = None if g is None else g.get_state()

    def set_epoch(self, epoch: int) -> None:
        if self._replaying and check_int("epoch", epoch) == self.epoch:
            return  # keep the loaded epoch's draw: drawing again would move the generator on
        super().set_epoch(epoch)  # drops the kept inner draw: the next one starts from here
        self._replaying = False
        self._remember_generator()

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        inner = self._inner_state()  # refused first: a position without it cannot resume
        return {**super().state_dict(consumed), "sampler": inner}

    def _inner_state(self) -> dict[str, Any] | None:
        sampler, name = self.sampler, type(self.sampler).__name__
        if callable(getattr(sampler, "state_dict", None)):
            return sampler.state_dict()  # type: ignore[attr-defined]
        if isinstance(sampler, (SequentialSampler, list, tuple, range)):
            return None  # the same epoch every time: nothing to save
        if self._drawn_from is not None:  # torch's samplers: the epoch is the generator's draw
            return {"kind": name, "version": 1, "generator": generator_text(self._drawn_from)}
        if hasattr(sampler, "generator") and sampler.generator is None:  # torch's global RNG
            raise TypeError(
                f"DistributedSamplerWrapper can save its position over {name} only if it draws "
                "from a generator of its own: build it with generator=torch.Generator()"
                ".manual_seed(seed), the same seed on every rank (with generator=None each epoch "
                "comes from torch's global RNG, which differs per rank and is not saved), but "
                f"got sampler={sampler!r} with generator=None"
            )
        raise TypeError(
            "DistributedSamplerWrapper can save its position only if its epoch can be drawn "
            "again: the inner sampler needs state_dict()/load_state_dict() (this package's "
            "Resumable* samplers have them), a generator of its own (torch's RandomSampler, "
            "WeightedRandomSampler and SubsetRandomSampler with generator=torch.Generator()"
            ".manual_seed(seed)) or a fixed order (SequentialSampler, a list), but got "
            f"sampler={sampler!r} of type {name}"
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = check_state(state, type(self).__name__, 1, {}, required=("sampler",))
        inner, g = state["sampler"], _own_generator(self.sampler)
        if g is not None:  # checked before anything changes
            drawn_from = _saved_generator(inner, type(self.sampler).__name__, g)
        elif inner is not None and not callable(getattr(self.sampler, "load_state_dict", None)):
            raise TypeError(
                f"state holds an inner sampler state, but sampler={self.sampler!r} has no "
                "load_state_dict() (nor a generator): build the wrapper around the same kind of "
                "sampler"
            )
        super().load_state_dict(state)  # the epoch (forwarded inside) and the position
        if g is not None:  # every draw of the loaded epoch starts where the saved one did
            g.set_state(drawn_from)
            self._drawn_from, self._replaying = drawn_from, True
        elif inner is not None:  # the inner epoch is drawn again from its state
            self.sampler.load_state_dict(inner)  # type: ignore[attr-defined]
            self.dataset.set_epoch(self.epoch)  # drop a kept draw: the next one reads the state


class ResumableBatchSampler(BatchSampler):
    r""":class:`~distsampling.BatchSampler` whose state is its sampler's (mid-batch is exact too:
    the sampler counts samples). Only a sampler with ``state_dict()`` can resume."""

    _handed: tuple[int, int] = (0, 0)  # batches the latest iter() handed out, the last's size

    def __iter__(self) -> Iterator[list[int]]:
        self._handed = (0, 0)
        for batch in super().__iter__():
            self._handed = (self._handed[0] + 1, len(batch))
            yield batch

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""The sampler's state, wrapped. ``consumed``: batches of the latest ``iter()`` the loop
        used, when a plain ``DataLoader`` with workers asked for more (its samples are passed on
        to the sampler's ``state_dict(consumed=...)``)."""
        if not callable(getattr(self.sampler, "state_dict", None)):
            raise TypeError(
                "BatchSampler can save its position only through its sampler's state_dict(), "
                f"but got sampler={self.sampler!r} of type {type(self.sampler).__name__}"
            )
        if consumed is None:
            inner = self.sampler.state_dict()  # type: ignore[union-attr]
        else:  # whole batches, but the last handed out may be short
            handed, last = self._handed
            why = f"the latest iter() handed out {handed} batches"
            k = check_consumed(consumed, handed, why, "batches")
            samples = k * self.batch_size - (self.batch_size - last if 0 < k == handed else 0)
            inner = self.sampler.state_dict(consumed=samples)  # type: ignore[union-attr]
        return {"kind": type(self).__name__, "version": 1, "batch_size": self.batch_size,
                "drop_last": self.drop_last, "sampler": inner}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        must_match = {"batch_size": self.batch_size, "drop_last": self.drop_last}
        state = check_state(state, type(self).__name__, 1, must_match, required=("sampler",))
        if not callable(getattr(self.sampler, "load_state_dict", None)):
            raise TypeError(
                "BatchSampler can resume only through its sampler's load_state_dict(), "
                f"but got sampler={self.sampler!r} of type {type(self.sampler).__name__}"
            )
        self.sampler.load_state_dict(state["sampler"])  # type: ignore[union-attr]
