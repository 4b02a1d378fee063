r"""The guards: everything that watches a framework or a loop, as one layer over the reference
samplers. Errors where accelerate would split a rank's share again and where Lightning's
``Trainer`` would rebuild a batch sampler over one, the warning where a loop is about to read a
dataset's epoch again, and the indices that carry their pass's epoch to a dataset's copy in a
DataLoader worker. Nothing in the reference files imports this module; the classes
``distsampling`` exports (:mod:`distsampling.guarded`) are the reference ones with these guards.

References: accelerate/data_loader.py (BatchSamplerShard, IterableDatasetShard,
DataLoaderDispatcher); pytorch_lightning/utilities/data.py (_dataloader_init_kwargs_resolve_sampler)
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = [
    "EpochIndex",
    "FrameworkWarning",
    "ShareGuards",
    "begin_dataset_pass",
    "refuse_lightnings_rebuild",
    "refuse_split_again",
]


class FrameworkWarning(UserWarning):
    r"""A loop is about to read a dataset's epoch again: an iterable dataset no ``set_epoch``
    reached (outside Lightning's ``Trainer``), or a dataset set to another epoch than its
    sampler's. To stop instead, ``warnings.filterwarnings("error", category=FrameworkWarning)``.

    Examples:
        >>> import warnings
        >>> from distsampling import ShardedIterableDataset
        >>> read = lambda shard: range(2 * shard, 2 * shard + 2)  # shard k: 2k and 2k + 1
        >>> shards = ShardedIterableDataset([0, 1], [2, 2], read, num_replicas=1, rank=0)
        >>> first = list(shards)  # epoch 0; then, with no set_epoch, epoch 0 again:
        >>> with warnings.catch_warnings(record=True) as heard:
        ...     warnings.simplefilter("always", FrameworkWarning)
        ...     again = list(shards)
        >>> str(heard[0].message).split(":")[0]
        'ShardedIterableDataset began a pass with no set_epoch since the previous one began'
    """


#: accelerate's wrappers of a prepared loader, and what each does to the share it consumes
_RESPLIT = {
    "BatchSamplerShard": "would split it again over {n} processes",
    "IterableDatasetShard": "would split it again over {n} processes",
    "DataLoaderDispatcher": "would read it on process 0 only and split its batches over {n} processes",
}


def refuse_split_again(
    share: object, wrappers: tuple[str, ...] = tuple(_RESPLIT), num_replicas: int = 0
) -> None:
    """Raise if ``share`` (one rank's share of ``num_replicas`` > 1, its own by default) is
    consumed by one of accelerate's ``wrappers`` (``accelerator.prepare(loader)``'s), found up the
    caller's stack: each process would train on a part of its share. Called first in ``__iter__``
    (each process iterates its wrapper), or for the dispatcher in ``set_epoch``, which it calls on
    every process first: every process raises before a batch, none waits in its broadcast."""
    if "accelerate" not in sys.modules:  # none of its wrappers can be up the stack: no walk
        return
    frame, num_replicas = sys._getframe(2), num_replicas or getattr(share, "num_replicas", 1)
    name = next(c.__name__ for c in type(share).__mro__ if not c.__name__.startswith("_"))
    while frame is not None and num_replicas > 1:
        module = frame.f_globals.get("__name__", "")
        wrapper = frame.f_locals.get("self") if module.startswith("accelerate.") else None
        kind = type(wrapper).__name__  # type(): accelerate's loaders mask their __class__
        if kind in wrappers:
            n = getattr(wrapper, "num_processes", None) or wrapper.state.num_processes
            if n < 2:  # one process: nothing is split again
                return
            raise RuntimeError(
                f"{name} already holds one rank's share (of num_replicas={num_replicas}), "
                f"and accelerate's {kind} {_RESPLIT[kind].format(n=n)}: each process would "
                f"train on about 1/{n} of its share. Prepare the model and optimizer, not the "
                "loader (model, optimizer = accelerator.prepare(model, optimizer)), and iterate "
                "the loader as built"
            )
        frame = frame.f_back


class EpochIndex(int):
    r"""An index that carries the epoch of the pass it belongs to: a dataset with an epoch of its
    own reads that epoch's item, whatever epoch its own copy (a DataLoader worker's, persistent
    or not) was set to last. It is the index everywhere else (an ``int``).

    Examples:
        >>> import pickle
        >>> i = EpochIndex(3, epoch=7)
        >>> i + 1, i.epoch, pickle.loads(pickle.dumps(i)).epoch
        (4, 7, 7)
    """

    epoch: int

    def __new__(cls, index: int, epoch: int) -> EpochIndex:
        self = super().__new__(cls, index)
        self.epoch = epoch
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # to a worker: the index and its epoch, no more
        return EpochIndex, (int(self), self.epoch)


def begin_dataset_pass(sampler: object, ints: Iterator[int]) -> Iterator[int]:
    """``ints``, a pass of ``sampler``, as it begins: warn if the dataset it splits has an epoch
    of its own (``set_epoch``) that is not the sampler's (set after the sampler's, whose
    ``set_epoch`` sets it too); where the dataset reads the epoch its indices carry
    (``reads_index_epoch``), each index carries the dataset's epoch now, at ``iter()``: a
    ``set_epoch`` meanwhile is the next pass's, in the main process and in every worker."""
    dataset = getattr(sampler, "dataset", None)  # a wrapper's own: its set_epoch sets it too
    epoch = getattr(dataset, "epoch", None) if hasattr(dataset, "set_epoch") else None
    if isinstance(epoch, int) and epoch != sampler.epoch:  # type: ignore[attr-defined]
        warnings.warn(
            f"{type(dataset).__name__} is at epoch {epoch} while its sampler, "
            f"{type(sampler).__name__}, is at epoch {sampler.epoch}: this pass reads the "  # type: ignore[attr-defined]
            f"dataset's epoch {epoch}. sampler.set_epoch(epoch) sets its dataset's epoch too: "
            "call it after dataset.set_epoch, or alone",
            FrameworkWarning, stacklevel=3,
        )  # fmt: skip
    if not (isinstance(epoch, int) and getattr(dataset, "reads_index_epoch", False)):
        return ints
    return (EpochIndex(i, epoch) for i in ints)


def refuse_lightnings_rebuild(name: str) -> None:
    """Raise if Lightning's Trainer is building this batch sampler (up the stack: the function
    that rebuilds a loader's batch sampler around its own sampler) in place of one whose
    sampler holds one rank's share (``num_replicas`` > 1): that share would be dropped.
    Lightning has no public hook for it: the walk is tested against the version the loop
    matrix runs (tests/test_validate.py)."""
    if "lightning" not in sys.modules and "pytorch_lightning" not in sys.modules:
        return  # no Trainer can be up the stack: no walk
    frame = sys._getframe(2)  # the caller of __init__
    while frame is not None:
        if frame.f_code.co_name == "_dataloader_init_kwargs_resolve_sampler" and "lightning" in (
            frame.f_globals.get("__name__", "")
        ):
            batches = getattr(frame.f_locals.get("dataloader"), "batch_sampler", None)
            share = getattr(batches, "sampler", None)  # the sampler Lightning drops
            if getattr(share, "num_replicas", 1) > 1:
                raise RuntimeError(
                    f"{name}: Lightning's Trainer rebuilds this batch sampler around a "
                    f"DistributedSampler of its own over the whole dataset and drops its sampler, "
                    f"{type(share).__name__}, which already holds one rank's share (of "
                    f"num_replicas={share.num_replicas}): each rank would train on another plan. "
                    "That is Lightning's default (use_distributed_sampler=True): pass "
                    "Trainer(use_distributed_sampler=False), and the loader reads the share as built"
                )
            return
        frame = frame.f_back


class ShareGuards:
    r"""The guards of a sampler that holds one rank's share, before its reference class in the
    bases (``class DistributedSampler(ShareGuards, distributed.DistributedSampler)``): a pass
    refuses accelerate's prepared loader (each process would read a part of its share) and
    hands a dataset with an epoch of its own its indices (:func:`begin_dataset_pass`);
    ``set_epoch`` refuses accelerate's ``DataLoaderDispatcher`` (it calls it on every process
    before a pass: every process raises, none waits in its broadcast) and sets such a
    dataset's epoch too, so a loop that sets the sampler's only (Lightning's) reads it."""

    def __iter__(self) -> Iterator[int]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        return begin_dataset_pass(self, super().__iter__())  # type: ignore[misc]

    def indices(self) -> Any:  # what iter() yields, as a tensor: the reference's
        return super().indices()  # type: ignore[misc]

    def set_epoch(self, epoch: int) -> None:
        refuse_split_again(self, ("DataLoaderDispatcher",))  # on every process, before a pass
        super().set_epoch(epoch)  # type: ignore[misc]
        dataset = getattr(self, "dataset", None)  # a dataset with epochs of its own follows
        if hasattr(dataset, "set_epoch") and isinstance(getattr(dataset, "epoch", None), int):
            dataset.set_epoch(self.epoch)  # type: ignore[attr-defined, union-attr]
