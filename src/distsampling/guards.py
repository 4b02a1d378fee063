r"""The guards: everything that watches a framework or a loop, as one layer over the reference
samplers. Errors where accelerate would split a rank's share again, and the warning where a loop
is about to read a dataset's epoch again. Nothing in the reference files imports this module.

References: accelerate/data_loader.py (BatchSamplerShard, IterableDatasetShard,
DataLoaderDispatcher); torch/utils/data/dataloader.py (the iterators that ask a sampler)
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator


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


def begin_dataset_pass(sampler: object, ints: Iterator[int]) -> Iterator[int]:
    """``ints``, a pass of ``sampler``, as it begins: warn if the dataset it splits has an epoch
    of its own (``set_epoch``) that is not the sampler's (set after the sampler's, whose
    ``set_epoch`` sets it too); then hold the dataset's epoch (``_hold_epoch``) while the
    DataLoader iterator that reads the pass lives (or ``ints``, read directly): a ``set_epoch``
    meanwhile waits, never changing the samples of a pass mid-way."""
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
    if not callable(hold := getattr(dataset, "_hold_epoch", None)):
        return ints
    # up to the DataLoader iterator reading the pass (torch's own _next_index, or _reset, asks
    # the sampler: torchdata's StatefulDataLoader too); only torch's frames: their locals are its
    frame, owner = sys._getframe(), None
    while frame is not None and owner is None:
        if frame.f_globals.get("__name__", "").startswith("torch.utils.data"):
            found = frame.f_locals.get("self")
            owner = found if "DataLoaderIter" in type(found).__name__ else None
        frame = frame.f_back
    if owner is None:  # read directly: the pass lasts as long as its iterator
        ints = owner = (i for i in ints)  # a generator: weak-referenceable, unlike chain
    hold(owner)
    return ints
