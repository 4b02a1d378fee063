r"""The resumable forms of this package's samplers: each is the plain class with Resumable first.

A plain sampler (``distributed.py``, ``wrapper.py``, ...) has torch's features and nothing
else. Its resumable form adds ``state_dict()`` / ``load_state_dict()`` through the
:class:`~distsampling.resume.Resumable` mixin and names what a saved state must match (the
data, the seed, the flags). To copy one, take the plain file, ``resume.py`` and the few lines
of its class below.

References:
    torchdata/stateful_dataloader/sampler.py (StatefulDistributedSampler, BatchSampler)
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from torch.utils.data import SequentialSampler

from .batch import BatchSampler
from .distributed import DistributedSampler
from .evaluation import UnpaddedDistributedSampler
from .resume import Resumable, check_state
from .weighted import WeightedBalanceClassSampler
from .wrapper import DistributedSamplerWrapper

__all__ = [
    "ResumableBatchSampler",
    "ResumableDistributedSampler",
    "ResumableDistributedSamplerWrapper",
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


class ResumableDistributedSamplerWrapper(Resumable, DistributedSamplerWrapper):
    r""":class:`~distsampling.DistributedSamplerWrapper` that resumes, with its inner sampler.

    The state holds the inner sampler's ``state_dict()`` (``sampler``), or ``None`` for an inner
    epoch that never changes (torch's ``SequentialSampler``, a list, a range). An inner sampler
    with neither cannot be drawn again exactly: ``state_dict()`` refuses it, saying so.
    """

    def _identity(self) -> dict[str, Any]:
        return {"sampler_len": len(self.dataset), "shuffle": self.shuffle, "seed": self.seed,
                "drop_last": self.drop_last}  # fmt: skip

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        if callable(getattr(self.sampler, "state_dict", None)):
            inner = self.sampler.state_dict()  # type: ignore[attr-defined]
        elif isinstance(self.sampler, (SequentialSampler, list, tuple, range)):
            inner = None  # the same epoch every time: nothing to save
        else:
            raise TypeError(
                "DistributedSamplerWrapper can save its position only if its epoch can be drawn "
                "again: the inner sampler needs state_dict()/load_state_dict() (this package's "
                "Resumable* samplers have them) or a fixed order (SequentialSampler, a list), "
                f"but got sampler={self.sampler!r} of type {type(self.sampler).__name__}"
            )
        return {**super().state_dict(consumed), "sampler": inner}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = check_state(state, type(self).__name__, 1, {}, required=("sampler",))
        inner = state["sampler"]
        if inner is not None and not callable(getattr(self.sampler, "load_state_dict", None)):
            raise TypeError(
                f"state holds an inner sampler state, but sampler={self.sampler!r} has no "
                "load_state_dict(): build the wrapper around the same kind of sampler"
            )
        super().load_state_dict(state)  # the epoch (forwarded inside) and the position
        if inner is not None:  # the inner epoch is drawn again from its state
            self.sampler.load_state_dict(inner)  # type: ignore[attr-defined]
            self.dataset.set_epoch(self.epoch)  # drop a kept draw: the next one reads the state


class ResumableBatchSampler(BatchSampler):
    r""":class:`~distsampling.BatchSampler` whose state is its sampler's (mid-batch is exact too:
    the sampler counts samples). Only a sampler with ``state_dict()`` can resume."""

    def state_dict(self) -> dict[str, Any]:
        if not callable(getattr(self.sampler, "state_dict", None)):
            raise TypeError(
                "BatchSampler can save its position only through its sampler's state_dict(), "
                f"but got sampler={self.sampler!r} of type {type(self.sampler).__name__}"
            )
        inner = self.sampler.state_dict()  # type: ignore[union-attr]
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
