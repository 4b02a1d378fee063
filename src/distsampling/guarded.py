r"""The classes ``distsampling`` exports: the reference samplers with the guards over them.

Each is a thin subclass of its reference class (``distributed.py``, ``batch.py``,
``windowed.py``, ``wrapper.py``), with the same name and the same indices outside any framework;
what it adds is :mod:`distsampling.guards`' (errors where accelerate's or Lightning's defaults
would train each rank on another plan without a word), and datasets that read the epoch their
indices carry, so that a DataLoader worker's copy needs no epoch of its own.
``WeightedBalanceClassSampler`` holds no share and has no epoch a worker reads: it is exported
as it is.

References: accelerate/data_loader.py; pytorch_lightning/utilities/data.py;
torch/utils/data/dataloader.py (workers, persistent or not, keep the dataset they started with)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from . import batch, distributed, windowed, wrapper
from .guards import ShareGuards, refuse_lightnings_rebuild, refuse_split_again
from .windowed import epoch_offset, window_indices  # noqa: F401  (the docstring example, run here too)

__all__ = [
    "BatchSampler",
    "DatasetFromSampler",
    "DistributedSampler",
    "DistributedSamplerWrapper",
    "SequentialWindowedDataset",
]


class DistributedSampler(ShareGuards, distributed.DistributedSampler):
    __doc__ = distributed.DistributedSampler.__doc__


class BatchSampler(batch.BatchSampler):
    __doc__ = batch.BatchSampler.__doc__

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        refuse_lightnings_rebuild(type(self).__name__)  # Lightning's Trainer over a share
        super().__init__(sampler, batch_size, drop_last)


class SequentialWindowedDataset(windowed.SequentialWindowedDataset):
    __doc__ = windowed.SequentialWindowedDataset.__doc__
    #: our DistributedSampler hands it indices that carry the epoch of their pass (EpochIndex)
    reads_index_epoch = True

    def __getitem__(self, index: int) -> int:
        start = super().__getitem__(index)  # checked; this copy's own epoch
        epoch = getattr(index, "epoch", self.epoch)
        if epoch == self.epoch:
            return start
        if getattr(self, "_other", (None,))[0] != epoch:  # one epoch kept: a pass's, not ours
            self._other = (epoch, epoch_offset(self.size, self.seed, epoch))
        return (start - self.offset + self._other[1]) % self.size  # the same window, its epoch


class DatasetFromSampler(wrapper.DatasetFromSampler):
    __doc__ = wrapper.DatasetFromSampler.__doc__
    #: our DistributedSampler hands it indices that carry the epoch of their pass (EpochIndex)
    reads_index_epoch = True

    def __getitem__(self, index: int) -> int:
        epoch = getattr(index, "epoch", self.epoch)
        if epoch == self.epoch:  # this copy's own draw
            return super().__getitem__(index)
        if getattr(self, "_other", (None,))[0] != epoch:  # one epoch kept: a pass's, not ours
            other = wrapper.DatasetFromSampler(copy.copy(self.sampler))  # ours stays as it is
            other.set_epoch(epoch)
            self._other = (epoch, other.indices)
        return int(self._other[1][index])


class DistributedSamplerWrapper(ShareGuards, wrapper.DistributedSamplerWrapper):
    __doc__ = wrapper.DistributedSamplerWrapper.__doc__

    def set_epoch(self, epoch: int) -> None:  # its dataset is its own: the reference sets it
        refuse_split_again(self, ("DataLoaderDispatcher",))  # on every process, before a pass
        wrapper.DistributedSamplerWrapper.set_epoch(self, epoch)

    def __copy__(self) -> DistributedSamplerWrapper:
        r"""A copy with its own dataset and inner sampler: its ``set_epoch`` moves neither of ours."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(vars(self))
        if callable(getattr(self.sampler, "set_epoch", None)):
            twin.sampler = copy.copy(self.sampler)
        twin.dataset = wrapper.DatasetFromSampler(twin.sampler)
        return twin
